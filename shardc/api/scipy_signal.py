"""shardc.scipy.signal, part 1: convolutions, correlations and detrend as
jax.scipy.signal's: direct convolutions are one lax.conv_general_dilated (the kernel
flipped, padded for the mode), fftconvolve multiplies (r)fftn spectra and slices the
mode's window out of the full result."""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError, ShardcNotImplementedError, wrap_public
from . import numpy as snp
from .conv import conv_general_dilated
from .lax_sorting import dynamic_slice
from .numpy._util import aval, check_arraylike, promote_dtypes_inexact

__all__ = ["fftconvolve", "convolve", "convolve2d", "correlate", "correlate2d", "detrend"]

_MODES = ("full", "same", "valid")


def _canon_axis(ax, ndim, name):
    ax = int(ax)
    if not -ndim <= ax < ndim:
        raise ArgumentError(f"{name}: axis {ax} is out of bounds for an array of {ndim} "
                          "dimensions")
    return ax % ndim


def fftconvolve(in1, in2, mode="full", axes=None):
    """N-d convolution by FFT, as jax.scipy.signal.fftconvolve."""
    check_arraylike("fftconvolve", in1, in2)
    in1, in2 = promote_dtypes_inexact(in1, in2)
    s1, s2 = aval(in1).shape, aval(in2).shape
    if len(s1) != len(s2):
        raise ArgumentError("in1 and in2 should have the same dimensionality")
    if mode not in _MODES:
        raise ArgumentError("mode must be one of ['same', 'full', 'valid']")

    def unbatched(a, b):
        return _fftconvolve_unbatched(a, b, mode)
    if axes is None:
        return unbatched(in1, in2)
    from .vmap import vmap
    axes = (axes,) if isinstance(axes, (int, np.integer)) else tuple(axes)
    axes = tuple(_canon_axis(a, len(s1), "fftconvolve") for a in axes)
    mapped = set(range(len(s1))) - set(axes)
    if any(s1[i] != s2[i] for i in mapped):
        raise ArgumentError(f"mapped axes must have same shape; got in1.shape={s1} "
                         f"in2.shape={s2} axes={axes}")
    fn = unbatched
    for ax in sorted(mapped):     # as jax: vmap over each axis not convolved
        fn = vmap(fn, in_axes=ax, out_axes=ax)
    return fn(in1, in2)


def _fftconvolve_unbatched(in1, in2, mode):
    s1, s2 = aval(in1).shape, aval(in2).shape
    full = tuple(a + b - 1 for a, b in zip(s1, s2))
    if mode == "valid":
        no_swap = all(a >= b for a, b in zip(s1, s2))
        swap = all(a <= b for a, b in zip(s1, s2))
        if not (no_swap or swap):
            raise ArgumentError("For 'valid' mode, One input must be at least as large as the "
                             "other in every dimension.")
        if swap:
            in1, in2, s1, s2 = in2, in1, s2, s1
    if all(a == 1 or b == 1 for a, b in zip(s1, s2)):
        conv = in1 * in2
    else:
        fft = snp.fft
        if snp.iscomplexobj(in1):
            conv = fft.ifftn(fft.fftn(in1, full) * fft.fftn(in2, full), full)
        else:
            conv = fft.irfftn(fft.rfftn(in1, full) * fft.rfftn(in2, full), full)
    if mode == "full":
        out = full
    elif mode == "same":
        out = s1
    else:
        out = tuple(a - b + 1 for a, b in zip(s1, s2))
    start = tuple((f - o) // 2 for f, o in zip(full, out))
    return dynamic_slice(conv, start, out)


def _convolve_nd(in1, in2, mode, *, precision):
    if mode not in _MODES:
        raise ArgumentError("mode must be one of ['full', 'same', 'valid']")
    s1, s2 = aval(in1).shape, aval(in2).shape
    if len(s1) != len(s2):
        raise ArgumentError("in1 and in2 must have the same number of dimensions")
    if 0 in s1 or 0 in s2:
        raise ArgumentError(f"zero-size arrays not supported in convolutions, got shapes {s1} "
                         f"and {s2}.")
    in1, in2 = promote_dtypes_inexact(in1, in2)
    no_swap = all(a >= b for a, b in zip(s1, s2))
    swap = all(a <= b for a, b in zip(s1, s2))
    if not (no_swap or swap):
        raise ArgumentError("One input must be smaller than the other in every dimension.")
    shape_o = s2
    if swap:
        in1, in2 = in2, in1
    shape = aval(in2).shape
    in2 = snp.flip(in2)          # conv_general_dilated correlates: flip for a convolution
    if mode == "valid":
        padding = [(0, 0)] * len(shape)
    elif mode == "same":
        padding = [(s - 1 - (so - 1) // 2, s - so + (so - 1) // 2)
                   for s, so in zip(shape, shape_o)]
    else:
        padding = [(s - 1, s - 1) for s in shape]
    out = conv_general_dilated(in1[None, None], in2[None, None], (1,) * len(shape), padding,
                               precision=precision)
    return out[0, 0]


def convolve(in1, in2, mode="full", method="auto", precision=None):
    """N-d convolution, as jax.scipy.signal.convolve."""
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    if method in ("direct", "auto"):
        return _convolve_nd(in1, in2, mode, precision=precision)
    raise ArgumentError(f"Got method={method!r}; expected 'auto', 'fft', or 'direct'.")


def _check_2d(name, in1, in2, boundary, fillvalue):
    if boundary != "fill" or fillvalue != 0:
        raise ShardcNotImplementedError(f"{name}() only supports boundary='fill', fillvalue=0")
    if np.ndim(in1) != 2 or np.ndim(in2) != 2:
        raise ArgumentError(f"{name}() only supports 2-dimensional inputs.")


def convolve2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """2-d convolution, as jax.scipy.signal.convolve2d."""
    _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    return _convolve_nd(in1, in2, mode, precision=precision)


def correlate(in1, in2, mode="full", method="auto", precision=None):
    """N-d cross-correlation, as jax.scipy.signal.correlate."""
    return convolve(in1, snp.flip(snp.conj(in2)), mode, precision=precision, method=method)


def correlate2d(in1, in2, mode="full", boundary="fill", fillvalue=0, precision=None):
    """2-d cross-correlation, as jax.scipy.signal.correlate2d: a convolution of the
    flipped operands, flipped back (the smaller one is the kernel)."""
    _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    s1, s2 = np.shape(in1), np.shape(in2)
    swap = all(a <= b for a, b in zip(s1, s2))
    same_shape = s1 == s2

    def conv(a, b):
        return _convolve_nd(a, b, mode, precision=precision)
    if mode == "same":
        return snp.flip(conv(snp.flip(in1), snp.conj(in2)))
    if mode == "valid":
        if swap and not same_shape:
            return conv(snp.flip(in2), snp.conj(in1))
        return snp.flip(conv(snp.flip(in1), snp.conj(in2)))
    if swap:
        return snp.conj(conv(snp.flip(in2), snp.conj(in1)))
    return snp.flip(conv(snp.flip(in1), snp.conj(in2)))


def detrend(data, axis=-1, type="linear", bp=0, overwrite_data=None):
    """Remove a constant or (piecewise) linear trend, as jax.scipy.signal.detrend: each
    piece's line is a least-squares fit."""
    if overwrite_data is not None:
        raise ShardcNotImplementedError("overwrite_data argument not implemented.")
    if type not in ("constant", "linear"):
        raise ArgumentError("Trend type must be 'linear' or 'constant'.")
    data, = promote_dtypes_inexact(snp.asarray(data))
    if type == "constant":
        return data - snp.mean(data, axis, keepdims=True)
    dt = aval(data).dtype
    n = aval(data).shape[axis]
    bps = np.sort(np.unique(np.r_[0, bp, n]))   # static breakpoints
    if bps[0] < 0 or bps[-1] > n:
        raise ArgumentError("Breakpoints must be non-negative and less than length of data "
                         "along given axis.")
    data = snp.moveaxis(data, axis, 0)
    shape = aval(data).shape
    data = snp.reshape(data, (n, -1))
    for lo, hi in zip(bps[:-1], bps[1:]):
        npts = hi - lo
        a = snp.vstack([snp.ones(npts, dtype=dt),
                        snp.arange(1, npts + 1, dtype=dt) / npts.astype(dt)]).T
        piece = slice(lo, hi)
        coef = snp.linalg.lstsq(a, data[piece])[0]
        data = data.at[piece].add(-snp.matmul(a, coef, precision="highest"))
    return snp.moveaxis(snp.reshape(data, shape), 0, axis)


wrap_public(globals())
