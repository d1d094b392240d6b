"""More jax.numpy composites: gradient trapezoid unwrap interp cov corrcoef, bits
(packbits unpackbits), index arithmetic (ravel_multi_index unravel_index), put place,
array_equal array_equiv trim_zeros (the polynomial arithmetic: _polyarith.py)."""
from __future__ import annotations

import math
import operator

import numpy as np

from ...errors import ArgumentError, ShardcError
from ...ir import dtypes
from ...ops import elementwise as ew
from ...ops.common import check_axis
from ...ops.sort import sort_p
from ...trace import core
from . import _reductions as R
from ._composite import tile
from ._creation import asarray, full
from ._indexing import getitem
from ._more import diff
from ._shapes import (atleast_2d, concatenate, expand_dims, moveaxis, pad, ravel,
    reshape, swapaxes, transpose)
from ._ufuncs import (abs, add, clip, divide, equal, greater, isnan, less, logical_and,
    logical_or, mod, multiply, negative, remainder, sqrt, subtract,
    where)
from ._util import (aval, canonical_dtype, check_arraylike, convert, promote_args_inexact,
    promote_dtypes, promote_dtypes_inexact)


def _slice_in_dim(a, start, stop, axis):
    return getitem(a, (slice(None),) * axis + (slice(start, stop),))


def gradient(f, *varargs, axis=None, edge_order=None):
    """Central differences inside, one-sided at the edges (as jnp.gradient)."""
    if edge_order is not None:
        raise ShardcError("The 'edge_order' argument to shardc.numpy.gradient is not "
                          "supported.")
    check_arraylike("gradient", f, *varargs)
    a, *spacing = promote_dtypes_inexact(f, *varargs)
    nd = aval(a).ndim

    def along(a, h, ax):
        def sl(lo, hi):
            return _slice_in_dim(a, lo, hi, ax)
        upper = subtract(sl(1, 2), sl(0, 1))
        lower = subtract(sl(-1, None), sl(-2, -1))
        if isinstance(h, (int, float)) or aval(h).ndim == 0:
            inner = divide(multiply(subtract(sl(2, None), sl(None, -2)), 0.5), h)
            lower, upper = divide(lower, h), divide(upper, h)
        elif aval(h).ndim == 1:
            if aval(h).shape[0] != aval(a).shape[ax]:
                raise ShardcError("Spacing arrays must have the same length as the dimension "
                                  "along which the gradient is calculated.")
            hs = [1] * nd
            hs[ax] = aval(h).shape[0]
            h = reshape(h, tuple(hs))

            def sx(lo, hi):
                return _slice_in_dim(h, lo, hi, ax)
            upper = divide(upper, subtract(sx(1, 2), sx(0, 1)))
            lower = divide(lower, subtract(sx(-1, None), sx(-2, -1)))
            dx1 = subtract(sx(1, -1), sx(0, -2))
            dx2 = subtract(sx(2, None), sx(1, -1))
            ca = divide(negative(dx2), multiply(dx1, add(dx1, dx2)))
            cb = divide(subtract(dx2, dx1), multiply(dx1, dx2))
            cc = divide(dx1, multiply(dx2, add(dx1, dx2)))
            inner = add(add(multiply(ca, sl(0, -2)), multiply(cb, sl(1, -1))),
                        multiply(cc, sl(2, None)))
        else:
            raise ShardcError("Spacing arrays must be 1D arrays or scalars.")
        return concatenate([upper, inner, lower], axis=ax)
    if axis is None:
        axes = tuple(range(nd))
    else:
        axes = tuple(check_axis("gradient", i, nd)
                     for i in ((axis,) if isinstance(axis, int) else axis))
    if not axes:
        return []
    if min(s for i, s in enumerate(aval(a).shape) if i in axes) < 2:
        raise ShardcError("Shape of array too small to calculate a numerical gradient, at "
                          "least 2 elements are required.")
    if not spacing:
        dx = [1.0] * len(axes)
    elif len(spacing) == 1:
        dx = list(spacing) * len(axes)
    elif len(spacing) == len(axes):
        dx = list(spacing)
    else:
        raise ShardcError(f"Invalid number of spacing arguments {len(spacing)} for "
                          f"axis={axis!r}")
    out = [along(a, h, ax) for ax, h in zip(axes, dx)]
    return out[0] if len(axes) == 1 else out


def trapezoid(y, x=None, dx=1.0, axis=-1):
    if x is None:
        check_arraylike("trapezoid", y)
        (y,) = promote_dtypes_inexact(y)
        d = asarray(dx) if not isinstance(dx, (int, float)) else dx
        if not isinstance(d, (int, float)) and aval(d).ndim > 0:
            d = expand_dims(d, tuple(range(aval(y).ndim - aval(d).ndim)))
            d = moveaxis(d, axis, -1)
    else:
        check_arraylike("trapezoid", y, x)
        y, x = promote_dtypes_inexact(y, x)
        d = diff(x) if aval(x).ndim == 1 else moveaxis(diff(x, axis=axis), axis, -1)
    y = moveaxis(y, axis, -1)
    dnd = 0 if isinstance(d, (int, float)) else aval(d).ndim
    if dnd == 0 or aval(d).shape[-1] == 1:
        dr = d if dnd == 0 else getitem(d, (Ellipsis, 0))
        ends = multiply(0.5, add(getitem(y, (Ellipsis, 0)), getitem(y, (Ellipsis, -1))))
        return multiply(dr, subtract(R.sum(y, -1), ends))
    mid = add(getitem(y, (Ellipsis, slice(1, None))), getitem(y, (Ellipsis, slice(None, -1))))
    return multiply(0.5, R.sum(multiply(d, mid), -1))


def unwrap(p, discont=None, axis=-1, period=2 * np.pi):
    check_arraylike("unwrap", p)
    p, period = promote_dtypes(p, period)
    if aval(p).shape[axis] == 0:
        return p
    if discont is None:
        discont = divide(period, 2)
    from ._ufuncs import floor_divide
    interval = divide(period, 2) if dtypes.is_float(aval(p).dtype) else floor_divide(period, 2)
    dd = diff(p, axis=axis)
    ddmod = subtract(mod(add(dd, interval), period), interval)
    ddmod = where(logical_and(equal(ddmod, negative(interval)), greater(dd, 0)), interval,
                  ddmod)
    correct = where(less(abs(dd), discont), 0, subtract(ddmod, dd))
    ax = check_axis("unwrap", axis, aval(p).ndim)
    return concatenate([_slice_in_dim(p, 0, 1, ax),
                        add(_slice_in_dim(p, 1, None, ax), R.cumsum(correct, axis=ax))],
                       axis=ax)


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation (as jnp.interp); the interval of each x is found by
    counting the xp at or below it (what searchsorted(side='right') returns)."""
    check_arraylike("interp", x, xp, fp)
    if aval(xp).shape != aval(fp).shape or aval(xp).ndim != 1:
        raise ShardcError("xp and fp must be one-dimensional arrays of equal size")
    x, xp = promote_dtypes_inexact(x, xp)
    (fp,) = promote_dtypes_inexact(fp)
    for name, v in (("left", left), ("right", right)):
        if isinstance(v, str) and v != "extrapolate":
            raise ShardcError(f"the only valid string value of `{name}` is 'extrapolate', "
                              f"but got: {v!r}")
    if period is not None:      # as jax: both wrapped into [0, period), xp sorted, padded
        if np.ndim(period) != 0:
            raise ArgumentError(f"period must be a scalar; got {period}")
        period = abs(period)
        x, xp = remainder(x, period), remainder(xp, period)
        xp, fp = sort_p.bind(xp, fp, dimension=0, is_stable=True, num_keys=1)
        xp = concatenate([subtract(getitem(xp, slice(-1, None)), period), xp,
                          add(getitem(xp, slice(None, 1)), period)])
        fp = concatenate([getitem(fp, slice(-1, None)), fp, getitem(fp, slice(None, 1))])
        left = right = "extrapolate"     # no clamping with a period
    n = aval(xp).shape[0]
    xs = expand_dims(x, -1)
    count = R.sum(convert(less_equal_(xp, xs), dtypes.default_int()), axis=-1)
    i = clip(count, 1, n - 1)
    im1 = subtract(i, 1)
    fi, fim1 = getitem(fp, i), getitem(fp, im1)
    xi, xim1 = getitem(xp, i), getitem(xp, im1)
    df, dx = subtract(fi, fim1), subtract(xi, xim1)
    delta = subtract(x, xim1)
    eps = np.spacing(np.finfo(aval(xp).dtype).eps)
    dx0 = ew.le_p.bind(abs(dx), convert(eps, aval(dx).dtype))
    f = where(dx0, fim1, add(fim1, multiply(divide(delta, where(dx0, 1, dx)), df)))
    if not isinstance(left, str):
        f = where(less(x, getitem(xp, 0)), getitem(fp, 0) if left is None else left, f)
    if not isinstance(right, str):
        f = where(greater(x, getitem(xp, -1)), getitem(fp, -1) if right is None else right, f)
    return f


def less_equal_(a, b):
    from ._ufuncs import less_equal
    return less_equal(a, b)


def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None,
        dtype=None):
    if y is not None:
        m, y = promote_args_inexact("cov", m, y)
        if aval(y).ndim > 2:
            raise ShardcError("y has more than 2 dimensions")
    else:
        (m,) = promote_args_inexact("cov", m)
    if aval(m).ndim > 2:
        raise ShardcError("m has more than 2 dimensions")
    if dtype is not None and not dtypes.is_inexact(canonical_dtype(dtype)):
        raise ShardcError(f"cov: dtype must be a subclass of float or complex; got "
                          f"dtype={dtype!r}")
    X = atleast_2d(m)
    if not rowvar and aval(m).ndim != 1:
        X = transpose(X)
    if aval(X).shape[0] == 0:
        return reshape(asarray(np.array([], np.float32)), (0, 0))
    if y is not None:
        ya = atleast_2d(y)
        if not rowvar and aval(ya).shape[0] != 1:
            ya = transpose(ya)
        X = concatenate([X, ya], axis=0)
    k, n = aval(X).shape
    if n == 0:
        return full(() if k == 1 else (k, k), np.nan, dtype=aval(X).dtype)
    if ddof is None:
        ddof = 1 if bias == 0 else 0
    w = None
    if fweights is not None:
        check_arraylike("cov", fweights)
        if aval(fweights).ndim > 1:
            raise ShardcError("cannot handle multidimensional fweights")
        if aval(fweights).shape[0] != n:
            raise ShardcError("incompatible numbers of samples and fweights")
        if not dtypes.is_int(aval(fweights).dtype):
            raise ShardcError("fweights must be integer.")
        w = abs(fweights)
    if aweights is not None:
        check_arraylike("cov", aweights)
        if aval(aweights).ndim > 1:
            raise ShardcError("cannot handle multidimensional aweights")
        if aval(aweights).shape[0] != n:
            raise ShardcError("incompatible numbers of samples and aweights")
        aweights = abs(aweights)
        w = aweights if w is None else multiply(w, aweights)
    if dtype is not None:
        X = convert(X, canonical_dtype(dtype))
        w = convert(w, canonical_dtype(dtype)) if w is not None else w
    from ._nanred import average
    avg, w_sum = average(X, axis=1, weights=w, returned=True)
    w_sum = getitem(w_sum, 0)
    if w is None:
        f = n - ddof
    elif ddof == 0:
        f = w_sum
    elif aweights is None:
        f = subtract(w_sum, ddof)
    else:
        f = subtract(w_sum, divide(multiply(ddof, R.sum(multiply(w, aweights))), w_sum))
    X = subtract(X, expand_dims(avg, 1))
    XT = transpose(X) if w is None else transpose(multiply(X, reshape(w, (1, n))))
    from ._linalg import dot
    from ._shapes import squeeze
    if dtypes.is_complex(aval(XT).dtype):     # X @ X^H, as numpy and jax
        from ...ops.complex import conj_p
        XT = conj_p.bind(XT)
    return squeeze(divide(dot(X, XT), f))


def corrcoef(x, y=None, rowvar=True, dtype=None):
    check_arraylike("corrcoef", x)
    c = cov(x, y, rowvar, dtype=dtype)
    if aval(c).ndim == 0:
        return divide(c, c)
    from ._construct import diag
    d = diag(c)
    if dtypes.is_complex(aval(c).dtype):   # as jax: sqrt of the real diagonal, both parts clipped
        from ...ops.complex import complex_p, imag_p, real_p
        std = convert(sqrt(real_p.bind(d)), aval(c).dtype)
        c = divide(divide(c, expand_dims(std, 1)), expand_dims(std, 0))
        return complex_p.bind(clip(real_p.bind(c), -1, 1), clip(imag_p.bind(c), -1, 1))
    std = sqrt(d)
    c = divide(divide(c, expand_dims(std, 1)), expand_dims(std, 0))
    return clip(c, -1, 1)


def packbits(a, axis=None, bitorder="big"):
    check_arraylike("packbits", a)
    dt = aval(a).dtype
    if not (dtypes.is_int(dt) or dt == dtypes.bool_):
        raise ShardcError("Expected an input array of integer or boolean data type")
    if bitorder not in ("little", "big"):
        raise ShardcError("'order' must be either 'little' or 'big'")
    from ._util import as_lit, lax_const
    arr = convert(ew.ne_p.bind(as_lit(a), lax_const(a, 0)), np.dtype(np.uint8))
    bits = np.arange(8, dtype=np.uint8)
    if bitorder == "big":
        bits = bits[::-1]
    if axis is None:
        arr, axis = ravel(arr), 0
    arr = swapaxes(arr, axis, -1)
    rem = aval(arr).shape[-1] % 8
    if rem:
        arr = pad(arr, [(0, 0)] * (aval(arr).ndim - 1) + [(0, 8 - rem)])
    s = aval(arr).shape
    arr = reshape(arr, s[:-1] + (s[-1] // 8, 8))
    from ._shifts import left_shift
    packed = convert(R.sum(left_shift(arr, bits.copy()), -1), np.dtype(np.uint8))
    return swapaxes(packed, axis, -1)


def unpackbits(a, axis=None, count=None, bitorder="big"):
    check_arraylike("unpackbits", a)
    if aval(a).dtype != np.uint8:
        raise ShardcError("Expected an input array of unsigned byte data type")
    if bitorder not in ("little", "big"):
        raise ShardcError("'order' must be either 'little' or 'big'")
    bits = (1 << np.arange(8)).astype(np.uint8)
    if bitorder == "big":
        bits = bits[::-1].copy()
    arr = a
    if axis is None:
        arr, axis = ravel(arr), 0
    arr = swapaxes(arr, axis, -1)
    from ._ufuncs import bitwise_and
    un = convert(greater(bitwise_and(expand_dims(arr, -1), bits), 0), np.dtype(np.uint8))
    s = aval(un).shape
    un = reshape(un, s[:-2] + (-1,))
    if count is not None:
        if count > aval(un).shape[-1]:
            un = pad(un, [(0, 0)] * (aval(un).ndim - 1) + [(0, count - aval(un).shape[-1])])
        else:
            un = getitem(un, (Ellipsis, slice(None, count)))
    return swapaxes(un, axis, -1)


def ravel_multi_index(multi_index, dims, mode="raise", order="C", *, dtype=None):
    if len(multi_index) != len(dims):
        raise ShardcError(f"len(multi_index)={len(multi_index)} != len(dims)={len(dims)}")
    dims = tuple(operator.index(d) for d in dims)
    check_arraylike("ravel_multi_index", *multi_index)
    idx = [asarray(i) if isinstance(i, (list, np.ndarray)) else i for i in multi_index]
    dt = canonical_dtype(dtype) if dtype is not None else dtypes.promote(
        (dtypes.default_int(), True), *[(aval(i).dtype, aval(i).weak) for i in idx])[0]
    if not dtypes.is_int(dt):
        raise ShardcError(f"dtype={dtype!r} is not an integer type.")
    if math.prod(dims) - 1 > np.iinfo(dt).max:
        raise ShardcError(f"ravel_multi_index: dtype={dt} not large enough to hold "
                          f"flattened index for dims={dims!r}")
    for i in idx:
        if not dtypes.is_int(aval(i).dtype):
            raise ShardcError("only int indices permitted")
    if mode == "raise":
        if any(core.is_tracer(i) for i in idx):
            raise ShardcError("ravel_multi_index with mode='raise' needs concrete indices; "
                              "use mode='wrap' or mode='clip' under shardc.jit")
        if any(np.any((np.asarray(i) < 0) | (np.asarray(i) >= d)) for i, d in zip(idx, dims)):
            raise ShardcError("invalid entry in coordinates array")
    elif mode == "clip":
        idx = [clip(i, 0, d - 1) for i, d in zip(idx, dims)]
    elif mode == "wrap":
        idx = [remainder(i, d) for i, d in zip(idx, dims)]
    elif mode != "ignore":
        raise ShardcError(f"invalid mode={mode!r}. Expected 'raise', 'wrap', 'clip', or "
                          "'ignore'.")
    if order == "F":
        strides = np.cumprod((1,) + dims[:-1])
    elif order == "C":
        strides = np.cumprod((1,) + dims[1:][::-1])[::-1]
    else:
        raise ShardcError(f"invalid order={order!r}. Expected 'C' or 'F'")
    out = asarray(np.array(0, dt))
    for i, s in zip(idx, strides):
        out = add(out, multiply(convert(i, dt), int(s)))
    return out


def unravel_index(indices, shape):
    check_arraylike("unravel_index", indices)
    try:
        shape = list(shape)
    except TypeError:
        shape = [shape]
    if any(np.ndim(s) != 0 for s in shape):
        raise ShardcError("unravel_index: shape should be a scalar or 1D sequence.")
    from ._shifts import divmod as _divmod
    idx = indices
    out = [0] * len(shape)
    for i, s in reversed(list(enumerate(shape))):
        idx, out[i] = _divmod(idx, s)
    oob_pos = greater(idx, 0)
    oob_neg = less(idx, -1) if dtypes.is_signed(aval(idx).dtype) else asarray(False)
    return tuple(where(oob_pos, s - 1, where(oob_neg, 0, i)) for s, i in zip(shape, out))


def _tile_to_size(arr, size):
    n = aval(arr).shape[0]
    if n < size:
        arr = tile(arr, -(-size // n))
    return getitem(arr, slice(0, size)) if aval(arr).shape[0] > size else arr


def put(a, ind, v, mode=None, *, inplace=True):
    """a with a.flat[ind] = v (inplace=False, as jnp.put)."""
    if inplace:
        raise ShardcError("shardc.numpy.put cannot modify arrays in-place, because arrays "
                          "are immutable. Pass inplace=False to instead return an updated "
                          "array.")
    check_arraylike("put", a, ind, v)
    arr = asarray(a)
    ind = ravel(asarray(ind))
    vals = ravel(asarray(v))
    size = aval(arr).size
    if not size or not aval(ind).size or not aval(vals).size:
        return arr
    vals = _tile_to_size(vals, aval(ind).shape[0])
    if mode == "clip":
        ind = clip(ind, 0, size - 1)
    elif mode == "wrap":
        ind = remainder(ind, size)
    elif mode == "raise":
        raise ShardcError("The 'raise' mode to shardc.numpy.put is not supported.")
    elif mode is not None:
        raise ShardcError(f"mode should be one of 'wrap' or 'clip'; got mode={mode!r}")
    # a scatter at the unravelled positions (as jax's, so arr keeps its layout); a
    # position written twice keeps the last value, as .at[].set and NumPy's put
    from ..lax_gather import ScatterDimensionNumbers, scatter
    from ._shapes import stack
    shape = aval(arr).shape
    nd = len(shape)
    idx = stack(unravel_index(ind, shape), axis=1)
    dn = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=tuple(range(nd)),
                                 scatter_dims_to_operand_dims=tuple(range(nd)))
    return scatter(arr, idx, convert(vals, aval(arr).dtype), dn)


def place(arr, mask, vals, *, inplace=True):
    """arr with its masked elements set to vals, in order, repeating (as jnp.place)."""
    check_arraylike("place", arr, mask, vals)
    if inplace:
        raise ShardcError("shardc.numpy.place cannot modify arrays in-place, because arrays "
                          "are immutable. Pass inplace=False to instead return an updated "
                          "array.")
    data, m = asarray(arr), asarray(mask)
    vals = ravel(asarray(vals))
    if aval(data).size != aval(m).size:
        raise ShardcError("place: arr and mask must be the same size")
    if not aval(vals).size:
        raise ShardcError("Cannot place values from an empty array")
    if not aval(data).size:
        return data
    flat_m = convert(ravel(m), dtypes.bool_)
    n = aval(flat_m).shape[0]
    vals = _tile_to_size(vals, n)
    k = subtract(R.cumsum(convert(flat_m, dtypes.default_int())), 1)
    picked = getitem(vals, clip(k, 0, n - 1))
    out = where(flat_m, convert(picked, aval(data).dtype), ravel(data))
    return reshape(out, aval(data).shape)


def array_equal(a1, a2, equal_nan=False):
    a1, a2 = asarray(a1), asarray(a2)
    if aval(a1).shape != aval(a2).shape:
        return asarray(np.array(False))
    eq = equal(a1, a2)
    if equal_nan:
        eq = logical_or(eq, logical_and(isnan(a1), isnan(a2)))
    return R.all(eq)


def array_equiv(a1, a2):
    a1, a2 = asarray(a1), asarray(a2)
    try:
        np.broadcast_shapes(aval(a1).shape, aval(a2).shape)
    except ValueError:
        return asarray(np.array(False))
    return R.all(equal(a1, a2))


def trim_zeros(filt, trim="fb", axis=None):
    check_arraylike("trim_zeros", filt)
    if core.is_tracer(filt):
        raise ShardcError("trim_zeros needs a concrete array (its result's shape depends on "
                          "the values)")
    x = np.asarray(filt)
    nd = x.ndim
    axes = set(range(nd)) if axis is None else \
        {check_axis("trim_zeros", a, nd) for a in ((axis,) if isinstance(axis, int) else axis)}
    if not axes or ("f" not in trim.lower() and "b" not in trim.lower()):
        return filt

    def sl(ax):
        if ax not in axes:
            return slice(None)
        m = x.any(axis=tuple(i for i in range(nd) if i != ax))
        if not m.any():
            return slice(0, 0)
        start = int(m.argmax()) if "f" in trim.lower() else None
        stop = x.shape[ax] - int(m[::-1].argmax()) if "b" in trim.lower() else None
        return slice(start, stop)
    return getitem(asarray(filt), tuple(sl(ax) for ax in range(nd)))
