"""Functions that read a float's bits (bitcast_convert_type), as jax.numpy's: signbit,
frexp, ldexp, spacing. Their values are jax's bit for bit (NaN signs, subnormals, and
ldexp's exponents past the float range)."""
from __future__ import annotations

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


def _normalize(x, info, it):
    small = ew.lt_p.bind(ew.abs_p.bind(x), const_like(x, float(info.tiny)))
    x1 = _where(small, ew.mul_p.bind(x, const_like(x, float(1 << info.nmant))), x)
    x2 = _where(small, const_like_int(it, -info.nmant), const_like_int(it, 0))
    return _bitcast(x1, it), x2


def const_like_int(dt, v):
    from ...ir.program import Aval, Lit
    return Lit(int(v), Aval((), dt, False))


def frexp(x, /):
    """(mantissa, exponent) with x = mantissa * 2**exponent, |mantissa| in [0.5, 1)."""
    check_arraylike("frexp", x)
    (x,) = promote_dtypes_inexact(x)
    dt = aval(x).dtype
    if dtypes.is_complex(dt):
        raise ShardcError("frexp does not support complex-valued inputs")
    info = dtypes.finfo(dt)
    it = _int_type("frexp", dt)
    mask = (1 << info.nexp) - 1
    bias = 1 - info.minexp
    x1, x2 = _normalize(x, info, it)
    top = ew.and_p.bind(ew.shift_right_arithmetic_p.bind(x1, const_like_int(it, info.nmant)),
                        const_like_int(it, mask))
    x2 = ew.add_p.bind(x2, ew.add_p.bind(ew.sub_p.bind(top, const_like_int(it, bias)),
                                         const_like_int(it, 1)))
    x1 = ew.and_p.bind(x1, const_like_int(it, ~(mask << info.nmant)))
    x1 = ew.or_p.bind(x1, const_like_int(it, (bias - 1) << info.nmant))
    m = _bitcast(x1, dt)
    from ._ufuncs import isinf, isnan
    cond = ew.or_p.bind(ew.or_p.bind(isinf(x), isnan(x)), ew.eq_p.bind(x, const_like(x, 0)))
    x2 = _where(cond, const_like_int(it, 0), x2)
    # the mantissa's derivative is 2**-e = m / x (jax's custom JVP): m * (x / x) with the
    # divisor a constant to AD keeps the bit-exact value and carries that derivative
    from ...transforms.ad import stop_gradient
    # (not for subnormal x: XLA's CPU flushes x / x to 0 / 0 there)
    tiny = ew.lt_p.bind(ew.abs_p.bind(x), const_like(x, float(info.tiny)))
    num = _where(ew.or_p.bind(cond, tiny), const_like(x, 1), x)
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
    m = _where(pos, ew.mul_p.bind(m, const_like(m, 2)), m)
    e = _where(pos, ew.sub_p.bind(e, const_like(e, 1)), e)
    x = ew.mul_p.bind(m, ew.pow_p.bind(const_like(m, 2), e))
    from ._ufuncs import isinf
    keep = ew.or_p.bind(isinf(x1), ew.eq_p.bind(x1, const_like(x1, 0)))
    return _where(keep, x1, x)


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
