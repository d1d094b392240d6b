"""Reductions of shardc.numpy: sum mean max min prod argmax argmin var std any all, cumsum."""
from __future__ import annotations

import math

import numpy as np

from ...ir import dtypes
from ...errors import ArgumentError, ShardcError
from ...ops import reduce as red
from ...ops import shape as shp
from ...ops.common import norm_axes
from ._ufuncs import add, divide, maximum, minimum, multiply, not_equal, sqrt, square, subtract
from ...ir.program import Aval, Lit
from ...ops import elementwise as ew
from ._util import _ARRAYS, _Tracer, aval, canonical_dtype, check_arraylike, convert

_OWN = frozenset({dtypes.float32, dtypes.float64})   # reduced in their own dtype


def _keepdims(x, out, axes, keepdims):
    """Re-insert reduced axes as size 1 (broadcast_in_dim, as lax.expand_dims)."""
    if not keepdims:
        return out
    shape = tuple(1 if d in axes else n for d, n in enumerate(aval(x).shape))
    kept = tuple(d for d in range(len(shape)) if d not in axes)
    return shp.broadcast_in_dim_p.bind(out, shape=shape, broadcast_dimensions=kept)


def _upcast(dtype):
    """JAX sums small ints in the default int and half floats in f32."""
    if dtype == dtypes.bool_:
        return dtypes.default_int()
    if dtypes.is_int(dtype) and dtype.itemsize < dtypes.default_int().itemsize:
        return dtypes.default_int() if dtypes.is_signed(dtype) else \
            dtypes.canonicalize(dtypes.uint64)
    return dtype


def _reduce(prim, name, a, axis, dtype, keepdims, promote_ints, upcast_half, initial=None,
            combine=None):
    """jnp's _reduction: convert to the computation dtype, reduce, combine with `initial`
    (in the computation dtype, as jax), re-insert kept axes, convert to the result
    dtype. The result is never weakly typed (as jax)."""
    t = type(a)
    if dtype is None and not keepdims and initial is None and (t is _Tracer or t in _ARRAYS):
        x = aval(a)
        if x.dtype in _OWN and not x.weak:      # the common call: no conversions
            return prim.bind(a, axes=norm_axes(name, axis, len(x.shape)))
    check_arraylike(name, a)
    x = aval(a)
    axes = norm_axes(name, axis, x.ndim)
    out_dtype = canonical_dtype(dtype) or (_upcast(x.dtype) if promote_ints else x.dtype)
    comp = dtypes.float32 if upcast_half and dtype is None and \
        out_dtype in (dtypes.float16, dtypes.bfloat16) else out_dtype
    a = convert(a, comp)
    if comp == dtypes.bool_ and prim in _BOOL_OPS:
        prim = _BOOL_OPS[prim]
    out = prim.bind(a, axes=axes)
    if initial is not None:
        ini = convert(initial if isinstance(initial, _Tracer) else np.asarray(initial), comp)
        if aval(ini).shape != ():
            raise ArgumentError("initial value must be a scalar. Got array of shape "
                                f"{aval(ini).shape}")
        out = combine(ini, out)
    return convert(_keepdims(a, out, axes, keepdims), out_dtype)


# sum and prod of booleans (asked for with dtype=bool) are or and and, as in jax
_BOOL_OPS = {red.reduce_sum_p: red.reduce_or_p, red.reduce_prod_p: red.reduce_and_p}


def _masked(name, a, where, fill):
    """a with the elements where `where` is False replaced by the reduction's identity."""
    if where is None:
        return a
    if fill is None:
        raise ShardcError(f"reduction operation {name!r} does not have an identity, so to "
                          "use a where mask one has to specify 'initial'")
    from ._ufuncs import where as select
    return select(where, a, convert(fill, aval(a).dtype))


def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
        promote_integers=True):
    return _reduce(red.reduce_sum_p, "sum", _masked("sum", a, where, 0), axis, dtype,
                   keepdims, promote_integers, True, initial, add)


def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None,
         promote_integers=True):
    return _reduce(red.reduce_prod_p, "prod", _masked("prod", a, where, 1), axis, dtype,
                   keepdims, promote_integers, True, initial, multiply)


def _extremum(prim, name, combine, a, axis, keepdims, initial, where):
    if initial is None:
        _nonempty(name, a, axis)
    elif where is not None and np.ndim(initial) != 0:      # (before it fills a's holes)
        raise ArgumentError(f"initial value must be a scalar. Got array of shape "
                            f"{np.shape(initial)}")
    a = _masked(name, a, where, initial)
    return _reduce(prim, name, a, axis, None, keepdims, False, False, initial, combine)


def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    return _extremum(red.reduce_max_p, "max", maximum, a, axis, keepdims, initial, where)


def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    return _extremum(red.reduce_min_p, "min", minimum, a, axis, keepdims, initial, where)


amax, amin = max, min


def _nonempty(name, a, axis):
    x = aval(a)
    for d in norm_axes(name, axis, x.ndim):
        if x.shape[d] == 0:
            raise ShardcError(f"zero-size array to reduction operation {name} which has no "
                              "identity")


def _to_bool(a):
    return a if aval(a).dtype == dtypes.bool_ else not_equal(a, 0)


def any(a, axis=None, out=None, keepdims=False, *, where=None):
    check_arraylike("any", a)
    return _reduce(red.reduce_or_p, "any", _masked("any", _to_bool(a), where, False), axis,
                   None, keepdims, False, False)


def all(a, axis=None, out=None, keepdims=False, *, where=None):
    check_arraylike("all", a)
    return _reduce(red.reduce_and_p, "all", _masked("all", _to_bool(a), where, True), axis,
                   None, keepdims, False, False)


def _count(a, axis):
    x = aval(a)
    return math.prod(x.shape[d] for d in norm_axes("mean", axis, x.ndim))


def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """sum / count, computed in float (f32 for half precision), as jnp.mean; with `where`,
    over the elements where it holds."""
    check_arraylike("mean", a)
    if where is not None:
        return _mean_where(a, axis, dtype, keepdims, where)
    x = aval(a)
    out_dtype = canonical_dtype(dtype) or (x.dtype if dtypes.is_inexact(x.dtype)
                                           else dtypes.default_float())
    comp = dtypes.float32 if out_dtype in (dtypes.float16, dtypes.bfloat16) else out_dtype
    s = sum(a, axis, dtype=comp, keepdims=keepdims)
    count = Lit(_count(a, axis), Aval((), comp, False))   # strongly typed, as jax's
    return convert(ew.div_p.bind(s, count), out_dtype)


_mean = mean      # (var's `mean` parameter hides the function)


def _mean_where(a, axis, dtype, keepdims, where):
    x = aval(a)
    out_dtype = canonical_dtype(dtype) or (x.dtype if dtypes.is_inexact(x.dtype)
                                           else dtypes.default_float())
    comp = dtypes.float32 if out_dtype in (dtypes.float16, dtypes.bfloat16) else out_dtype
    from ._shapes import broadcast_to
    w = broadcast_to(where, x.shape)
    s = sum(a, axis, dtype=comp, keepdims=keepdims, where=w)
    n = sum(w, axis, dtype=comp, keepdims=keepdims)
    return convert(divide(s, n), out_dtype)


def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        correction=None, mean=None):
    """Mean squared deviation from the mean, over count - ddof, as jnp.var (`correction`
    is ddof's array-API name; `mean` a precomputed mean; `where` masks elements)."""
    if correction is not None:
        if ddof:
            raise ShardcError("ddof and correction can't be provided simultaneously.")
        ddof = correction
    if where is not None or mean is not None:
        return _var_where(a, axis, dtype, ddof, keepdims, where, mean)
    check_arraylike("var", a)
    x = aval(a)
    out_dtype = canonical_dtype(dtype) or (dtypes.real_dtype(x.dtype)
                                           if dtypes.is_inexact(x.dtype)
                                           else dtypes.default_float())
    comp = dtypes.float32 if out_dtype in (dtypes.float16, dtypes.bfloat16) else out_dtype
    if dtypes.is_complex(x.dtype):     # |a - mean|**2, in the parts' dtype (as jnp)
        from ...ops import complex as cx
        c = subtract(a, _mean(a, axis, keepdims=True))
        centered = convert(cx.real_p.bind(ew.mul_p.bind(c, cx.conj_p.bind(c))), comp)
    else:
        a = convert(a, comp)
        centered = square(subtract(a, _mean(a, axis, keepdims=True)))
    n = _count(a, axis) - ddof
    s = sum(centered, axis, keepdims=keepdims)
    out = multiply(s, float("nan")) if n <= 0 else divide(s, float(n))
    if not dtypes.is_inexact(out_dtype):
        # jnp.var's closing where(n > 0, result, nan) makes an integer result a weak float
        out = convert(convert(out, out_dtype), dtypes.default_float(), weak=True)
        return multiply(out, float("nan")) if n <= 0 else out
    return convert(out, out_dtype)


def _var_where(a, axis, dtype, ddof, keepdims, where, a_mean):
    check_arraylike("var", a)
    x = aval(a)
    out_dtype = canonical_dtype(dtype) or (x.dtype if dtypes.is_float(x.dtype)
                                           else dtypes.default_float())
    comp = dtypes.float32 if out_dtype in (dtypes.float16, dtypes.bfloat16) else out_dtype
    a = convert(a, comp)
    m = _mean_where(a, axis, comp, True, where) if where is not None else \
        mean(a, axis, keepdims=True)
    m = m if a_mean is None else convert(a_mean, comp)
    centered = square(subtract(a, m))
    if where is None:
        n = convert(_count(a, axis), comp)
        s = sum(centered, axis, keepdims=keepdims)
    else:
        from ._shapes import broadcast_to
        w = broadcast_to(where, x.shape)
        n = sum(w, axis, dtype=comp, keepdims=keepdims)
        s = sum(centered, axis, keepdims=keepdims, where=w)
    n = subtract(n, ddof)
    from ._ufuncs import greater, where as select
    out = select(greater(n, 0), divide(s, select(greater(n, 0), n, 1)), float("nan"))
    if not dtypes.is_inexact(out_dtype):   # as var's
        return select(greater(n, 0), convert(out, out_dtype), float("nan"))
    return convert(out, out_dtype)


def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
        correction=None, mean=None):
    if dtype is not None and not dtypes.is_inexact(canonical_dtype(dtype)):
        from ...errors import ArgumentError
        raise ArgumentError(f"dtype argument to shardc.numpy.std must be inexact; got "
                            f"{np.dtype(canonical_dtype(dtype))}")
    return sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, correction=correction,
                    mean=mean))


def _arg(prim, name, a, axis, keepdims):
    check_arraylike(name, a)
    x = aval(a)
    if axis is None:
        a = shp.reshape_p.bind(a, shape=(x.size,)) if x.ndim != 1 else a
        out = prim.bind(a, axis=0, index_dtype=dtypes.default_int())
        if keepdims:
            out = shp.broadcast_in_dim_p.bind(out, shape=(1,) * x.ndim, broadcast_dimensions=())
        return out
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise ShardcError(f"{name}: axis must be one integer (or None), got {axis!r}")
    ax = norm_axes(name, int(axis), x.ndim)[0]
    out = prim.bind(a, axis=ax, index_dtype=dtypes.default_int())
    return _keepdims(a, out, (ax,), keepdims)


def argmax(a, axis=None, out=None, keepdims=False):
    return _arg(red.argmax_p, "argmax", a, axis, keepdims)


def argmin(a, axis=None, out=None, keepdims=False):
    return _arg(red.argmin_p, "argmin", a, axis, keepdims)


def _cumulative(prim, name, a, axis, dtype):
    check_arraylike(name, a)
    x = aval(a)
    if axis is None:
        a = shp.reshape_p.bind(a, shape=(x.size,)) if x.ndim != 1 else a
        axis = 0
    ax = norm_axes(name, axis, aval(a).ndim)[0]
    if dtype is None:     # jax keeps the dtype (booleans count in the default int)
        out_dtype = comp = dtypes.default_int() if x.dtype == dtypes.bool_ else x.dtype
    else:
        out_dtype = canonical_dtype(dtype)
        comp = _upcast(out_dtype) if out_dtype == dtypes.bool_ else out_dtype
        if out_dtype == dtypes.bool_ and x.dtype != dtypes.bool_:
            a = not_equal(a, 0)
    a = convert(a, comp)
    return convert(prim.bind(a, axis=ax, reverse=False), out_dtype)


def cumsum(a, axis=None, dtype=None, out=None):
    return _cumulative(red.cumsum_p, "cumsum", a, axis, dtype)
