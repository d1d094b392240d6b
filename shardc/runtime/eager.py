"""Eager mode: a primitive applied to concrete arrays runs at once as a one-op program.

The program goes through the same propagate -> lower -> compile path as jit; its
executable is cached per (primitive, params, argument types and shardings).
"""
from __future__ import annotations

import jax
import numpy as np

from ..trace import core
from ..propagate import passes
from . import backend as runtime
from ..errors import UNKNOWN, user_loc
from ..ir.program import Lit, Op, Program, Value, fmt_param
from ..lower.emit import lower
from .meshes import MeshInfo, mesh_of_args
from ..ir.sharding import Sharding

_cache: dict = {}


def _params_key(params):
    items = tuple(sorted(params.items()))
    try:
        hash(items)
        return items
    except TypeError:
        return tuple((k, fmt_param(v)) for k, v in items)


def _is_scalar(a):
    return isinstance(a, Lit) or (isinstance(a, (bool, int, float)) and
                                  not isinstance(a, np.generic))


def apply(prim, args, params):
    """Run one primitive now. Python scalars become (weak) arguments, so one executable
    serves every value; results are committed only if an input was (as in jax)."""
    mesh = mesh_of_args([a for a in args if isinstance(a, jax.Array)], [], None)
    specs, arrays, committed = [], [], mesh.mesh is not None
    for a in args:
        aval = core.aval_of(a)
        if _is_scalar(a):
            arrays.append(np.asarray(a.value if isinstance(a, Lit) else a, aval.dtype))
            specs.append((aval, Sharding.replicated(0)))
            continue
        if isinstance(a, jax.Array) and mesh.mesh is not None and \
                not isinstance(a.sharding, jax.sharding.SingleDeviceSharding):
            sh = mesh.sharding_from(a.sharding, aval, "argument")
        else:
            sh = Sharding.replicated(aval.ndim)
            committed = committed or (isinstance(a, jax.Array) and a.committed)
        specs.append((aval, sh))
        arrays.append(a)
    key = (prim.name, _params_key(params), mesh.devices, mesh.shape, tuple(specs), committed)
    entry = _cache.get(key)
    if entry is None:
        entry = _cache[key] = _build(prim, params, specs, mesh, committed)
    exe, in_shardings, multiple = entry
    outs = exe([runtime.place(a, s) for a, s in zip(arrays, in_shardings)])
    return outs if multiple else outs[0]


def _build(prim, params, specs, mesh: MeshInfo, committed):
    p = Program(prim.name, mesh=mesh.shape)
    for aval, sh in specs:
        p.inputs.append(Value(aval, sh, name=f"x{len(p.inputs)}"))
    out_avals = core.abstract_eval(prim, [v.aval for v in p.inputs], params, user_loc())
    multiple = prim.multiple_results
    outs = [Value(a) for a in (out_avals if multiple else [out_avals])]
    p.ops.append(Op(prim, list(p.inputs), outs, params, UNKNOWN))
    p.outputs = list(outs)
    p.out_shardings = [None] * len(outs)
    passes.prepare(p)
    passes.propagate(p)
    in_sh = [mesh.named(v.sharding) for v in p.inputs]
    out_sh = [mesh.named(s) for s in p.out_shardings]
    exe = runtime.compile(lower(p), mesh.devices)
    return runtime.Executable(exe, in_sh, [v.aval for v in outs], out_sh, mesh.devices,
                              committed), in_sh, multiple


core.set_eager(apply)
