"""gather: integer-array indexing (embedding lookups), with StableHLO's dimension numbers,
and scatter_add, its transpose.

Batching dims (StableHLO's operand_batching_dims / start_indices_batching_dims, and the
scatter's) pair an operand dim with an index dim, each example indexing its own slice
(vmap of indexing, jax's gathers with batching dims): they share one pass-through
factor with the result's batch dim, so a sharded batch stays sharded. They are params
only when there are some, so a plain gather prints as before."""
from __future__ import annotations

from functools import partial

from ..ir import dtypes
from ..trace.core import Primitive
from . import elementwise as ew
from ..ir.primitive import PropKind
from ..errors import ShardcError
from ..ir.program import Aval
from ..lower.emit import sharding_attr, tensor_type
from ..ir.sharding import Sharding
from ..ir.rules import NEED_REPLICATION, REDUCTION, RuleBuilder
from .common import i64_array
from .dimension_numbers import check_gather, check_scatter


def batching(obd, ibd, scatter=False):
    """The batching-dim params to bind (none when there are no batching dims)."""
    if not obd:
        return {}
    return {"operand_batching_dims": tuple(obd),
            ("scatter" if scatter else "start") + "_indices_batching_dims": tuple(ibd)}


def _check_batching(name, x, idx, obd, ibd):
    if len(obd) != len(ibd) or any(x.shape[o] != idx.shape[i] for o, i in zip(obd, ibd)):
        raise ShardcError(f"{name}: operand batching dims {tuple(obd)} and indices "
                          f"batching dims {tuple(ibd)} must pair dims of one size "
                          f"(operand {x.shape}, indices {idx.shape})")


def _gather_shape(x, idx, *, offset_dims, collapsed_slice_dims, start_index_map,
                  index_vector_dim, slice_sizes, operand_batching_dims=(),
                  start_indices_batching_dims=()):
    if not dtypes.is_int(idx.dtype):
        raise ShardcError(f"indices must be integers, got {idx}")
    check_gather(x, idx, offset_dims=offset_dims, collapsed_slice_dims=collapsed_slice_dims,
                 start_index_map=start_index_map, index_vector_dim=index_vector_dim,
                 slice_sizes=slice_sizes, operand_batching_dims=operand_batching_dims)
    _check_batching("gather", x, idx, operand_batching_dims, start_indices_batching_dims)
    batch = [n for d, n in enumerate(idx.shape) if d != index_vector_dim]
    offsets = [n for d, n in enumerate(slice_sizes)
               if d not in collapsed_slice_dims and d not in operand_batching_dims]
    rank = len(batch) + len(offsets)
    shape, bi, oi = [], iter(batch), iter(offsets)
    for d in range(rank):
        shape.append(next(oi) if d in offset_dims else next(bi))
    return Aval(shape, x.dtype, x.weak)


def _gather_rule(ins, outs, *, offset_dims, collapsed_slice_dims, start_index_map,
                 index_vector_dim, slice_sizes, operand_batching_dims=(),
                 start_indices_batching_dims=()):
    """Shardy's addGatherScatterFactors: a batching dim pair passes through to the
    result's batch dim."""
    x, idx = ins
    out = outs[0]
    b = RuleBuilder(ins, outs)
    in_dim = 0
    batch_pos = 0
    skip = set(collapsed_slice_dims) | set(operand_batching_dims)
    for sd, n in enumerate(out.shape):
        if sd in offset_dims:
            while in_dim in skip:
                in_dim += 1
            m = x.shape[in_dim]
            if m == n:
                b.factor([in_dim, None], [sd], m)
            elif n == 1:
                b.factor([in_dim, None], [None], m, REDUCTION)
                b.factor([None, None], [sd], 1, NEED_REPLICATION)
            else:
                b.factor([in_dim, None], [sd], m, NEED_REPLICATION, blocked=True)
            in_dim += 1
        else:
            idim = batch_pos if batch_pos < index_vector_dim else batch_pos + 1
            od = _paired(idim, start_indices_batching_dims, operand_batching_dims)
            b.factor([od, idim], [sd], n)
            batch_pos += 1
    for d in collapsed_slice_dims:
        m = x.shape[d]
        b.factor([d, None], [None], m, NEED_REPLICATION if m == 1 else REDUCTION)
    if index_vector_dim < idx.ndim:
        b.factor([None, index_vector_dim], [None], idx.shape[index_vector_dim],
                 NEED_REPLICATION)
    return b.build()


def _paired(idim, ibd, obd):
    """The operand dim an index batching dim pairs with (None: not a batching dim)."""
    return obd[ibd.index(idim)] if idim in ibd else None


def _dims(name, dims):
    return f"{name} = [{', '.join(map(str, dims))}], "


def _lower_gather(ctx, x, idx, *, offset_dims, collapsed_slice_dims, start_index_map,
                  index_vector_dim, slice_sizes, operand_batching_dims=(),
                  start_indices_batching_dims=()):
    dn = (f"#stablehlo.gather<offset_dims = [{', '.join(map(str, offset_dims))}], "
          f"collapsed_slice_dims = [{', '.join(map(str, collapsed_slice_dims))}], "
          + (_dims("operand_batching_dims", operand_batching_dims) +
             _dims("start_indices_batching_dims", start_indices_batching_dims)
             if operand_batching_dims else "") +
          f"start_index_map = [{', '.join(map(str, start_index_map))}], "
          f"index_vector_dim = {index_vector_dim}>")
    idx, it = _wide_index(ctx, idx, ctx.in_avals[1])
    return ctx.op("stablehlo.gather", [x, idx], [tensor_type(ctx.in_avals[0]), it],
                  [tensor_type(ctx.out_avals[0])],
                  {"dimension_numbers": dn, "indices_are_sorted": "false",
                   "slice_sizes": i64_array(slice_sizes)})


gather_p = Primitive("gather", shape_rule=_gather_shape, sharding_rule=_gather_rule,
                     lower=_lower_gather, prop_kind=PropKind.NONE)


# ---------------------------------------------------------------- scatter_add
# The transpose of gather: add `updates` into `operand` at the gathered positions; a
# window out of bounds is dropped (XLA's scatter). The one a gather's gradient binds has
# `clamped_transpose`: its own transpose is that gather, clamping, as jax's
# promise_in_bounds scatter-add (so forward mode reads the clamped element's tangent).

def scatter_shape(name, operand, idx, updates, *, update_window_dims, inserted_window_dims,
                  scatter_dims_to_operand_dims, index_vector_dim, operand_batching_dims=(),
                  scatter_indices_batching_dims=(), clamped_transpose=False):
    """The shape rule of every scatter (`name`: the op, for its errors)."""
    check_scatter(name, operand, idx, updates, update_window_dims=update_window_dims,
                  inserted_window_dims=inserted_window_dims,
                  scatter_dims_to_operand_dims=scatter_dims_to_operand_dims,
                  index_vector_dim=index_vector_dim, operand_batching_dims=operand_batching_dims)
    _check_batching(name, operand, idx, operand_batching_dims, scatter_indices_batching_dims)
    if updates.dtype != operand.dtype:
        raise ShardcError(f"{name}: updates {updates} must have the operand's dtype "
                          f"{operand.dtype}")
    if not dtypes.is_int(idx.dtype):
        raise ShardcError(f"{name}: indices must be integers, got {idx}")
    return operand


_scatter_shape = partial(scatter_shape, "scatter_add")


def _scatter_rule(ins, outs, *, update_window_dims, inserted_window_dims,
                  scatter_dims_to_operand_dims, index_vector_dim, operand_batching_dims=(),
                  scatter_indices_batching_dims=(), clamped_transpose=False,
                  batch_kind=REDUCTION):
    """Shardy's scatter rule (addGatherScatterFactors) for one input and an add region
    (`batch_kind`: what a sharded update batch dim is; a partial result to combine,
    unless it is a batching dim, which passes through to the operand's)."""
    x, idx, upd = ins
    b = RuleBuilder(ins, outs)
    in_dim = 0
    batch_pos = 0
    skip = set(inserted_window_dims) | set(operand_batching_dims)
    for sd, n in enumerate(upd.shape):
        if sd in update_window_dims:
            while in_dim in skip:
                in_dim += 1
            m = x.shape[in_dim]
            if m == n:
                b.factor([in_dim, None, sd], [in_dim], m)
            else:
                b.factor([in_dim, None, None], [in_dim], m, NEED_REPLICATION)
                b.factor([None, None, sd], [None], n, NEED_REPLICATION)
            in_dim += 1
        else:
            idim = batch_pos if batch_pos < index_vector_dim else batch_pos + 1
            od = _paired(idim, scatter_indices_batching_dims, operand_batching_dims)
            if od is None:
                b.factor([None, idim, sd], [None], n, batch_kind)
            else:
                b.factor([od, idim, sd], [od], n)
            batch_pos += 1
    for d in inserted_window_dims:
        b.factor([d, None, None], [d], x.shape[d])
    if index_vector_dim < idx.ndim:
        b.factor([None, index_vector_dim, None], [None], idx.shape[index_vector_dim],
                 NEED_REPLICATION)
    return b.build()


def _lower_scatter(ctx, x, idx, upd, *, update_window_dims, inserted_window_dims,
                   scatter_dims_to_operand_dims, index_vector_dim, operand_batching_dims=(),
                   scatter_indices_batching_dims=(), clamped_transpose=False, kind="add"):
    """stablehlo.scatter whose region combines with `kind` (add, mul, min, max, or
    replace)."""
    from .reduce import monoid_region
    if kind == "replace":           # jax's scatter: the update replaces the element
        scalar = ctx.in_avals[0].update(shape=(), weak=False)
        region = ctx.region([scalar, scalar], lambda c, a, b: [b])
    else:
        region = monoid_region(ctx, kind, ctx.in_avals[0])
    dn = (f"#stablehlo.scatter<update_window_dims = [{', '.join(map(str, update_window_dims))}], "
          f"inserted_window_dims = [{', '.join(map(str, inserted_window_dims))}], "
          + (_dims("input_batching_dims", operand_batching_dims) +
             _dims("scatter_indices_batching_dims", scatter_indices_batching_dims)
             if operand_batching_dims else "") +
          f"scatter_dims_to_operand_dims = [{', '.join(map(str, scatter_dims_to_operand_dims))}], "
          f"index_vector_dim = {index_vector_dim}>")
    ib = [d for d in range(ctx.in_avals[1].ndim) if d != index_vector_dim]
    ub = [d for d in range(ctx.in_avals[2].ndim) if d not in update_window_dims]
    idx, upd = _even(ctx, idx, 1, ib), _even(ctx, upd, 2, ub)
    idx, it = _wide_index(ctx, idx, ctx.in_avals[1])
    types = [tensor_type(ctx.in_avals[0]), it, tensor_type(ctx.in_avals[2])]
    # an operand dim the indices address, split unevenly: XLA's partitioner writes the
    # wrong rows there (jax.jit's too), so it is scattered whole and split after
    whole = _uneven_whole(ctx, scatter_dims_to_operand_dims)
    if whole is not None:
        x = ctx.held(x, ctx.in_avals[0], whole, always=True)
    out = ctx.op("stablehlo.scatter", [x, idx, upd], types,
                 [tensor_type(ctx.out_avals[0])],
                 {"indices_are_sorted": "false", "scatter_dimension_numbers": dn,
                  "unique_indices": "false"}, regions=[region],
                 sharding=None if whole is None else [whole])
    if whole is None:
        return out
    if ctx.lowering.sources_only:   # a cond branch's scatter has no sharding: hold it
        out = [ctx.held(out[0], ctx.out_avals[0], whole, always=True)]
    return [ctx.held(out[0], ctx.out_avals[0], ctx.out_shardings[0], always=True)]


def _uneven_whole(ctx, dims):
    """The operand's and result's sharding with each of `dims` that either splits
    unevenly made whole, or None if none does (or shardings are XLA's to choose)."""
    if ctx.lowering.oracle:
        return None
    shs = [ctx.in_shardings[0], ctx.out_shardings[0]]
    shape = ctx.in_avals[0].shape
    if any(s is None for s in shs) or not any(
            shape[d] % s.shards(ctx.mesh, d) for s in shs for d in dims):
        return None
    out = shs[1]
    return Sharding([() if d in dims else axes for d, axes in enumerate(out.dims)], None,
                    out.unreduced, out.reduced)


def _wide_index(ctx, idx, a):
    """The index operand, 8- and 16-bit ones widened to int32, as jax widens them before
    its gathers and scatters (XLA's SPMD partitioner aborts the process on them); and
    its type."""
    if a.dtype.itemsize >= 4:
        return idx, tensor_type(a)
    t = tensor_type(a.update(dtype=dtypes.int32))
    (r,) = ctx.op("stablehlo.convert", [idx], [tensor_type(a)], [t], sharding=False)
    return r, t


def _even(ctx, name, i, batch_dims):
    """Operand i with each scatter batch dim it splits unevenly made whole: XLA's
    partitioner adds the padding of an unevenly split batch dim into the result
    (jax.jit's too, when shardings put one there), a silently wrong value."""
    sh, aval = ctx.in_shardings[i], ctx.in_avals[i]
    if sh is None or not any(aval.shape[d] % sh.shards(ctx.mesh, d) for d in batch_dims):
        return name
    dims = [() if d in batch_dims and aval.shape[d] % sh.shards(ctx.mesh, d) else axes
            for d, axes in enumerate(sh.dims)]
    t = tensor_type(aval)
    (r,) = ctx.op("sdy.sharding_constraint", [name], [t], [t],
                  {"sharding": sharding_attr(Sharding(dims))}, sharding=False)
    return r


scatter_add_p = Primitive("scatter_add", shape_rule=_scatter_shape, sharding_rule=_scatter_rule,
                          lower=_lower_scatter, prop_kind=PropKind.NONE)


def _window_sizes(ndim, upd_shape, update_window_dims, inserted_window_dims, obd=()):
    sizes, pos = [], 0
    for d in range(ndim):
        if d in inserted_window_dims or d in obd:
            sizes.append(1)
        else:
            sizes.append(upd_shape[update_window_dims[pos]])
            pos += 1
    return tuple(sizes)


def window_gather(v, idx, upd_shape, *, update_window_dims, inserted_window_dims,
                  scatter_dims_to_operand_dims, index_vector_dim, operand_batching_dims=(),
                  scatter_indices_batching_dims=()):
    """The windows of `v` a scatter with these dimension numbers writes, shaped as its
    updates (`upd_shape`): the gather that is the scatter's transpose. The gather
    clamps a window out of bounds, which the scatter drops: see dropped_to_zero."""
    from . import lax as L
    sizes = _window_sizes(L.aval(v).ndim, upd_shape, update_window_dims, inserted_window_dims,
                          operand_batching_dims)
    return gather_p.bind(v, idx, offset_dims=update_window_dims,
                         collapsed_slice_dims=inserted_window_dims,
                         start_index_map=scatter_dims_to_operand_dims,
                         index_vector_dim=index_vector_dim, slice_sizes=sizes,
                         **batching(operand_batching_dims, scatter_indices_batching_dims))


def dropped_to_zero(g, idx, operand_shape, *, update_window_dims, inserted_window_dims,
                    scatter_dims_to_operand_dims, index_vector_dim, operand_batching_dims=(),
                    scatter_indices_batching_dims=()):
    """`g` (shaped as a scatter's updates) with zeros for the updates whose window is
    out of bounds: XLA's scatter drops them, so their cotangent is zero."""
    from . import lax as L
    ga, ia = L.aval(g), L.aval(idx)
    sizes = _window_sizes(len(operand_shape), ga.shape, update_window_dims,
                          inserted_window_dims, operand_batching_dims)
    batch = tuple(n for d, n in enumerate(ia.shape) if d != index_vector_dim)
    ok = None
    for k, d in enumerate(scatter_dims_to_operand_dims):
        col = idx
        if index_vector_dim < ia.ndim:
            lo, hi = [0] * ia.ndim, list(ia.shape)
            lo[index_vector_dim], hi[index_vector_dim] = k, k + 1
            col = L.reshape(L.slice(idx, lo, hi), batch)
        good = ew.and_p.bind(L.ge(col, 0), L.le(col, operand_shape[d] - sizes[d]))
        ok = good if ok is None else ew.and_p.bind(ok, good)
    if ok is None:
        return g
    upd_batch = tuple(d for d in range(ga.ndim) if d not in update_window_dims)
    return L.select(L.broadcast_in_dim(ok, ga.shape, upd_batch), g, L.zeros_like(g))


def clamped_starts(idx, shape, start_index_map, slice_sizes, index_vector_dim):
    """idx with each start clamped into the operand, as XLA's gather clamps it. Its
    transpose, a scatter, drops a window out of bounds instead: a gather that means to
    clamp (clip mode, a per-example dynamic_slice) clamps its starts first."""
    from . import lax as L
    ia = L.aval(idx)
    cols = []
    for k, d in enumerate(start_index_map):
        col = idx
        if index_vector_dim < ia.ndim:
            lo, hi = [0] * ia.ndim, list(ia.shape)
            lo[index_vector_dim], hi[index_vector_dim] = k, k + 1
            col = L.slice(idx, lo, hi)
        cols.append(L.max(L.min(col, max(shape[d] - slice_sizes[d], 0)), 0))
    if not cols:
        return idx
    return cols[0] if len(cols) == 1 else L.concatenate(cols, index_vector_dim)


def _vjps():
    from . import lax as L      # looked up when a rule runs

    def gather_vjp(ctx, cts, x, idx, *, offset_dims, collapsed_slice_dims, start_index_map,
                   index_vector_dim, slice_sizes, operand_batching_dims=(),
                   start_indices_batching_dims=()):
        # (a start out of bounds, which the gather clamps, is dropped here, as jax's
        # transpose of a promise_in_bounds gather: clip-mode callers clamp it first)
        zeros = L.zeros(ctx.in_avals[0].shape, cts[0].dtype)
        return [scatter_add_p.bind(zeros, idx, cts[0], update_window_dims=offset_dims,
                                   inserted_window_dims=collapsed_slice_dims,
                                   scatter_dims_to_operand_dims=start_index_map,
                                   index_vector_dim=index_vector_dim,
                                   **batching(operand_batching_dims,
                                              start_indices_batching_dims, scatter=True),
                                   clamped_transpose=True),
                None]
    gather_p.vjp = gather_vjp

    def scatter_vjp(ctx, cts, x, idx, upd, clamped_transpose=False, **dn):
        # a gather's transpose transposes back to that gather, clamping (forward mode
        # of a clamped read: the clamped element's tangent, as jax's promise_in_bounds
        # scatter-add, whose transpose is its gather)
        g = cts[0]
        gu = window_gather(g, idx, ctx.in_avals[2].shape, **dn)
        if clamped_transpose:
            return [g, None, gu]
        return [g, None, dropped_to_zero(gu, idx, ctx.in_avals[0].shape, **dn)]
    scatter_add_p.vjp = scatter_vjp


_vjps()


def scatter_batch(prim):
    """The batching rule of a scatter primitive (scatter_add and the combiners): the
    operand and updates get the mapped dim; unmapped indices make it a window dim,
    mapped ones a batching dim (each example scatters into its own slice)."""
    from .batching import bcast, shift_axes

    def run(ctx, args, batched, *, update_window_dims, inserted_window_dims,
            scatter_dims_to_operand_dims, index_vector_dim, operand_batching_dims=(),
            scatter_indices_batching_dims=(), **flags):
        x, idx, upd = args
        x, upd = bcast(ctx, x, batched[0]), bcast(ctx, upd, batched[2])
        obd, ibd = shift_axes(operand_batching_dims), scatter_indices_batching_dims
        if not batched[1]:
            return prim.bind(
                x, idx, upd, update_window_dims=(0, *shift_axes(update_window_dims)),
                inserted_window_dims=shift_axes(inserted_window_dims),
                scatter_dims_to_operand_dims=shift_axes(scatter_dims_to_operand_dims),
                index_vector_dim=index_vector_dim, **batching(obd, ibd, scatter=True),
                **flags), True
        return prim.bind(
            x, idx, upd, update_window_dims=shift_axes(update_window_dims),
            inserted_window_dims=shift_axes(inserted_window_dims),
            scatter_dims_to_operand_dims=shift_axes(scatter_dims_to_operand_dims),
            index_vector_dim=index_vector_dim + 1,
            **batching((0, *obd), (0, *shift_axes(ibd)), scatter=True), **flags), True
    return run


def _batch_rules():
    """vmap. Only the indices mapped: more batch dims of the indices (the result's lead).
    The operand mapped too: its mapped dim is a window dim when the indices are not
    mapped, else a batching dim paired with theirs."""
    from .batching import shift_axes

    def gather_batch(ctx, args, batched, *, offset_dims, collapsed_slice_dims,
                     start_index_map, index_vector_dim, slice_sizes,
                     operand_batching_dims=(), start_indices_batching_dims=()):
        x, idx = args
        bx, bi = batched
        obd, ibd = operand_batching_dims, start_indices_batching_dims
        if not bx:
            return gather_p.bind(x, idx, offset_dims=shift_axes(offset_dims),
                                 collapsed_slice_dims=collapsed_slice_dims,
                                 start_index_map=start_index_map,
                                 index_vector_dim=index_vector_dim + 1,
                                 slice_sizes=slice_sizes,
                                 **batching(obd, shift_axes(ibd))), True
        if not bi:
            return gather_p.bind(x, idx, offset_dims=(0, *shift_axes(offset_dims)),
                                 collapsed_slice_dims=shift_axes(collapsed_slice_dims),
                                 start_index_map=shift_axes(start_index_map),
                                 index_vector_dim=index_vector_dim,
                                 slice_sizes=(ctx.size, *slice_sizes),
                                 **batching(shift_axes(obd), ibd)), True
        return gather_p.bind(x, idx, offset_dims=shift_axes(offset_dims),
                             collapsed_slice_dims=shift_axes(collapsed_slice_dims),
                             start_index_map=shift_axes(start_index_map),
                             index_vector_dim=index_vector_dim + 1,
                             slice_sizes=(1, *slice_sizes),
                             **batching((0, *shift_axes(obd)), (0, *shift_axes(ibd)))), True
    gather_p.batch = gather_batch

    scatter_add_p.batch = scatter_batch(scatter_add_p)


_batch_rules()
