"""dynamic_slice and dynamic_update_slice: slices at start indices known only at run time.

Start indices are scalar integer operands, clamped (by StableHLO) so the slice fits in
the operand. A sliced dim cannot stay sharded (its data moves by an unknown offset):
as Shardy's rules, only dims the slice takes whole get a factor.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.primitive import PropKind
from ..ir.program import Aval, Op
from ..ir.rules import NEED_REPLICATION, RuleBuilder
from ..ir.sharding import Sharding
from ..lower.emit import tensor_type
from ..trace.core import Primitive
from .common import i64_array


def _check_indices(name, x, idx):
    if len(idx) != x.ndim:
        raise ShardcError(f"{name}: {len(idx)} start indices for an operand of rank {x.ndim}; "
                          "give one per dim")
    for i in idx:
        if i.ndim or not dtypes.is_int(i.dtype):
            raise ShardcError(f"{name}: start indices must be integer scalars, got {i}")
    if len({i.dtype for i in idx}) > 1:
        raise ShardcError(f"{name}: start indices must share one dtype, got "
                          f"{[str(i.dtype) for i in idx]}")


def _ds_shape(x, *idx, slice_sizes):
    _check_indices("dynamic_slice", x, idx)
    if len(slice_sizes) != x.ndim or any(not 0 <= s <= n for s, n in zip(slice_sizes, x.shape)):
        raise ShardcError(f"dynamic_slice: slice_sizes {tuple(slice_sizes)} must be one size per "
                          f"dim, each within the operand's shape {x.shape}")
    return Aval(tuple(slice_sizes), x.dtype, x.weak)


def _ds_rule(ins, outs, *, slice_sizes):
    """Shardy's: pointwise; a sliced dim is a blocked need-replication factor (whole in
    operand and result: a result sharded there would read the wrong rows)."""
    x = ins[0].shape
    b = RuleBuilder(ins, outs)
    nidx = len(ins) - 1
    for d, n in enumerate(x):
        if n == slice_sizes[d]:
            b.factor([d] + [None] * nidx, [d], n)
        else:
            b.factor([d] + [None] * nidx, [d], n, NEED_REPLICATION, blocked=True)
    return b.build()


def _lower_ds(ctx, x, *idx, slice_sizes):
    """Starts along sharded sliced dims are clamped here: XLA's partitioner does not
    clamp an out-of-range start when it splits the result of a dynamic_slice along a
    sliced dim (wrong values, in jax too), while an in-range start is exact."""
    xa = ctx.in_avals[0]
    shs = [sh for sh in (ctx.in_shardings[0], ctx.out_shardings[0]) if sh is not None]
    idx = list(idx)
    for d in range(xa.ndim):
        if xa.shape[d] != slice_sizes[d] and any(sh.dims[d] for sh in shs):
            ia = ctx.in_avals[1 + d].update(weak=False)
            it = tensor_type(ia)
            lo = ctx.constant(0, ia)
            hi = ctx.constant(xa.shape[d] - slice_sizes[d], ia)
            (idx[d],) = ctx.op("stablehlo.clamp", [lo, idx[d], hi], [it] * 3, [it],
                               sharding=[Sharding.replicated(0)])
    return ctx.op("stablehlo.dynamic_slice", [x, *idx], [tensor_type(a) for a in ctx.in_avals],
                  [tensor_type(ctx.out_avals[0])], {"slice_sizes": i64_array(slice_sizes)})


def _fold_ds(op, consts, defs):
    """Known starts: a slice (as XLA's canonicalizer makes it before Shardy, so its
    sliced dims may stay sharded), at the starts clamped as the op clamps them."""
    if any(c is None for c in consts[1:]):
        return None
    from .shape import slice_p
    shape, sizes = op.inputs[0].aval.shape, op.params["slice_sizes"]
    lo = [min(max(int(c), 0), n - k) for c, n, k in zip(consts[1:], shape, sizes)]
    return Op(slice_p, op.inputs[:1], op.outputs,
              {"start_indices": tuple(lo),
               "limit_indices": tuple(a + k for a, k in zip(lo, sizes)),
               "strides": None}, op.loc)


dynamic_slice_p = Primitive("dynamic_slice", shape_rule=_ds_shape, sharding_rule=_ds_rule,
                            lower=_lower_ds, prop_kind=PropKind.DYNAMIC_SLICE)
dynamic_slice_p.fold = _fold_ds
# explicit mode: the result has the operand's type, a sliced sharded dim included (an
# error where its size does not divide), as jax's _get_sharding_for_varying_out_shape
dynamic_slice_p.type_whole = "keep"
dynamic_slice_p.type_partial = ("layout", (0,))     # a slice of partial sums is one


def _dus_shape(x, upd, *idx):
    _check_indices("dynamic_update_slice", x, idx)
    if upd.ndim != x.ndim or any(u > n for u, n in zip(upd.shape, x.shape)):
        raise ShardcError(f"dynamic_update_slice: update shape {upd.shape} must fit in the "
                          f"operand's shape {x.shape} (same rank, each dim no larger)")
    if upd.dtype != x.dtype:
        raise ShardcError(f"dynamic_update_slice: update {upd} must have the operand's dtype "
                          f"{x.dtype}")
    # jax's standard weak-type rule: weak only if every operand is (starts included)
    return x.update(weak=x.weak and upd.weak and all(i.weak for i in idx))


def _dus_rule(ins, outs):
    """Shardy's: dims the update covers whole are shared by operand, update and result;
    along the others operand and result may stay sharded (each device updates its own
    rows), the update is whole."""
    x, u = ins[0].shape, ins[1].shape
    b = RuleBuilder(ins, outs)
    rest = [None] * (len(ins) - 2)
    for d, n in enumerate(x):
        if u[d] == n:
            b.factor([d, d] + rest, [d], n)
        else:
            b.factor([d, None] + rest, [d], n)
            b.factor([None, d] + rest, [None], u[d], NEED_REPLICATION)
    return b.build()


def _lower_dus(ctx, x, upd, *idx):
    return ctx.op("stablehlo.dynamic_update_slice", [x, upd, *idx],
                  [tensor_type(a) for a in ctx.in_avals], [tensor_type(ctx.out_avals[0])])


dynamic_update_slice_p = Primitive("dynamic_update_slice", shape_rule=_dus_shape,
                                   sharding_rule=_dus_rule, lower=_lower_dus,
                                   prop_kind=PropKind.DYNAMIC_SLICE)
dynamic_update_slice_p.type_partial = ("layout", (0, 1))   # both partial, or neither


# ---------------------------------------------------------------- gradients, batching

def _rules():
    from . import lax as L
    from .batching import bcast

    def ds_vjp(ctx, cts, x, *idx, slice_sizes):
        g = cts[0]
        zeros = L.zeros(ctx.in_avals[0].shape, L.aval(g).dtype)
        return [dynamic_update_slice_p.bind(zeros, g, *idx)] + [None] * len(idx)
    dynamic_slice_p.vjp = ds_vjp

    def dus_vjp(ctx, cts, x, upd, *idx):
        g = cts[0]
        ua = ctx.in_avals[1]
        gx = dynamic_update_slice_p.bind(g, L.zeros(ua.shape, L.aval(g).dtype), *idx)
        gu = dynamic_slice_p.bind(g, *idx, slice_sizes=ua.shape)
        return [gx, gu] + [None] * len(idx)
    dynamic_update_slice_p.vjp = dus_vjp

    def zero_index(i):
        return L.zeros((), L.aval(i).dtype)

    def ds_batch(ctx, args, batched, *, slice_sizes):
        x, idx = args[0], args[1:]
        if not any(batched[1:]):     # one slice for every example: a dynamic_slice
            return dynamic_slice_p.bind(x, zero_index(idx[0]), *idx,
                                        slice_sizes=(ctx.size, *slice_sizes)), True
        x = bcast(ctx, x, batched[0])
        return _gather_slices(ctx, x, idx, batched[1:], slice_sizes), True
    dynamic_slice_p.batch = ds_batch

    def dus_batch(ctx, args, batched, **_):
        x, upd, idx = args[0], args[1], args[2:]
        if not any(batched[2:]):
            x, upd = bcast(ctx, x, batched[0]), bcast(ctx, upd, batched[1])
            return dynamic_update_slice_p.bind(x, upd, zero_index(idx[0]), *idx), True
        x, upd = bcast(ctx, x, batched[0]), bcast(ctx, upd, batched[1])
        return _select_update(ctx, x, upd, idx, batched[2:]), True
    dynamic_update_slice_p.batch = dus_batch


def _signed_start(i, dtype, n):
    """Start `i` in the signed index dtype; an unsigned one too wide for it is cut to
    the dim `n` first (the op clamps it there anyway) so it cannot wrap negative."""
    from . import lax as L
    it = L.aval(i).dtype
    if not dtypes.is_signed(it) and np.iinfo(it).max > np.iinfo(dtype).max:
        i = L.min(i, L.full((), n, it))
    return L.convert_element_type(i, dtype)


def _index_vectors(ctx, idx, batched, dtype, shape):
    """(size, 1 + rank) start indices: the example's number, then its start per dim."""
    from . import lax as L
    cols = [L.reshape(L.iota(dtype, (ctx.size,)), (ctx.size, 1))]
    for i, b, n in zip(idx, batched, shape):
        i = _signed_start(i, dtype, n)
        i = i if b else L.broadcast_in_dim(i, (ctx.size,), ())
        cols.append(L.reshape(i, (ctx.size, 1)))
    return L.concatenate(cols, 1)


def _gather_slices(ctx, x, idx, batched, slice_sizes):
    """Per-example slices of a batched operand at per-example starts: a gather (it
    clamps each start as dynamic_slice does)."""
    from . import lax as L
    from .indexing import clamped_starts, gather_p
    nd = len(slice_sizes)
    dtype = _index_dtype(idx)
    starts = _index_vectors(ctx, idx, batched, dtype, L.aval(x).shape[1:])
    # clamped here, not by the gather: its transpose would drop a window past the end
    starts = clamped_starts(starts, L.aval(x).shape, tuple(range(nd + 1)),
                            (1, *slice_sizes), 1)
    return gather_p.bind(x, starts, offset_dims=tuple(range(1, nd + 1)),
                         collapsed_slice_dims=(0,), start_index_map=tuple(range(nd + 1)),
                         index_vector_dim=1, slice_sizes=(1, *slice_sizes))


def _index_dtype(idx):
    from . import lax as L
    return dtypes.int64 if any(L.aval(i).dtype == dtypes.int64 for i in idx) else dtypes.int32


def _and(a, b):
    from .elementwise import and_p
    return and_p.bind(a, b)


def _select_update(ctx, x, upd, idx, batched):
    """Per-example updates at per-example starts: each operand element reads the
    update at its offset from the (clamped) start where it lies inside the window."""
    from . import lax as L
    from .indexing import gather_p
    xa, ua = L.aval(x), L.aval(upd)
    shape, ushape = xa.shape[1:], ua.shape[1:]
    nd = len(shape)
    dtype = _index_dtype(idx)
    inside = None
    coords = [L.iota(dtype, xa.shape, 0)]
    for d, (i, b) in enumerate(zip(idx, batched)):
        i = _signed_start(i, dtype, shape[d])
        i = i if b else L.broadcast_in_dim(i, (ctx.size,), ())
        s = L.max(L.min(i, shape[d] - ushape[d]), 0)     # the clamped start
        s = L.broadcast_in_dim(s, xa.shape, (0,))
        pos = L.iota(dtype, xa.shape, d + 1)
        off = L.sub(pos, s)
        ok = _and(L.ge(off, 0), L.lt(off, ushape[d])) if ushape[d] else L.lt(off, 0)
        inside = ok if inside is None else _and(inside, ok)
        coords.append(L.max(L.min(off, max(ushape[d] - 1, 0)), 0))
    full = L.concatenate([L.reshape(c, (*xa.shape, 1)) for c in coords], nd + 1)
    if ua.size == 0:
        return x
    picked = gather_p.bind(upd, full, offset_dims=(), collapsed_slice_dims=tuple(range(nd + 1)),
                           start_index_map=tuple(range(nd + 1)), index_vector_dim=nd + 1,
                           slice_sizes=(1,) * (nd + 1))
    return L.select(inside, picked, x)


_rules()
