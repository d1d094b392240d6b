"""Sorting and searching in shardc.numpy: sort argsort take_along_axis partition
argpartition lexsort searchsorted digitize, and the cumulative names (cumprod,
cumulative_sum, nancumsum, ...), as jax.numpy builds them."""
from __future__ import annotations

import operator

import numpy as np

from ...errors import ShardcError, ShardcTypeError
from ...ir import dtypes
from ...ops import cumulative as cum
from ...ops import lax as L
from ...ops import reduce as red
from ...ops import sort as srt
from ...ops.batching import move_dim
from ...ops.common import check_axis
from ...ops.indexing import gather_p
from ...ops.take import clamp_index, gather_along_p, scatter_add_along_p
from ...trace import core
from ._reductions import _cumulative, cumsum, sum as _sum
from ._shapes import broadcast_to, concatenate, ravel, reshape
from ._ufuncs import add, bitwise_and, bitwise_or, equal, isnan, less, logical_not, where
from ._util import (aval, default_fill, canonical_dtype, check_arraylike, convert,
    index_for_dim, promote_dtypes)


def asarray_(name, a):
    """a as an operand: lists and NumPy arrays become constants, scalars weak literals."""
    check_arraylike(name, a)
    if core.is_tracer(a):
        return a
    if L.is_py_scalar(a):
        x = aval(a)
        return L.full((), a, x.dtype, x.weak)
    from ._creation import asarray
    return asarray(a)


def _static_int(name, what, v):
    try:
        return operator.index(v)
    except TypeError:
        raise ShardcTypeError(f"{name}: {what} must be a static int, got {v!r}") from None


def _flat_axis(name, a, axis):
    if axis is None:
        return ravel(a), 0
    x = aval(a)
    if x.ndim == 0:
        raise ShardcError(f"{name}: axis {axis} is out of bounds for a 0-d array")
    return a, check_axis(name, axis, x.ndim)


def _iota_like(a, axis, dtype=None):
    return L.iota(dtype or dtypes.default_int(), aval(a).shape, axis)


# ---------------------------------------------------------------- sort, argsort

def sort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False):
    a = asarray_("sort", a)
    if order is not None:
        raise ShardcError("sort: the 'order' argument is not supported")
    a, axis = _flat_axis("sort", a, axis)
    (out,) = srt.sort_p.bind(a, dimension=axis, is_stable=bool(stable), num_keys=1)
    return L.rev(out, (axis,)) if descending else out


def argsort(a, axis=-1, *, kind=None, order=None, stable=True, descending=False, dtype=None):
    """Indices that sort `a` (stable: ties keep their order, descending too)."""
    a = asarray_("argsort", a)
    if order is not None:
        raise ShardcError("argsort: the 'order' argument is not supported")
    a, axis = _flat_axis("argsort", a, axis)
    iota = _iota_like(a, axis, canonical_dtype(dtype) if dtype is not None else None)
    if descending and stable:
        a, iota = L.rev(a, (axis,)), L.rev(iota, (axis,))
    _, idx = srt.sort_p.bind(a, iota, dimension=axis, is_stable=bool(stable), num_keys=1)
    return L.rev(idx, (axis,)) if descending else idx


def lexsort(keys, axis=-1):
    """Indices sorting by the last key, then the one before, ... (stable)."""
    if core.is_tracer(keys) or hasattr(keys, "shape") and not isinstance(keys, (list, tuple)):
        k = asarray_("lexsort", keys)
        n = aval(k).shape[0] if aval(k).ndim else 0
        keys = [L.reshape(L.slice(k, (i,) + (0,) * (aval(k).ndim - 1),
                                  (i + 1,) + aval(k).shape[1:]), aval(k).shape[1:])
                for i in range(n)]
    keys = [asarray_("lexsort", k) for k in keys]
    if not keys:
        raise ShardcTypeError("need sequence of keys with len > 0 in lexsort")
    shape = aval(keys[0]).shape
    if any(aval(k).shape != shape for k in keys):
        raise ShardcError("all keys need to be the same shape")
    if not shape:
        return L.full((), 0, dtypes.default_int())
    axis = check_axis("lexsort", axis, len(shape))
    iota = _iota_like(keys[0], axis)
    outs = srt.sort_p.bind(*keys[::-1], iota, dimension=axis, is_stable=True,
                           num_keys=len(keys))
    return outs[-1]


# ---------------------------------------------------------------- take_along_axis

def take_along_axis(arr, indices, axis=-1, mode=None, fill_value=None, *,
                    wrap_negative_indices=None):
    """arr's elements at `indices` along `axis` (as jnp.take_along_axis: out-of-range
    indices give `fill_value` (NaN, ...) by default, mode="clip" clamps them)."""
    arr = asarray_("take_along_axis", arr)
    idx = asarray_("take_along_axis", indices)
    ia = aval(idx)
    if not dtypes.is_int(ia.dtype):
        raise ShardcTypeError(f"take_along_axis: indices must be integers, got {ia.dtype}")
    if axis is None:
        if ia.ndim != 1:
            raise ShardcError(f"take_along_axis: when axis=None, indices must be 1-d, got "
                              f"shape {ia.shape}")
        arr, axis = ravel(arr), 0
    xa = aval(arr)
    if xa.ndim != ia.ndim:
        raise ShardcError(f"take_along_axis: indices and arr must have the same number of "
                          f"dimensions; {ia.ndim} vs {xa.ndim}")
    axis = check_axis("take_along_axis", axis, xa.ndim)
    shape = []
    for d, (m, k) in enumerate(zip(xa.shape, ia.shape)):
        if d == axis:
            continue
        if m != k and 1 not in (m, k):
            raise ShardcError(f"take_along_axis: arr {xa.shape} and indices {ia.shape} do not "
                              f"broadcast along dim {d}")
        shape.append(max(m, k) if 0 not in (m, k) else 0)
    xs = list(shape)
    xs.insert(axis, xa.shape[axis])
    is_ = list(shape)
    is_.insert(axis, ia.shape[axis])
    arr = broadcast_to(arr, tuple(xs)) if tuple(xs) != xa.shape else arr
    idx = broadcast_to(idx, tuple(is_)) if tuple(is_) != ia.shape else idx
    n = xa.shape[axis]
    mode = "fill" if mode is None else mode
    if mode not in ("fill", "clip", "promise_in_bounds"):
        raise ShardcError(f"take_along_axis: mode must be 'fill', 'clip' or "
                          f"'promise_in_bounds', got {mode!r}")
    # as jax's: negatives wrap unless promised in bounds (the gather clamps them there)
    wrap = mode != "promise_in_bounds" if wrap_negative_indices is None else \
        wrap_negative_indices
    idx = index_for_dim(idx, n)     # (i + n, i <= n - 1, the clamp: not in int8)
    if wrap and dtypes.is_signed(ia.dtype):
        idx = L.select(L.lt(idx, 0), L.add(idx, n), idx)
    oa = aval(idx)
    if oa.size == 0:
        return L.full(oa.shape, 0, xa.dtype, xa.weak)
    if n == 0:
        if mode != "fill":
            raise ShardcError("take_along_axis: cannot take from an empty axis (use "
                              "mode='fill')")
        return _filled(xa, L.full(oa.shape, 0, xa.dtype, xa.weak),
                       L.full(oa.shape, False, dtypes.bool_), fill_value)
    if mode == "clip":      # (clamped here, so its gradient is clamped too, as jax's)
        idx = clamp_index(idx, n)
    out = gather_along_p.bind(arr, idx, axis=axis)
    if mode != "fill":
        return out
    ok = L.le(idx, n - 1)
    if dtypes.is_signed(ia.dtype):
        ok = bitwise_and(L.ge(idx, 0), ok)
    return _filled(xa, out, ok, fill_value)


def _filled(xa, out, ok, fill_value):
    dt = xa.dtype
    if fill_value is None:      # jax's: NaN, True, the largest negative or positive int
        fill_value = default_fill(dt)
    fill = L.full((), np.asarray(fill_value).astype(dt), dt)
    return L.select(ok, out, fill)


# ---------------------------------------------------------------- partition

def _neg_for_bottom(arr):
    """-(arr + 1) for unsigned ints (so 0 maps to the largest), -arr otherwise."""
    dt = aval(arr).dtype
    if dtypes.is_int(dt) and not dtypes.is_signed(dt):
        return L.neg(L.add(arr, 1)), True
    return L.neg(arr), False


def partition(a, kth, axis=-1):
    """The kth smallest first: two top_k's, as jax (the halves in no promised order)."""
    arr = asarray_("partition", a)
    x = aval(arr)
    axis = check_axis("partition", axis, x.ndim)
    kth = check_axis("partition", _static_int("partition", "kth", kth), x.shape[axis])
    arr = move_dim(arr, axis, -1)
    neg, unsigned = _neg_for_bottom(arr)
    bottom = L.neg(srt.top_k_p.bind(neg, k=kth + 1)[0])
    if unsigned:
        bottom = L.sub(bottom, 1)
    top = srt.top_k_p.bind(arr, k=x.shape[axis] - kth - 1)[0]
    out = L.concatenate([bottom, top], x.ndim - 1)
    return move_dim(out, -1, axis)


def argpartition(a, kth, axis=-1):
    arr = asarray_("argpartition", a)
    x = aval(arr)
    axis = check_axis("argpartition", axis, x.ndim)
    kth = check_axis("argpartition", _static_int("argpartition", "kth", kth), x.shape[axis])
    arr = move_dim(arr, axis, -1)
    neg, _ = _neg_for_bottom(arr)
    bottom = srt.top_k_p.bind(neg, k=kth + 1)[1]
    shape = aval(arr).shape
    ones = L.full(shape, 1.0, dtypes.float32)
    # the bottom's places zeroed (each index once): a scatter-add of -1 there
    minus = L.full(aval(bottom).shape, -1.0, dtypes.float32)
    proxy = scatter_add_along_p.bind(ones, bottom, minus, axis=x.ndim - 1)
    top = srt.top_k_p.bind(proxy, k=shape[-1] - kth - 1)[1]
    out = L.concatenate([bottom, top], x.ndim - 1)
    return move_dim(out, -1, axis)


# ---------------------------------------------------------------- searchsorted

def _canon(x):
    """jax's sort key: -0.0 as 0.0 (NaNs compare equal and last via _lt/_eq)."""
    if dtypes.is_float(aval(x).dtype):
        return L.select(L.eq(x, 0), L.zeros_like(x), x)
    return x


def _complex_order(part_cmp, x, y):
    """A complex comparison in jax's sort order: by real part, then imaginary part."""
    from ...ops.complex import imag_p, real_p
    xr, yr = real_p.bind(x), real_p.bind(y)
    xr_, yr_ = _canon(xr), _canon(yr)
    eq_r = bitwise_or(L.eq(xr_, yr_), bitwise_and(isnan(xr_), isnan(yr_)))
    return bitwise_or(sort_lt(xr, yr), bitwise_and(eq_r, part_cmp(imag_p.bind(x),
                                                                  imag_p.bind(y))))


def sort_lt(x, y):
    """x < y in jax's sort order (NaNs last, -0.0 == 0.0, complex lexicographic)."""
    if dtypes.is_complex(aval(x).dtype):
        return _complex_order(sort_lt, x, y)
    if not dtypes.is_float(aval(x).dtype):
        return L.lt(x, y)
    x, y = _canon(x), _canon(y)
    return bitwise_or(L.lt(x, y), bitwise_and(logical_not(isnan(x)), isnan(y)))


def sort_le(x, y):
    if dtypes.is_complex(aval(x).dtype):
        return _complex_order(sort_le, x, y)
    if not dtypes.is_float(aval(x).dtype):
        return L.le(x, y)
    x, y = _canon(x), _canon(y)
    return bitwise_or(L.le(x, y), isnan(y))


def _gather1d(a, idx):
    """a[idx] for a 1-d `a` and an index array of any shape (in range)."""
    ia = aval(idx)
    return gather_p.bind(a, L.reshape(idx, (*ia.shape, 1)), offset_dims=(),
                         collapsed_slice_dims=(0,), start_index_map=(0,),
                         index_vector_dim=ia.ndim, slice_sizes=(1,))


def searchsorted(a, v, side="left", sorter=None, *, method="scan"):
    """Where v's values would go in the sorted 1-d `a` (jax's binary search, unrolled)."""
    a, v = asarray_("searchsorted", a), asarray_("searchsorted", v)
    if side not in ("left", "right"):
        raise ShardcError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if method not in ("scan", "scan_unrolled", "sort", "compare_all"):
        raise ShardcError(f"searchsorted: method must be one of 'scan', 'scan_unrolled', "
                          f"'sort', 'compare_all', got {method!r}")
    if aval(a).ndim != 1:
        raise ShardcError("searchsorted: a should be 1-dimensional")
    a, v = promote_dtypes(a, v)
    if sorter is not None:
        a = take_along_axis(a, asarray_("searchsorted", sorter), 0, mode="clip")
    n = aval(a).shape[0]
    dt = dtypes.int32 if n < 2 ** 31 - 1 else dtypes.int64
    va = aval(v)
    if n == 0:
        return L.full(va.shape, 0, dt)
    go_left = sort_le if side == "left" else sort_lt
    if method == "compare_all":
        # as jax's: a's entries the query goes after, a's dim leading (so that a's
        # sharding meets the queries' as jax's does)
        full = (n, *va.shape)
        c = (sort_lt if side == "left" else sort_le)(
            broadcast_to(reshape(a, (n,) + (1,) * va.ndim), full), broadcast_to(v, full))
        return _sum(c, axis=0, dtype=dt)
    if method == "sort":
        return _searchsorted_sort(a, v, side, dt)
    udt = dtypes.uint32
    low = L.full(va.shape, 0, udt)
    high = L.full(va.shape, n, udt)
    for _ in range(int(np.ceil(np.log2(n + 1)))):
        mid = L.add(low, L.div(L.sub(high, low), 2))
        left = go_left(v, _gather1d(a, L.min(mid, n - 1)))
        low, high = L.select(left, low, mid), L.select(left, mid, high)
    return convert(high, dt)


def _searchsorted_sort(a, v, side, dt):
    """jax's method="sort": a query's rank among a and the queries co-sorted (stably,
    queries first for side="left"), less its rank among the queries (flat, as jax's, so
    the result is laid out as jax's)."""
    from ..lax_gather import ScatterDimensionNumbers, scatter
    n, q = aval(a).shape[0], aval(v).size
    wdt = dtypes.int32 if n + q <= np.iinfo(np.int32).max else dtypes.int64

    def rank(x):
        m = aval(x).shape[0]
        idx = L.iota(wdt, (m,), 0)
        perm = srt.sort_p.bind(x, idx, dimension=0, is_stable=True, num_keys=1)[1]
        dn = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
        return scatter(L.full((m,), 0, wdt), L.reshape(perm, (m, 1)), idx, dn)
    flat = ravel(v)
    if side == "left":
        index = L.slice(rank(concatenate([flat, a], 0)), (0,), (q,))
    else:
        index = L.slice(rank(concatenate([a, flat], 0)), (n,), (n + q,))
    return convert(reshape(L.sub(index, rank(flat)), aval(v).shape), dt)


def digitize(x, bins, right=False, *, method=None):
    x, bins = asarray_("digitize", x), asarray_("digitize", bins)
    if aval(bins).ndim != 1:
        raise ShardcError(f"digitize: bins must be a 1-dimensional array; got {aval(bins)}")
    n = aval(bins).shape[0]
    if n == 0:
        return L.full(aval(x).shape, 0, dtypes.int32)
    side = "right" if not right else "left"
    kw = {} if method is None else {"method": method}
    first = L.reshape(L.slice(bins, (0,), (1,)), ())
    last = L.reshape(L.slice(bins, (n - 1,), (n,)), ())
    inc = L.ge(*promote_dtypes(last, first))
    fwd = searchsorted(bins, x, side=side, **kw)
    bwd = L.sub(L.full((), n, dtypes.int32), searchsorted(L.rev(bins, (0,)), x, side=side,
                                                          **kw))
    return where(inc, fwd, bwd)


# ---------------------------------------------------------------- cumulative

def cumprod(a, axis=None, dtype=None, out=None):
    return _cumulative(cum.cumprod_p, "cumprod", asarray_("cumprod", a), axis, dtype)


def _nan_to(a, value):
    a = asarray_("nancum", a)
    if dtypes.is_inexact(aval(a).dtype):
        return where(isnan(a), L.full((), value, aval(a).dtype), a)
    return a


def nancumsum(a, axis=None, dtype=None, out=None):
    return cumsum(_nan_to(a, 0), axis, dtype)


def nancumprod(a, axis=None, dtype=None, out=None):
    return cumprod(_nan_to(a, 1), axis, dtype)


def _cumulative_include(name, prim, x, axis, dtype, include_initial, initial):
    x = asarray_(name, x)
    xa = aval(x)
    if xa.ndim == 0:
        raise ShardcError(f"{name}: the input must be non-scalar to take a cumulative "
                          f"{'sum' if initial == 0 else 'product'}, however a scalar value "
                          "or scalar array was given.")
    if axis is None:
        if xa.ndim > 1:
            raise ShardcError(f"{name}: the input array has rank {xa.ndim}, however axis "
                              "was not set to an explicit value. The axis argument is only "
                              "optional for one-dimensional arrays.")
        axis = 0
    axis = check_axis(name, axis, xa.ndim)
    out = _cumulative(prim, name, x, axis, dtype)
    if include_initial:
        oa = aval(out)
        shape = tuple(1 if d == axis else n for d, n in enumerate(oa.shape))
        out = concatenate([L.full(shape, initial, oa.dtype, oa.weak), out], axis=axis)
    return out


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    return _cumulative_include("cumulative_sum", red.cumsum_p, x, axis, dtype,
                               include_initial, 0)


def cumulative_prod(x, /, *, axis=None, dtype=None, include_initial=False):
    return _cumulative_include("cumulative_prod", cum.cumprod_p, x, axis, dtype,
                               include_initial, 1)


cumproduct = cumprod
_ = (add, equal, less, reshape)

__all__ = ["sort", "argsort", "lexsort", "take_along_axis",
           "partition", "argpartition", "searchsorted", "digitize", "cumprod", "nancumsum",
           "nancumprod", "cumulative_sum", "cumulative_prod", "cumproduct"]


def _wrap():
    from ...errors import wrap_public
    pub = {k: globals()[k] for k in __all__}
    wrap_public(pub)
    globals().update(pub)


_wrap()
