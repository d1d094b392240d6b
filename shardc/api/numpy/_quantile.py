"""Order statistics of shardc.numpy, sort based as jax's: quantile, percentile,
median and their nan* forms; histogram and histogram_bin_edges."""
from __future__ import annotations

import builtins
import operator

import numpy as np

from ...errors import ShardcError, ShardcNotImplementedError, ShardcTypeError
from ...ir import dtypes
from ...ops import lax as L
from ...ops import sort as srt
from ...ops.batching import move_dim
from ...ops.common import check_axis
from ...ops.indexing import scatter_add_p
from ...ops.take import gather_along_p
from ._reductions import any as _any, max as _max, min as _min, sum as _sum
from ._shapes import ravel, reshape
from ._sorting import asarray_, searchsorted
from ._ufuncs import isnan, logical_not, where
from ._util import aval, convert, promote_dtypes_inexact
from ..explicit import takes_out_sharding

builtins_range = builtins.range
_METHODS = ("linear", "lower", "higher", "midpoint", "nearest")


def _reduced_last(name, a, axis):
    """a with the reduced axes flattened into one last axis; the kept shape, and the
    shape keepdims=True gives."""
    x = aval(a)
    if axis is None:
        return ravel(a), (), (1,) * x.ndim
    axes = axis if isinstance(axis, tuple) else (axis,)
    axes = tuple(check_axis(name, ax, x.ndim) for ax in axes)
    if len(set(axes)) != len(axes):
        raise ShardcError(f"{name}: repeated axis")
    keep = [d for d in range(x.ndim) if d not in axes]
    kept = tuple(x.shape[d] for d in keep)
    n = int(np.prod([x.shape[d] for d in axes]))
    if list(keep) + list(axes) != list(range(x.ndim)):
        a = L.transpose(a, (*keep, *axes))
    a = L.reshape(a, (*kept, n))
    kd = tuple(1 if d in axes else s for d, s in enumerate(x.shape))
    return a, kept, kd


def _quantile(name, a, q, axis, method, keepdims, squash_nans, weights=None):
    if method not in _METHODS and method != "inverted_cdf":
        raise ShardcError(f"{name}: method can only be 'linear', 'lower', 'higher', "
                          f"'midpoint', 'nearest' or 'inverted_cdf', got {method!r}")
    a, q = asarray_(name, a), asarray_(name, q)
    if weights is not None:
        a, weights = _weights(name, a, weights, axis, method)
    else:
        (a,) = promote_dtypes_inexact(a)
    qa = aval(q)
    if qa.ndim > 1:
        raise ShardcError(f"{name}: q must be have rank <= 1, got shape {qa.shape}")
    if not dtypes.is_float(qa.dtype):
        q = convert(q, dtypes.default_float(), qa.weak)
        qa = aval(q)
    dt = aval(a).dtype
    a, kept, kd = _reduced_last(name, a, axis)
    if weights is not None:
        weights = _reduced_last(name, weights, axis)[0]
    n = aval(a).shape[-1]
    nq = qa.shape[0] if qa.ndim else None
    qdt = qa.dtype
    # the quantile positions, shape (*kept, nq) (or (*kept,) for a scalar q)
    qs = q if nq is None else q
    if squash_nans:
        a = where(isnan(a), L.full((), np.nan, dt), a)
        a, weights = _sorted(a, weights)
        counts = convert(_sum(logical_not(isnan(a)), axis=-1), qdt)
        top = L.sub(counts, L.full((), 1, qdt))
    else:
        a = where(_any(isnan(a), axis=-1, keepdims=True), L.full((), np.nan, dt), a)
        a, weights = _sorted(a, weights)
        top = L.full(kept, n - 1, qdt)
    shape = kept if nq is None else (*kept, nq)
    if method == "inverted_cdf":
        res = _inverted_cdf(a, weights, qs, top, shape, squash_nans)
        if nq is not None:
            res = move_dim(res, -1, 0)
        if keepdims:
            res = reshape(res, kd if nq is None else (nq, *kd))
        return convert(res, dt)
    qb = L.broadcast_in_dim(qs, shape, () if nq is None else (len(kept),))
    topb = L.broadcast_in_dim(top, shape, tuple(range(len(kept))))
    pos = L.mul(qb, topb)
    low = L.floor(pos)
    high = _ceil(pos)
    hw = L.sub(pos, low)
    lw = L.sub(L.full((), 1, qdt), hw)
    zero = L.full((), 0, qdt)
    low = L.max(zero, L.min(low, topb))
    high = L.max(zero, L.min(high, topb))
    idt = dtypes.default_int()
    low, high = L.convert_element_type(low, idt), L.convert_element_type(high, idt)
    if n == 0 or 0 in shape:      # (an empty result has nothing to gather)
        lv = hv = L.full(shape, np.nan, dt)
    else:
        def take(i):
            i = i if nq is not None else L.reshape(i, (*kept, 1))
            if nq is not None and nq == 0:
                return L.full(shape, 0, dt)
            v = gather_along_p.bind(a, i, axis=len(kept))
            return v if nq is not None else L.reshape(v, kept)
        lv, hv = take(low), take(high)
    if method == "linear":
        res = L.add(L.mul(convert(lv, qdt), lw), L.mul(convert(hv, qdt), hw))
    elif method == "lower":
        res = lv
    elif method == "higher":
        res = hv
    elif method == "nearest":
        res = L.select(L.le(hw, L.full((), 0.5, qdt)), lv, hv)
    else:
        res = L.mul(L.add(lv, hv), L.full((), 0.5, dt))
    if nq is not None:
        res = move_dim(res, -1, 0)
    if keepdims:
        res = reshape(res, kd if nq is None else (nq, *kd))
    return convert(res, dt)


def _weights(name, a, w, axis, method):
    """a and jax's `weights=` promoted together, w broadcast to a's shape (it may have
    the shape of the reduced axes)."""
    w = asarray_(name, w)
    if dtypes.is_complex(aval(w).dtype):
        raise ShardcError(f"{name}: weights cannot be complex types")
    if method != "inverted_cdf":
        raise ShardcNotImplementedError(f"{method} doesn't support weights. Only method "
                                        "'inverted_cdf' supports weights.")
    a, w = promote_dtypes_inexact(a, w)
    sa, sw = aval(a).shape, aval(w).shape
    if sw != sa:
        if axis is None:
            raise ShardcError(f"{name}: weights shape {sw} must match a's shape {sa} when "
                              "axis is None")
        axes = axis if isinstance(axis, tuple) else (axis,)
        axes = tuple(check_axis(name, ax, len(sa)) for ax in axes)
        if sw != tuple(sa[ax] for ax in axes):
            raise ShardcError(f"{name}: weights shape {sw} must match the reduced axes "
                              f"{tuple(sa[ax] for ax in axes)}")
        w = L.broadcast_in_dim(w, sa, axes)
    return a, w


def _sorted(a, w):
    """a sorted along its last axis, the weights (if any) moved with it."""
    last = aval(a).ndim - 1
    if w is None:
        return srt.sort_p.bind(a, dimension=last, is_stable=True, num_keys=1)[0], None
    a, w = srt.sort_p.bind(a, w, dimension=last, is_stable=True, num_keys=1)
    return a, w


def _inverted_cdf(a, w, q, top, shape, squash_nans):
    """jax's method='inverted_cdf': the first sorted value whose cumulative weight
    reaches q of the total (weights 1 when none given); NaN where a weight is negative
    or NaN, and where a holds a NaN (nanquantile: where it holds nothing else)."""
    from ._reductions import cumsum
    dt = aval(a).dtype
    if w is None:
        w = L.full(aval(a).shape, 1, dt)
    wdt = aval(w).dtype
    zero = L.full((), 0, wdt)
    bad = L.bitwise_or(L.lt(w, zero), isnan(w))
    nan_data = isnan(a)
    cum = cumsum(where(L.bitwise_or(bad, nan_data), zero, w), axis=-1)
    *rows, n = aval(a).shape
    kept = len(rows)
    k = len(shape) - kept        # 1 with a vector q
    total = L.slice(cum, (0,) * kept + (n - 1,), (*rows, n)) if n else \
        L.full((*rows, 1), 0, wdt)
    qb = L.broadcast_in_dim(convert(q, wdt), shape, () if not k else (kept,))
    target = L.mul(qb, L.broadcast_in_dim(L.reshape(total, rows), shape, tuple(range(kept))))
    full = (*shape, n)
    less = L.lt(L.broadcast_in_dim(cum, full, tuple(range(kept)) + (len(full) - 1,)),
                L.broadcast_in_dim(target, full, tuple(range(len(shape)))))
    idt = dtypes.default_int()
    idx = _sum(convert(less, idt), axis=-1)
    topb = L.convert_element_type(L.broadcast_in_dim(top, shape, tuple(range(kept))), idt)
    idx = L.max(L.full((), 0, idt), L.min(idx, topb))
    if n == 0 or 0 in shape:
        res = L.full(shape, np.nan, dt)
    else:
        i = idx if k else L.reshape(idx, (*shape, 1))
        res = gather_along_p.bind(a, i, axis=kept)
        res = res if k else L.reshape(res, shape)
    if squash_nans:
        force = L.bitwise_or(_any(bad, axis=-1), L.eq(_sum(logical_not(nan_data), axis=-1),
                                               L.full((), 0, idt)))
    else:
        force = L.bitwise_or(_any(bad, axis=-1), _any(nan_data, axis=-1))
    force = L.broadcast_in_dim(force, shape, tuple(range(kept)))
    return where(force, L.full((), np.nan, dt), res)


def _ceil(x):
    from ...ops.elementwise import ceil_p
    return ceil_p.bind(x)


def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
             keepdims=False, *, weights=None):
    _no_out("quantile", out, overwrite_input)
    return _quantile("quantile", a, q, axis, method, keepdims, False, weights)


def nanquantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None):
    _no_out("nanquantile", out, overwrite_input)
    return _quantile("nanquantile", a, q, axis, method, keepdims, True, weights)


def _no_out(name, out, overwrite_input):
    if out is not None or overwrite_input:
        raise ShardcError(f"{name} does not support overwrite_input=True or out != None")


def _percent(name, q):
    q = asarray_(name, q)
    qa = aval(q)
    if not dtypes.is_float(qa.dtype):
        q = convert(q, dtypes.default_float(), qa.weak)
    return L.div(q, 100)


@takes_out_sharding
def percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None):
    _no_out("percentile", out, overwrite_input)
    a = asarray_("percentile", a)
    (a,) = promote_dtypes_inexact(a)
    return quantile(a, _percent("percentile", q), axis, method=method, keepdims=keepdims,
                    weights=weights)


def nanpercentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                  keepdims=False, *, weights=None):
    _no_out("nanpercentile", out, overwrite_input)
    a = asarray_("nanpercentile", a)
    (a,) = promote_dtypes_inexact(a)
    return nanquantile(a, _percent("nanpercentile", q), axis, method=method,
                       keepdims=keepdims, weights=weights)


def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return quantile(a, 0.5, axis=axis, out=out, overwrite_input=overwrite_input,
                    keepdims=keepdims, method="midpoint")


def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    return nanquantile(a, 0.5, axis=axis, out=out, overwrite_input=overwrite_input,
                       keepdims=keepdims, method="midpoint")


# ---------------------------------------------------------------- histograms

def histogram_bin_edges(a, bins=10, range=None, weights=None):
    if isinstance(bins, str):
        raise ShardcError("histogram_bin_edges: string values for `bins` are not "
                          "implemented")
    arr = asarray_("histogram_bin_edges", a)
    dt = aval(arr).dtype
    dt = dt if dtypes.is_float(dt) else dtypes.default_float()
    if np.ndim(bins) == 1 or (hasattr(bins, "shape") and len(bins.shape) == 1):
        return convert(asarray_("histogram_bin_edges", bins), dt)
    try:
        nbins = operator.index(bins)
    except TypeError:
        raise ShardcTypeError(f"histogram_bin_edges: bins must be an int or a 1-d array, "
                              f"got {bins!r}") from None
    if range is None:
        lo, hi = convert(_min(arr), dt), convert(_max(arr), dt)
    else:
        if np.shape(range) != (2,):
            raise ShardcError(f"`range` must be either None or a sequence of scalars, got "
                              f"{range}")
        lo, hi = (convert(asarray_("histogram", r), dt) for r in range)
    flat = L.eq(L.sub(hi, lo), 0)
    lo = where(flat, L.sub(lo, 0.5), lo)
    hi = where(flat, L.add(hi, 0.5), hi)
    from ._composite import linspace
    return linspace(lo, hi, nbins + 1, dtype=dt)


def histogram(a, bins=10, range=None, weights=None, density=None):
    a = asarray_("histogram", a)
    if weights is None:
        (a,) = promote_dtypes_inexact(a)
        w = L.full(aval(a).shape, 1, aval(a).dtype)
    else:
        w = asarray_("histogram", weights)
        if aval(w).shape != aval(a).shape:
            raise ShardcError("histogram: weights should have the same shape as a.")
        a, w = promote_dtypes_inexact(a, w)
    edges = histogram_bin_edges(a, bins, range)
    m = aval(edges).shape[0]
    idx = searchsorted(edges, a, side="right")
    last = L.reshape(L.slice(edges, (m - 1,), (m,)), ())
    idx = where(L.eq(a, convert(last, aval(a).dtype)), m - 1, idx)
    idx, w = ravel(idx), ravel(w)
    counts = scatter_add_p.bind(L.full((m,), 0, aval(w).dtype),
                                L.reshape(idx, (aval(idx).shape[0], 1)), w,
                                update_window_dims=(), inserted_window_dims=(0,),
                                scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
    counts = L.slice(counts, (1,), (m,))
    if density:
        widths = L.sub(L.slice(edges, (1,), (m,)), L.slice(edges, (0,), (m - 1,)))
        counts = L.div(L.div(counts, convert(widths, aval(counts).dtype)), _sum(counts))
    return counts, edges


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """Counts of the N points of `sample` (N, D) in a D-dim grid of bins (jax's:
    searchsorted per dim, a clipped flat index, a bincount)."""
    from ._setops import bincount
    sample = asarray_("histogramdd", sample)
    if weights is None:
        (sample,) = promote_dtypes_inexact(sample)
    else:
        weights = asarray_("histogramdd", weights)
        if aval(weights).shape != aval(sample).shape[:1]:
            raise ShardcError("histogramdd: should have one weight for each sample.")
        sample, weights = promote_dtypes_inexact(sample, weights)
    if aval(sample).ndim != 2:
        raise ShardcError(f"histogramdd: sample must be (N, D), got {aval(sample).shape}")
    n, d = aval(sample).shape
    if range is not None and (len(range) != d or any(
            r is not None and np.shape(r)[0] != 2 for r in range)):
        raise ShardcError(f"histogramdd: for sample.shape={(n, d)}, range must be a "
                          f"sequence of {d} pairs or Nones; got {range=}")
    per_dim = list(bins) if isinstance(bins, (list, tuple)) else d * [bins]
    if len(per_dim) != d:
        raise ShardcError("histogramdd: should be a bin for each dimension.")
    idt = dtypes.int32
    flat, edges, sizes = None, [], []
    for i in builtins_range(d):
        col = L.reshape(L.slice(sample, (0, i), (n, i + 1)), (n,))
        e = histogram_bin_edges(col, per_dim[i], None if range is None else range[i])
        m = aval(e).shape[0]
        last = L.reshape(L.slice(e, (m - 1,), (m,)), ())
        idx = convert(searchsorted(e, col, side="right"), idt)
        idx = where(L.eq(col, last), L.sub(idx, 1), idx)
        edges.append(e)
        sizes.append(m + 1)
        idx = L.max(L.min(idx, m), 0)                     # ravel_multi_index(mode="clip")
        flat = idx if flat is None else L.add(L.mul(flat, m + 1), idx)
    hist = bincount(flat, weights, length=int(np.prod(sizes)))
    hist = L.reshape(hist, tuple(sizes))
    hist = L.slice(hist, (1,) * d, tuple(k - 1 for k in sizes))
    if density:
        hist = convert(hist, aval(sample).dtype)
        hist = L.div(hist, _sum(hist))
        for i, e in enumerate(edges):
            m = aval(e).shape[0]
            de = L.sub(L.slice(e, (1,), (m,)), L.slice(e, (0,), (m - 1,)))
            hist = L.div(hist, L.broadcast_in_dim(de, aval(hist).shape, (i,)))
    return hist, edges


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    x, y = asarray_("histogram2d", x), asarray_("histogram2d", y)
    try:
        nb = len(bins)
    except TypeError:
        nb = 1
    if nb not in (1, 2):
        bins = [bins, bins]
    from ._shapes import stack
    hist, edges = histogramdd(stack([x, y], axis=1), bins, range, weights, density)
    return hist, edges[0], edges[1]


__all__ = ["quantile", "nanquantile", "percentile", "nanpercentile", "median", "nanmedian",
           "histogram_bin_edges", "histogram", "histogramdd", "histogram2d"]


def _wrap():
    from ...errors import wrap_public
    pub = {k: globals()[k] for k in __all__}
    wrap_public(pub)
    globals().update(pub)


_wrap()
