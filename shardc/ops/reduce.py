"""Reductions: sum/max/min/prod/and/or over axes, argmax/argmin, cumulative sums.

A reduced dim is a *reduction* factor: a result sharded like the operand on it is a
partial result that XLA all-reduces.
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from ..ir import dtypes
from ..trace.core import Primitive
from ..ir.primitive import PropKind, Trait
from ..errors import ShardcError
from ..ir.program import Aval
from ..lower.emit import sharding_attr, tensor_type
from ..ir.sharding import Sharding
from ..ir.rules import NEED_REPLICATION, PERMUTATION, REDUCTION, RuleBuilder
from .common import check_dtype, i64_array, norm_axes
from .complex_math import lex_pick
from .scan_lower import lower_scan


def _reduce_shape(name, kind, x, *, axes):
    check_dtype(name, x, kind)
    axes = norm_axes(name, axes, x.ndim)
    return Aval(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype, x.weak)


def reduce_rule(in_avals, out_avals, *, axes, lexicographic=False, **_):
    """A reduced dim is a reduction factor, except for a complex max / min
    (`lexicographic`): XLA's all-reduce of partial results has no complex order, so the
    reduced dims must be whole."""
    x = in_avals[0]
    b = RuleBuilder(in_avals, out_avals)
    reduced = NEED_REPLICATION if lexicographic and dtypes.is_complex(x.dtype) else REDUCTION
    out_dim = 0
    for d, n in enumerate(x.shape):
        if d in axes:
            b.factor([d] + [None] * (len(in_avals) - 1), [None] * len(out_avals), n, reduced)
        else:
            b.factor([d] * len(in_avals), [out_dim] * len(out_avals), n)
            out_dim += 1
    return b.build()


def identity_of(kind, dtype):
    """The init value of a reduction."""
    if kind == "add":
        return 0
    if kind == "mul":
        return 1
    if kind == "and":      # all bits set (True for booleans)
        if dtype == dtypes.bool_:
            return True
        return -1 if dtypes.is_signed(dtype) else int(dtypes.iinfo(dtype).max)
    if kind == "or":
        return False
    if dtypes.is_complex(dtype):
        # the least / greatest complex number in the lexicographic order (jax's -inf+0j
        # would win over -inf-1j)
        inf = np.inf if kind == "min" else -np.inf
        return complex(inf, inf)
    if dtypes.is_float(dtype):
        if not dtypes.has_inf(dtype):      # float8_e4m3fn etc.: the extreme finite value
            info = dtypes.finfo(dtype)
            return float(info.min if kind == "max" else info.max)
        return -np.inf if kind == "max" else np.inf
    if dtype == dtypes.bool_:
        return kind != "max"
    info = dtypes.iinfo(dtype)
    return info.min if kind == "max" else info.max


_HLO = {"add": "stablehlo.add", "mul": "stablehlo.multiply", "max": "stablehlo.maximum",
        "min": "stablehlo.minimum", "and": "stablehlo.and", "or": "stablehlo.or"}


def monoid_ops(kind, dtype):
    """`combine(op, a, b, aval)`: emits a <kind> b of type `aval` with `op(name,
    operands, operand types, result types, props)` (a region's or a lowering's)."""
    def combine(op, a, b, aval):
        t = tensor_type(aval)
        if kind in ("max", "min") and dtypes.is_complex(dtype):
            real = aval.update(dtype=dtypes.real_dtype(dtype))
            return lex_pick(op, "GT" if kind == "max" else "LT", a, b, t,
                            tensor_type(real), tensor_type(real.update(dtype=dtypes.bool_)))[0]
        return op(_HLO[kind], [a, b], [t, t], [t])[0]
    return combine


def monoid_region(ctx, kind, aval):
    """The `^bb0(a, b): return a <kind> b` region of reductions and collectives."""
    scalar = aval.update(shape=(), weak=False)
    combine = monoid_ops(kind, aval.dtype)
    return ctx.region([scalar, scalar], lambda c, a, b: [
        combine(partial(c.op, sharding=False), a, b, scalar)])


def lower_reduce(ctx, kind, x, axes, in_aval, out_aval, sharding=None):
    """Emit stablehlo.reduce of `x` over `axes` with the monoid `kind`."""
    scalar = in_aval.update(shape=(), weak=False)
    init = ctx.constant(identity_of(kind, in_aval.dtype), scalar)
    st = tensor_type(scalar)
    region = monoid_region(ctx, kind, in_aval)
    out_t = tensor_type(out_aval)
    (r,) = ctx.op("stablehlo.reduce", [x, init], [tensor_type(in_aval), st], [out_t],
                  {"dimensions": i64_array(axes)}, sharding, regions=[region])
    ctx.lowering.types[r] = out_t
    return r


def _lower(kind, ctx, x, *, axes):
    xa, sh = ctx.in_avals[0], ctx.in_shardings[0]
    if kind in ("max", "min") and dtypes.is_complex(xa.dtype) and sh is not None \
            and any(sh.dims[d] for d in axes):
        # the rule's need_replication, made explicit: XLA's partitioner would reduce the
        # shards and all-reduce them, which it cannot do in complex order
        t = tensor_type(xa)
        whole = Sharding(tuple(() if d in axes else a for d, a in enumerate(sh.dims)))
        (x,) = ctx.op("sdy.sharding_constraint", [x], [t], [t],
                      {"sharding": sharding_attr(whole)}, sharding=False)
    return lower_reduce(ctx, kind, x, axes, xa, ctx.out_avals[0])


def reduction(name, kind, dtype_kind):
    return Primitive(name, shape_rule=partial(_reduce_shape, name, dtype_kind),
                     sharding_rule=partial(reduce_rule, lexicographic=kind in ("max", "min")),
                     lower=partial(_lower, kind),
                     prop_kind=PropKind.NONE, traits=Trait.REDUCE)


reduce_sum_p = reduction("reduce_sum", "add", "numeric")
reduce_prod_p = reduction("reduce_prod", "mul", "numeric")
reduce_max_p = reduction("reduce_max", "max", "any")
reduce_min_p = reduction("reduce_min", "min", "any")
reduce_and_p = reduction("reduce_and", "and", "bool_int")
reduce_or_p = reduction("reduce_or", "or", "bool_int")
reduce_sum_p.type_partial = ("layout", (0,))   # a sum of partial sums is one


# argmax / argmin: a variadic reduce over (x, iota), ties to the first index; NaN wins
def _arg_shape(name, x, *, axis, index_dtype):
    check_dtype(name, x, "real")      # (jax's argmax has no complex order either)
    axis = norm_axes(name, axis, x.ndim)[0]
    if x.shape[axis] == 0:
        raise ShardcError(f"{name} of an empty axis")
    return Aval(tuple(d for i, d in enumerate(x.shape) if i != axis), index_dtype)


def _arg_rule(in_avals, out_avals, *, axis, index_dtype):
    return reduce_rule(in_avals, out_avals, axes=(axis,))


def _lower_arg(direction, ctx, x, *, axis, index_dtype):
    xa, out = ctx.in_avals[0], ctx.out_avals[0]
    ia = xa.update(dtype=index_dtype, weak=False)
    it = tensor_type(ia)
    (iota,) = ctx.op("stablehlo.iota", [], [], [it], {"iota_dimension": f"{axis} : i64"},
                     [ctx.in_shardings[0]])
    vs = xa.update(shape=(), weak=False)
    is_ = ia.update(shape=())
    vinit = ctx.constant(identity_of("max" if direction == "GT" else "min", xa.dtype), vs)
    iinit = ctx.constant(0, is_)
    vt, itt = tensor_type(vs), tensor_type(is_)
    bt = "tensor<i1>"
    cmp_t = ("FLOAT" if dtypes.is_float(xa.dtype)
             else "SIGNED" if dtypes.is_signed(xa.dtype) else "UNSIGNED")

    def cmp(c, a, b, d, t, ty):
        props = {"comparison_direction": f"#stablehlo<comparison_direction {d}>",
                 "compare_type": f"#stablehlo<comparison_type {t}>"}
        return c.op("stablehlo.compare", [a, b], [ty, ty], [bt], props, sharding=False)[0]

    def body(c, a, ia_, b, ib):
        pick = cmp(c, a, b, direction, cmp_t, vt)
        if dtypes.is_float(xa.dtype):
            isnan = cmp(c, a, a, "NE", cmp_t, vt)
            pick = c.op("stablehlo.or", [pick, isnan], [bt, bt], [bt], sharding=False)[0]
        eq = cmp(c, a, b, "EQ", cmp_t, vt)
        lt = cmp(c, ia_, ib, "LT", "SIGNED" if dtypes.is_signed(ia.dtype) else "UNSIGNED",
                 itt)
        tie = c.op("stablehlo.and", [eq, lt], [bt, bt], [bt], sharding=False)[0]
        pick_i = c.op("stablehlo.or", [pick, tie], [bt, bt], [bt], sharding=False)[0]
        v = c.op("stablehlo.select", [pick, a, b], [bt, vt, vt], [vt], sharding=False)[0]
        i = c.op("stablehlo.select", [pick_i, ia_, ib], [bt, itt, itt], [itt],
                 sharding=False)[0]
        return [v, i]
    region = ctx.region([vs, is_, vs, is_], body)
    ov = tensor_type(out.update(dtype=xa.dtype))
    vals = ctx.op("stablehlo.reduce", [x, iota, vinit, iinit], [tensor_type(xa), it, vt, itt],
                  [ov, tensor_type(out)], {"dimensions": i64_array([axis])},
                  [ctx.out_shardings[0]] * 2, regions=[region])
    return vals[1]


argmax_p = Primitive("argmax", shape_rule=partial(_arg_shape, "argmax"),
                     sharding_rule=_arg_rule, lower=partial(_lower_arg, "GT"),
                     prop_kind=PropKind.NONE)
argmin_p = Primitive("argmin", shape_rule=partial(_arg_shape, "argmin"),
                     sharding_rule=_arg_rule, lower=partial(_lower_arg, "LT"),
                     prop_kind=PropKind.NONE)


# cumulative reductions: reduce_window with a window spanning the whole axis
def _cum_shape(name, x, *, axis, reverse=False):
    check_dtype(name, x, "numeric")
    norm_axes(name, axis, x.ndim)
    return x


def _cum_rule(in_avals, out_avals, *, axis, reverse=False):
    """reduce_window's rule: the windowed (padded) axis is a permutation factor."""
    b = RuleBuilder(in_avals, out_avals)
    b.same_dims(out_avals[0].shape, kind=lambda d: PERMUTATION if d == axis else "pass")
    return b.build()


def _lower_cum(kind, ctx, x, *, axis, reverse=False):
    dtype = ctx.in_avals[0].dtype
    return lower_scan(ctx, x, axis=axis, reverse=reverse, identity=identity_of(kind, dtype),
                      combine=monoid_ops(kind, dtype),
                      blocks=kind == "add" or not dtypes.is_complex(dtype))


def cumulative(name, kind):
    return Primitive(name, shape_rule=partial(_cum_shape, name), sharding_rule=_cum_rule,
                     lower=partial(_lower_cum, kind), prop_kind=PropKind.NONE)


cumsum_p = cumulative("cumsum", "add")


# ---------------------------------------------------------------- gradients

def _vjps():
    from ..ir.primitive import nondiff
    from .elementwise import defvjp
    from .shape import broadcast_in_dim_p
    from . import lax as L      # looked up when a rule runs

    def back(g, x_aval, axes):
        kept = tuple(d for d in range(x_aval.ndim) if d not in axes)
        return broadcast_in_dim_p.bind(g, shape=x_aval.shape, broadcast_dimensions=kept)

    defvjp(reduce_sum_p, lambda c, g, x, *, axes: (back(g, c.in_avals[0], axes),))

    def chooser(c, g, x, *, axes):
        """Ties share the gradient equally (as JAX's reduce_max/min)."""
        xa = c.in_avals[0]
        loc = L.convert_element_type(L.eq(x, back(c.out, xa, axes)), g.dtype)
        counts = reduce_sum_p.bind(loc, axes=axes)
        return (L.mul(loc, back(L.div(g, counts), xa, axes)),)
    defvjp(reduce_max_p, chooser)
    defvjp(reduce_min_p, chooser)

    def prod_vjp(c, g, x, *, axes):
        """jax's: the transpose of the jvp of a product tree (the reduced elements,
        flattened, halves multiplied pairwise, an odd half padded with 1), so the
        cotangent of x_i is g times the sibling products on its path to the root. Each
        partial product stays within the range of the result (a product of the elements
        before x_i may overflow where the total does not), and the rule is a polynomial
        in x, exact where x has zeros at every order."""
        xa = c.in_avals[0]
        axes = tuple(sorted(axes))
        kept = tuple(d for d in range(xa.ndim) if d not in axes)
        perm, n = axes + kept, math.prod(xa.shape[d] for d in axes)
        flat = x
        if len(axes) != 1:      # the reduced dims in front, as one
            flat = L.reshape(L.transpose(x, perm), (n, *(xa.shape[d] for d in kept)))
        ax = axes[0] if len(axes) == 1 else 0
        shape = list(L.aval(flat).shape)
        if n == 0:
            return (L.zeros_like(x),)

        def part(v, lo, hi):
            return L.slice(v, [lo if d == ax else 0 for d in range(len(shape))],
                           [hi if d == ax else s for d, s in enumerate(L.aval(v).shape)])
        levels, v = [], flat
        while L.aval(v).shape[ax] > 1:
            m = L.aval(v).shape[ax]
            h = (m + 1) // 2
            lo, hi = part(v, 0, h), part(v, h, m)
            if m - h != h:
                hi = L.pad(hi, L.lit(1, L.aval(v)),
                           [(0, 1, 0) if d == ax else (0, 0, 0) for d in range(len(shape))])
            levels.append((lo, hi, m - h))
            v = L.mul(lo, hi)
        top = [1 if d == ax else s for d, s in enumerate(shape)]
        ct = L.broadcast_in_dim(g, top, [d for d in range(len(shape)) if d != ax])
        for lo, hi, m2 in reversed(levels):
            ct_hi = L.mul(ct, lo)
            if m2 != L.aval(lo).shape[ax]:
                ct_hi = part(ct_hi, 0, m2)
            ct = L.concatenate([L.mul(ct, hi), ct_hi], ax)
        if len(axes) != 1:
            ct = L.transpose(L.reshape(ct, tuple(xa.shape[d] for d in perm)),
                             tuple(int(i) for i in np.argsort(perm)))
        return (ct,)
    defvjp(reduce_prod_p, prod_vjp)
    for p in (reduce_and_p, reduce_or_p, argmax_p, argmin_p):
        p.vjp = nondiff
    defvjp(cumsum_p, lambda c, g, x, *, axis, reverse=False: (
        cumsum_p.bind(g, axis=axis, reverse=not reverse),))


_vjps()


def _batch_rules():
    """vmap: reductions and scans over the per-example dims, one further along."""
    from .batching import shift_axes
    for p in (reduce_sum_p, reduce_prod_p, reduce_max_p, reduce_min_p, reduce_and_p,
              reduce_or_p):
        p.batch = (lambda p: lambda ctx, args, batched, *, axes: (
            p.bind(args[0], axes=shift_axes(axes)), True))(p)
    for p in (argmax_p, argmin_p):
        p.batch = (lambda p: lambda ctx, args, batched, *, axis, index_dtype: (
            p.bind(args[0], axis=axis + 1, index_dtype=index_dtype), True))(p)
    cumsum_p.batch = lambda ctx, args, batched, *, axis, reverse=False: (
        cumsum_p.bind(args[0], axis=axis + 1, reverse=reverse), True)


_batch_rules()
