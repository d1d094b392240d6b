"""shard_map: write the per-device program and its communication yourself.

The body is traced with device-local shapes into a region of one `shard_map` op;
propagation treats its boundary as fixed shardings and lowering emits
`sdy.manual_computation`. While tracing, every value records the manual mesh axes
it varies over (JAX's "vma"), so out_specs that claim replication are checked.
"""
from __future__ import annotations

import functools

import jax
from jax.sharding import NamedSharding, PartitionSpec

from ..trace import core
from ..errors import ShardcError, api_boundary, user_loc
from ..ir.program import Program
from ..ops.manual import local_shape, shard_map_p
from ..ops.manual_region import (ManualCtx, body_value as _body_value,  # noqa: F401
                                 manual_ctx, open_free as _open_free)
from ..ir.sharding import Sharding, from_spec

_tree = jax.tree_util


def _specs_for(specs, tree_obj, what):
    from .jit import _broadcast_prefix
    return _broadcast_prefix(specs, tree_obj, what)


def _spec_sharding(spec, aval, mesh_shape, manual, what):
    if spec is None:
        spec = PartitionSpec()
    if not isinstance(spec, PartitionSpec):
        raise ShardcError(f"{what}: expected a PartitionSpec, got {type(spec).__name__}")
    sh = from_spec(spec, aval.ndim, mesh_shape, what)
    for d in sh.dims:
        for a in d:
            if a not in manual:
                raise ShardcError(f"{what}: mesh axis {a!r} is not manual here (axis_names="
                                  f"{sorted(manual)}); specs may only name manual axes")
    return sh.closed()


def shard_map(f=None, *, mesh, in_specs, out_specs, axis_names=None, check_vma=True,
              check_rep=None):
    """Map `f` over shards of its arguments, as jax.shard_map: inside `f` arrays have
    their device-local shapes and collectives (shardc.lax.psum, ...) communicate."""
    if f is None:
        return functools.partial(shard_map, mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                                 axis_names=axis_names, check_vma=check_vma, check_rep=check_rep)
    if check_rep is not None:
        check_vma = check_rep
    if not isinstance(mesh, jax.sharding.Mesh):
        raise ShardcError("shard_map needs a mesh (shardc.make_mesh(...))")
    manual = tuple(mesh.axis_names) if axis_names is None else \
        tuple(a for a in mesh.axis_names if a in set(axis_names))
    if axis_names is not None:
        unknown = set(axis_names) - set(mesh.axis_names)
        if unknown:
            raise ShardcError(f"shard_map: axis_names {sorted(unknown)} are not axes of the "
                              f"mesh {list(mesh.axis_names)}")

    compiled = []     # called outside a trace: compiled once, cached per signature

    @functools.wraps(f)
    @api_boundary
    def wrapped(*args):
        if core.current_builder() is None:
            if not compiled:
                from .jit import jit
                compiled.append(jit(wrapped))
            return compiled[0](*args)
        return _trace_shard_map(f, mesh, in_specs, out_specs, manual, check_vma, args)
    return wrapped


def _trace_shard_map(f, mesh, in_specs, out_specs, manual, check_vma, args):
    outer = core.current_builder()
    loc = user_loc()
    info = outer.meshes.adopt(mesh)
    mshape = info.shape
    if manual_ctx() is not None:
        raise ShardcError("nested shard_map is not supported")
    leaves, in_tree = _tree.tree_flatten(args)
    flat_specs = _specs_for(in_specs if not isinstance(in_specs, list) else tuple(in_specs),
                            tuple(args), "shard_map in_specs")
    sizes = mshape.sizes
    in_vals, in_sh, local_avals = [], [], []
    for i, (x, spec) in enumerate(zip(leaves, flat_specs)):
        aval = core.aval_of(x)
        sh = _spec_sharding(spec, aval, mshape, manual, f"shard_map in_specs for argument {i}")
        local_avals.append(aval.update(shape=local_shape(
            aval.shape, sh, sizes, f"shard_map argument {i} ({aval}) with in_spec {spec}"),
            weak=aval.weak))
        in_sh.append(sh)
        in_vals.append(x)
    body = core.Builder(f"{getattr(f, '__name__', 'body')}", parent=outer)
    ctx = body.manual = ManualCtx(mshape, manual, check_vma)
    tracers = [body.new_input(a) for a in local_avals]
    for t, sh in zip(tracers, in_sh):
        ctx.vma[id(t.value)] = frozenset(a for d in sh.dims for a in d)
    with core.trace_context(body):
        out = f(*_tree.tree_unflatten(in_tree, tracers))
    out_leaves, out_tree = _tree.tree_flatten(out)
    region = body.program
    region.outputs = [_body_value(body, x) for x in out_leaves]
    flat_out = _specs_for(out_specs, out, "shard_map out_specs")
    out_sh, out_avals = [], []
    for i, (v, spec) in enumerate(zip(region.outputs, flat_out)):
        sh = _spec_sharding(spec, v.aval, mshape, manual, f"shard_map out_specs for output {i}")
        if check_vma:
            claimed = set(manual) - {a for d in sh.dims for a in d}
            varies = ctx.vma_of(v) & claimed
            if varies:
                raise ShardcError(
                    f"shard_map out_specs[{i}] is {spec}, which says output {i} is the same on "
                    f"every device along mesh axes {sorted(varies)}, but it varies along them. "
                    "Reduce it first (shardc.lax.psum / pmean / pmax), name the axes in "
                    "out_specs, or pass check_vma=False", loc)
        out_sh.append(sh)
        out_avals.append(v.aval.update(shape=tuple(
            n * _prod(sizes[a] for a in axes) for n, axes in zip(v.aval.shape, sh.dims))))
    # values the body closed over become extra, replicated operands
    for t, v in body.captured.values():
        region.inputs.append(v)
        in_vals.append(t)
        in_sh.append(Sharding.replicated(v.aval.ndim))
    operands = [outer.to_value(x) for x in in_vals]
    params = {"in_specs": tuple(in_sh), "out_specs": tuple(out_sh), "manual_axes": manual,
              "mesh": mshape, "check_vma": check_vma}
    outs = outer.add(shard_map_p, operands, params, out_avals, loc, regions=[region])
    for v, sh in zip(outs, out_sh):
        v.sharding = _open_free(sh, manual, mshape)
    results = [core.Tracer(outer, v) for v in outs]
    return _tree.tree_unflatten(out_tree, results)


def _prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


_ = (NamedSharding, Program)
