"""shardc.lax's complex, bit-counting and precision functions, as jax.lax's."""
from __future__ import annotations

import enum

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


def fft(x, fft_type, fft_lengths):
    """jax.lax.fft: fft_type "FFT", "IFFT", "RFFT", "IRFFT" (or jax.lax.FftType); the
    operand is converted to the transform's input dtype first, as jax's."""
    from .numpy.fft import _lax_fft
    name = getattr(fft_type, "name", fft_type)
    return _lax_fft(x, str(name).upper(), tuple(int(n) for n in fft_lengths))


class FftType(enum.IntEnum):
    """jax.lax.FftType's names and values."""
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


def exp2(x):
    """2 ** x (as jax.lax.exp2, which lowers to exp(log(2) * x))."""
    from ..ir.program import Aval, Lit
    from ..ops import elementwise as ew
    from ..trace import core
    a = aval(x)
    two = Lit(core._scalar(2, a.dtype), Aval((), a.dtype, a.weak))
    return ew.exp_p.bind(ew.mul_p.bind(ew.log_p.bind(two), x))


def bitcast_convert_type(operand, new_dtype):
    """operand's bits read as new_dtype (as jax.lax.bitcast_convert_type)."""
    from ..ops.bits import bitcast_convert_type_p
    from .numpy._util import canonical_dtype
    return bitcast_convert_type_p.bind(operand, new_dtype=canonical_dtype(new_dtype))
