"""shardc.scipy.linalg, part 4: the special matrices of jax.scipy.linalg (toeplitz,
hankel, circulant, convolution_matrix, leslie, companion, fiedler, fiedler_companion,
hilbert, invhilbert, pascal, invpascal, helmert, hadamard, dft). Those built from
vectors take stacks of them as jax's do (one matrix per vector); Toeplitz and Hankel
matrices are convolution patches of the concatenated vectors, as jax builds them."""
from __future__ import annotations

import math
import operator

import numpy as np

from ..errors import ArgumentError, ShardcTypeError, wrap_public
from ..ir import dtypes
from . import lax as slax
from . import numpy as snp
from .numpy._util import (aval, canonical_dtype, check_arraylike, promote_args_inexact,
                          promote_dtypes)
from .scipy_special import comb

__all__ = ["toeplitz", "hankel", "circulant", "leslie", "companion", "fiedler",
           "fiedler_companion", "convolution_matrix", "hilbert", "invhilbert", "pascal",
           "invpascal", "helmert", "hadamard", "dft"]


def _patches(v, width):
    """The sliding windows of width `width` over vector v, one per row."""
    size = aval(v).shape[0]
    return slax.conv_general_dilated_patches(
        snp.reshape(v, (1, size, 1)), (width,), (1,), "VALID",
        dimension_numbers=("NTC", "IOT", "NTC"), precision="highest")[0]


def _toeplitz(c, r):
    rows, cols = aval(c).shape[0], aval(r).shape[0]
    if rows == 0 or cols == 0:
        return snp.empty((rows, cols), dtype=snp.promote_types(aval(c).dtype, aval(r).dtype))
    return snp.flip(_patches(snp.concatenate((c[::-1], r[1:])), cols), axis=0)


def toeplitz(c, r=None):
    """The Toeplitz matrix of first column c and first row r (r[0] ignored; default
    conj(c)); stacks of vectors give stacks of matrices."""
    if r is None:
        check_arraylike("toeplitz", c)
        r = snp.conjugate(snp.asarray(c))
    else:
        check_arraylike("toeplitz", c, r)
    c, r = snp.atleast_1d(snp.asarray(c)), snp.atleast_1d(snp.asarray(r))
    return snp.vectorize(_toeplitz, signature="(m),(n)->(m,n)")(c, r)


def _hankel(c, r):
    rows, cols = aval(c).shape[0], aval(r).shape[0]
    if rows == 0 or cols == 0:
        return snp.empty((rows, cols), dtype=snp.result_type(c, r))
    return _patches(snp.concatenate((c, r[1:])), cols)


def hankel(c, r=None):
    """The Hankel matrix of first column c and last row r (r[0] ignored; default
    zeros)."""
    if r is None:
        check_arraylike("hankel", c)
        c = snp.asarray(c)
        r = snp.zeros_like(c)
    else:
        check_arraylike("hankel", c, r)
        c, r = snp.asarray(c), snp.asarray(r)
    if aval(c).ndim == 0:
        raise ArgumentError("hankel: c must be at least 1-dimensional, got a scalar.")
    if aval(r).ndim == 0:
        raise ArgumentError("hankel: r must be at least 1-dimensional, got a scalar.")
    nc, nr = aval(c).ndim, aval(r).ndim
    if nc < nr:
        c = snp.expand_dims(c, tuple(range(nr - nc)))
    elif nr < nc:
        r = snp.expand_dims(r, tuple(range(nc - nr)))
    return snp.vectorize(_hankel, signature="(m),(n)->(m,n)")(c, r)


def _circulant(c):
    n = aval(c).shape[0]
    idx = (snp.arange(n)[:, None] - snp.arange(n)[None, :]) % n
    return c[idx]


def circulant(c):
    """The circulant matrix of first column c."""
    check_arraylike("circulant", c)
    return snp.vectorize(_circulant, signature="(n)->(n,n)")(snp.atleast_1d(snp.asarray(c)))


def _leslie(f, s):
    f, s = promote_dtypes(f, s)
    return snp.diag(s, k=-1).at[0].set(f)


def leslie(f, s):
    """The Leslie matrix of fecundities f and survival rates s (one shorter)."""
    check_arraylike("leslie", f, s)
    f, s = snp.atleast_1d(f), snp.atleast_1d(s)
    sf, ss = aval(f).shape, aval(s).shape
    if sf[-1] < 2:
        raise ArgumentError(f"The length of f along the last axis must be at least 2; got "
                            f"shape {sf}.")
    if ss[-1] != sf[-1] - 1:
        raise ArgumentError("Incorrect lengths for f and s. The length of s along the last "
                            "axis must be one less than the length of f; got f shape "
                            f"{sf} and s shape {ss}.")
    return snp.vectorize(_leslie, signature="(n),(m)->(n,n)")(f, s)


def _companion(a):
    first_row = -a[1:] / a[0]
    m = aval(a).shape[0] - 1
    return snp.eye(m, m, k=-1, dtype=aval(first_row).dtype).at[0].set(first_row)


def companion(a):
    """The companion matrix of polynomial coefficients a (highest degree first)."""
    (a,) = promote_args_inexact("companion", a)
    a = snp.atleast_1d(a)
    if aval(a).shape[-1] < 2:
        raise ArgumentError(f"The length of `a` along the last axis must be at least 2; got "
                            f"shape {aval(a).shape}.")
    return snp.vectorize(_companion, signature="(n)->(m,m)")(a)


def fiedler(a):
    """The symmetric Fiedler matrix |a[i] - a[j]|."""
    check_arraylike("fiedler", a)
    a = snp.atleast_1d(a)
    return snp.abs(a[..., None] - a[..., None, :])


def _fiedler_companion(a):
    n = aval(a).shape[0] - 1
    if n == 0:
        return snp.empty((0, 0), dtype=aval(a).dtype)
    a = a / a[0]
    if n == 1:
        return snp.reshape(-a[1:], (1, 1))
    i = snp.arange(n)[:, None]
    j = snp.arange(n)[None, :]
    even, odd = i % 2 == 0, i % 2 == 1
    one, zero = snp.array(1, dtype=aval(a).dtype), snp.array(0, dtype=aval(a).dtype)
    # the pentadiagonal product of Fiedler's factors: -a's on the inner diagonals, ones
    # on the outer ones (alternating rows)
    conditions = [(i == 0) & (j == 0), (i == 1) & (j == 0), (j == i + 1) & even,
                  (j == i + 2) & even, (j == i - 1) & even & (i >= 2),
                  (j == i - 2) & odd & (i >= 3)]
    choices = [-a[1], one, -a[snp.minimum(i + 2, n)], one, -a[snp.minimum(i + 1, n)], one]
    return snp.select(conditions, choices, default=zero)


def fiedler_companion(a):
    """The Fiedler companion matrix of polynomial coefficients a: pentadiagonal, with
    the companion matrix's characteristic polynomial."""
    (a,) = promote_args_inexact("fiedler_companion", a)
    a = snp.atleast_1d(a)
    if aval(a).shape[-1] == 0:
        raise ArgumentError("fiedler_companion requires the last axis of 'a' to have nonzero "
                            f"length, but got an array of shape {aval(a).shape}.")
    return snp.vectorize(_fiedler_companion, signature="(n)->(m,m)")(a)


def convolution_matrix(a, n, mode="full"):
    """The Toeplitz matrix A with A @ v == convolve(a, v, mode) for v of length n."""
    try:
        n = operator.index(n)
    except TypeError:
        raise ShardcTypeError(f"convolution_matrix: n must be an integer, got {n!r}") from None
    if n <= 0:
        raise ArgumentError(f"n must be a positive integer; got {n}.")
    check_arraylike("convolution_matrix", a)
    a = snp.asarray(a)
    if aval(a).ndim == 0:
        raise ArgumentError("convolution_matrix: a must be at least 1-dimensional, got a "
                            "scalar.")
    m = aval(a).shape[-1]
    if m < 1:
        raise ArgumentError(f"len(a) must be at least 1; got shape {aval(a).shape}.")
    if mode not in ("full", "valid", "same"):
        raise ArgumentError(f"mode must be one of 'full', 'valid', 'same'; got {mode!r}.")
    pads = [(0, 0)] * (aval(a).ndim - 1) + [(0, n - 1)]
    az = snp.pad(a, pads)
    raz = snp.pad(snp.flip(a, axis=-1), pads)
    length = m + n - 1
    if mode == "same":
        trim = min(n, m) - 1
        tb, te = trim // 2, trim - trim // 2
    elif mode == "valid":
        tb = te = min(n, m) - 1
    else:
        tb = te = 0
    col0 = slax.slice_in_dim(az, tb, length - te, axis=-1)
    row0 = slax.slice_in_dim(raz, length - n - tb, length - tb, axis=-1)
    return toeplitz(col0, row0)


def _static_n(name, n):
    try:
        return operator.index(n)
    except TypeError:
        raise ShardcTypeError(f"{name}: n must be a static integer, got {n!r}") from None


def hilbert(n):
    """The n x n Hilbert matrix 1 / (i + j + 1)."""
    n = _static_n("hilbert", n)
    a = slax.broadcasted_iota(dtypes.default_float(), (n, 1), 0)
    return 1 / (a + a.T + 1)


def invhilbert(n):
    """The inverse of the n x n Hilbert matrix (in floating point)."""
    n = _static_n("invhilbert", n)
    a = snp.arange(n, dtype=dtypes.default_float())
    i, j = a[:, None], a[None, :]
    s = i + j
    return (-1.0) ** s * (s + 1.0) * comb(n + i, n - j - 1) * comb(n + j, n - i - 1) * \
        comb(s, i) ** 2


def _binom(n, k):
    return snp.exp(slax.lgamma(n + 1.0) - slax.lgamma(n - k + 1.0) - slax.lgamma(k + 1.0))


def _kind(kind):
    kind = "symmetric" if kind is None else kind
    valid = ["symmetric", "lower", "upper"]
    if kind not in valid:
        raise ArgumentError(f"Expected kind to be one of: {valid}; got {kind}")
    return kind


def pascal(n, kind=None):
    """The n x n Pascal matrix: binomial coefficients, 'symmetric', 'lower' or
    'upper' (float32, as jax's)."""
    n, kind = _static_n("pascal", n), _kind(kind)
    a = snp.arange(n, dtype=np.float32)
    low = _binom(a[:, None], a[None, :])
    if kind == "lower":
        return low
    if kind == "upper":
        return low.T
    return snp.dot(low, low.T)


def invpascal(n, kind=None):
    """The inverse of pascal(n, kind)."""
    n, kind = _static_n("invpascal", n), _kind(kind)
    a = snp.arange(n, dtype=dtypes.default_float())
    i, j = a[:, None], a[None, :]
    low = (-1.0) ** (i - j) * _binom(i, j)
    if kind == "lower":
        return low
    if kind == "upper":
        return low.T
    return snp.dot(low.T, low)


def helmert(n, full=False):
    """The (n - 1) x n Helmert matrix (n x n with full: the first row 1 / sqrt(n))."""
    n = _static_n("helmert", n)
    if n < 1:
        raise ArgumentError(f"n must be a positive integer; got {n}.")
    i = snp.arange(n - 1)[:, None]
    j = snp.arange(n)[None, :]
    k = i + 1
    kf = k.astype(dtypes.default_float())
    denom = snp.sqrt(kf * (kf + 1))
    H = snp.where(j <= i, 1.0 / denom, snp.where(j == k, -kf / denom, snp.zeros_like(denom)))
    if full:
        first = snp.full((1, n), 1.0 / snp.sqrt(n), dtype=aval(H).dtype)
        H = snp.concatenate([first, H], axis=0)
    return H


def hadamard(n, dtype=int):
    """The n x n Hadamard matrix (Sylvester's construction; n a power of 2)."""
    n = _static_n("hadamard", n)
    if n < 1 or not math.log2(n).is_integer():
        raise ArgumentError(f"n must be a positive power of 2; got {n}.")
    H = snp.ones((1, 1), dtype=dtype)
    for _ in range(int(math.log2(n))):
        H = snp.block([[H, H], [H, -H]])
    return H


def dft(n, scale=None, *, dtype=None):
    """The n x n discrete Fourier transform matrix exp(-2 pi i j k / n), scaled by
    1 / sqrt(n) ('sqrtn') or 1 / n ('n')."""
    n = _static_n("dft", n)
    if scale is not None and scale not in ("sqrtn", "n"):
        raise ArgumentError(f"scale must be None, 'sqrtn', or 'n'; got {scale!r}.")
    if dtype is None:
        dtype = dtypes.default_complex()
    else:
        dtype = canonical_dtype(dtype)
        if not dtypes.is_complex(dtype):
            raise ArgumentError(f"dtype must be a complex floating-point type; got {dtype}.")
    a = snp.arange(n, dtype=dtype)
    omegas = snp.exp(-2j * np.pi * a[:, None] * a[None, :] / n)
    if scale == "sqrtn":
        omegas = omegas / snp.sqrt(n)
    elif scale == "n":
        omegas = omegas / n
    return omegas


wrap_public(globals())
