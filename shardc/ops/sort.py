"""Sorting: sort (several operands, the first `num_keys` the keys), top_k, approx_top_k.

The sorted dim must be whole on a device (a need-replication factor, as Shardy's); the
other dims pass through, so a batch of rows sorts shard by shard.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.primitive import PropKind
from ..ir.program import Aval
from ..ir.rules import NEED_REPLICATION, RuleBuilder
from ..lower.emit import dense, tensor_type
from ..trace.core import Primitive
from .common import check_axis


# ---------------------------------------------------------------- sort

def _sort_shape(*xs, dimension, is_stable, num_keys):
    if not xs:
        raise ShardcError("sort needs at least one operand")
    shape = xs[0].shape
    if any(x.shape != shape for x in xs):
        raise ShardcError(f"sort: every operand needs one shape, got {[x.shape for x in xs]}")
    if not xs[0].ndim:
        raise ShardcError("sort needs operands of rank >= 1, got a scalar")
    check_axis("sort", dimension, len(shape))
    if not 1 <= num_keys <= len(xs):
        raise ShardcError(f"sort: num_keys={num_keys} must be in [1, {len(xs)}] (the number "
                          "of operands)")
    return tuple(xs)


def _sort_rule(ins, outs, *, dimension, is_stable, num_keys):
    """Shardy's: pointwise, the sort dim a need-replication factor (and no factor at all
    when every other dim has size 1, as Shardy's rule today)."""
    shape = ins[0].shape
    along = any(n > 1 for d, n in enumerate(shape) if d != dimension)
    b = RuleBuilder(ins, outs)
    b.same_dims(shape, pred=lambda d: along or d != dimension,
                kind=lambda d: NEED_REPLICATION if d == dimension else "pass")
    return b.build()


def _const(c, value, aval):
    (r,) = c.op("stablehlo.constant", [], [], [tensor_type(aval)],
                {"value": dense(value, aval)}, sharding=False)
    return r


def _cmp(c, a, b, direction, ctype, t):
    props = {"comparison_direction": f"#stablehlo<comparison_direction {direction}>",
             "compare_type": f"#stablehlo<comparison_type {ctype}>"}
    return c.op("stablehlo.compare", [a, b], [t, t], ["tensor<i1>"], props, sharding=False)[0]


def _bool2(c, name, a, b):
    return c.op(name, [a, b], ["tensor<i1>"] * 2, ["tensor<i1>"], sharding=False)[0]


def _key(c, x, aval):
    """(key, compare type) of one operand, as jax's _operands_to_keys."""
    t = tensor_type(aval)
    if dtypes.is_float(aval.dtype):
        zero = _const(c, 0.0, aval)
        is_zero = _cmp(c, x, zero, "EQ", "FLOAT", t)
        y = c.op("stablehlo.select", [is_zero, _const(c, 0.0, aval), x], ["tensor<i1>", t, t],
                 [t], sharding=False)[0]
        is_nan = _cmp(c, x, x, "NE", "FLOAT", t)
        y = c.op("stablehlo.select", [is_nan, _const(c, np.nan, aval), y], ["tensor<i1>", t, t],
                 [t], sharding=False)[0]
        return y, "TOTALORDER"
    if aval.dtype == dtypes.bool_ or not dtypes.is_signed(aval.dtype):
        return x, "UNSIGNED"
    return x, "SIGNED"


def _parts(c, x, aval):
    """A complex key compares as (real, imag), as jax's _operands_to_keys."""
    if not dtypes.is_complex(aval.dtype):
        return [(x, aval)]
    part = aval.update(dtype=dtypes.real_dtype(aval.dtype))
    t, pt = tensor_type(aval), tensor_type(part)
    return [(c.op(f"stablehlo.{f}", [x], [t], [pt], sharding=False)[0], part)
            for f in ("real", "imag")]


def lt_comparator(c, avals, num_keys, args):
    """jax's _sort_lt_comparator: lexicographic `<` over the keys."""
    keys = []
    for i in range(num_keys):
        a = avals[i].update(shape=(), weak=False)
        for (pa, part), (pb, _) in zip(_parts(c, args[2 * i], a),
                                       _parts(c, args[2 * i + 1], a)):
            xa, ct = _key(c, pa, part)
            xb, _ = _key(c, pb, part)
            keys.append((xa, xb, ct, tensor_type(part)))
    p = None
    for xa, xb, ct, t in reversed(keys):
        lt = _cmp(c, xa, xb, "LT", ct, t)
        if p is None:
            p = lt
        else:
            eq = _cmp(c, xa, xb, "EQ", ct, t)
            p = _bool2(c, "stablehlo.or", lt, _bool2(c, "stablehlo.and", eq, p))
    return [p]


def _lower_sort(ctx, *xs, dimension, is_stable, num_keys):
    avals = ctx.in_avals
    scalars = []
    for a in avals:
        s = a.update(shape=(), weak=False)
        scalars += [s, s]
    region = ctx.region(scalars, lambda c, *args: lt_comparator(c, avals, num_keys, args))
    types = [tensor_type(a) for a in avals]
    return ctx.op("stablehlo.sort", list(xs), types, [tensor_type(a) for a in ctx.out_avals],
                  {"dimension": f"{dimension} : i64",
                   "is_stable": "true" if is_stable else "false"}, regions=[region])


sort_p = Primitive("sort", shape_rule=_sort_shape, sharding_rule=_sort_rule, lower=_lower_sort,
                   prop_kind=PropKind.NONE, multiple_results=True)
sort_p.type_whole = "error"     # explicit mode: jax rejects sorting a sharded dim


# ---------------------------------------------------------------- top_k

def _topk_shape(x, *, k):
    if not x.ndim:
        raise ShardcError("top_k needs an operand of rank >= 1, got a scalar")
    if not 0 <= k <= x.shape[-1]:
        raise ShardcError(f"top_k: k={k} must be in [0, {x.shape[-1]}] (the size of the last "
                          "dim)")
    shape = (*x.shape[:-1], k)
    return (Aval(shape, x.dtype, x.weak), Aval(shape, dtypes.int32, x.weak))


def _topk_rule(ins, outs, **_):
    """Shardy's (mhlo.topk): pointwise where the operand and values' dims match, so
    the reduced last dim (unless k is its size) stays whole."""
    b = RuleBuilder(ins, outs)
    x, v = ins[0].shape, outs[0].shape
    b.same_dims(x, pred=lambda d: x[d] == v[d])
    return b.build()


def _lower_topk(ctx, x, *, k):
    return ctx.op("chlo.top_k", [x], [tensor_type(ctx.in_avals[0])],
                  [tensor_type(a) for a in ctx.out_avals], {"k": f"{k} : i64"})


top_k_p = Primitive("top_k", shape_rule=_topk_shape, sharding_rule=_topk_rule,
                    lower=_lower_topk, prop_kind=PropKind.NONE, multiple_results=True)


# ---------------------------------------------------------------- approx_top_k
# On CPU XLA computes it exactly (its fallback sorts by value and slices): so here,
# a sort of (operand, iota) by the plain comparison, sliced to k.

def _approx_shape(x, *, k, reduction_dimension, is_max_k, recall_target, aggregate_to_topk,
                  reduction_input_size_override):
    if not x.ndim:
        raise ShardcError("approx_max_k needs an operand of rank >= 1, got a scalar")
    d = reduction_dimension
    if not 0 <= d < x.ndim:      # (the frontend and the API canonicalize a negative one)
        raise ShardcError(f"approx_max_k: reduction_dimension={d} is not a dim of {x}")
    if not 0 <= k <= x.shape[d]:
        raise ShardcError(f"approx_max_k: k={k} must be in [0, {x.shape[d]}] (the size of "
                          f"dim {d})")
    if not dtypes.is_float(x.dtype):
        raise ShardcError(f"approx_max_k needs a floating-point operand, got {x}")
    shape = tuple(k if i == d else n for i, n in enumerate(x.shape))
    return (Aval(shape, x.dtype, x.weak), Aval(shape, dtypes.int32, x.weak))


def _approx_rule(ins, outs, *, reduction_dimension, **_):
    """As its lowering, a sort then a slice: the reduced dim one need-replication factor
    (the sort's, sized as the operand) that the slice passes on to the results; no factor
    when it is all the sort sees (as the sort's own rule)."""
    x, d0 = ins[0].shape, reduction_dimension
    along = any(n > 1 for d, n in enumerate(x) if d != d0)
    b = RuleBuilder(ins, outs)
    b.same_dims(x, pred=lambda d: along or d != d0,
                kind=lambda d: NEED_REPLICATION if d == d0 else "pass")
    return b.build()


def _lower_approx(ctx, x, *, k, reduction_dimension, is_max_k, recall_target,
                  aggregate_to_topk, reduction_input_size_override):
    xa = ctx.in_avals[0]
    d = reduction_dimension
    ia = xa.update(dtype=dtypes.int32, weak=False)
    it = tensor_type(ia)
    sh = ctx.in_shardings[0]
    (iota,) = ctx.op("stablehlo.iota", [], [], [it], {"iota_dimension": f"{d} : i64"}, [sh])
    vs = xa.update(shape=(), weak=False)
    is_ = ia.update(shape=())
    vt = tensor_type(vs)

    def body(c, a, b, ia_, ib):
        return [_cmp(c, a, b, "GT" if is_max_k else "LT", "FLOAT", vt)]
    region = ctx.region([vs, vs, is_, is_], body)
    xt = tensor_type(xa)
    vals = ctx.op("stablehlo.sort", [x, iota], [xt, it], [xt, it],
                  {"dimension": f"{d} : i64", "is_stable": "true"}, [sh, sh], regions=[region])
    from .common import i64_array
    outs = []
    for v, t, oa, osh in zip(vals, [xt, it], ctx.out_avals, ctx.out_shardings):
        (r,) = ctx.op("stablehlo.slice", [v], [t], [tensor_type(oa)],
                      {"start_indices": i64_array([0] * xa.ndim),
                       "limit_indices": i64_array(oa.shape),
                       "strides": i64_array([1] * xa.ndim)}, [osh])
        outs.append(r)
    return outs


approx_top_k_p = Primitive("approx_top_k", shape_rule=_approx_shape, sharding_rule=_approx_rule,
                           lower=_lower_approx, prop_kind=PropKind.NONE, multiple_results=True)


# ---------------------------------------------------------------- gradients, batching

def _rules():
    from . import lax as L
    from .batching import materialize, move_dim

    def iota_like(aval, dimension):
        return L.iota(dtypes.int32, aval.shape, dimension)

    def sort_vjp(ctx, cts, *xs, dimension, is_stable, num_keys):
        """Each output is its operand permuted: the permutation (an iota sorted along),
        then each cotangent put back by sorting it by that permutation."""
        avals = ctx.in_avals
        if all(c is None for c in cts):
            return [None] * len(xs)
        perm = sort_p.bind(*xs, iota_like(avals[0], dimension), dimension=dimension,
                           is_stable=is_stable, num_keys=num_keys)[-1]
        out = []
        for c, a in zip(cts, avals):
            if c is None or not dtypes.is_inexact(a.dtype):
                out.append(None)
                continue
            out.append(sort_p.bind(perm, c, dimension=dimension, is_stable=False,
                                   num_keys=1)[1])
        return out
    sort_p.vjp = sort_vjp

    def topk_vjp(ctx, cts, x, *, k):
        g = cts[0]
        if g is None or not dtypes.is_float(ctx.in_avals[0].dtype):
            return [None]
        return [_scatter_last(L, g, ctx.outs[1], ctx.in_avals[0])]
    top_k_p.vjp = topk_vjp

    def approx_vjp(ctx, cts, x, *, reduction_dimension, **_):
        g = cts[0]
        if g is None:
            return [None]
        xa = ctx.in_avals[0]
        d = reduction_dimension
        g, idx = move_dim(g, d, -1), move_dim(ctx.outs[1], d, -1)
        moved = xa.update(shape=tuple(n for i, n in enumerate(xa.shape) if i != d)
                          + (xa.shape[d],))
        return [move_dim(_scatter_last(L, g, idx, moved), -1, d)]
    approx_top_k_p.vjp = approx_vjp

    def sort_batch(ctx, args, batched, *, dimension, is_stable, num_keys):
        xs = materialize(ctx, args, batched)
        outs = sort_p.bind(*xs, dimension=dimension + 1, is_stable=is_stable,
                           num_keys=num_keys)
        return outs, [True] * len(outs)
    sort_p.batch = sort_batch

    def topk_batch(ctx, args, batched, *, k):
        outs = top_k_p.bind(args[0], k=k)
        return outs, [True, True]
    top_k_p.batch = topk_batch

    def approx_batch(ctx, args, batched, *, reduction_dimension, **params):
        outs = approx_top_k_p.bind(args[0], reduction_dimension=reduction_dimension + 1,
                                   **params)
        return outs, [True, True]
    approx_top_k_p.batch = approx_batch


def _scatter_last(L, g, idx, x_aval):
    """zeros of x's shape with g added at `idx` along the last dim (top_k's transpose):
    a one-hot contraction would be k*n; a scatter is what jax emits."""
    from .indexing import scatter_add_p
    nd = x_aval.ndim
    batch = x_aval.shape[:-1]
    k = L.aval(g).shape[-1]
    # full indices (batch..., idx) per element: index_vector_dim = nd
    parts = []
    for d in range(nd - 1):
        io = L.iota(dtypes.int32, (*batch, k), d)
        parts.append(L.reshape(io, (*batch, k, 1)))
    parts.append(L.reshape(L.convert_element_type(idx, dtypes.int32), (*batch, k, 1)))
    full = L.concatenate(parts, nd) if len(parts) > 1 else parts[0]
    zeros = L.zeros(x_aval.shape, L.aval(g).dtype)
    return scatter_add_p.bind(zeros, full, g, update_window_dims=(),
                              inserted_window_dims=tuple(range(nd)),
                              scatter_dims_to_operand_dims=tuple(range(nd)),
                              index_vector_dim=nd)


_rules()
