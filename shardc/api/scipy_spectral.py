"""shardc.scipy.signal, part 2: windowed FFTs (stft, istft) and Welch's spectral
estimates (csd, welch), as jax.scipy.signal's: the signal is cut into overlapping
segments (a vmapped dynamic_slice), each detrended, windowed and transformed; istft
inverts by overlap-add with the squared window's sum as the normalizer."""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..errors import ArgumentError, TracerError, wrap_public
from ..ir import dtypes
from ..trace import core
from . import numpy as snp
from .lax_sorting import dynamic_slice_in_dim
from .numpy._util import aval, check_arraylike, promote_dtypes_inexact
from .scipy_signal import _canon_axis, detrend

__all__ = ["csd", "istft", "stft", "welch"]


def _static_int(v, what):
    if core.is_tracer(v):
        raise TracerError(f"{what} must be a static Python int (it decides a shape), got a "
                          "traced value; pass it as a static argument")
    return int(v)


def _hann(n):
    """The periodic Hann window sin(pi k / n)^2, computed on device as jax's."""
    if n == 1:
        return snp.array([1.0])
    return snp.sin(snp.linspace(0, np.pi, n, endpoint=False)) ** 2


def _named_window(window, n, dtype):
    if isinstance(window, str) and window == "hann":
        return snp.asarray(_hann(n), dtype=dtype)
    try:        # as jax: other named windows come from SciPy, if installed
        from scipy.signal import get_window
    except ImportError as err:
        raise ImportError(f"scipy must be available to use window={window!r}") from err
    return snp.array(get_window(window, n), dtype=dtype)


def _triage_segments(window, nperseg, input_length, dtype):
    """(window array, segment length) from a window name/tuple or array."""
    if isinstance(window, (str, tuple)):
        n = input_length if nperseg is None else int(nperseg)
        if n > input_length:
            warnings.warn(f"nperseg={n} is greater than input_length={input_length}, using "
                          f"nperseg={input_length}")
            n = input_length
        return _named_window(window, n, dtype), n
    win = snp.asarray(window, dtype=dtype)
    wa = aval(win)
    n = math.prod(wa.shape) if nperseg is None else int(nperseg)
    if wa.ndim != 1:
        raise ArgumentError("window must be 1-D")
    if input_length < wa.shape[0]:
        raise ArgumentError("window is longer than input signal")
    if n != wa.shape[0]:
        raise ArgumentError("value specified for nperseg is different from length of window")
    return win, n


def _median_bias(n):
    """The median's bias relative to the mean over n periodograms (Allen et al. 2012)."""
    ii = snp.arange(2.0, n, 2)
    return 1 + snp.sum(1.0 / (ii + 1) - 1.0 / ii)


def _odd_ext(x, n, axis=-1):
    if n < 1:
        return x
    nd = aval(x).ndim
    axis %= nd
    size = aval(x).shape[axis]
    if n > size - 1:
        raise ArgumentError(f"The extension length n ({n}) is too big. It must not exceed "
                         f"x.shape[axis]-1, which is {size - 1}.")

    def part(lo, hi):
        return x[(slice(None),) * axis + (slice(lo, hi),)]
    left = 2 * part(0, 1) - snp.flip(part(1, n + 1), axis=axis)
    right = 2 * part(-1, None) - snp.flip(part(-(n + 1), -1), axis=axis)
    return snp.concatenate((left, x, right), axis=axis)


def _pad_fn(mode, **kw):
    def pad(x, n, axis=-1):
        width = [(0, 0)] * aval(x).ndim
        width[axis] = (n, n)
        return snp.pad(x, width, mode, **kw)
    return pad


_BOUNDARY = {"even": _pad_fn("reflect"), "odd": _odd_ext, "constant": _pad_fn("edge"),
             "zeros": _pad_fn("constant", constant_values=0.0), None: lambda x, *a, **k: x}


def _fft_helper(x, win, detrend_func, nperseg, noverlap, nfft, sides):
    """The windowed FFT of each segment: (..., segments, frequencies)."""
    from .vmap import vmap
    *batch, length = aval(x).shape
    if nperseg == 1 and noverlap == 0:
        segs = x[..., None]
    else:
        starts = snp.arange(0, length - nperseg + 1, nperseg - noverlap)
        segs = vmap(lambda s: dynamic_slice_in_dim(x, s, nperseg, axis=-1),
                    out_axes=-2)(starts)
    segs = detrend_func(segs)
    if snp.iscomplexobj(win):
        segs = snp.asarray(segs, dtype=dtypes.complex_dtype(aval(segs).dtype))
    segs = snp.reshape(win, (1,) * len(batch) + (1, nperseg)) * segs
    if sides == "twosided":
        return snp.fft.fft(segs, n=nfft)
    return snp.fft.rfft(snp.real(segs), n=nfft)


def _detrend_func(detrend_type, axis):
    if isinstance(detrend_type, str):
        return lambda d: detrend(d, type=detrend_type, axis=-1)
    if callable(detrend_type):
        if axis != -1:      # as jax: the user's function sees `axis` where it expects it
            return lambda d: snp.moveaxis(detrend_type(snp.moveaxis(d, axis, -1)), -1, axis)
        return detrend_type
    if not detrend_type:
        return lambda d: d
    raise ArgumentError(f"Unsupported detrend type: {detrend_type}")


def _spectral_helper(x, y, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
                     detrend_type="constant", return_onesided=True, scaling="density",
                     axis=-1, mode="psd", boundary=None, padded=False):
    """(freqs, times, result) of jax's _spectral_helper; y=None: the auto-spectrum."""
    if mode not in ("psd", "stft"):
        raise ArgumentError(f"Unknown value for mode {mode}, must be one of: ('psd', 'stft')")
    if boundary not in _BOUNDARY:
        raise ArgumentError(f"Unknown boundary option '{boundary}', must be one of: "
                         f"{list(_BOUNDARY)}")
    axis = _canon_axis(_static_int(axis, "axis of windowed-FFT"), aval(x).ndim,
                       "spectral")
    if y is None:
        check_arraylike("spectral_helper", x)
        x, = promote_dtypes_inexact(x)
        outer = tuple(s for i, s in enumerate(aval(x).shape) if i != axis)
    else:
        if mode != "psd":
            raise ArgumentError("two-argument mode is available only when mode=='psd'")
        check_arraylike("spectral_helper", x, y)
        x, y = promote_dtypes_inexact(x, y)
        if aval(x).ndim != aval(y).ndim:
            raise ArgumentError(f"two-arguments must have the same rank ({aval(x).ndim} vs "
                             f"{aval(y).ndim}).")
        try:
            outer = np.broadcast_shapes(
                tuple(s for i, s in enumerate(aval(x).shape) if i != axis),
                tuple(s for i, s in enumerate(aval(y).shape) if i != axis))
        except ValueError as err:
            raise ArgumentError("x and y cannot be broadcast together.") from err
    result_dtype = dtypes.complex_dtype(aval(x).dtype)
    freq_dtype = np.finfo(result_dtype).dtype
    if nperseg is not None:
        nperseg = _static_int(nperseg, "nperseg of windowed-FFT")
        if nperseg < 1:
            raise ArgumentError("nperseg must be a positive integer")
    win, nperseg = _triage_segments(window, nperseg, aval(x).shape[axis], aval(x).dtype)
    noverlap = nperseg // 2 if noverlap is None else \
        _static_int(noverlap, "noverlap of windowed-FFT")
    nfft = nperseg if nfft is None else _static_int(nfft, "nfft of windowed-FFT")
    xs = aval(x).shape
    if y is None and math.prod(xs) == 0:
        return (snp.zeros(xs, freq_dtype), snp.zeros(xs, freq_dtype),
                snp.zeros(xs, result_dtype))
    if y is not None and (math.prod(xs) == 0 or math.prod(aval(y).shape) == 0):
        shape = list(outer)
        shape.insert(axis, min(xs[axis], aval(y).shape[axis]))
        return tuple(snp.zeros(tuple(shape), d) for d in (freq_dtype, freq_dtype,
                                                          result_dtype))
    x = snp.moveaxis(x, axis, -1)
    if y is not None and aval(y).ndim > 1:
        y = snp.moveaxis(y, axis, -1)
    if y is not None and aval(x).shape[-1] != aval(y).shape[-1]:   # zero-pad the shorter
        nx, ny = aval(x).shape[-1], aval(y).shape[-1]
        if nx < ny:
            x = snp.concatenate((x, snp.zeros(aval(x).shape[:-1] + (ny - nx,),
                                              aval(x).dtype)), -1)
        else:
            y = snp.concatenate((y, snp.zeros(aval(y).shape[:-1] + (nx - ny,),
                                              aval(x).dtype)), -1)
    if nfft < nperseg:
        raise ArgumentError("nfft must be greater than or equal to nperseg.")
    if noverlap >= nperseg:
        raise ArgumentError("noverlap must be less than nperseg.")
    nstep = nperseg - noverlap
    if boundary is not None:
        ext = _BOUNDARY[boundary]
        x = ext(x, nperseg // 2, axis=-1)
        if y is not None:
            y = ext(y, nperseg // 2, axis=-1)
    if padded:      # a whole number of segments
        nadd = (-(aval(x).shape[-1] - nperseg) % nstep) % nperseg
        x = snp.concatenate((x, snp.zeros(aval(x).shape[:-1] + (nadd,), aval(x).dtype)), -1)
        if y is not None:
            y = snp.concatenate((y, snp.zeros(aval(y).shape[:-1] + (nadd,), aval(x).dtype)),
                                -1)
    detrend_func = _detrend_func(detrend_type, axis)
    if scaling == "density":
        scale = 1.0 / (fs * snp.sum(win * win))
    elif scaling == "spectrum":
        scale = 1.0 / snp.sum(win) ** 2
    else:
        raise ArgumentError(f"Unknown scaling: {scaling}")
    if mode == "stft":
        scale = snp.sqrt(scale)
    scale = snp.asarray(scale, dtype=dtypes.complex_dtype(aval(scale).dtype))
    sides = "onesided" if return_onesided else "twosided"
    if return_onesided and (snp.iscomplexobj(x) or (y is not None and snp.iscomplexobj(y))):
        sides = "twosided"
        warnings.warn("Input data is complex, switching to return_onesided=False")
    if sides == "twosided":
        freqs = snp.fft.fftfreq(nfft, 1 / fs, dtype=freq_dtype)
    else:
        freqs = snp.fft.rfftfreq(nfft, 1 / fs, dtype=freq_dtype)
    result = _fft_helper(x, win, detrend_func, nperseg, noverlap, nfft, sides)
    if y is not None:
        result = snp.conjugate(result) * _fft_helper(y, win, detrend_func, nperseg,
                                                     noverlap, nfft, sides)
    elif mode == "psd":
        result = snp.conjugate(result) * result
    result = result * scale
    if sides == "onesided" and mode == "psd":    # fold the negative frequencies' power in
        result = result.at[..., 1:None if nfft % 2 else -1].multiply(2)
    time = snp.arange(nperseg / 2, aval(x).shape[-1] - nperseg / 2 + 1, nperseg - noverlap,
                      dtype=freq_dtype) / fs
    if boundary is not None:
        time = time - (nperseg / 2) / fs
    result = snp.asarray(result, dtype=result_dtype)
    if y is None and mode != "stft":
        result = snp.real(result)
    return freqs, time, snp.moveaxis(result, -1, axis)


def stft(x, fs=1.0, window="hann", nperseg=256, noverlap=None, nfft=None, detrend=False,
         return_onesided=True, boundary="zeros", padded=True, axis=-1):
    """Short-time Fourier transform (f, t, Zxx), as jax.scipy.signal.stft."""
    return _spectral_helper(x, None, fs, window, nperseg, noverlap, nfft, detrend,
                            return_onesided, scaling="spectrum", axis=axis, mode="stft",
                            boundary=boundary, padded=padded)


def csd(x, y, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
        detrend="constant", return_onesided=True, scaling="density", axis=-1,
        average="mean"):
    """Cross power spectral density by Welch's method (f, Pxy), as
    jax.scipy.signal.csd; y=None: the PSD of x."""
    freqs, _, pxy = _spectral_helper(x, y, fs, window, nperseg, noverlap, nfft, detrend,
                                     return_onesided, scaling, axis, mode="psd")
    if y is not None:
        pxy = pxy + 0j
    shape = aval(pxy).shape
    if len(shape) >= 2 and math.prod(shape) > 0:
        if shape[-1] > 1:
            if average == "median":
                bias = snp.asarray(_median_bias(shape[-1]), dtype=aval(pxy).dtype)
                if snp.iscomplexobj(pxy):
                    pxy = (snp.median(snp.real(pxy), axis=-1)
                           + 1j * snp.median(snp.imag(pxy), axis=-1))
                else:
                    pxy = snp.median(pxy, axis=-1)
                pxy = pxy / bias
            elif average == "mean":
                pxy = snp.mean(pxy, axis=-1)
            else:
                raise ArgumentError(f'average must be "median" or "mean", got {average}')
        else:
            pxy = snp.reshape(pxy, shape[:-1])
    return freqs, pxy


def welch(x, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          detrend="constant", return_onesided=True, scaling="density", axis=-1,
          average="mean"):
    """Power spectral density by Welch's method (f, Pxx), as jax.scipy.signal.welch."""
    freqs, pxx = csd(x, None, fs=fs, window=window, nperseg=nperseg, noverlap=noverlap,
                     nfft=nfft, detrend=detrend, return_onesided=return_onesided,
                     scaling=scaling, axis=axis, average=average)
    return freqs, snp.real(pxx)


def _overlap_and_add(x, step):
    """Sum frames (..., frames, frame_length) overlapped by `step` into one signal, by
    tf.signal.overlap_and_add's reshaping trick (no scatter)."""
    *batch, nframes, seglen = aval(x).shape
    nb = math.prod(batch)
    x = snp.reshape(x, (nb, nframes, seglen))
    out_size = step * (nframes - 1) + seglen
    nsteps = 1 + (seglen - 1) // step
    x = snp.pad(x, ((0, 0), (0, 0), (0, nsteps * step - seglen)))
    x = snp.reshape(x, (nb, nframes, nsteps, step)).transpose((0, 2, 1, 3))
    # reading the rows with one fewer frame each shifts row j by j frames
    x = snp.pad(x, ((0, 0), (0, 0), (0, nframes), (0, 0)))
    shrunk = aval(x).shape[2] - 1
    x = snp.reshape(x, (nb, -1))[:, :nsteps * shrunk * step]
    x = snp.reshape(x, (nb, nsteps, shrunk * step))
    return snp.reshape(snp.sum(x, axis=1)[:, :out_size], tuple(batch) + (-1,))


def istft(Zxx, fs=1.0, window="hann", nperseg=None, noverlap=None, nfft=None,
          input_onesided=True, boundary=True, time_axis=-1, freq_axis=-2):
    """Inverse short-time Fourier transform (t, x), as jax.scipy.signal.istft."""
    check_arraylike("istft", Zxx)
    Zxx = snp.asarray(Zxx)
    nd = aval(Zxx).ndim
    if nd < 2:
        raise ArgumentError("Input stft must be at least 2d!")
    freq_axis = _canon_axis(freq_axis, nd, "istft")
    time_axis = _canon_axis(time_axis, nd, "istft")
    if freq_axis == time_axis:
        raise ArgumentError("Must specify differing time and frequency axes!")
    Zxx = snp.asarray(Zxx, dtype=dtypes.complex_dtype(aval(Zxx).dtype))
    nfreq = aval(Zxx).shape[freq_axis]
    n_default = 2 * (nfreq - 1) if input_onesided else nfreq
    nperseg_int = _static_int(nperseg or n_default, "nperseg: segment length of STFT")
    if nperseg_int < 1:
        raise ArgumentError("nperseg must be a positive integer")
    if nfft is None:
        nfft_int = n_default + (1 if input_onesided and nperseg_int == n_default + 1 else 0)
    else:
        nfft_int = _static_int(nfft, "nfft of STFT")
    if nfft_int < nperseg_int:
        raise ArgumentError(f"FFT length ({nfft_int}) must be longer than nperseg "
                         f"({nperseg_int}).")
    noverlap_int = _static_int(noverlap or nperseg_int // 2, "noverlap of STFT")
    if noverlap_int >= nperseg_int:
        raise ArgumentError("noverlap must be less than nperseg.")
    nstep = nperseg_int - noverlap_int
    if time_axis != nd - 1 or freq_axis != nd - 2:
        outer = tuple(i for i in range(nd) if i not in (time_axis, freq_axis))
        Zxx = snp.transpose(Zxx, outer + (freq_axis, time_axis))
    ifunc = snp.fft.irfft if input_onesided else snp.fft.ifft
    # (..., T, N): frames of length T; jax passes the user's nfft (None: the default)
    xsubs = ifunc(Zxx, axis=-2, n=nfft)[..., :nperseg_int, :]
    xdt = aval(xsubs).dtype
    if isinstance(window, (str, tuple)):
        win = _named_window(window, nperseg_int, xdt)
    else:
        win = snp.asarray(window)
        if aval(win).ndim != 1:
            raise ArgumentError("window must be 1-D")
        if aval(win).shape[0] != nperseg_int:
            raise ArgumentError(f"window must have length of {nperseg_int}")
    xsubs = xsubs * snp.sum(win)     # undoes stft's 'spectrum' scaling
    xnd = aval(xsubs).ndim
    win = snp.reshape(win, (1,) * (xnd - 2) + (nperseg_int, 1))
    x = _overlap_and_add(snp.swapaxes(xsubs * win, -2, -1), nstep)
    win_sq = snp.repeat(win * win, aval(xsubs).shape[-1], axis=-1)
    norm = _overlap_and_add(snp.swapaxes(win_sq, -2, -1), nstep)
    if boundary:     # drop stft's extension points
        h = nperseg_int // 2
        x, norm = x[..., h:-h], norm[..., h:-h]
    x = x / snp.where(norm > 1e-10, norm, 1.0)
    if aval(x).ndim > 1 and time_axis != nd - 1:
        if freq_axis < time_axis:
            time_axis -= 1
        x = snp.moveaxis(x, -1, time_axis)
    # (as jax: the length of x's first axis)
    time = snp.arange(aval(x).shape[0], dtype=np.finfo(aval(x).dtype).dtype) / fs
    return time, x


wrap_public(globals())
