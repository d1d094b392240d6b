"""Counting and set operations of shardc.numpy: bincount, nonzero, argwhere,
flatnonzero, unique (and unique_*), isin, union1d, intersect1d, setdiff1d, setxor1d.

Their result sizes depend on the values: under jit they need `size=` (as jax's), so
the shapes are static; eagerly the size is read off the concrete values first.
"""
from __future__ import annotations

import operator
from typing import NamedTuple

import numpy as np

from ...errors import ShardcError, ShardcTypeError
from ...ir import dtypes
from ...ops import dynamic as dyn
from ...ops import lax as L
from ...ops import sort as srt
from ...ops.common import check_axis
from ...ops.indexing import gather_p, scatter_add_p
from ...trace import core
from ._reductions import any as _any, cumsum, sum as _sum
from ._shapes import concatenate, moveaxis, ravel, reshape, transpose
from ._sorting import asarray_, lexsort
from ._ufuncs import bitwise_and, isnan, logical_not, where
from ._util import aval, convert, promote_dtypes

SIZE_HINT = ("under shardc.jit, pass a static `size=` (the result's length), as jax "
             "requires")


def _concrete_int(x, name):
    """The value of a scalar computed from concrete arrays (eager mode only)."""
    if core.is_tracer(x):
        raise ShardcError(f"{name}: the result's size depends on the values; {SIZE_HINT}")
    return int(np.asarray(x))


def _size(name, size):
    if size is None:
        return None
    try:
        return operator.index(size)
    except TypeError:
        raise ShardcTypeError(f"{name}: size must be a static int, got {size!r}") from None


def _int():
    return dtypes.default_int()


def _arange(n, dt=None):
    return L.iota(dt or _int(), (n,))


def _take1d(a, idx, fill=None):
    """a[idx] for a 1-d `a` (idx clamped into range, or `fill` where out of range)."""
    ia = aval(idx)
    n = aval(a).shape[0]
    out = gather_p.bind(a, L.reshape(idx, (*ia.shape, 1)), offset_dims=(),
                        collapsed_slice_dims=(0,), start_index_map=(0,),
                        index_vector_dim=ia.ndim, slice_sizes=(1,))
    if fill is None:
        return out
    ok = bitwise_and(L.ge(idx, 0), L.lt(idx, n))
    return L.select(ok, out, L.full((), fill, aval(a).dtype))


def _sl(x, lo, hi):
    return L.slice(x, (lo,), (hi,))


# ---------------------------------------------------------------- bincount

def bincount(x, weights=None, minlength=0, *, length=None, out_sharding=None):
    """Counts of each non-negative int in the 1-d `x` (negative ones count as 0)."""
    x = asarray_("bincount", x)
    xa = aval(x)
    if not dtypes.is_int(xa.dtype) and xa.dtype != dtypes.bool_:
        raise ShardcTypeError(f"bincount: x argument must have an integer type, got {xa.dtype}")
    if xa.ndim != 1:
        raise ShardcError("bincount: only 1-dimensional input supported.")
    minlength = _size("bincount", minlength)
    if minlength < 0:
        raise ShardcError(f"bincount: minlength must be non-negative, got {minlength}")
    if length is None:
        top = L.max(L.convert_element_type(_reduce_max(x), _int()), 0) if xa.size else 0
        length = max(minlength, xa.size and _concrete_int(top, "bincount") + 1)
    length = _size("bincount", length)
    if weights is None:
        w = L.full(xa.shape, 1, _int())
    else:
        w = asarray_("bincount", weights)
        if aval(w).shape != xa.shape:
            raise ShardcError(f"bincount: weights {aval(w).shape} must have x's shape "
                              f"{xa.shape}")
    wa = aval(w)
    dt = wa.dtype if wa.dtype != dtypes.bool_ else dtypes.bool_
    idx = convert(x, _int()) if xa.dtype == dtypes.bool_ else x
    idx = L.max(idx, 0)
    zeros = L.full((length,), 0, dt)
    return scatter_add_p.bind(zeros, L.reshape(idx, (*xa.shape, 1)), w,
                              update_window_dims=(), inserted_window_dims=(0,),
                              scatter_dims_to_operand_dims=(0,), index_vector_dim=1)


def _reduce_max(x):
    from ...ops.reduce import reduce_max_p
    return reduce_max_p.bind(x, axes=tuple(range(aval(x).ndim)))


# ---------------------------------------------------------------- nonzero

def nonzero(a, *, size=None, fill_value=None):
    """Indices of the nonzero entries, one array per dim (the first `size` of them,
    padded with `fill_value` or 0)."""
    arr = asarray_("nonzero", a)
    xa = aval(arr)
    if xa.ndim == 0:
        raise ShardcError("Calling nonzero on 0d arrays is not allowed. Use "
                          "shardc.numpy.atleast_1d(scalar) instead.")
    mask = arr if xa.dtype == dtypes.bool_ else L.ne(arr, L.full((), 0, xa.dtype))
    count = _sum(mask)
    size = _concrete_int(count, "nonzero") if size is None else _size("nonzero", size)
    if xa.size == 0 or size == 0:
        return tuple(L.full((size,), 0, _int()) for _ in xa.shape)
    flat = cumsum(bincount(cumsum(mask), length=size))
    strides = (np.cumprod(xa.shape[::-1])[::-1] // xa.shape).astype(np.int64)
    out = []
    for stride, n in zip(strides, xa.shape):
        q = L.div(flat, L.full((), int(stride), _int())) if stride != 1 else flat
        out.append(_mod(q, n))
    if fill_value is not None:
        fills = fill_value if isinstance(fill_value, tuple) else (fill_value,) * xa.ndim
        if len(fills) != xa.ndim or any(np.shape(f) != () for f in fills):
            raise ShardcError(f"nonzero: fill_value must be a scalar or a tuple of "
                              f"{xa.ndim} scalars, got {fill_value!r}")
        past = L.ge(_arange(size), convert(count, _int()))
        out = [where(past, f, o) for f, o in zip(fills, out)]
    return tuple(out)


def _mod(q, n):
    from ._ufuncs import remainder
    return remainder(q, n)


def flatnonzero(a, *, size=None, fill_value=None):
    return nonzero(ravel(asarray_("flatnonzero", a)), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size=None, fill_value=None):
    a = asarray_("argwhere", a)
    nd = aval(a).ndim
    if nd == 0:
        a = L.reshape(a, (1,))
    cols = nonzero(a, size=size, fill_value=fill_value)
    out = transpose(L.concatenate([L.reshape(c, (1, aval(c).shape[0])) for c in cols], 0))
    if nd == 0:
        return L.reshape(L.slice(out, (0, 0), (aval(out).shape[0], 0)), (aval(out).shape[0], 0))
    return out


# ---------------------------------------------------------------- unique

def _rows(a, idx):
    """a[idx] along dim 0 of an array of any rank (idx clamped into range)."""
    ia, shape = aval(idx), aval(a).shape
    if not shape[0]:        # (only an empty idx can index no rows)
        return L.full((*ia.shape, *shape[1:]), 0, aval(a).dtype)
    if aval(a).ndim == 1:
        return _take1d(a, idx)
    return gather_p.bind(a, L.reshape(idx, (*ia.shape, 1)),
                         offset_dims=tuple(range(ia.ndim, ia.ndim + len(shape) - 1)),
                         collapsed_slice_dims=(0,), start_index_map=(0,),
                         index_vector_dim=ia.ndim, slice_sizes=(1, *shape[1:]))


def _unique_sorted_mask(ar, equal_nan):
    """(the rows of `ar` (its slices along dim 0) sorted lexicographically, mask of each
    first occurrence, the sorting permutation), as jax's."""
    n, *rest = aval(ar).shape
    if dtypes.is_complex(aval(ar).dtype):      # jax's: NaN anywhere is one NaN
        ar = where(isnan(ar), L.full((), np.nan, aval(ar).dtype), ar)
    width = int(np.prod(rest, dtype=np.int64))
    if rest and width == 0:
        n, perm = 1, L.full((1,), 0, _int())
    elif rest:
        cols = reshape(ar, (n, width))
        perm = lexsort([L.reshape(L.slice(cols, (0, j), (n, j + 1)), (n,))
                        for j in reversed(range(width))])
    else:
        perm = lexsort([ar])
    aux = _rows(ar, perm)
    if not aval(aux).size:
        return aux, L.full((n,), False, dtypes.bool_), perm
    lo = (0,) * len(rest)
    a = L.slice(aux, (1, *lo), (n, *rest))
    b = L.slice(aux, (0, *lo), (n - 1, *rest))
    neq = L.ne(a, b)
    if dtypes.is_inexact(aval(ar).dtype) and equal_nan:
        neq = bitwise_and(neq, logical_not(bitwise_and(isnan(a), isnan(b))))
    if rest:
        neq = _any(neq, axis=tuple(range(1, 1 + len(rest))))
    mask = L.concatenate([L.full((1,), True, dtypes.bool_), neq], 0)
    return aux, mask, perm


def _unique(ar, return_index=False, return_inverse=False, return_counts=False,
            equal_nan=True, size=None, fill_value=None, return_true_size=False):
    n0 = aval(ar).shape[0]
    if n0 == 0 and size and fill_value is None:
        raise ShardcError("unique: for zero-sized input with nonzero size argument, "
                          "fill_value must be specified")
    aux, mask, perm = _unique_sorted_mask(ar, equal_nan)
    has = bool(aval(aux).size)
    n = aval(mask).shape[0]
    count = _sum(mask)
    if size is None:
        size_ = _concrete_int(count, "unique")
        ind = nonzero(mask, size=size_)[0]
    else:
        ind = nonzero(mask, size=size)[0]
    result = _rows(aux, ind) if has else aux
    if size is not None and fill_value is not None:
        ra = aval(result)
        fv = L.full((), np.asarray(fill_value).astype(ra.dtype), ra.dtype)
        if ra.shape[0]:
            valid = L.broadcast_in_dim(L.lt(_arange(size), convert(count, _int())),
                                       ra.shape, (0,))
            result = where(valid, result, fv)
        else:
            result = L.broadcast_in_dim(fv, (size, *ra.shape[1:]), ())
    ret = (result,)
    if return_index:
        ret += (_take1d(perm, ind) if has else perm,)
    if return_inverse:
        if not has:
            ret += (L.full((n0,), 0, _int()),)
        elif n:
            imask = L.sub(cumsum(mask), 1)
            ret += (srt.sort_p.bind(perm, convert(imask, _int()), dimension=0,
                                    is_stable=False, num_keys=1)[1],)
    if return_counts:
        if has:
            if size is None:
                idx = L.concatenate([nonzero(mask, size=size_)[0],
                                     L.full((1,), n, _int())], 0)
            else:
                idx = nonzero(mask, size=size + 1)[0]
                tail = _sl(idx, 1, size + 1)
                idx = L.concatenate([_sl(idx, 0, 1),
                                     where(L.ne(tail, 0), tail, L.full((), n, _int()))], 0)
            m = aval(idx).shape[0]
            ret += (L.sub(_sl(idx, 1, m), _sl(idx, 0, m - 1)),)
        else:       # jax's: one count of every row when the rows are empty
            ret += (L.full((1,) if n0 else (0,), n0, _int()),)
    if return_true_size:
        ret += (count,)
    return ret[0] if len(ret) == 1 else ret


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None,
           *, equal_nan=True, size=None, fill_value=None, sorted=True):
    """The sorted distinct values (and, on request, first indices, the inverse and the
    counts); under jit only the first `size` of them, padded."""
    arr = asarray_("unique", ar)
    size = _size("unique", size)
    shape = aval(arr).shape
    flat = axis is None
    if flat:
        arr, axis = (ravel(arr) if len(shape) != 1 else arr), 0
    else:           # the unique slices along `axis`
        axis = check_axis("unique", operator.index(axis), len(shape))
        arr = moveaxis(arr, axis, 0)
    out = _unique(arr, return_index, return_inverse, return_counts, equal_nan=equal_nan,
                  size=size, fill_value=fill_value)
    if axis:
        first = moveaxis(out[0] if isinstance(out, tuple) else out, 0, axis)
        out = (first, *out[1:]) if isinstance(out, tuple) else first
    if return_inverse and flat:
        i = 2 if return_index else 1
        out = (*out[:i], reshape(out[i], shape), *out[i + 1:])
    return out


class UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def unique_all(x, /, *, size=None, fill_value=None):
    return UniqueAllResult(*unique(x, True, True, True, equal_nan=False, size=size,
                                   fill_value=fill_value))


def unique_counts(x, /, *, size=None, fill_value=None):
    return UniqueCountsResult(*unique(x, return_counts=True, equal_nan=False, size=size,
                                      fill_value=fill_value))


def unique_inverse(x, /, *, size=None, fill_value=None):
    return UniqueInverseResult(*unique(x, return_inverse=True, equal_nan=False, size=size,
                                       fill_value=fill_value))


def unique_values(x, /, *, size=None, fill_value=None):
    return unique(x, equal_nan=False, size=size, fill_value=fill_value)


# ---------------------------------------------------------------- set operations

def _in1d(ar1, ar2, invert):
    a, b = promote_dtypes(ar1, ar2)
    a, b = ravel(a), ravel(b)
    n, m = aval(a).shape[0], aval(b).shape[0]
    if n == 0 or m == 0:
        return L.full((n,), bool(invert), dtypes.bool_)
    aa = L.broadcast_in_dim(a, (n, m), (0,))
    bb = L.broadcast_in_dim(b, (n, m), (1,))
    if invert:
        return logical_not(_any(L.eq(aa, bb), axis=-1))
    return _any(L.eq(aa, bb), axis=-1)


def isin(element, test_elements, assume_unique=False, invert=False, *, method="auto"):
    element = asarray_("isin", element)
    test_elements = asarray_("isin", test_elements)
    if method not in ("auto", "compare_all", "binary_search", "sort"):
        raise ShardcError(f"isin: method={method!r} is not implemented; options are "
                          "'compare_all', 'binary_search', 'sort', and 'auto'")
    return reshape(_in1d(element, test_elements, invert), aval(element).shape)


def union1d(ar1, ar2, *, size=None, fill_value=None):
    ar1, ar2 = asarray_("union1d", ar1), asarray_("union1d", ar2)
    return unique(concatenate((ar1, ar2), axis=None), size=size, fill_value=fill_value)


def _fill_tail(vals, num, fill_value):
    """vals past the first `num` set to fill_value (default: jax's, the valid max, then
    min, i.e. the smallest valid value... as jax computes it)."""
    k = aval(vals).shape[0]
    live = L.lt(_arange(k), convert(num, _int()))
    if fill_value is None:
        from ._reductions import max as _max, min as _min
        vals = where(live, vals, _max(vals))
        return where(live, vals, _min(vals))
    return where(live, vals, L.full((), np.asarray(fill_value).astype(aval(vals).dtype),
                                    aval(vals).dtype))


def _concat_unique(a, b):
    a, n1 = _unique(a, size=aval(a).shape[0], return_true_size=True)
    b, n2 = _unique(b, size=aval(b).shape[0], return_true_size=True)
    k1, k2 = aval(a).shape[0], aval(b).shape[0]
    arr = L.full((k1 + k2,), 0, aval(a).dtype)
    zero = L.full((), 0, _int())
    arr = dyn.dynamic_update_slice_p.bind(arr, a, zero)
    arr = dyn.dynamic_update_slice_p.bind(arr, b, convert(n1, _int()))
    return arr, L.add(convert(n1, _int()), convert(n2, _int()))


def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    a = ravel(asarray_("setdiff1d", ar1))
    b = ravel(asarray_("setdiff1d", ar2))
    size = _size("setdiff1d", size)
    dt = aval(a).dtype
    fill = L.full((), np.asarray(0 if fill_value is None else fill_value).astype(dt), dt)
    n = aval(a).shape[0]
    if n == 0:
        return L.full((size or 0,), 0, dt) if fill_value is None else \
            L.broadcast_in_dim(fill, (size or 0,), ())
    if not assume_unique:
        a, nu = _unique(a, size=n, return_true_size=True)
    mask = _in1d(a, b, invert=True)
    if not assume_unique:
        mask = bitwise_and(mask, L.lt(_arange(n), convert(nu, _int())))
    count = _sum(mask)
    k = _concrete_int(count, "setdiff1d") if size is None else size
    vals = _take1d(a, nonzero(mask, size=k)[0])
    if size is None:
        return vals
    return where(L.lt(_arange(size), convert(count, _int())), vals, fill)


def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):
    a, b = promote_dtypes(asarray_("intersect1d", ar1), asarray_("intersect1d", ar2))
    a, b = ravel(a), ravel(b)
    size_ = _size("intersect1d", size)
    n1, n2 = aval(a).shape[0], aval(b).shape[0]
    if assume_unique:
        ind1, nu1 = _arange(n1), L.full((), n1, _int())
        ind2 = _arange(n2)
        arr = L.concatenate([a, b], 0)
        aux, order = srt.sort_p.bind(arr, _arange(n1 + n2), dimension=0, is_stable=True,
                                     num_keys=1)
        mask = L.full((n1 + n2,), True, dtypes.bool_)
    else:
        a, ind1, nu1 = _unique(a, return_index=True, size=n1, fill_value=0,
                               return_true_size=True)
        b, ind2, nu2 = _unique(b, return_index=True, size=n2, fill_value=0,
                               return_true_size=True)
        nu1 = convert(nu1, _int())
        arr = L.full((n1 + n2,), 0, aval(a).dtype)
        arr = dyn.dynamic_update_slice_p.bind(arr, a, L.full((), 0, _int()))
        arr = dyn.dynamic_update_slice_p.bind(arr, b, nu1)
        mask = L.lt(_arange(n1 + n2), L.add(nu1, convert(nu2, _int())))
        _, aux, order = srt.sort_p.bind(logical_not(mask), arr, _arange(n1 + n2), dimension=0,
                                        is_stable=True, num_keys=2)
    m = n1 + n2
    if m == 0:
        empty = L.full((size_ or 0,), 0, aval(a).dtype)
        return (empty, L.full((size_ or 0,), 0, _int()),
                L.full((size_ or 0,), 0, _int())) if return_indices else empty
    aux_mask = bitwise_and(L.eq(_sl(aux, 1, m), _sl(aux, 0, m - 1)), _sl(mask, 1, m))
    num = _sum(aux_mask)
    k = _concrete_int(num, "intersect1d") if size_ is None else size_
    vi = nonzero(aux_mask, size=k, fill_value=m)[0]
    vals = _take1d(aux, vi, fill=0)
    if size_ is not None:
        vals = _fill_tail(vals, num, fill_value)
    if not return_indices:
        return vals
    live = L.lt(_arange(k), convert(num, _int()))
    i1 = where(live, _take1d(order, vi, fill=n1), n1)
    i2 = where(live, L.sub(_take1d(order, L.add(vi, 1), fill=n2), nu1), n2)
    i1 = _take1d(ind1, i1, fill=aval(ind1).shape[0])
    i2 = _take1d(ind2, i2, fill=aval(ind2).shape[0])
    return vals, i1, i2


def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    a, b = promote_dtypes(asarray_("setxor1d", ar1), asarray_("setxor1d", ar2))
    a, b = ravel(a), ravel(b)
    size_ = _size("setxor1d", size)
    if assume_unique:
        (aux,) = srt.sort_p.bind(L.concatenate([a, b], 0), dimension=0, is_stable=True,
                                 num_keys=1)
        m = aval(aux).shape[0]
        flag = L.concatenate([L.full((1,), bool(m), dtypes.bool_),
                              L.ne(_sl(aux, 1, m), _sl(aux, 0, m - 1)) if m else
                              L.full((0,), False, dtypes.bool_),
                              L.full((1,), True, dtypes.bool_)], 0)
    else:
        arr, nu = _concat_unique(a, b)
        m = aval(arr).shape[0]
        mask = L.lt(_arange(m + 1), L.add(nu, 1))
        _, aux = srt.sort_p.bind(logical_not(_sl(mask, 1, m + 1)), arr, dimension=0,
                                 is_stable=True, num_keys=2)
        ne = L.ne(_sl(aux, 1, m), _sl(aux, 0, m - 1)) if m else \
            L.full((0,), False, dtypes.bool_)
        tail = L.concatenate([L.full((1,), bool(m), dtypes.bool_), ne,
                              L.full((1,), False, dtypes.bool_)], 0)
        # .at[num_unique].set(True)
        tail = L.bitwise_or(tail, L.eq(_arange(m + 1), nu))
        flag = bitwise_and(mask, tail)
    aux_mask = bitwise_and(_sl(flag, 1, m + 1), _sl(flag, 0, m))
    num = _sum(aux_mask)
    k = _concrete_int(num, "setxor1d") if size_ is None else size_
    if m:
        vi = nonzero(aux_mask, size=k, fill_value=m)[0]
        vals = _take1d(aux, vi, fill=0)
    else:
        vals = L.full((k,), 0, aval(aux).dtype)
    if size_ is None:
        return vals
    return _fill_tail(vals, num, fill_value)


__all__ = ["bincount", "nonzero", "flatnonzero", "argwhere", "unique", "unique_all",
           "unique_counts", "unique_inverse", "unique_values", "isin", "union1d",
           "setdiff1d", "intersect1d", "setxor1d"]


def _wrap():
    from ...errors import wrap_public
    pub = {k: globals()[k] for k in __all__}
    wrap_public(pub)
    globals().update(pub)


_wrap()
