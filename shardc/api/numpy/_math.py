"""Elementwise jax.numpy functions built from shardc's existing ops, each as jax.numpy
builds it (same promotion, same formula), so values, weak types and gradients agree:
inverse hyperbolics, hypot, sinc, heaviside, fmax/fmin, gcd/lcm, ..."""
from __future__ import annotations

import numpy as np

from ...errors import ShardcError
from ...ir import dtypes
from ...ops import elementwise as ew
from ...ops import powers as pw
from ._ufuncs import (abs, add, arccos, arcsin, arctan, arctan2, bitwise_not, ceil, divide,
    equal, floor, floor_divide, full_like_bool, greater, isnan, less, log, log1p,
    logical_or, maximum, minimum, multiply, not_equal, power, round, sqrt,
    subtract, where)
from ._floatbits import copysign, ldexp, signbit  # noqa: F401  (jax's, via bitcasts)
from ._util import (aval, check_arraylike, const_like, convert, lax_const, promote_args,
    promote_args_inexact, promote_dtypes)

acos, asin, atan, atan2 = arccos, arcsin, arctan, arctan2


def _inexact(name, x, complex_ok=False):
    check_arraylike(name, x)
    (x,) = promote_args_inexact(name, x)
    if not (dtypes.is_inexact if complex_ok else dtypes.is_float)(aval(x).dtype):
        raise ShardcError(f"{name} needs a floating-point array, got {aval(x)}")
    return x


def _big(x):
    """sqrt of the dtype's largest value: above it, x*x overflows (chlo's threshold)."""
    return lax_const(x, float(np.sqrt(np.finfo(aval(x).dtype).max)))


def _upcast_half(x):
    """chlo decomposes the inverse hyperbolics of half floats in f32."""
    a = aval(x)
    if a.dtype in (dtypes.float16, dtypes.bfloat16):
        return ew.convert_element_type_p.bind(x, new_dtype=dtypes.float32, weak_type=a.weak), a
    return x, None


def _back(out, a):
    if a is None:
        return out
    return ew.convert_element_type_p.bind(out, new_dtype=a.dtype, weak_type=a.weak)


def arcsinh(x, /):
    """sign(x) * log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), log(2|x|) where x^2 overflows
    (chlo.asinh's decomposition)."""
    x = _inexact("arcsinh", x, complex_ok=True)
    if dtypes.is_complex(aval(x).dtype):
        return ew.asinh_p.bind(x)
    x, half = _upcast_half(x)
    ax = ew.abs_p.bind(x)
    one = lax_const(x, 1)
    small = ew.log1p_p.bind(ew.add_p.bind(ax, ew.div_p.bind(
        ew.mul_p.bind(ax, ax), ew.add_p.bind(one, ew.sqrt_p.bind(ew.add_p.bind(
            one, ew.mul_p.bind(ax, ax)))))))
    large = ew.add_p.bind(ew.log_p.bind(ax), lax_const(x, float(np.log(2))))
    out = where(ew.ge_p.bind(ax, _big(x)), large, small)
    return _back(ew.mul_p.bind(ew.sign_p.bind(x), out), half)


def arccosh(x, /):
    """log(x + sqrt((x + 1) (x - 1))), log(2x) where that overflows (chlo.acosh's)."""
    x = _inexact("arccosh", x, complex_ok=True)
    if dtypes.is_complex(aval(x).dtype):
        return ew.acosh_p.bind(x)
    x, half = _upcast_half(x)
    one = lax_const(x, 1)
    small = ew.log_p.bind(ew.add_p.bind(x, ew.sqrt_p.bind(ew.mul_p.bind(
        ew.add_p.bind(x, one), ew.sub_p.bind(x, one)))))
    large = ew.add_p.bind(ew.log_p.bind(x), lax_const(x, float(np.log(2))))
    out = where(ew.ge_p.bind(x, _big(x)), large, small)
    # NaN below 1 (chlo's): (x + 1)(x - 1) overflowed to inf for large negative x
    return _back(where(ew.lt_p.bind(x, one), lax_const(x, np.nan), out), half)


def arctanh(x, /):
    """(log1p(x) - log1p(-x)) / 2, NaN outside [-1, 1] (chlo.atanh's)."""
    x = _inexact("arctanh", x, complex_ok=True)
    if dtypes.is_complex(aval(x).dtype):
        return ew.atanh_p.bind(x)
    x, half = _upcast_half(x)
    out = ew.mul_p.bind(ew.sub_p.bind(ew.log1p_p.bind(x), ew.log1p_p.bind(ew.neg_p.bind(x))),
                        lax_const(x, 0.5))
    out = where(ew.gt_p.bind(ew.abs_p.bind(x), lax_const(x, 1)), lax_const(x, np.nan), out)
    return _back(out, half)


asinh, acosh, atanh = arcsinh, arccosh, arctanh


def _log_scaled(x, scale):
    """log(x) scaled, complex ones part by part (as jnp: a complex division made log2(0)'s
    imaginary part NaN)."""
    from ...ops.complex import complex_p, imag_p, real_p
    r = ew.log_p.bind(x)
    if not dtypes.is_complex(aval(x).dtype):
        return scale(r)
    return complex_p.bind(scale(real_p.bind(r)), scale(imag_p.bind(r)))


def log2(x, /):
    x = _inexact("log2", x, complex_ok=True)
    return _log_scaled(x, lambda r: ew.div_p.bind(r, ew.log_p.bind(const_like(r, 2))))


def log10(x, /):
    x = _inexact("log10", x, complex_ok=True)
    return _log_scaled(x, lambda r: ew.mul_p.bind(
        r, const_like(r, np.array(0.4342944819032518, dtype=aval(r).dtype))))


def fabs(x, /):
    return ew.abs_p.bind(_inexact("fabs", x))


def bitwise_invert(x, /):
    check_arraylike("bitwise_invert", x)
    return bitwise_not(*promote_args("bitwise_invert", x))


def deg2rad(x, /):
    x = _inexact("deg2rad", x, complex_ok=True)
    return ew.mul_p.bind(x, lax_const(x, np.pi / 180))


def rad2deg(x, /):
    x = _inexact("rad2deg", x, complex_ok=True)
    return ew.mul_p.bind(x, lax_const(x, 180 / np.pi))


radians, degrees = deg2rad, rad2deg


def hypot(x1, x2, /):
    """sqrt(x1^2 + x2^2) without overflow: max * sqrt(1 + (min/max)^2) (as jnp.hypot)."""
    x1, x2 = promote_args_inexact("hypot", x1, x2)
    x1, x2 = ew.abs_p.bind(x1), ew.abs_p.bind(x2)
    idx_inf = ew.or_p.bind(isposinf(x1), isposinf(x2))
    x1, x2 = maximum(x1, x2), minimum(x1, x2)
    zero = equal(x1, 0)
    safe = where(zero, _ones(x1), x1)
    x = where(zero, x1, ew.mul_p.bind(x1, ew.sqrt_p.bind(ew.add_p.bind(
        lax_const(x1, 1), pw.square_p.bind(ew.div_p.bind(x2, safe))))))
    return where(idx_inf, lax_const(x, np.inf), x)


def _ones(x):
    a = aval(x)
    from ._creation import full_like
    return full_like(x, 1) if a.shape else lax_const(x, 1)


def sinc(x, /):
    """sin(pi x) / (pi x), 1 at 0 (where the gradient is 0, as jax's)."""
    x = _inexact("sinc", x, complex_ok=True)
    eq_zero = ew.eq_p.bind(x, lax_const(x, 0))
    pi_x = ew.mul_p.bind(lax_const(x, np.pi), x)
    safe = where(eq_zero, lax_const(x, 1), pi_x)
    at_zero = ew.add_p.bind(ew.mul_p.bind(pi_x, lax_const(x, 0)), lax_const(x, 1))
    return where(eq_zero, at_zero, ew.div_p.bind(ew.sin_p.bind(safe), safe))


def heaviside(x1, x2, /):
    check_arraylike("heaviside", x1, x2)
    x1, x2 = promote_args_inexact("heaviside", x1, x2)
    zero = lax_const(x1, 0)
    return where(ew.lt_p.bind(x1, zero), zero,
                 where(ew.gt_p.bind(x1, zero), lax_const(x1, 1), where(isnan(x1), x1, x2)))


def fmax(x1, x2):
    """The larger, ignoring NaNs (as jnp.fmax)."""
    return where(logical_or(greater(x1, x2), isnan(x2)), x1, x2)


def fmin(x1, x2):
    return where(logical_or(less(x1, x2), isnan(x2)), x1, x2)


def float_power(x, y, /):
    x, y = promote_args_inexact("float_power", x, y)
    return ew.pow_p.bind(x, y)


def trunc(x):
    check_arraylike("trunc", x)
    if not dtypes.is_float(aval(x).dtype):
        return x
    return where(ew.lt_p.bind(x, const_like(x, 0)), ceil(x), floor(x))


def rint(x, /):
    check_arraylike("rint", x)
    (x,) = promote_args("rint", x)
    dt = aval(x).dtype
    if dtypes.is_complex(dt):
        from ...ops.complex import complex_p, imag_p, real_p
        return complex_p.bind(ew.round_p.bind(real_p.bind(x)), ew.round_p.bind(imag_p.bind(x)))
    if not dtypes.is_float(dt):
        return convert(x, dtypes.default_float())
    return ew.round_p.bind(x)


def _isposneginf(name, inf, x, out):
    check_arraylike(name, x)
    if out is not None:
        raise ShardcError(f"{name}: the 'out' argument is not supported")
    (x,) = promote_args(name, x)
    if dtypes.is_float(aval(x).dtype):
        return ew.eq_p.bind(x, const_like(x, inf))
    return full_like_bool(x, False)


def isposinf(x, /, out=None):
    return _isposneginf("isposinf", np.inf, x, out)


def isneginf(x, /, out=None):
    return _isposneginf("isneginf", -np.inf, x, out)


def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """NaN, +inf and -inf replaced (by 0 and the dtype's largest/smallest by default)."""
    check_arraylike("nan_to_num", x)
    dt = aval(x).dtype
    if dtypes.is_complex(dt):   # part by part, as jnp.nan_to_num
        from ...ops.complex import complex_p, imag_p, real_p
        kw = dict(nan=nan, posinf=posinf, neginf=neginf)
        return complex_p.bind(nan_to_num(real_p.bind(x), **kw), nan_to_num(imag_p.bind(x), **kw))
    if not dtypes.is_float(dt):
        return x
    from ._creation import asarray
    info = np.finfo(dt) if dt != dtypes.bfloat16 else __import__("ml_dtypes").finfo(dt)
    posinf = info.max if posinf is None else posinf
    neginf = info.min if neginf is None else neginf
    out = where(isnan(x), asarray(nan, dtype=dt), x)
    out = where(isposinf(out), asarray(posinf, dtype=dt), out)
    return where(isneginf(out), asarray(neginf, dtype=dt), out)


def modf(x, /, out=None):
    if out is not None:
        raise ShardcError("modf: the 'out' argument is not supported")
    check_arraylike("modf", x)
    (x,) = promote_args_inexact("modf", x)
    whole = where(ew.ge_p.bind(x, lax_const(x, 0)), floor(x), ceil(x))
    return subtract(x, whole), whole


def logaddexp2(x1, x2, /):
    """log2(2**x1 + 2**x2) without overflow (as jax's lax_other.logaddexp2)."""
    x1, x2 = promote_args_inexact("logaddexp2", x1, x2)
    amax = ew.max_p.bind(x1, x2)
    invln2 = lax_const(amax, 1 / np.log(2))
    delta = ew.sub_p.bind(x1, x2)
    two = lax_const(x1, 2)
    exp2 = ew.pow_p.bind(two, ew.neg_p.bind(ew.abs_p.bind(delta)))
    return where(isnan(delta), ew.add_p.bind(x1, x2),
                 ew.add_p.bind(amax, ew.mul_p.bind(invln2, ew.log1p_p.bind(exp2))))


def _int_args(name, x1, x2):
    check_arraylike(name, x1, x2)
    x1, x2 = promote_dtypes(x1, x2)
    if not dtypes.is_int(aval(x1).dtype):
        raise ShardcError(f"Arguments to shardc.numpy.{name} must be integers.")
    from ._shapes import broadcast_arrays
    return broadcast_arrays(x1, x2)


def gcd(x1, x2):
    """Euclid's algorithm in a while loop over all elements at once (as jnp.gcd)."""
    from ..control import while_loop
    from ._reductions import any as _any
    x1, x2 = _int_args("gcd", x1, x2)

    def body(xs):
        a, b = xs
        nz = not_equal(b, 0)
        a, b = where(nz, b, a), where(nz, ew.rem_p.bind(a, where(nz, b, _ones(b))),
                                      const_like(b, 0))
        lt = less(a, b)
        return where(lt, b, a), where(lt, a, b)
    out, _ = while_loop(lambda xs: _any(not_equal(xs[1], 0)), body, (abs(x1), abs(x2)))
    return out


def lcm(x1, x2):
    x1, x2 = _int_args("lcm", x1, x2)
    x1, x2 = abs(x1), abs(x2)
    d = gcd(x1, x2)
    return where(equal(d, 0), const_like(d, 0),
                 multiply(x1, floor_divide(x2, where(equal(d, 0), _ones(d), d))))


_ = (add, divide, log, log1p, power, round, sqrt)
