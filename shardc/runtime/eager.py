"""Eager mode: a primitive applied to concrete arrays runs at once as a one-op program.

The program goes through the same propagate -> lower -> compile path as jit; its
executable is cached per (primitive, params, argument types and shardings).

Calls are dispatched as jax dispatches its own eager ops (jax/_src/dispatch.py
apply_primitive: one `jax.jit` of `prim.bind` per (primitive, params)): one jaxlib C++
dispatcher (runtime.dispatcher) per (primitive, params), whose cache keys each call on
its arguments' dtypes, shapes, weak types, shardings and committed-ness in C++. A
signature it has seen runs without entering Python; a new one comes back to `_miss`,
which builds (or finds) the executable and hands it to the dispatcher.
"""
from __future__ import annotations

import jax
import numpy as np

from ..trace import core, types
from ..propagate import passes
from . import backend as runtime
from . import special
from ..errors import UNKNOWN, user_loc
from ..ir.program import Lit, Op, Program, Value, fmt_param
from ..lower.emit import lower
from .meshes import MeshInfo, memory_of, mesh_of_args, one_device, with_memory
from ..ir import dtypes
from ..ir.sharding import Sharding

_cache: dict = {}       # full signature -> (Executable, in shardings, multiple results)
_dispatchers: dict = {}  # (primitive, params, literal avals) -> C++ dispatcher

_ARRAY = runtime.ARRAY_TYPE
# argument types the C++ dispatcher types as shardc does (aval_of): anything else
# (lists, NumPy arrays of dtypes shardc lacks, objects with __array__, ...) takes the
# Python path, which raises shardc's errors
_PLAIN = frozenset({_ARRAY, np.float32, np.float64, np.float16, np.int32, np.int64, np.int8,
                    np.int16, np.uint8, np.uint16, np.uint32, np.uint64, np.bool_})
_PY_SCALARS = frozenset({float, int, bool})
_SUPPORTED = dtypes.SUPPORTED


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
    if types.ANY_LENIENT[0] and types.is_lenient():   # an out_sharding= op: untyped result
        return _checked(prim, _run(prim, args, params)[0])
    if special.disable_jit.value:   # one op still compiles (as jax's apply_primitive)
        prev = special.disable_jit.swap_local(False)
        try:
            return apply(prim, args, params)
        finally:
            special.disable_jit.set_local(prev)
    for a in args:
        if type(a) is not _ARRAY:
            break
    else:       # the common call: jax.Arrays only
        try:
            d = _dispatchers.get(key := (prim, *params.items()))
        except TypeError:
            d, key = None, (prim, None, _params_key(params))
        if d is None:
            d = _dispatchers.setdefault(key, _dispatcher(prim, params, None))
        return d(*args)
    lits = None
    for i, a in enumerate(args):
        t = type(a)
        if t is _ARRAY or t in _PLAIN or (t is np.ndarray and a.dtype in _SUPPORTED):
            continue
        if t is Lit:
            aval, v = a.aval, a.value
        elif t in _PY_SCALARS:
            aval, v = core.aval_of(a), a
        else:
            return _checked(prim, _run(prim, args, params)[0])
        if lits is None:
            lits, args = [None] * len(args), list(args)
        # a literal (or Python scalar) travels as a rank-0 NumPy array of its dtype, placed
        # once per value (_place_arg); its weak type, which the C++ key cannot see, goes
        # into the dispatcher's key instead
        lits[i] = aval
        args[i] = np.asarray(v, aval.dtype)
    try:
        key = (prim, *params.items()) if lits is None else \
            (prim, tuple(lits), *params.items())
        d = _dispatchers.get(key)
    except TypeError:   # unhashable params (an array, a list): one key by value
        key = (prim, lits and tuple(lits), _params_key(params))
        d = _dispatchers.get(key)
    if d is None:
        d = _dispatchers[key] = _dispatcher(prim, params, lits)
    return d(*args)


def _dispatcher(prim, params, lits):
    def miss(*args):
        if lits is not None:
            args = [a if aval is None else Lit(a.item(), aval) for a, aval in zip(args, lits)]
        out, entry = _run(prim, args, params)
        special.check(d, args, {}, out)
        exe, in_shardings, multiple = entry
        outs = out if multiple else [out]
        return out, runtime.fastpath(exe, in_shardings, outs,
                                     runtime.flatten(out)[1]), False
    d = runtime.dispatcher(prim.name, miss, place_arg=_place_arg,
                           deopt=special.primitive_fun(prim.name))
    return d


def _checked(prim, out):
    special.check_op(prim.name, out)
    return out


_consts: dict = {}      # (dtype, bytes, sharding) -> a placed rank-0 array


def _place_arg(x, sharding, layout=None, *_):
    """An argument the program wants elsewhere. Literals and NumPy scalars are few
    distinct values used over and over (`x * 2` in a loop), and placing one costs more
    than the op: each is placed once per sharding (bit for bit: 0.0 and -0.0 differ).
    Eager programs never donate their inputs, so sharing the placed array is safe."""
    if (type(x) is np.ndarray and x.ndim == 0) or isinstance(x, np.generic):
        key = (x.dtype, x.tobytes(), sharding)
        out = _consts.get(key)
        if out is None:
            if len(_consts) >= 4096:
                _consts.clear()
            out = _consts[key] = runtime.place(x, sharding)
        return out
    return runtime.shard_arg(x, sharding, layout)


def _run(prim, args, params):
    """(outputs, cache entry) of one call, in Python."""
    mesh, specs, arrays, committed = _arguments(args)
    key = (prim.name, _params_key(params), mesh.devices, mesh.shape, tuple(specs), committed,
           types.is_lenient())
    entry = _cache.get(key)
    if entry is None:
        entry = _cache[key] = _build(prim, params, specs, mesh, committed)
    exe, in_shardings, multiple = entry
    outs = exe([runtime.place(a, s) for a, s in zip(arrays, in_shardings)])
    return (outs if multiple else outs[0]), entry


def _arguments(args):
    """(mesh, (aval, sharding) per argument, the arrays to pass, committed)."""
    for a in args:
        if isinstance(a, jax.core.Tracer):
            raise core.foreign_tracer_error(a)
    mesh = mesh_of_args([a for a in args if isinstance(a, jax.Array)], [], None)
    if mesh.mesh is None:
        one_device(args, range(len(args)))
    specs, arrays, committed = [], [], mesh.mesh is not None
    for a in args:
        aval = core.aval_of(a)
        if _is_scalar(a):
            arrays.append(np.asarray(a.value if isinstance(a, Lit) else a, aval.dtype))
            specs.append((aval, Sharding.replicated(0), None))
            continue
        if isinstance(a, jax.Array) and mesh.mesh is not None and \
                not isinstance(a.sharding, jax.sharding.SingleDeviceSharding):
            sh = mesh.sharding_from(a.sharding, aval, "argument")
        else:
            sh = Sharding.replicated(aval.ndim)
            committed = committed or (isinstance(a, jax.Array) and a.committed)
        specs.append((aval, sh, memory_of(a)))
        arrays.append(a)
    return mesh, specs, arrays, committed


def _inputs(p, specs, explicit, memory=None):
    """The program's inputs; arrays in host memory give results there (as jax's
    memory-space types), or `memory`, a memory_put's."""
    for aval, sh, _ in specs:
        if explicit:        # explicit mode: the arrays' types carry their shardings
            aval = types.typed(aval, types.restrict(sh, explicit, aval.ndim))
        p.inputs.append(Value(aval, sh, name=f"x{len(p.inputs)}"))
    p.meta["in_memory"] = [m for _, _, m in specs]
    if memory is None:      # (jax's rule: an operand of rank > 0 in pinned host memory)
        host = any(m == "pinned_host" and a.shape for a, _, m in specs)
    else:
        host = memory == "pinned_host"
    p.meta["out_host"] = host


def _compiled(p, outs, mesh, committed):
    p.outputs = list(outs)
    p.out_shardings = [None] * len(outs)
    out_memory = "pinned_host" if p.meta.pop("out_host", False) else None
    p.meta["out_memory"] = [out_memory] * len(outs)
    passes.prepare(p)
    passes.propagate(p)
    in_sh = [with_memory(mesh.named(v.sharding), m)
             for v, m in zip(p.inputs, p.meta["in_memory"])]
    out_sh = [with_memory(mesh.result(s, v.aval), out_memory)
              for s, v in zip(p.out_shardings, outs)]
    calls = []      # (a region run now may hold a debug.print)
    exe = runtime.compile(lower(p, host_calls=calls), mesh.devices, calls)
    return runtime.Executable(exe, in_sh, [v.aval for v in outs], out_sh, mesh.devices,
                              committed), in_sh


def apply_region(prim, args, params, regions, out_avals, loc):
    """A region op (loop, branch, checkpoint) on constants, run now: under
    jax.ensure_compile_time_eval, as jax's control flow runs eagerly there, so Python can
    read its results. Compiled per call (its regions are the trace's, no cache key)."""
    with core.outside_traces():
        mesh, specs, arrays, committed = _arguments(args)
        p = Program(prim.name, mesh=mesh.shape)
        _inputs(p, specs, mesh.shape.explicit)
        outs = [Value(a) for a in out_avals]
        p.ops.append(Op(prim, list(p.inputs), outs, params, loc, regions))
        exe, in_sh = _compiled(p, outs, mesh, committed)
        return exe([runtime.place(a, s) for a, s in zip(arrays, in_sh)])


def _build(prim, params, specs, mesh: MeshInfo, committed):
    p = Program(prim.name, mesh=mesh.shape)
    p.meta["platform"] = mesh.devices[0].platform
    explicit = mesh.shape.explicit
    _inputs(p, specs, explicit, prim.memory(params) if prim.memory is not None else None)
    loc = user_loc()
    out_avals = core.abstract_eval(prim, [v.aval.bare() for v in p.inputs], params, loc)
    multiple = prim.multiple_results
    out_avals = list(out_avals) if multiple else [out_avals]
    if explicit:
        out_avals = types.infer(prim, p.inputs, out_avals, params, mesh.shape, explicit, loc)
    outs = [Value(a) for a in out_avals]
    p.ops.append(Op(prim, list(p.inputs), outs, params, UNKNOWN))
    exe, in_sh = _compiled(p, outs, mesh, committed)
    return exe, in_sh, multiple


core.set_eager(apply, apply_region)
