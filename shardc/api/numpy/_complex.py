"""shardc.numpy's complex functions, the small and complex dtypes' names, iinfo/finfo and
elementwise functions on top of lax's newer ops (cbrt, exp2, nextafter), as
jax.numpy's."""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ...errors import ShardcError
from ...ir.program import Aval, Lit
from ...trace import core
from ...ir import dtypes
from ...ops import complex as cx
from ...ops import elementwise as ew
from ...ops import numeric as nu
from ._floatbits import frexp, spacing  # noqa: F401  (re-exported)
from ._names import _scalar_type
from ._util import aval, check_arraylike, const_like, convert, promote_args_inexact

float8_e4m3fn, float8_e5m2 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2
float8_e4m3fnuz, float8_e5m2fnuz = ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2fnuz
float8_e4m3b11fnuz, float8_e3m4 = ml_dtypes.float8_e4m3b11fnuz, ml_dtypes.float8_e3m4
float8_e4m3, float8_e8m0fnu = ml_dtypes.float8_e4m3, ml_dtypes.float8_e8m0fnu
float4_e2m1fn = ml_dtypes.float4_e2m1fn
int2, uint2, int4, uint4 = ml_dtypes.int2, ml_dtypes.uint2, ml_dtypes.int4, ml_dtypes.uint4
complex64 = csingle = _scalar_type("complex64", np.complex64)
complex128 = cdouble = complex_ = _scalar_type("complex128", np.complex128)


def iinfo(int_type):
    """Machine limits of an integer dtype (int4 and int2 included), as jnp.iinfo."""
    return ml_dtypes.iinfo(_dtype_of(int_type))


def finfo(dtype):
    """Machine limits of a float dtype (float8s and bfloat16 included), as jnp.finfo;
    a complex dtype gives its parts' limits."""
    return ml_dtypes.finfo(dtypes.real_dtype(_dtype_of(dtype)))


def _dtype_of(x):
    if isinstance(x, (np.dtype, type, str)):
        return np.dtype(x)
    return np.dtype(getattr(x, "dtype", None) or np.asarray(x).dtype)


def iscomplexobj(x):
    """Whether x has a complex dtype (a Python bool, as jnp.iscomplexobj)."""
    if x is None:
        return False
    if isinstance(x, complex):
        return True
    dt = getattr(x, "dtype", None)
    if dt is None:
        dt = aval(x).dtype
    return dtypes.is_complex(np.dtype(dt))


def isrealobj(x):
    return not iscomplexobj(x)


def real(val, /):
    check_arraylike("real", val)
    return cx.real_p.bind(val) if iscomplexobj(val) else _asarray(val)


def imag(val, /):
    check_arraylike("imag", val)
    if iscomplexobj(val):
        return cx.imag_p.bind(val)
    from ...ops import lax as L
    return L.zeros_like(_asarray(val))


def conjugate(x, /):
    check_arraylike("conjugate", x)
    return cx.conj_p.bind(x) if iscomplexobj(x) else _asarray(x)


conj = conjugate


def _asarray(x):
    from ._creation import asarray
    return asarray(x)


def angle(z, deg=False):
    """The argument of z: atan2(imag(z), real(z)), in the inexact dtype (as jnp.angle)."""
    check_arraylike("angle", z)
    re, im = real(z), imag(z)
    dt = aval(re).dtype
    if not dtypes.is_float(dt) or (dtypes.is_float(aval(z).dtype) and aval(z).ndim == 0):
        dt = dt if dtypes.is_float(dt) else dtypes.default_float()
        re, im = convert(re, dt), convert(im, dt)     # strongly typed, as jnp's
    out = ew.atan2_p.bind(im, re)
    return ew.mul_p.bind(out, const_like(out, 180 / np.pi)) if deg else out


def iscomplex(x):
    i = imag(x)
    return ew.ne_p.bind(i, const_like(i, 0))


def isreal(x):
    i = imag(x)
    return ew.eq_p.bind(i, const_like(i, 0))


def _real_float(name, x):
    if dtypes.is_complex(aval(x).dtype):
        raise ShardcError(f"{name} does not accept complex arrays, got {aval(x)}")
    return x


def cbrt(x, /):
    (x,) = promote_args_inexact("cbrt", x)
    return nu.cbrt_p.bind(_real_float("cbrt", x))


def exp2(x, /):
    """2 ** x as exp(log(2) * x) (jax lowers lax.exp2 so); weak if x is."""
    (x,) = promote_args_inexact("exp2", x)
    a = aval(x)
    two = Lit(core._scalar(2, a.dtype), Aval((), a.dtype, a.weak))
    return ew.exp_p.bind(ew.mul_p.bind(ew.log_p.bind(two), x))


def nextafter(x, y, /):
    x, y = promote_args_inexact("nextafter", x, y)
    return nu.nextafter_p.bind(_real_float("nextafter", x), y)



__all__ = [
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e4m3b11fnuz",
    "float8_e3m4", "float8_e4m3", "float8_e8m0fnu", "float4_e2m1fn", "int2", "uint2", "int4",
    "uint4", "complex64", "complex128", "csingle", "cdouble", "complex_",
    "iinfo", "finfo", "iscomplexobj", "isrealobj", "real", "imag", "conjugate", "conj", "angle",
    "iscomplex", "isreal", "cbrt", "exp2", "nextafter", "frexp", "spacing",
]
