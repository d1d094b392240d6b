"""take_along_axis as jax lowers it: a gather whose every dim but `axis` is a batching
dim of operand and indices alike (so those dims keep their sharding), and its
transpose, the matching scatter-add.

`idx` has x's shape except along `axis`; its entries index x's `axis` (the gather
clamps them into range, the scatter and the gather's transpose drop out-of-range ones,
as XLA's; a caller that means to clamp, clip mode, clamps them first).
"""
from __future__ import annotations

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.primitive import PropKind
from ..ir.program import Aval
from ..ir.rules import NEED_REPLICATION, REDUCTION, RuleBuilder
from ..lower.emit import tensor_type
from ..trace.core import Primitive
from .common import i64_array


def _check(name, x, idx, axis):
    if not dtypes.is_int(idx.dtype):
        raise ShardcError(f"{name}: indices must be integers, got {idx}")
    if idx.ndim != x.ndim or not 0 <= axis < x.ndim or \
            any(a != b for d, (a, b) in enumerate(zip(idx.shape, x.shape)) if d != axis):
        raise ShardcError(f"{name}: indices {idx.shape} must have the operand's shape "
                          f"{x.shape} but along axis {axis}")


def _gather_shape(x, idx, *, axis):
    _check("take_along_axis", x, idx, axis)
    return Aval(idx.shape, x.dtype, x.weak)


def _gather_rule(ins, outs, *, axis):
    """Shardy's gather rule with batching dims: each batch dim is one factor of operand,
    indices and result; the gathered axis of the operand is summed over (a masked local
    gather, then an all-reduce), the indices' axis passes to the result."""
    x, idx = ins
    b = RuleBuilder(ins, outs)
    for d, n in enumerate(idx.shape):
        if d == axis:
            b.factor([None, d], [d], n)
        else:
            b.factor([d, d], [d], n)
    m = x.shape[axis]
    b.factor([axis, None], [None], m, REDUCTION if m > 1 else NEED_REPLICATION)
    return b.build()


def _dnums(nd, axis):
    batch = ", ".join(str(d) for d in range(nd) if d != axis)
    return batch


def _with_vector_dim(ctx, idx, aval):
    """indices (*shape) -> (*shape, 1): the index vector dim XLA wants last."""
    out = aval.update(shape=(*aval.shape, 1))
    sh = ctx.in_shardings[1]
    if sh is not None:
        from ..ir.sharding import Sharding
        sh = Sharding(tuple(sh.dims) + ((),))
    (r,) = ctx.op("stablehlo.reshape", [idx], [tensor_type(aval)], [tensor_type(out)],
                  sharding=[sh] if sh is not None else False)
    return r, tensor_type(out)


def _lower_gather(ctx, x, idx, *, axis):
    xa, ia = ctx.in_avals
    nd = xa.ndim
    idx, it = _with_vector_dim(ctx, idx, ia)
    batch = _dnums(nd, axis)
    dn = (f"#stablehlo.gather<collapsed_slice_dims = [{axis}], operand_batching_dims = "
          f"[{batch}], start_indices_batching_dims = [{batch}], start_index_map = [{axis}], "
          f"index_vector_dim = {nd}>")
    return ctx.op("stablehlo.gather", [x, idx], [tensor_type(xa), it],
                  [tensor_type(ctx.out_avals[0])],
                  {"dimension_numbers": dn, "indices_are_sorted": "false",
                   "slice_sizes": i64_array([1] * nd)})


gather_along_p = Primitive("gather_along", shape_rule=_gather_shape, sharding_rule=_gather_rule,
                           lower=_lower_gather, prop_kind=PropKind.NONE)


def _scatter_shape(x, idx, upd, *, axis):
    _check("take_along_axis (transpose)", x, idx, axis)
    if upd.shape != idx.shape or upd.dtype != x.dtype:
        raise ShardcError(f"scatter_add_along: updates {upd} must have the indices' shape "
                          f"{idx.shape} and the operand's dtype {x.dtype}")
    return x


def _scatter_rule(ins, outs, *, axis):
    """Shardy's scatter rule with batching dims: batch dims shared by all; the
    indices' axis (absent from the operand) is summed over."""
    x, idx, upd = ins
    b = RuleBuilder(ins, outs)
    for d, n in enumerate(idx.shape):
        if d == axis:
            b.factor([None, d, d], [None], n, REDUCTION)
        else:
            b.factor([d, d, d], [d], n)
    b.factor([axis, None, None], [axis], x.shape[axis])
    return b.build()


def _lower_scatter(ctx, x, idx, upd, *, axis):
    from .reduce import monoid_region
    xa, ia, ua = ctx.in_avals
    nd = xa.ndim
    idx, it = _with_vector_dim(ctx, idx, ia)
    region = monoid_region(ctx, "add", xa)
    batch = _dnums(nd, axis)
    dn = (f"#stablehlo.scatter<inserted_window_dims = [{axis}], input_batching_dims = "
          f"[{batch}], scatter_indices_batching_dims = [{batch}], "
          f"scatter_dims_to_operand_dims = [{axis}], index_vector_dim = {nd}>")
    return ctx.op("stablehlo.scatter", [x, idx, upd], [tensor_type(xa), it, tensor_type(ua)],
                  [tensor_type(ctx.out_avals[0])],
                  {"indices_are_sorted": "false", "scatter_dimension_numbers": dn,
                   "unique_indices": "false"}, regions=[region])


scatter_add_along_p = Primitive("scatter_add_along", shape_rule=_scatter_shape,
                                sharding_rule=_scatter_rule, lower=_lower_scatter,
                                prop_kind=PropKind.NONE)


def clamp_index(idx, n):
    from . import lax as L
    return L.max(L.min(idx, max(n - 1, 0)), 0)


def _rules():
    from . import lax as L
    from .batching import materialize

    def gather_vjp(ctx, cts, x, idx, *, axis):
        g = cts[0]
        xa = ctx.in_avals[0]
        zeros = L.zeros(xa.shape, L.aval(g).dtype)
        # an index out of range, which the gather clamped, gets no cotangent: dropped,
        # as jax's transpose of a promise_in_bounds gather (clip-mode callers clamp)
        return [scatter_add_along_p.bind(zeros, idx, g, axis=axis), None]
    gather_along_p.vjp = gather_vjp

    def scatter_vjp(ctx, cts, x, idx, upd, *, axis):
        g = cts[0]
        n = ctx.in_avals[0].shape[axis]
        # the updates at out-of-range indices were dropped: their cotangent is zero
        ok = L.bitwise_or(L.lt(idx, 0), L.ge(idx, n))
        gu = gather_along_p.bind(g, idx, axis=axis)
        return [g, None, L.select(ok, L.zeros_like(gu), gu)]
    scatter_add_along_p.vjp = scatter_vjp

    gather_along_p.batch = lambda ctx, args, batched, *, axis: (
        gather_along_p.bind(*materialize(ctx, args, batched), axis=axis + 1), True)
    scatter_add_along_p.batch = lambda ctx, args, batched, *, axis: (
        scatter_add_along_p.bind(*materialize(ctx, args, batched), axis=axis + 1), True)


_rules()
