"""NaN-ignoring and other composite reductions of shardc.numpy, built as jax.numpy builds
them: nansum nanprod nanmax nanmin nanargmax nanargmin nanmean nanvar nanstd, average, ptp,
count_nonzero."""
from __future__ import annotations

import math

import numpy as np

from ...errors import ShardcError
from ...ir import dtypes
from ...ops import elementwise as ew
from ...ops import powers as pw
from ...ops.common import norm_axes
from . import _reductions as R
from ._ufuncs import isnan, logical_not, multiply, where
from ._util import (aval, canonical_dtype, check_arraylike, convert, lax_const,
    promote_dtypes_inexact)


def _no_out(name, out):
    if out is not None:
        raise ShardcError(f"The 'out' argument to shardc.numpy.{name} is not supported.")


def _init_val(a, v):
    """The reduction's identity in a's dtype (the dtype's extreme if it has no inf)."""
    dt = aval(a).dtype
    if dt == dtypes.bool_:
        return np.array(v > 0, dt)
    return np.array(v, dt)


def _nan_reduction(a, name, reduction, init, nan_if_all_nan, axis, keepdims, where, **kw):
    check_arraylike(name, a)
    if not dtypes.is_inexact(aval(a).dtype):     # complex too, as jax's np.inexact
        return reduction(a, axis=axis, keepdims=keepdims, where=where, **kw)
    out = reduction(where_(isnan(a), _init_val(a, init), a), axis=axis, keepdims=keepdims,
                    where=where, **kw)
    if nan_if_all_nan:
        return where_(R.all(isnan(a), axis=axis, keepdims=keepdims), lax_const(a, np.nan), out)
    return out


where_ = where


def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    _no_out("nansum", out)
    return _nan_reduction(a, "nansum", R.sum, 0, False, axis, keepdims, where, dtype=dtype,
                          initial=initial)


def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    _no_out("nanprod", out)
    return _nan_reduction(a, "nanprod", R.prod, 1, False, axis, keepdims, where, dtype=dtype,
                          initial=initial)


def nanmax(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    _no_out("nanmax", out)
    return _nan_reduction(a, "nanmax", R.max, -np.inf, initial is None, axis, keepdims, where,
                          initial=initial)


def nanmin(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    _no_out("nanmin", out)
    return _nan_reduction(a, "nanmin", R.min, np.inf, initial is None, axis, keepdims, where,
                          initial=initial)


def _nanarg(name, reduction, fill, a, axis, out, keepdims):
    _no_out(name, out)
    check_arraylike(name, a)
    keepdims = bool(keepdims)
    if not dtypes.is_inexact(aval(a).dtype):
        return reduction(a, axis=axis, keepdims=keepdims)
    mask = isnan(a)
    res = reduction(where_(mask, fill, a), axis=axis, keepdims=keepdims)
    return where_(R.all(mask, axis=axis, keepdims=keepdims), -1, res)


def nanargmax(a, axis=None, out=None, keepdims=None):
    return _nanarg("nanargmax", R.argmax, -np.inf, a, axis, out, keepdims)


def nanargmin(a, axis=None, out=None, keepdims=None):
    return _nanarg("nanargmin", R.argmin, np.inf, a, axis, out, keepdims)


def _inexact_dtype(dt):
    return dt if dtypes.is_inexact(dt) else dtypes.default_float()


def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, where=None):
    _no_out("nanmean", out)
    check_arraylike("nanmean", a)
    dt = aval(a).dtype
    if not dtypes.is_inexact(dt):
        if where is not None:
            return ew.div_p.bind(*_where_mean(a, axis, dtype, keepdims, where))
        return R.mean(a, axis, dtype, keepdims=keepdims)
    dtype = canonical_dtype(dtype) or _inexact_dtype(dt)
    normalizer = R.sum(logical_not(isnan(a)), axis=axis, dtype=dtype, keepdims=keepdims,
                       where=where)
    return ew.div_p.bind(nansum(a, axis, dtype=dtype, keepdims=keepdims, where=where),
                         normalizer)


def _where_mean(a, axis, dtype, keepdims, where):
    dt = canonical_dtype(dtype) or _inexact_dtype(aval(a).dtype)
    from ._shapes import broadcast_to
    count = R.sum(broadcast_to(where, aval(a).shape), axis=axis, dtype=dt, keepdims=keepdims)
    return R.sum(a, axis, dtype=dt, keepdims=keepdims, where=where), count


def _upcast_f16(dt):
    return dtypes.float32 if dt in (dtypes.float16, dtypes.bfloat16) else dt


def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None):
    _no_out("nanvar", out)
    check_arraylike("nanvar", a)
    adt = aval(a).dtype
    if dtype is not None:      # jax's _var_promote_types
        comp = out_dt = canonical_dtype(dtype)
        if dtypes.is_complex(adt) and not dtypes.is_complex(comp):
            raise ValueError("shardc.numpy.nanvar does not support a real dtype for the "
                             "variance of a complex array (as jax.numpy).")
    elif dtypes.is_inexact(adt):   # a complex array's variance is real, computed in complex
        comp, out_dt = adt, dtypes.real_dtype(adt)
    else:
        comp = out_dt = dtypes.default_float()
    comp = _upcast_f16(comp)
    a = convert(a, comp)
    if mean is None:
        mean = nanmean(a, axis, dtype=comp, keepdims=True, where=where)
    else:
        mean = convert(mean, comp)
    nan = isnan(a)
    centered = where_(nan, 0, ew.sub_p.bind(*_bcast(a, mean)))
    if dtypes.is_complex(aval(centered).dtype):      # |a - mean|**2
        from ...ops import complex as cx
        centered = cx.real_p.bind(ew.mul_p.bind(centered, cx.conj_p.bind(centered)))
    else:
        centered = pw.square_p.bind(centered)
    normalizer = R.sum(logical_not(nan), axis=axis, keepdims=keepdims, where=where)
    normalizer = ew.sub_p.bind(normalizer, lax_const(normalizer, ddof))
    mask = ew.le_p.bind(normalizer, lax_const(normalizer, 0))
    result = R.sum(centered, axis, keepdims=keepdims, where=where)
    result = where_(mask, np.nan, result)
    divisor = where_(mask, 1, normalizer)
    result = ew.div_p.bind(result, convert(divisor, aval(result).dtype))
    return convert(result, out_dt)


def _bcast(a, m):
    from ._util import promote_shapes
    return promote_shapes("nanvar", a, m)


def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, where=None, mean=None):
    _no_out("nanstd", out)
    return ew.sqrt_p.bind(nanvar(a, axis, dtype, None, ddof, keepdims, where, mean))


def average(a, axis=None, weights=None, returned=False, keepdims=False):
    """The (weighted) mean along `axis`; with returned=True also the sum of weights."""
    check_arraylike("average", a)
    nd = aval(a).ndim
    axes = norm_axes("average", axis, nd)
    if weights is None:
        (a,) = promote_dtypes_inexact(a)
        avg = R.mean(a, axis=axis, keepdims=keepdims)
        n = math.prod(aval(a).shape[d] for d in axes)
        from ._creation import full
        weights_sum = full((), n, dtype=aval(avg).dtype)
    else:
        check_arraylike("average", weights)
        a, weights = promote_dtypes_inexact(a, weights)
        sa, sw = aval(a).shape, aval(weights).shape
        if sa != sw:
            if axis is None:
                raise ShardcError("Axis must be specified when shapes of a and weights differ.")
            if sw != tuple(sa[d] for d in axes):
                raise ShardcError("Shape of weights must be consistent with shape of a along "
                                  "specified axis.")
            from ._shapes import reshape, transpose
            order = tuple(int(i) for i in np.argsort(axes))
            weights = transpose(weights, order) if order != tuple(range(len(order))) \
                else weights
            weights = reshape(weights, tuple(n if i in axes else 1 for i, n in enumerate(sa)))
        weights_sum = R.sum(weights, axis=axis, keepdims=keepdims)
        avg = ew.div_p.bind(*_bcast(R.sum(multiply(a, weights), axis=axis, keepdims=keepdims),
                                    weights_sum))
    if returned:
        if aval(avg).shape != aval(weights_sum).shape:
            from ._shapes import broadcast_to
            weights_sum = broadcast_to(weights_sum, aval(avg).shape)
        return avg, weights_sum
    return avg


def ptp(a, axis=None, out=None, keepdims=False):
    _no_out("ptp", out)
    check_arraylike("ptp", a)
    return ew.sub_p.bind(R.max(a, axis=axis, keepdims=keepdims),
                         R.min(a, axis=axis, keepdims=keepdims))


def count_nonzero(a, axis=None, keepdims=False):
    check_arraylike("count_nonzero", a)
    from ._util import as_lit
    nz = ew.ne_p.bind(as_lit(a), lax_const(a, 0))
    return R.sum(nz, axis=axis, dtype=dtypes.default_int(), keepdims=keepdims)
