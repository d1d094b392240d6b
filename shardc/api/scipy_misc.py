"""shardc.scipy.integrate.trapezoid, shardc.scipy.fft (dct, dctn, idct, idctn: type 2,
by an FFT of the even/odd-interleaved input, Makhoul's method, as jax's) and
shardc.scipy.cluster.vq.vq, as jax.scipy's."""
from __future__ import annotations

import operator

import numpy as np

from ..errors import ArgumentError, ShardcNotImplementedError, wrap_public
from ..ir import dtypes
from . import lax as slax
from . import numpy as snp
from .numpy import linalg as snl
from .numpy._util import aval, check_arraylike, promote_dtypes_inexact

__all__ = ["trapezoid", "dct", "dctn", "idct", "idctn", "vq"]


def trapezoid(y, x=None, dx=1.0, axis=-1):
    """The integral of y along `axis` by the trapezoidal rule (at sample points x, or
    spacing dx)."""
    return snp.trapezoid(y, x, dx, axis)


# ---------------------------------------------------------------- DCT

def _canon_axis(name, axis, ndim):
    axis = operator.index(axis)
    if not -ndim <= axis < ndim:
        raise ArgumentError(f"{name}: axis {axis} is out of bounds for array of dimension "
                            f"{ndim}")
    return axis % ndim


def _check(name, x, type, norm):
    check_arraylike(name, x)
    if type != 2:
        raise ShardcNotImplementedError("Only DCT type 2 is implemented.")
    if norm is not None and norm not in ("backward", "ortho"):
        raise ArgumentError(f"shardc.scipy.fft.{name}: norm={norm!r} is not implemented")
    return snp.asarray(x)


def _w4(N, k):
    """exp(-i pi k / (2 N)), in k's complex dtype."""
    cdt = dtypes.complex_dtype(aval(k).dtype) if not dtypes.is_complex(aval(k).dtype) \
        else aval(k).dtype
    return snp.exp(-0.5j * np.pi * k.astype(cdt) / snp.asarray(N, dtype=cdt))


def _along(v, axis, ndim):
    """A vector shaped to broadcast along `axis` of an ndim-dim array."""
    return snp.expand_dims(v, tuple(a for a in range(ndim) if a != axis))


def _interleave(x, axis):
    """x's even entries, then its odd ones reversed (along axis)."""
    v0 = slax.slice_in_dim(x, None, None, 2, axis)
    v1 = slax.rev(slax.slice_in_dim(x, 1, None, 2, axis), (axis,))
    return snp.concatenate([v0, v1], axis)


def _deinterleave(x, axis):
    """The inverse of _interleave: x's first ceil(n/2) entries to the even places, the
    rest reversed to the odd ones, as one gather along axis (jax scatters both halves
    into zeros; both leave that axis unsharded and keep the others' shardings)."""
    n = aval(x).shape[axis]
    p = np.arange(n)
    return snp.take(x, snp.asarray(np.where(p % 2 == 0, p // 2, n - 1 - p // 2)), axis=axis)


def _ortho_norm(out, axis):
    n = aval(out).shape[axis]
    dt = aval(out).dtype
    factor = snp.concatenate([snp.full((1,), 4, dtype=dt), snp.full((n - 1,), 2, dtype=dt)])
    return out / snp.sqrt(_along(factor, axis, aval(out).ndim) * n)


def _pad_to(x, axis, n):
    """x zero-padded (or truncated) to length n along axis."""
    cfg = [(0, n - aval(x).shape[axis] if a == axis else 0, 0) for a in range(aval(x).ndim)]
    return slax.pad(x, snp.array(0, dtype=aval(x).dtype), cfg)


def _split_complex(fn, x, **kw):
    return slax.complex(fn(snp.real(x), **kw), fn(snp.imag(x), **kw))


def dct(x, type=2, n=None, axis=-1, norm=None):
    """The type-2 discrete cosine transform along `axis` (x padded or cut to n)."""
    x = _check("dct", x, type, norm)
    if dtypes.is_complex(aval(x).dtype):
        return _split_complex(dct, x, type=type, n=n, axis=axis, norm=norm)
    axis = _canon_axis("dct", axis, aval(x).ndim)
    if n is not None:
        x = _pad_to(x, axis, n)
    N = aval(x).shape[axis]
    V = snp.fft.fft(_interleave(x, axis), axis=axis)
    k = _along(snp.arange(N, dtype=aval(snp.real(V)).dtype), axis, aval(x).ndim)
    out = 2 * (V * _w4(N, k)).real
    return _ortho_norm(out, axis) if norm == "ortho" else out


def _dct2(x, axes, norm):
    """The 2-D DCT over two axes with one 2-D FFT."""
    nd = aval(x).ndim
    a1, a2 = (_canon_axis("dctn", a, nd) for a in axes)
    N1, N2 = aval(x).shape[a1], aval(x).shape[a2]
    V = snp.fft.fftn(_interleave(_interleave(x, a1), a2), axes=axes)
    k1 = _along(snp.arange(N1, dtype=aval(V).dtype), a1, nd)
    k2 = _along(snp.arange(N2, dtype=aval(V).dtype), a2, nd)
    out = _w4(N1, k1) * (_w4(N2, k2) * V +
                         _w4(N2, -k2) * snp.roll(snp.flip(V, axis=a2), shift=1, axis=a2))
    out = 2 * out.real
    if norm == "ortho":
        return _ortho_norm(_ortho_norm(out, a1), a2)
    return out


def _shape_axes(name, x, s, axes):
    nd = aval(x).ndim
    if s is not None:
        try:
            s = list(s)
        except TypeError:
            s = [operator.index(s)]
        if len(s) > nd:
            raise ArgumentError(f"s must have at most x.ndim ({nd}) elements, got {len(s)}")
    if axes is None:
        axes = tuple(range(nd - len(s), nd)) if s is not None else tuple(range(nd))
    else:
        axes = tuple(_canon_axis(name, a, nd) for a in axes)
        if len(set(axes)) != len(axes):
            raise ArgumentError(f"{name}: repeated axis in axes {axes}")
    if s is not None and len(axes) > 1:
        ns = dict(zip(axes, s))
        for a in axes:
            if a in ns:
                x = _pad_to(x, a, ns[a])
    return x, s, axes


def dctn(x, type=2, s=None, axes=None, norm=None):
    """The type-2 DCT over several axes (each padded or cut to s)."""
    x = _check("dctn", x, type, norm)
    if dtypes.is_complex(aval(x).dtype):
        return _split_complex(dctn, x, type=type, s=s, axes=axes, norm=norm)
    x, s, axes = _shape_axes("dctn", x, s, axes)
    if len(axes) == 1:
        return dct(x, n=s[0] if s is not None else None, axis=axes[0], norm=norm)
    if len(axes) == 2:
        return _dct2(x, axes, norm)
    for i in range(0, len(axes), 2):      # two axes at a time, as jax
        x = dctn(x, axes=axes[i:i + 2], norm=norm)
    return x


def idct(x, type=2, n=None, axis=-1, norm=None):
    """The inverse of dct along `axis` (x padded or cut to n first)."""
    x = _check("idct", x, type, norm)
    if dtypes.is_complex(aval(x).dtype):
        return _split_complex(idct, x, type=type, n=n, axis=axis, norm=norm)
    axis = _canon_axis("idct", axis, aval(x).ndim)
    if n is not None:
        x = _pad_to(x, axis, n)
    N = aval(x).shape[axis]
    (x,) = promote_dtypes_inexact(x)
    if norm is None or norm == "backward":
        x = _ortho_norm(x, axis)
    x = _ortho_norm(x, axis)
    k = _along(snp.arange(N, dtype=aval(x).dtype), axis, aval(x).ndim)
    w4 = _w4(N, k)
    x = x.astype(aval(w4).dtype) / w4 * 2 * N
    return _deinterleave(snp.fft.ifft(x, axis=axis).real, axis)


def idctn(x, type=2, s=None, axes=None, norm=None):
    """The inverse of dctn (one axis at a time)."""
    x = _check("idctn", x, type, norm)
    if dtypes.is_complex(aval(x).dtype):
        return _split_complex(idctn, x, type=type, s=s, axes=axes, norm=norm)
    x, s, axes = _shape_axes("idctn", x, s, axes)
    if len(axes) == 1:
        return idct(x, n=s[0] if s is not None else None, axis=axes[0], norm=norm)
    for a in axes:
        x = idct(x, axis=a, norm=norm)
    return x


# ---------------------------------------------------------------- vq

def vq(obs, code_book, check_finite=True):
    """(code, dist): each observation's nearest code (Euclidean) and its distance."""
    del check_finite
    check_arraylike("scipy.cluster.vq.vq", obs, code_book)
    obs, cb = promote_dtypes_inexact(obs, code_book)
    if aval(obs).ndim != aval(cb).ndim:
        raise ArgumentError("Observation and code_book should have the same rank")
    if aval(obs).ndim == 1:
        obs, cb = obs[..., None], cb[..., None]
    if aval(obs).ndim != 2:
        raise ArgumentError("ndim different than 1 or 2 are not supported")
    dist = snl.norm(obs[:, None, :] - cb[None, :, :], axis=-1)
    code = snp.argmin(dist, axis=-1)
    return code, snp.take_along_axis(dist, code[:, None], axis=1)[:, 0]


wrap_public(globals())
