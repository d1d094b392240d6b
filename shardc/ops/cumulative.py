"""Cumulative products, maxima, minima and log-sum-exps (cumsum is in reduce.py).

Lowered as jax lowers them on CPU: a reduce_window whose window spans the axis (XLA
rewrites it into a log-depth scan). Gradients are closed forms built from shardc's own
ops; the linear recurrences they need run as log-depth scans (`linear_scan`).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..ir import dtypes
from ..ir.primitive import PropKind, Trait
from ..lower.emit import tensor_type
from ..trace.core import Primitive
from .batching import elementwise_rule
from .common import check_dtype, expand_scalars, norm_axes
from .elementwise import defvjp, elementwise
from .reduce import _cum_rule, cumulative
from .scan_lower import lower_scan

cumprod_p = cumulative("cumprod", "mul")
cummax_p = cumulative("cummax", "max")
cummin_p = cumulative("cummin", "min")


def _lse_shape(x, *, axis, reverse=False):
    check_dtype("cumlogsumexp", x, "float")
    norm_axes("cumlogsumexp", axis, x.ndim)
    return x


def logaddexp_ops(op, a, b, t, bt):
    """jax's logaddexp of two real floats: max + log1p(exp(-|a - b|)), or a + b where a - b
    is NaN (a NaN, or two infinities of one sign). `op(name, operands, operand types,
    result types, props)` emits one op (a lowering's or a region's)."""
    def un(name, *xs):
        return op(name, list(xs), [t] * len(xs), [t])[0]
    mx, d = un("stablehlo.maximum", a, b), un("stablehlo.subtract", a, b)
    nan = op("stablehlo.compare", [d, d], [t, t], [bt],
             {"comparison_direction": "#stablehlo<comparison_direction NE>",
              "compare_type": "#stablehlo<comparison_type FLOAT>"})[0]
    e = un("stablehlo.log_plus_one", un("stablehlo.exponential", un(
        "stablehlo.negate", un("stablehlo.abs", d))))
    return op("stablehlo.select", [nan, un("stablehlo.add", a, b), un("stablehlo.add", mx, e)],
              [bt, t, t], [t])[0]


def _lower_lse(ctx, x, *, axis, reverse=False):
    """A scan of jax's logaddexp (NaN-safe for two infinities)."""
    def combine(op, a, b, aval):
        return logaddexp_ops(op, a, b, tensor_type(aval),
                             tensor_type(aval.update(dtype=dtypes.bool_)))
    return lower_scan(ctx, x, axis=axis, reverse=reverse, identity=-np.inf, combine=combine)


cumlogsumexp_p = Primitive("cumlogsumexp", shape_rule=_lse_shape, sharding_rule=_cum_rule,
                           lower=_lower_lse, prop_kind=PropKind.NONE)


def _lower_logaddexp(ctx, a, b):
    out = ctx.out_avals[0]
    a, b = expand_scalars(ctx, (a, b), out.shape)
    return [logaddexp_ops(ctx.op, a, b, tensor_type(out),
                          tensor_type(out.update(dtype=dtypes.bool_)))]


# the combine of cumlogsumexp's derivatives: jax's lax logaddexp, a custom_jvp whose rule
# this op's gradient is (what it does at infinities, NaNs included)
logaddexp_p = elementwise("logaddexp", None, "float", 2, lower=_lower_logaddexp)
logaddexp_p.traits |= Trait.EXPENSIVE


# ---------------------------------------------------------------- helpers for the rules

def _L():
    from . import lax as L
    return L


def shift(x, axis, k, fill):
    """x moved k places along `axis` (towards higher indices if k > 0), `fill` entering."""
    L = _L()
    a = L.aval(x)
    n = a.shape[axis]
    k_ = min(abs(k), n)
    if k_ == 0:
        return x
    lo = [0] * a.ndim
    hi = list(a.shape)
    if k > 0:
        hi[axis] = n - k_
    else:
        lo[axis] = k_
    kept = L.slice(x, lo, hi)
    pad_shape = tuple(k_ if d == axis else s for d, s in enumerate(a.shape))
    filler = L.full(pad_shape, fill, a.dtype)
    parts = [filler, kept] if k > 0 else [kept, filler]
    return L.concatenate(parts, axis)


def linear_scan(a, b, axis, reverse=False):
    """s with s[i] = b[i] + a[i] * s[i-1] (s[i+1] if reverse), s[-1] = 0: the
    Hillis-Steele scan of the composition of affine maps, log2(n) steps."""
    L = _L()
    n = L.aval(b).shape[axis]
    step = -1 if reverse else 1
    k = 1
    while k < n:
        b = L.add(b, L.mul(a, shift(b, axis, step * k, 0)))
        a = L.mul(a, shift(a, axis, step * k, 1))
        k *= 2
    return b


def _forward(fn, g, x, y, axis, reverse):
    """fn's gradient for a forward scan; a reverse one is the mirror image."""
    L = _L()
    if not reverse:
        return fn(g, x, y, axis)
    r = partial(L.rev, dimensions=(axis,))
    return r(fn(r(g), r(x), r(y), axis))


def _cumprod_grad(g, x, y, axis):
    """d/dx_i sum_j g_j y_j = prod_{k<i} x_k * S_i, S_i = g_i + x_{i+1} S_{i+1}:
    exact where x has zeros (no division)."""
    L = _L()
    excl = shift(y, axis, 1, 1)
    s = linear_scan(shift(x, axis, -1, 0), g, axis, reverse=True)
    return L.mul(excl, s)


def _slice_every(x, start, limit, stride, axis):
    """x[start:limit:stride] along `axis` (limit None: to the end; negative: from it)."""
    L = _L()
    shape = L.aval(x).shape
    n = shape[axis]
    limit = n if limit is None else (limit + n if limit < 0 else limit)
    lo, hi, st = [0] * len(shape), list(shape), [1] * len(shape)
    lo[axis], hi[axis], st[axis] = start, max(limit, start), stride
    return L.slice(x, lo, hi, st if stride != 1 else None)


def _interleave(a, b, axis):
    """a[0], b[0], a[1], b[1], ... along `axis` (zeros padded between, then summed)."""
    L = _L()
    aa = L.aval(a)
    even = aa.shape[axis] == L.aval(b).shape[axis]
    ca, cb = [(0, 0, 0)] * aa.ndim, [(0, 0, 0)] * aa.ndim
    ca[axis], cb[axis] = (0, 1 if even else 0, 1), (1, 0 if even else 1, 1)
    zero = L.full((), 0, aa.dtype)
    return L.add(L.pad(a, zero, ca), L.pad(b, zero, cb))


def assoc_scan(fn, x, axis):
    """jax's associative_scan of one array (odd/even recursion): the structure its
    cumulative ops differentiate, so ties split as there."""
    L = _L()
    n = L.aval(x).shape[axis]
    if n < 2:
        return x
    odd = assoc_scan(fn, fn(_slice_every(x, 0, -1, 2, axis), _slice_every(x, 1, None, 2, axis)),
                     axis)
    rest = _slice_every(x, 2, None, 2, axis)
    even = fn(_slice_every(odd, 0, -1, 1, axis) if n % 2 == 0 else odd, rest)
    even = L.concatenate([_slice_every(x, 0, 1, 1, axis), even], axis)
    return _interleave(even, odd, axis)


def _cumext_vjp(fn):
    """jax differentiates cummax/cummin/cumlogsumexp as its associative scan of
    max/min/logaddexp (a tie at a max splits the cotangent in halves): the same scan,
    differentiated here."""
    def rule(ctx, cts, x, *, axis, reverse=False):
        L = _L()
        if not dtypes.is_inexact(ctx.in_avals[0].dtype):
            return [None]

        def scan(v):
            v = L.rev(v, (axis,)) if reverse else v
            out = assoc_scan(fn, v, axis)
            return L.rev(out, (axis,)) if reverse else out
        _, _, back = ctx.trace_vjp(scan, (x,))
        return [back(cts[0])[0]]
    return rule


def _rules():
    def vjp(fn):
        def rule(ctx, cts, x, *, axis, reverse=False):
            if not dtypes.is_inexact(ctx.in_avals[0].dtype):
                return [None]
            return [_forward(fn, cts[0], x, ctx.out, axis, reverse)]
        return rule
    cumprod_p.vjp = vjp(_cumprod_grad)
    cummax_p.vjp = _cumext_vjp(lambda a, b: _L().max(a, b))
    cummin_p.vjp = _cumext_vjp(lambda a, b: _L().min(a, b))
    # jax differentiates cumlogsumexp as its associative scan of logaddexp
    cumlogsumexp_p.vjp = _cumext_vjp(logaddexp_p.bind)

    def logaddexp_vjp(c, g, a, b):
        """jax's rule: each argument's weight is exp(x - out), with +inf read as 0 in x
        and out (finite, if arbitrary, where an argument is +inf)."""
        L = _L()

        def finite(v):
            return L.select(L.eq(v, np.inf), L.zeros_like(v), v)
        out = finite(c.out)
        return tuple(L.mul(g, L.exp(L.sub(finite(v), out))) for v in (a, b))
    defvjp(logaddexp_p, logaddexp_vjp)
    logaddexp_p.batch = elementwise_rule(logaddexp_p)

    def batch(prim):
        def rule(ctx, args, batched, *, axis, reverse=False):
            return prim.bind(args[0], axis=axis + 1, reverse=reverse), True
        return rule
    for p in (cumprod_p, cummax_p, cummin_p, cumlogsumexp_p):
        p.batch = batch(p)


_rules()
