"""Elementwise functions of shardc.numpy (jax.numpy's ufuncs and their dtype rules)."""
from __future__ import annotations

from ...ir import dtypes
from ...errors import ShardcError, ShardcTypeError
from ...ops import elementwise as ew
from ...ops import powers as pw
import numpy as np

from . import _ufunc_methods as _um
from ._util import _ARRAYS, _Tracer
from ._util import (as_lit, aval, check_arraylike, const_like, convert, lax_const, promote_args,
    promote_args_inexact, promote_args_numeric, promote_dtypes_inexact, promote_dtypes,
    promote_dtypes_numeric, promote_shapes, result_type, zero_scalar)


def _float_unary(prim, name):
    def f(x, /):
        t = type(x)
        if (t is _Tracer or t in _ARRAYS) and dtypes.is_float(aval(x).dtype):
            return prim.bind(x)     # the common call: nothing to check or promote
        check_arraylike(name, x)
        (x,) = promote_dtypes_inexact(x)
        return prim.bind(x)
    f.__name__ = name
    f.__doc__ = f"Elementwise {name} (as jax.numpy.{name})."
    return f


exp = _float_unary(ew.exp_p, "exp")
log = _float_unary(ew.log_p, "log")
log1p = _float_unary(ew.log1p_p, "log1p")
expm1 = _float_unary(ew.expm1_p, "expm1")
sqrt = _float_unary(ew.sqrt_p, "sqrt")
rsqrt = _float_unary(ew.rsqrt_p, "rsqrt")
sin = _float_unary(ew.sin_p, "sin")
cos = _float_unary(ew.cos_p, "cos")
tan = _float_unary(ew.tan_p, "tan")
tanh = _float_unary(ew.tanh_p, "tanh")
arcsin = _float_unary(ew.asin_p, "arcsin")
arccos = _float_unary(ew.acos_p, "arccos")
arctan = _float_unary(ew.atan_p, "arctan")
sinh = _float_unary(ew.sinh_p, "sinh")
cosh = _float_unary(ew.cosh_p, "cosh")
erf = _float_unary(ew.erf_p, "erf")
logistic = _float_unary(ew.logistic_p, "logistic")


def _keep_int(prim, name):
    """floor/ceil/round leave integer arrays unchanged (as jnp)."""
    def f(x, /):
        check_arraylike(name, x)
        a = aval(x)
        if not dtypes.is_float(a.dtype):
            return x if a.dtype != dtypes.bool_ else convert(x, a.dtype)
        return prim.bind(x)
    f.__name__ = name
    return f


floor = _keep_int(ew.floor_p, "floor")
ceil = _keep_int(ew.ceil_p, "ceil")


def round(a, decimals=0, out=None):
    """Round half to even, as jnp.round (half floats scale in f32 for decimals)."""
    check_arraylike("round", a)
    if out is not None:
        raise ShardcError("The 'out' argument to shardc.numpy.round is not supported.")
    dt = aval(a).dtype
    if dt == dtypes.bool_:
        raise ShardcError("round needs a numeric array, got a boolean one; convert it "
                          "with .astype(int) first")
    if dtypes.is_complex(dt):       # each part on its own, as jnp.round
        from ...ops import complex as cx
        return cx.complex_p.bind(round(cx.real_p.bind(a), decimals),
                                 round(cx.imag_p.bind(a), decimals))
    if not dtypes.is_float(dt):
        if decimals < 0:
            raise ShardcError("round of integers with decimals < 0 is not supported")
        return a
    if decimals == 0:
        return ew.round_p.bind(a)
    x = convert(a, dtypes.float32) if dt == dtypes.float16 else a
    factor = _const_like(x, 10 ** decimals)
    out = ew.div_p.bind(ew.round_p.bind(ew.mul_p.bind(x, factor)), factor)
    return convert(out, dt, aval(a).weak) if dt == dtypes.float16 else out


_const_like = const_like


around = round


def negative(x, /):
    check_arraylike("negative", x)
    (x,) = promote_args("negative", x)
    return ew.neg_p.bind(x)


def positive(x, /):
    return x


def abs(x, /):
    check_arraylike("abs", x)
    a = aval(x)
    if a.dtype == dtypes.bool_ or (dtypes.is_int(a.dtype) and not dtypes.is_signed(a.dtype)):
        return x
    return ew.abs_p.bind(x)


absolute = abs


def sign(x, /):
    check_arraylike("sign", x)
    (x,) = promote_args("sign", x)
    return ew.sign_p.bind(x)


def square(x, /):
    check_arraylike("square", x)
    (x,) = promote_args_numeric("square", x)
    return pw.square_p.bind(x)


def reciprocal(x, /):
    """1 / x in floating point (integer_pow(x, -1), as jnp.reciprocal)."""
    check_arraylike("reciprocal", x)
    (x,) = promote_dtypes_inexact(x)
    return pw.integer_pow_p.bind(x, y=-1)


def isnan(x, /):
    """x != x (as jnp.isnan); for integers XLA folds that to a constant, so it is one."""
    check_arraylike("isnan", x)
    (x,) = promote_args("isnan", x)
    if not dtypes.is_inexact(aval(x).dtype):
        return full_like_bool(x, False, aval(x).weak)
    return ew.ne_p.bind(x, x)


def isfinite(x, /):
    check_arraylike("isfinite", x)
    if dtypes.is_complex(aval(x).dtype):      # both parts finite (as jnp)
        from ._complex import imag, real
        return logical_and(isfinite(real(x)), isfinite(imag(x)))
    if not dtypes.is_float(aval(x).dtype):
        return full_like_bool(x, True)
    return ew.is_finite_p.bind(x)


def isinf(x, /):
    check_arraylike("isinf", x)
    if dtypes.is_complex(aval(x).dtype):      # either part infinite (as jnp)
        from ._complex import imag, real
        return logical_or(isinf(real(x)), isinf(imag(x)))
    if not dtypes.is_float(aval(x).dtype):
        return full_like_bool(x, False)
    return ew.eq_p.bind(ew.abs_p.bind(x), _const_like(x, float("inf")))


def full_like_bool(x, value, weak=False):
    """A boolean constant of x's shape (lax.full_like(x, value, bool) is not weak)."""
    from ...trace.core import _scalar
    from ...ir.program import Aval, Lit
    from ._creation import full
    a = aval(x)
    return full(a.shape, Lit(_scalar(value, dtypes.bool_), Aval((), dtypes.bool_, weak)))


def _binary(prim, name, promote=promote_args):
    def f(x, y, /):
        x, y = promote(name, x, y)
        return prim.bind(x, y)
    f.__name__ = name
    f.__doc__ = f"Elementwise {name} (as jax.numpy.{name})."
    return f


def _bool_as(prim, bool_prim, name):
    """add/multiply: on booleans they are or/and (as jnp)."""
    def f(x, y, /):
        x, y = promote_args(name, x, y)
        return (bool_prim if aval(x).dtype == dtypes.bool_ else prim).bind(x, y)
    f.__name__ = name
    f.__doc__ = f"Elementwise {name} (as jax.numpy.{name})."
    return f


add = _bool_as(ew.add_p, ew.or_p, "add")
subtract = _binary(ew.sub_p, "subtract")
multiply = _bool_as(ew.mul_p, ew.and_p, "multiply")
maximum = _binary(ew.max_p, "maximum")
minimum = _binary(ew.min_p, "minimum")
arctan2 = _binary(ew.atan2_p, "arctan2", promote_args_inexact)
equal = _binary(ew.eq_p, "equal")
not_equal = _binary(ew.ne_p, "not_equal")


def _ordered(prim, name):
    """An order comparison; complex numbers compare lexicographically (real parts, then
    imaginary parts where the real parts tie), as jnp's (XLA has no complex order)."""
    def f(x, y, /):
        x, y = promote_args(name, x, y)
        if not dtypes.is_complex(aval(x).dtype):
            return prim.bind(x, y)
        from ...ops import complex as cx
        xr, yr = cx.real_p.bind(x), cx.real_p.bind(y)
        return ew.select_p.bind(ew.eq_p.bind(xr, yr),
                                prim.bind(cx.imag_p.bind(x), cx.imag_p.bind(y)),
                                prim.bind(xr, yr))
    f.__name__ = name
    f.__doc__ = f"Elementwise {name} (as jax.numpy.{name})."
    return f


less = _ordered(ew.lt_p, "less")
less_equal = _ordered(ew.le_p, "less_equal")
greater = _ordered(ew.gt_p, "greater")
greater_equal = _ordered(ew.ge_p, "greater_equal")


def _bool_binary(prim, name):
    def f(x, y, /):
        x, y = promote_args(name, x, y)
        if not (dtypes.is_int(aval(x).dtype) or aval(x).dtype == dtypes.bool_):
            raise ShardcError(f"{name} needs boolean or integer arrays, got {aval(x)}")
        return prim.bind(x, y)
    f.__name__ = name
    return f


bitwise_and = _bool_binary(ew.and_p, "bitwise_and")
bitwise_or = _bool_binary(ew.or_p, "bitwise_or")
bitwise_xor = _bool_binary(ew.xor_p, "bitwise_xor")


def bitwise_not(x, /):
    check_arraylike("bitwise_not", x)
    return ew.not_p.bind(x)


invert = bitwise_not


def _to_bool(x):
    return x if aval(x).dtype == dtypes.bool_ else not_equal(x, 0)


def _to_bool_lax(x):
    return x if aval(x).dtype == dtypes.bool_ else ew.ne_p.bind(as_lit(x), lax_const(x, 0))


def _logical(prim, name):
    """Promote, then compare each argument with 0 (as jnp's logical ufuncs)."""
    def f(*xs):
        return prim.bind(*map(_to_bool_lax, promote_args(name, *xs)))
    f.__name__ = name
    return f


logical_and = _logical(ew.and_p, "logical_and")
logical_or = _logical(ew.or_p, "logical_or")
logical_xor = _logical(ew.xor_p, "logical_xor")


def logical_not(x, /):
    check_arraylike("logical_not", x)
    return _logical(ew.not_p, "logical_not")(x)


def divide(x, y, /):
    """True division: integers divide as floats (as jnp.divide)."""
    x, y = promote_args_inexact("divide", x, y)
    return ew.div_p.bind(x, y)


true_divide = divide


def floor_divide(x, y, /):
    """Division rounded down (Python's //), built as jnp.floor_divide builds it."""
    x, y = promote_args_numeric("floor_divide", x, y)
    dt = aval(x).dtype
    if dtypes.is_complex(dt):
        raise ShardcTypeError("floor_divide does not support complex-valued inputs")
    if dtypes.is_float(dt):
        return _float_divmod(x, y)[0]
    if not dtypes.is_signed(dt):
        return ew.div_p.bind(x, y)
    # C division truncates; step down where signs differ and there is a remainder
    q = ew.div_p.bind(x, y)
    select = logical_and(not_equal(ew.sign_p.bind(x), ew.sign_p.bind(y)),
                         not_equal(ew.rem_p.bind(x, y), 0))
    return where(select, subtract(q, 1), q)


def _float_divmod(x, y):
    """CPython's float_divmod (as jax): the quotient rounded, and a modulo of y's sign."""
    mod = ew.rem_p.bind(x, y)
    x_corrected = where(equal(y, 0), x, ew.sub_p.bind(x, mod))
    div = ew.div_p.bind(x_corrected, y)
    ind = ew.and_p.bind(not_equal(mod, 0), not_equal(ew.sign_p.bind(y), ew.sign_p.bind(mod)))
    mod = ew.select_p.bind(ind, add(mod, y), mod)
    div = ew.select_p.bind(ind, subtract(div, 1.0), div)
    return ew.round_afz_p.bind(div), mod


def _ones_like(x):
    """lax.full_like(x, 1): x's shape, dtype and weak type."""
    from ...trace.core import _scalar
    from ...ir.program import Aval, Lit
    from ._creation import full
    a = aval(x)
    return full(a.shape, Lit(_scalar(1, a.dtype), Aval((), a.dtype, a.weak)))


def remainder(x, y, /):
    """Python-style modulo: the result has the sign of the divisor (as jnp.remainder)."""
    x, y = promote_args_numeric("remainder", x, y)
    _no_complex("rem", x)
    zero = _const_like(x, 0)
    if dtypes.is_int(aval(y).dtype):
        y = where(equal(y, 0), _ones_like(y), y)
    trunc_mod = ew.rem_p.bind(x, y)
    not_zero = ew.ne_p.bind(trunc_mod, zero)
    do_plus = ew.and_p.bind(ew.ne_p.bind(ew.lt_p.bind(trunc_mod, zero), ew.lt_p.bind(y, zero)),
                            not_zero)
    return ew.select_p.bind(do_plus, ew.add_p.bind(trunc_mod, y), trunc_mod)


mod = remainder


def fmod(x, y, /):
    """C-style modulo: the result has the sign of the dividend (as jnp.fmod)."""
    check_arraylike("fmod", x, y)
    if dtypes.is_int(result_type(x, y)[0]):
        y = where(equal(y, 0), _ones_like(y), y)
    x, y = promote_args_numeric("fmod", x, y)
    _no_complex("rem", x)
    return ew.rem_p.bind(x, y)


def _no_complex(name, x):
    """lax.rem's dtype check (XLA:CPU aborts on a complex remainder's comparisons)."""
    dt = aval(x).dtype
    if dtypes.is_complex(dt):
        raise ShardcTypeError(f"{name} does not accept dtype {np.dtype(dt).name} at position "
                              "0. Accepted dtypes at position 0 are subtypes of integer, "
                              "floating.")


def power(x, y, /):
    """x ** y as jnp.power: a static integer exponent multiplies (integer_pow); integer
    arrays use binary exponentiation; float bases take integer exponents as they are."""
    check_arraylike("power", x, y)
    if isinstance(y, (int, np.integer)) and not isinstance(y, (bool, np.bool_)):
        (x,) = promote_dtypes_numeric(x)
        if y < 0 and not dtypes.is_inexact(aval(x).dtype):
            raise ShardcError(f"integers cannot be raised to negative powers, got "
                              f"power({aval(x)}, {int(y)}); convert to float first")
        return pw.integer_pow_p.bind(x, y=int(y))
    x, y = promote_shapes("power", x, y)
    xn, yn = promote_dtypes_numeric(x, y)
    if not dtypes.is_inexact(aval(xn).dtype):
        return _pow_int_int(xn, yn)
    if dtypes.is_inexact(aval(x).dtype) and dtypes.is_int(aval(y).dtype):
        x, y = as_lit(x), as_lit(y)
        return ew.pow_p.bind(x, y)
    return ew.pow_p.bind(xn, yn)


def _pow_int_int(x, y):
    """Integer power by unrolled binary exponentiation over 6 bits (as jax)."""
    zero, one = _const_like(y, 0), _const_like(y, 1)
    acc = where(ew.and_p.bind(ew.eq_p.bind(x, zero), ew.ne_p.bind(y, zero)), zero, one)
    for _ in range(6):
        acc = where(ew.and_p.bind(y, one), ew.mul_p.bind(acc, x), acc)
        x = ew.mul_p.bind(x, x)
        y = ew.shift_right_logical_p.bind(y, one)
    return acc


pow = power


def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """Choose x where condition, else y (the three-argument form), as jnp.where: all
    three broadcast to one shape (a rank-0 condition leaves x and y as they are)."""
    if x is None and y is None and size is not None:
        from . import _names  # noqa: F401  (nonzero, when the sort family provides it)
        from .. import numpy as snp
        if hasattr(snp, "nonzero"):
            return snp.nonzero(condition, size=size, fill_value=fill_value)
    if size is not None or fill_value is not None:
        if x is not None or y is not None:
            raise ShardcError("size= and fill_value= go with the one-argument where")
    if x is None or y is None:
        raise ShardcError("shardc.numpy.where needs three arguments; the one-argument "
                          "form has a data-dependent shape")
    check_arraylike("where", condition, x, y)
    if aval(condition).dtype != dtypes.bool_:
        condition = ew.ne_p.bind(as_lit(condition), zero_scalar(condition))
    x, y = promote_dtypes(x, y)
    from ._util import broadcast_shapes, broadcast_to, shape
    if not shape(condition):
        target = broadcast_shapes("where", shape(x), shape(y))
        x, y = (broadcast_to(v, target) for v in (x, y))
    else:
        target = broadcast_shapes("where", shape(condition), shape(x), shape(y))
        condition, x, y = (broadcast_to(v, target) for v in (condition, x, y))
    return ew.select_p.bind(condition, x, y)


def clip(a, min=None, max=None):
    """Clamp to [min, max] with maximum/minimum (as jnp.clip)."""
    check_arraylike("clip", a)
    if min is not None:
        a = maximum(min, a)
    if max is not None:
        a = minimum(max, a)
    return a


# jax.numpy's ufunc objects: the functions above as their calls, with jax's identities and
# the fast paths of their methods (add.reduce is a sum, add.at a scatter-add, ...)
add = _um.builtin(add, 2, 0, reduce=_um.add_reduce, accumulate=_um.add_accumulate,
                  at=_um.add_at)
multiply = _um.builtin(multiply, 2, 1, reduce=_um.multiply_reduce,
                       accumulate=_um.multiply_accumulate, at=_um.multiply_at)
subtract = _um.builtin(subtract, 2, at=_um.subtract_at)
maximum = _um.builtin(maximum, 2, reduce=_um.maximum_reduce)
minimum = _um.builtin(minimum, 2, reduce=_um.minimum_reduce)
bitwise_and = _um.builtin(bitwise_and, 2, -1, reduce=_um.bitwise_and_reduce)
bitwise_or = _um.builtin(bitwise_or, 2, 0, reduce=_um.bitwise_or_reduce)
bitwise_xor = _um.builtin(bitwise_xor, 2, 0, reduce=_um.bitwise_xor_reduce)
logical_and = _um.builtin(logical_and, 2, True, reduce=_um.logical_and_reduce)
logical_or = _um.builtin(logical_or, 2, False, reduce=_um.logical_or_reduce)
logical_xor = _um.builtin(logical_xor, 2, False, reduce=_um.logical_xor_reduce)
negative = _um.builtin(negative, 1)
