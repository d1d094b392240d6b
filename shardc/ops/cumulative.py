"""Cumulative products, maxima, minima and log-sum-exps (cumsum is in reduce.py).

Lowered as jax lowers them on CPU: a reduce_window whose window spans the axis (XLA
rewrites it into a log-depth scan). Gradients are closed forms built from shardc's own
ops; the linear recurrences they need run as log-depth scans (`linear_scan`).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..ir import dtypes
from ..ir.primitive import PropKind
from ..lower.emit import tensor_type
from ..trace.core import Primitive
from .common import check_dtype, i64_array, norm_axes
from .reduce import _cum_rule, cumulative, cumsum_p

cumprod_p = cumulative("cumprod", "mul")
cummax_p = cumulative("cummax", "max")
cummin_p = cumulative("cummin", "min")


def _lse_shape(x, *, axis, reverse=False):
    check_dtype("cumlogsumexp", x, "float")
    norm_axes("cumlogsumexp", axis, x.ndim)
    return x


def _lower_lse(ctx, x, *, axis, reverse=False):
    """reduce_window with jax's logaddexp region (NaN-safe for two infinities)."""
    xa = ctx.in_avals[0]
    n = xa.shape[axis]
    if xa.size == 0:
        return [x]
    s = xa.update(shape=(), weak=False)
    st = tensor_type(s)
    init = ctx.constant(-np.inf, s)

    def body(c, a, b):
        def op(name, *xs, out=st):
            return c.op(name, list(xs), [st] * len(xs), [out], sharding=False)[0]
        mx = op("stablehlo.maximum", a, b)
        d = op("stablehlo.subtract", a, b)
        props = {"comparison_direction": "#stablehlo<comparison_direction NE>",
                 "compare_type": "#stablehlo<comparison_type FLOAT>"}
        nan = c.op("stablehlo.compare", [d, d], [st, st], ["tensor<i1>"], props,
                   sharding=False)[0]
        both = op("stablehlo.add", a, b)
        e = op("stablehlo.log_plus_one",
               op("stablehlo.exponential", op("stablehlo.negate", op("stablehlo.abs", d))))
        r = op("stablehlo.add", mx, e)
        return [c.op("stablehlo.select", [nan, both, r], ["tensor<i1>", st, st], [st],
                     sharding=False)[0]]
    region = ctx.region([s, s], body)
    window = [n if d == axis else 1 for d in range(xa.ndim)]
    pads = ", ".join(f"[{(0 if reverse else n - 1) if d == axis else 0}, "
                     f"{(n - 1 if reverse else 0) if d == axis else 0}]" for d in range(xa.ndim))
    props = {"window_dimensions": i64_array(window),
             "window_strides": i64_array([1] * xa.ndim),
             "base_dilations": i64_array([1] * xa.ndim),
             "window_dilations": i64_array([1] * xa.ndim),
             "padding": f"dense<[{pads}]> : tensor<{xa.ndim}x2xi64>"}
    t = tensor_type(xa)
    return ctx.op("stablehlo.reduce_window", [x, init], [t, st], [t], props, regions=[region])


cumlogsumexp_p = Primitive("cumlogsumexp", shape_rule=_lse_shape, sharding_rule=_cum_rule,
                           lower=_lower_lse, prop_kind=PropKind.NONE)


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


def _cumext_grad(g, x, y, axis):
    """Each y_j is some x_i: the last i <= j where x_i is the running extreme; x_i
    gets the sum of g over the run of outputs it is (ties: the later element)."""
    L = _L()
    a = L.aval(x)
    pos = L.iota(dtypes.int32, a.shape, axis)
    owner = cummax_p.bind(L.select(L.eq(x, y), pos, L.full(a.shape, -1, dtypes.int32)),
                          axis=axis)
    same_next = L.convert_element_type(L.eq(shift(owner, axis, -1, -2), owner), L.aval(g).dtype)
    runs = linear_scan(same_next, g, axis, reverse=True)
    return L.select(L.eq(owner, pos), runs, L.zeros_like(g))


def _cumlse_grad(g, x, y, axis):
    """sum_{j>=i} g_j exp(x_i - y_j), as exp(x_i + log of the positive part's sum) minus
    the same of the negative part: each a reverse cumlogsumexp, never overflowing."""
    L = _L()
    out = None
    for part in (L.max(g, 0), L.neg(L.min(g, 0))):
        t = cumlogsumexp_p.bind(L.sub(L.log(part), y), axis=axis, reverse=True)
        e = L.exp(L.add(x, t))
        out = e if out is None else L.sub(out, e)
    return out


def _rules():
    def vjp(fn):
        def rule(ctx, cts, x, *, axis, reverse=False):
            if not dtypes.is_float(ctx.in_avals[0].dtype):
                return [None]
            return [_forward(fn, cts[0], x, ctx.out, axis, reverse)]
        return rule
    cumprod_p.vjp = vjp(_cumprod_grad)
    cummax_p.vjp = vjp(_cumext_grad)
    cummin_p.vjp = vjp(_cumext_grad)
    cumlogsumexp_p.vjp = vjp(_cumlse_grad)

    def batch(prim):
        def rule(ctx, args, batched, *, axis, reverse=False):
            return prim.bind(args[0], axis=axis + 1, reverse=reverse), True
        return rule
    for p in (cumprod_p, cummax_p, cummin_p, cumlogsumexp_p):
        p.batch = batch(p)
    if getattr(cumsum_p, "batch", None) is None:      # (the vmap branch brings its own)
        cumsum_p.batch = batch(cumsum_p)


_rules()
