"""shardc.lax's complex, bit-counting and precision functions, as jax.lax's."""
from __future__ import annotations

from ..ops import complex as cx
from ..ops import numeric as nu
from .numpy._util import aval


def real(x):
    return cx.real_p.bind(x)


def imag(x):
    return cx.imag_p.bind(x)


def conj(x):
    """The complex conjugate; a real x becomes complex first (as jax.lax.conj)."""
    from ..ir import dtypes
    from ..ops import lax as L
    a = aval(x)
    if not dtypes.is_complex(a.dtype):
        x = L.convert_element_type(x, dtypes.complex_dtype(a.dtype))
    return cx.conj_p.bind(x)


def complex(x, y):   # noqa: A001  (jax.lax's name)
    return cx.complex_p.bind(x, y)


def clz(x):
    return nu.clz_p.bind(x)


def population_count(x):
    return nu.population_count_p.bind(x)


def nextafter(x1, x2):
    return nu.nextafter_p.bind(x1, x2)


def cbrt(x):
    return nu.cbrt_p.bind(x)


def reduce_precision(operand, exponent_bits, mantissa_bits):
    return nu.reduce_precision(operand, exponent_bits, mantissa_bits)
