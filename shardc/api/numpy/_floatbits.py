"""Functions that read a float's bits (bitcast_convert_type), as jax.numpy's: signbit,
frexp, ldexp, spacing. Their values are jax's bit for bit (NaN signs, subnormals, and
ldexp's exponents past the float range)."""
from __future__ import annotations

from functools import partial

import numpy as np

from ...errors import ShardcError
from ...ir import dtypes
from ...ops import elementwise as ew
from ...ops import numeric as nu
from ...ops.bits import bitcast_convert_type_p
from ._util import (aval, check_arraylike, const_like, convert, promote_args,
                    promote_args_inexact, promote_dtypes_inexact)

_INT_OF_BITS = {16: dtypes.int16, 32: dtypes.int32, 64: dtypes.int64}


def _int_type(name, dt):
    bits = dtypes.finfo(dt).bits
    if bits not in _INT_OF_BITS:
        raise ShardcError(f"{name} only supports 16, 32 and 64-bit floats, got {dt}")
    return _INT_OF_BITS[bits]


def _bitcast(x, dt):
    return bitcast_convert_type_p.bind(x, new_dtype=dt)


def _where(c, a, b):
    from ._ufuncs import where
    return where(c, a, b)


def signbit(x, /):
    """The sign bit of x (-0.0 and negative NaNs included), as jnp.signbit."""
    from ._ufuncs import full_like_bool
    check_arraylike("signbit", x)
    (x,) = promote_args("signbit", x)
    dt = aval(x).dtype
    if dtypes.is_int(dt):
        return ew.lt_p.bind(x, const_like(x, 0))
    if dt == dtypes.bool_:
        return full_like_bool(x, False)
    if not dtypes.is_float(dt):
        raise ShardcError(f"signbit is not well defined for {dt}")
    info = dtypes.finfo(dt)
    it = _int_type("signbit", dt)
    bits = _bitcast(x, it)
    shifted = ew.shift_right_arithmetic_p.bind(bits, const_like(bits, info.nexp + info.nmant))
    return convert(shifted, dtypes.bool_)


def copysign(x1, x2, /):
    x1, x2 = promote_args_inexact("copysign", x1, x2)
    if dtypes.is_complex(aval(x1).dtype):
        raise ShardcError("copysign does not support complex-valued inputs")
    a = ew.abs_p.bind(x1)
    return _where(signbit(x2), ew.neg_p.bind(a), a)


def const_like_int(dt, v):
    from ...ir.program import Aval, Lit
    return Lit(int(v), Aval((), dt, False))


def frexp(x, /):
    """(mantissa, exponent) with x = mantissa * 2**exponent, |mantissa| in [0.5, 1).

    On the bits in integer arithmetic, so subnormal inputs are exact (as NumPy's) where
    a float comparison or product flushes them to zero (XLA's CPU does)."""
    check_arraylike("frexp", x)
    (x,) = promote_dtypes_inexact(x)
    dt = aval(x).dtype
    if dtypes.is_complex(dt):
        raise ShardcError("frexp does not support complex-valued inputs")
    info = dtypes.finfo(dt)
    it = _int_type("frexp", dt)
    nm, width = info.nmant, info.bits
    bias = 1 - info.minexp
    c = partial(const_like_int, it)
    bits = _bitcast(x, it)
    sign = ew.and_p.bind(bits, c(-(1 << (width - 1))))
    mag = ew.and_p.bind(bits, c((1 << (width - 1)) - 1))
    field = ew.shift_right_logical_p.bind(mag, c(nm))
    frac = ew.and_p.bind(mag, c((1 << nm) - 1))
    # a subnormal's fraction, shifted so its leading one is the implicit bit
    lead = ew.sub_p.bind(c(width - 1), nu.clz_p.bind(frac))           # its position
    sub_frac = ew.and_p.bind(ew.shift_left_p.bind(frac, ew.sub_p.bind(c(nm), lead)),
                             c((1 << nm) - 1))
    sub = ew.eq_p.bind(field, c(0))
    frac = _where(sub, sub_frac, frac)
    x2 = _where(sub, ew.add_p.bind(lead, c(info.minexp - nm + 1)),
                ew.sub_p.bind(field, c(bias - 1)))
    m = _bitcast(ew.or_p.bind(ew.or_p.bind(sign, c((bias - 1) << nm)), frac), dt)
    # zero, inf and nan are their own mantissa, with exponent 0
    cond = ew.or_p.bind(ew.eq_p.bind(mag, c(0)), ew.eq_p.bind(field, c((1 << info.nexp) - 1)))
    x2 = _where(cond, c(0), x2)
    # the mantissa's derivative is 2**-e = m / x (jax's custom JVP): m * (x / x) with the
    # divisor a constant to AD keeps the bit-exact value and carries that derivative
    from ...transforms.ad import stop_gradient
    # (not for subnormal x: XLA's CPU flushes x / x to 0 / 0 there)
    num = _where(ew.or_p.bind(cond, sub), const_like(x, 1), x)
    m = ew.mul_p.bind(m, ew.div_p.bind(num, stop_gradient(num)))
    return _where(cond, x, m), convert(x2, dtypes.int32)


def ldexp(x1, x2, /):
    """x1 * 2**x2 for an integer x2, exponent split off first (as jnp.ldexp)."""
    check_arraylike("ldexp", x1, x2)
    d1, d2 = aval(x1).dtype, aval(x2).dtype
    if dtypes.is_complex(d1) or dtypes.is_inexact(d2):
        raise ShardcError(f"ldexp not supported for input types {(d1, d2)}")
    (x1,) = promote_args_inexact("ldexp", x1)
    dt = aval(x1).dtype
    x2 = convert(x2, dt)
    x1, x2 = promote_args("ldexp", x1, x2)
    m, e = frexp(x1)
    e = convert(ew.add_p.bind(convert(e, dt), x2), dt)
    pos = ew.gt_p.bind(e, const_like(e, 0))
    m2 = _where(pos, ew.mul_p.bind(m, const_like(m, 2)), m)
    e2 = _where(pos, ew.sub_p.bind(e, const_like(e, 1)), e)
    x = ew.mul_p.bind(m2, ew.pow_p.bind(const_like(m2, 2), e2))
    info = dtypes.finfo(dt)
    it = _INT_OF_BITS[info.bits]        # (frexp has checked the width)
    x = _where(ew.lt_p.bind(e, const_like(e, float(info.minexp + 1))),
               _subnormal(m, e, info), x)
    from ._ufuncs import isinf, isnan
    # zero by its bits: a subnormal x1 compares equal to 0 where XLA flushes it
    mag = ew.and_p.bind(_bitcast(x1, it), const_like_int(it, (1 << (info.bits - 1)) - 1))
    zero = ew.eq_p.bind(mag, const_like_int(it, 0))
    keep = ew.or_p.bind(ew.or_p.bind(isinf(x1), isnan(x1)), zero)
    return _where(keep, x1, x)


def _subnormal(m, e, info):
    """m * 2**e (m from frexp, e a float of an integer) where it is below the smallest
    normal: the significand shifted into a subnormal's bits with ties to even, in
    integer arithmetic (XLA's CPU flushes float ops' subnormal results to zero)."""
    it = _INT_OF_BITS[info.bits]
    c = partial(const_like_int, it)
    nm = info.nmant
    bits = _bitcast(m, it)
    sign = ew.and_p.bind(bits, c(-(1 << (info.bits - 1))))
    sig = ew.or_p.bind(ew.and_p.bind(bits, c((1 << nm) - 1)), c(1 << nm))
    # shift k = minexp + 1 - e >= 1; past nm + 2 everything rounds to zero
    k = ew.sub_p.bind(c(info.minexp + 1), convert(e, it))
    k = ew.max_p.bind(c(1), ew.min_p.bind(k, c(nm + 2)))
    q = ew.shift_right_logical_p.bind(sig, k)
    r = ew.and_p.bind(sig, ew.sub_p.bind(ew.shift_left_p.bind(c(1), k), c(1)))
    half = ew.shift_left_p.bind(c(1), ew.sub_p.bind(k, c(1)))
    up = ew.or_p.bind(ew.gt_p.bind(r, half), ew.and_p.bind(
        ew.eq_p.bind(r, half), ew.eq_p.bind(ew.and_p.bind(q, c(1)), c(1))))
    q = ew.add_p.bind(q, convert(up, it))
    return _bitcast(ew.or_p.bind(sign, q), aval(m).dtype)


def spacing(x, /):
    """The distance from x to the next float away from zero, as jnp.spacing."""
    (x,) = promote_args_inexact("spacing", x)
    dt = aval(x).dtype
    if dtypes.is_complex(dt):
        raise ShardcError("spacing is not defined for complex inputs")
    inf = const_like(x, np.inf)
    if dt == dtypes.float16:
        return ew.sub_p.bind(nu.nextafter_p.bind(x, inf), x)
    res = ew.sub_p.bind(nu.nextafter_p.bind(x, copysign(inf, x)), x)
    tiny = copysign(const_like(x, float(dtypes.finfo(dt).smallest_subnormal)), x)
    return _where(ew.eq_p.bind(res, const_like(res, 0)), tiny, res)
