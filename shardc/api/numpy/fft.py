"""shardc.numpy.fft: jax.numpy.fft's functions over shardc's fft primitive."""
from __future__ import annotations

import operator

import numpy as np

from ...errors import ShardcError
from ...ir import dtypes
from ...ops import complex as cx
from ...ops import elementwise as ew
from ...ops import fft as F
from ...ops import lax as L
from ._util import aval, canonical_dtype, check_arraylike, const_like

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn",
           "ifftn", "rfftn", "irfftn", "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift",
           "ifftshift"]


def _lax_fft(x, fft_type, lengths):
    """jax.lax.fft: the operand converted (strongly) to the transform's input dtype."""
    a = aval(x)
    if fft_type == "RFFT":
        if dtypes.is_complex(a.dtype):
            raise ShardcError("rfft needs real input; got a complex array")
        dt = a.dtype if dtypes.is_float(a.dtype) else dtypes.default_float()
    else:
        real = a.dtype if dtypes.is_inexact(a.dtype) else dtypes.default_float()
        dt = dtypes.canonicalize(dtypes.complex_dtype(real))
    x = L.convert_element_type(x, dt, False)
    if not lengths:
        return x
    return F.fft(x, fft_type, lengths)


def _norm_factor(s, name, norm):
    if norm == "backward":
        return None
    n = float(np.prod(s))
    if norm == "ortho":
        return np.sqrt(n) if name.startswith("i") else 1 / np.sqrt(n)
    if norm == "forward":
        return n if name.startswith("i") else 1 / n
    raise ShardcError(f'Invalid norm value {norm}; should be "backward", "ortho" or '
                      '"forward".')


def _core_nd(arr, fft_type, s):
    """XLA transforms at most 3 dims: more go through FFT/IFFT passes (as jax)."""
    from ._shapes import moveaxis
    if len(s) <= 3:
        return _lax_fft(arr, fft_type, tuple(s))
    nd = aval(arr).ndim
    n = 2 if len(s) == 4 else 3
    src = tuple(range(nd - len(s), nd - n))
    dst = tuple(range(nd - len(s) + n, nd))
    if fft_type in ("RFFT", "FFT"):
        arr = _lax_fft(arr, fft_type, tuple(s)[-n:])
        arr = moveaxis(arr, src, dst)
        arr = _core_nd(arr, "FFT", s[:-n])
        return moveaxis(arr, dst, src)
    arr = moveaxis(arr, src, dst)
    arr = _core_nd(arr, "IFFT", s[:-n])
    arr = moveaxis(arr, dst, src)
    return _lax_fft(arr, fft_type, tuple(s)[-n:])


def _core(name, fft_type, a, s, axes, norm):
    from ._creation import asarray
    from ._shapes import moveaxis, pad
    check_arraylike(f"fft.{name}", a)
    arr = asarray(a)
    nd = aval(arr).ndim
    if s is not None:
        s = tuple(map(operator.index, s))
        if any(x <= 0 for x in s):
            raise ShardcError("fft: Shape should be positive.")
    if s is not None and axes is not None and len(s) != len(axes):
        raise ShardcError("fft: Shape and axes have different lengths.")
    orig_axes = axes
    if axes is None:
        axes = range(nd) if s is None else range(nd - len(s), nd)
    axes = tuple(axes)
    if len(axes) != len(set(axes)):
        raise ShardcError(f"fft.{name} does not support repeated axes. Got axes {axes}.")
    if orig_axes is not None:
        axes = tuple(range(nd - len(axes), nd))
        arr = moveaxis(arr, orig_axes, axes)
    shape = aval(arr).shape
    if s is not None:
        in_s = list(shape)
        for ax, x in zip(axes, s):
            in_s[ax] = x
        if fft_type == "IRFFT":
            in_s[-1] = in_s[-1] // 2 + 1
        if any(x < y for x, y in zip(in_s, shape)):
            arr = L.slice(arr, (0,) * nd, tuple(min(x, y) for x, y in zip(in_s, shape)))
        cur = aval(arr).shape
        if any(x > y for x, y in zip(in_s, cur)):
            arr = pad(arr, [(0, x - y) for x, y in zip(in_s, cur)])
    elif fft_type == "IRFFT":
        s = [shape[ax] for ax in axes[:-1]]
        if axes:
            s += [max(0, 2 * (shape[axes[-1]] - 1))]
    else:
        s = [shape[ax] for ax in axes]
    out = _core_nd(arr, fft_type, list(s))
    if norm is not None:
        f = _norm_factor(s, name, norm)
        if f is not None:
            out = ew.mul_p.bind(out, const_like(out, f))
    if orig_axes is not None:
        out = moveaxis(out, axes, orig_axes)
    return out


def _check_1d(name, axis):
    if isinstance(axis, (list, tuple)):
        raise ShardcError(f"fft.{name} does not support multiple axes. Please use "
                          f"{name}n. Got axis = {axis!r}.")


def _core_1d(name, fft_type, a, n, axis, norm):
    _check_1d(name, axis)
    return _core(name, fft_type, a, None if n is None else [n],
                 None if axis is None else [axis], norm)


def fft(a, n=None, axis=-1, norm=None):
    return _core_1d("fft", "FFT", a, n, axis, norm)


def ifft(a, n=None, axis=-1, norm=None):
    return _core_1d("ifft", "IFFT", a, n, axis, norm)


def rfft(a, n=None, axis=-1, norm=None):
    return _core_1d("rfft", "RFFT", a, n, axis, norm)


def irfft(a, n=None, axis=-1, norm=None):
    return _core_1d("irfft", "IRFFT", a, n, axis, norm)


def hfft(a, n=None, axis=-1, norm=None):
    from ._complex import conj
    conj_a = conj(a)
    _check_1d("hfft", axis)
    nn = (aval(conj_a).shape[axis] - 1) * 2 if n is None else n
    out = _core_1d("hfft", "IRFFT", conj_a, n, axis, norm)
    return ew.mul_p.bind(out, const_like(out, nn))


def ihfft(a, n=None, axis=-1, norm=None):
    from ._creation import asarray
    _check_1d("ihfft", axis)
    arr = asarray(a)
    nn = aval(arr).shape[axis] if n is None else n
    out = _core_1d("ihfft", "RFFT", arr, n, axis, norm)
    out = cx.conj_p.bind(out)
    return ew.mul_p.bind(out, const_like(out, 1 / nn))


def _core_2d(name, fft_type, a, s, axes, norm):
    if len(axes) != 2:
        raise ShardcError(f"fft.{name} only supports 2 axes. Got axes = {axes!r}.")
    return _core(name, fft_type, a, s, axes, norm)


def fft2(a, s=None, axes=(-2, -1), norm=None):
    return _core_2d("fft2", "FFT", a, s, axes, norm)


def ifft2(a, s=None, axes=(-2, -1), norm=None):
    return _core_2d("ifft2", "IFFT", a, s, axes, norm)


def rfft2(a, s=None, axes=(-2, -1), norm=None):
    return _core_2d("rfft2", "RFFT", a, s, axes, norm)


def irfft2(a, s=None, axes=(-2, -1), norm=None):
    return _core_2d("irfft2", "IRFFT", a, s, axes, norm)


def fftn(a, s=None, axes=None, norm=None):
    return _core("fftn", "FFT", a, s, axes, norm)


def ifftn(a, s=None, axes=None, norm=None):
    return _core("ifftn", "IFFT", a, s, axes, norm)


def rfftn(a, s=None, axes=None, norm=None):
    return _core("rfftn", "RFFT", a, s, axes, norm)


def irfftn(a, s=None, axes=None, norm=None):
    return _core("irfftn", "IRFFT", a, s, axes, norm)


def _freq_args(name, n, d):
    if isinstance(n, (list, tuple)):
        raise ShardcError(f"The n argument of fft.{name} only takes an int. Got n = {list(n)}.")
    if isinstance(d, (list, tuple)):
        raise ShardcError(f"The d argument of fft.{name} only takes a single value. "
                          f"Got d = {list(d)}.")


def fftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies [0, 1, ..., -1] / (d * n), as jnp.fft.fftfreq."""
    from ._creation import arange, asarray
    _freq_args("fftfreq", n, d)
    out_dtype = canonical_dtype(dtype) or dtypes.default_float()
    dt = dtypes.real_dtype(out_dtype) if dtypes.is_inexact(out_dtype) else \
        dtypes.default_float()
    i = arange(n, dtype=dt)
    k = ew.sub_p.bind(ew.rem_p.bind(ew.add_p.bind(i, const_like(i, n // 2)), const_like(i, n)),
                      const_like(i, n // 2))
    res = ew.div_p.bind(k, asarray(d * n, dtype=dt))
    return L.convert_element_type(res, out_dtype, False)


def rfftfreq(n, d=1.0, *, dtype=None, device=None):
    """The sample frequencies [0, 1, ..., n // 2] / (d * n), as jnp.fft.rfftfreq."""
    from ._creation import arange, asarray
    _freq_args("rfftfreq", n, d)
    dt = canonical_dtype(dtype) or dtypes.default_float()
    k = arange(0, n // 2 + 1 if n % 2 == 0 else (n - 1) // 2 + 1, dtype=dt)
    return ew.div_p.bind(k, asarray(d * n, dtype=dt))


def _shift(name, x, axes, sign):
    from ._composite import roll
    check_arraylike(name, x)
    shape = aval(x).shape
    if axes is None:
        axes = tuple(range(len(shape)))
        shift = [sign * (n // 2) for n in shape]
    elif isinstance(axes, int):
        shift = sign * (shape[axes] // 2)
    else:
        shift = [sign * (shape[ax] // 2) for ax in axes]
    return roll(x, shift, axes)


def fftshift(x, axes=None):
    return _shift("fftshift", x, axes, 1)


def ifftshift(x, axes=None):
    return _shift("ifftshift", x, axes, -1)


def _wrap():
    from ...errors import wrap_public
    wrap_public(globals())


_wrap()
