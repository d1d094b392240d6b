"""shardc.numpy.linalg: jax.numpy.linalg's names, on shardc's decompositions
(shardc.lax.linalg) and products."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...errors import ShardcError, wrap_public
from ...ir import dtypes
from ...ops import lax as L
from ...ops.common import norm_axes
from .. import lax_linalg
from ._linalg import matmul as _matmul
from ._linalg import tensordot as _tensordot
from ._det import SlogdetResult, det, slogdet  # noqa: F401
from ._linalg_solve import (diagonal as _diagonal, inexact, inv, mT,  # noqa: F401
                            solve, square)
from ._reductions import max as _max
from ._reductions import min as _min
from ._reductions import sum as _sum
from ._shapes import expand_dims, moveaxis, ravel, reshape
from ._ufuncs import abs, divide, greater, greater_equal, isnan, logical_and, multiply, not_equal, \
    power, sqrt, where
from ._util import aval, check_arraylike, promote_dtypes_inexact


class QRResult(NamedTuple):
    Q: object
    R: object


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


def _atleast2(name, a):
    if aval(a).ndim < 2:
        raise ShardcError(f"{name}: {aval(a).ndim}-dimensional array given; the array must "
                          "be at least two-dimensional")


# ---------------------------------------------------------------- decompositions

def cholesky(a, *, upper=False, symmetrize_input=True):
    (a,) = inexact("cholesky", a)
    _atleast2("cholesky", a)
    out = lax_linalg.cholesky(a, symmetrize_input=symmetrize_input)
    return lax_linalg.H(out) if upper else out


def qr(a, mode="reduced"):
    (a,) = inexact("qr", a)
    _atleast2("qr", a)
    if mode == "raw":       # LAPACK's geqrf output, transposed as NumPy's raw mode
        from ...ops.linalg_decomp import geqrf_p
        h, taus = geqrf_p.bind(a)
        return QRResult(matrix_transpose(h), taus)
    if mode in ("reduced", "r", "full"):
        full = False
    elif mode == "complete":
        full = True
    else:
        raise ShardcError(f"Unsupported QR decomposition mode '{mode}' (modes: 'reduced', "
                          "'complete', 'r', 'raw')")
    q, r = lax_linalg.qr(a, full_matrices=full)
    return r if mode == "r" else QRResult(q, r)


def svd(a, full_matrices=True, compute_uv=True, hermitian=False, subset_by_index=None):
    (a,) = inexact("svd", a)
    _atleast2("svd", a)
    if hermitian:
        return _svd_hermitian(a, compute_uv)
    if compute_uv:
        return SVDResult(*lax_linalg.svd(a, full_matrices=full_matrices,
                                         subset_by_index=subset_by_index))
    return lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=False,
                          subset_by_index=subset_by_index)


def _svd_hermitian(a, compute_uv):
    """The SVD of Hermitian matrices from eigh: |eigenvalues| sorted descending, the
    eigenvectors reordered (and signed) to match, as jnp.linalg.svd(hermitian=True)."""
    from ..lax_sorting import sort
    from ._sorting import take_along_axis
    v, w = lax_linalg.eigh(a)
    s = abs(w)
    nd = aval(s).ndim
    if not compute_uv:
        return L.rev(sort(s, dimension=-1), (nd - 1,))
    sign = L.sign(w)
    idxs = L.iota(dtypes.uint32, aval(s).shape, nd - 1)
    s, idxs, sign = sort((s, idxs, sign), dimension=-1, num_keys=1)
    s, idxs, sign = (L.rev(t, (nd - 1,)) for t in (s, idxs, sign))
    u = take_along_axis(v, expand_dims(idxs, -2), axis=-1)
    vh = lax_linalg.H(multiply(u, L.convert_element_type(expand_dims(sign, -2),
                                                         aval(u).dtype)))
    return SVDResult(u, s, vh)


def svdvals(x, /):
    return svd(x, compute_uv=False)


def _uplo(name, UPLO):
    if UPLO is None or UPLO == "L":
        return True
    if UPLO == "U":
        return False
    raise ShardcError(f"{name}: UPLO must be one of None, 'L', or 'U', got {UPLO}")


def eigh(a, UPLO=None, symmetrize_input=True):
    (a,) = inexact("eigh", a)
    square("eigh", a)
    v, w = lax_linalg.eigh(a, lower=_uplo("eigh", UPLO), symmetrize_input=symmetrize_input)
    return EighResult(w, v)


class EigResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


def eig(a):
    """Eigenvalues and right eigenvectors of general square matrices (complex)."""
    (a,) = inexact("eig", a)
    square("eig", a)
    w, v = lax_linalg.eig(a, compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a):
    (a,) = inexact("eigvals", a)
    square("eigvals", a)
    return lax_linalg.eig(a, compute_left_eigenvectors=False,
                          compute_right_eigenvectors=False)[0]


def eigvalsh(a, UPLO="L", *, symmetrize_input=True):
    return eigh(a, UPLO, symmetrize_input=symmetrize_input).eigenvalues


# ---------------------------------------------------------------- derived

def pinv(a, rtol=None, hermitian=False, *, rcond=None):
    """The pseudo-inverse (singular values at most rtol * the largest count as zero)."""
    if rcond is not None:
        if rtol is not None:
            raise ShardcError("pinv: only one of rtol and rcond may be specified.")
        rtol = rcond
    (a,) = inexact("pinv", a)
    _atleast2("pinv", a)
    s_ = aval(a).shape
    m, n = s_[-2:]
    if m == 0 or n == 0:
        return L.zeros((*s_[:-2], n, m), aval(a).dtype)
    dt = aval(a).dtype
    if dtypes.is_complex(dt):
        a = lax_linalg.H(mT(a))             # conj(a), as jax's
    if rtol is None:
        rtol = 10.0 * max(m, n) * float(np.finfo(dtypes.real_dtype(dt)).eps)
    u, s, vh = svd(a, full_matrices=False, hermitian=hermitian)
    if hasattr(rtol, "shape"):
        rtol = expand_dims(rtol, -1)
    cutoff = multiply(rtol, L.slice(s, (0,) * aval(s).ndim, (*aval(s).shape[:-1], 1)))
    s = where(greater(s, cutoff), s, np.inf)
    return _matmul(mT(vh), divide(mT(u), expand_dims(s, -1)))


def matrix_power(a, n):
    (a,) = inexact("matrix_power", a) if not dtypes.is_int(aval(a).dtype) else (a,)
    square("matrix_power", a)
    try:
        n = int(n.__index__())
    except (AttributeError, TypeError):
        raise ShardcError(f"matrix_power: exponent must be an integer, got {n}") from None
    if n == 0:
        s = aval(a).shape
        k = s[-1]
        eye = L.convert_element_type(L.eq(L.iota(dtypes.int32, (k, k), 0),
                                          L.iota(dtypes.int32, (k, k), 1)), aval(a).dtype)
        return L.broadcast_in_dim(eye, s, (len(s) - 2, len(s) - 1))
    if n < 0:
        a, n = inv(a), -n
    if n == 1:
        return a
    if n == 2:
        return _matmul(a, a)
    if n == 3:
        return _matmul(_matmul(a, a), a)
    z = result = None
    while n > 0:
        z = a if z is None else _matmul(z, z)
        n, bit = divmod(n, 2)
        if bit:
            result = z if result is None else _matmul(result, z)
    return result


def matrix_rank(M, rtol=None, *, hermitian=False, tol=None):
    if tol is not None:
        if rtol is not None:
            raise ShardcError("matrix_rank: only one of tol or rtol may be specified.")
        rtol = tol
    (M,) = inexact("matrix_rank", M)
    if aval(M).ndim < 2:
        from ._reductions import any as _any
        return L.convert_element_type(_any(not_equal(M, 0)), dtypes.int32)
    S = svd(M, full_matrices=False, compute_uv=False, hermitian=hermitian)
    if rtol is None:
        dt = aval(S).dtype
        rtol = multiply(_max(S, axis=-1), float(max(aval(M).shape[-2:]) * np.finfo(dt).eps))
    rtol = expand_dims(rtol, np.ndim(rtol)) if hasattr(rtol, "shape") else rtol
    return _sum(greater(S, rtol), axis=-1)


def lstsq(a, b, rcond=None, *, numpy_resid=False):
    """Least squares by SVD, as jnp.linalg.lstsq: (x, residuals, rank, s)."""
    a, b = inexact("lstsq", a, b)
    sa, sb = aval(a).shape, aval(b).shape
    if len(sa) != 2:
        raise ShardcError(f"lstsq: {len(sa)}-dimensional array given. Array must be "
                          "two-dimensional")
    if sa[0] != sb[0]:
        raise ShardcError("lstsq: Leading dimensions of input arrays must match")
    vec = len(sb) == 1
    if vec:
        b = reshape(b, (sb[0], 1))
    elif len(sb) != 2:
        raise ShardcError(f"lstsq: {len(sb)}-dimensional array given. Array must be one or "
                          "two-dimensional")
    m, n = sa
    dt = aval(a).dtype
    if rcond is None:
        rcond = float(np.finfo(dt).eps) * max(n, m)
    elif rcond < 0:
        rcond = float(np.finfo(dt).eps)
    u, s, vt = svd(a, full_matrices=False)
    s0 = L.slice(s, (0,), (1,))
    mask = logical_and(greater(s, 0), greater_equal(s, multiply(s0, rcond)))
    rank = _sum(mask)
    safe = where(mask, s, 1)
    s_inv = expand_dims(where(mask, L.div(1, safe), 0), 1)
    x = _matmul(lax_linalg.H(vt), multiply(s_inv, _matmul(lax_linalg.H(u), b)))   # V S+ U^H b
    if numpy_resid:
        raise ShardcError("lstsq: numpy_resid=True needs the rank at trace time; shardc "
                          "has numpy_resid=False only")
    resid = power(norm(L.sub(b, _matmul(a, x)), axis=0), 2)
    if vec:
        x = ravel(x)
    return x, resid, rank, s


def cond(x, p=None):
    (x,) = inexact("cond", x)
    _atleast2("cond", x)
    sh = aval(x).shape
    if sh[-1] == 0 or sh[-2] == 0:
        raise ShardcError(f"cond: input array must not be empty; got shape {sh}")

    def at(s, i):
        k = aval(s).shape[-1]
        i %= k
        v = L.slice(s, (0,) * aval(s).ndim, (*aval(s).shape[:-1], 1)) if i == 0 else \
            L.slice(s, (0,) * (aval(s).ndim - 1) + (i,), aval(s).shape)
        return reshape(v, aval(s).shape[:-1])
    if p is None or p == 2:
        s = svdvals(x)
        return L.div(at(s, 0), at(s, -1))
    if p == -2:
        s = svdvals(x)
        r = L.div(at(s, -1), at(s, 0))
    else:
        square("cond", x)
        r = multiply(norm(x, ord=p, axis=(-2, -1)), norm(inv(x), ord=p, axis=(-2, -1)))
    from ._reductions import any as _any
    nan_in = _any(isnan(x), axis=(-2, -1))
    return where(logical_and(isnan(r), L.eq(nan_in, False)), np.inf, r)


# ---------------------------------------------------------------- products and views

def cross(x1, x2, /, *, axis=-1):
    check_arraylike("cross", x1, x2)
    x1, x2 = _promote(x1, x2)
    s1, s2 = aval(x1).shape, aval(x2).shape
    if s1[axis] != 3 or s2[axis] != 3:
        raise ShardcError("cross: Both input arrays must be (arrays of) 3-dimensional "
                          f"vectors, but they have x1.shape[axis]={s1[axis]} and "
                          f"x2.shape[axis]={s2[axis]}")
    a, b = moveaxis(x1, axis, -1), moveaxis(x2, axis, -1)
    from ._util import broadcast_shapes, broadcast_to
    shape = broadcast_shapes("cross", aval(a).shape, aval(b).shape)
    a, b = broadcast_to(a, shape), broadcast_to(b, shape)

    def c(v, i):
        return L.slice(v, (0,) * (len(shape) - 1) + (i,), (*shape[:-1], i + 1))
    parts = [L.sub(L.mul(c(a, (i + 1) % 3), c(b, (i + 2) % 3)),
                   L.mul(c(a, (i + 2) % 3), c(b, (i + 1) % 3))) for i in range(3)]
    return moveaxis(L.concatenate(parts, len(shape) - 1), -1, axis)


def _promote(*xs):
    from ._util import promote_dtypes
    return promote_dtypes(*xs)


def outer(x1, x2, /):
    check_arraylike("outer", x1, x2)
    if aval(x1).ndim != 1 or aval(x2).ndim != 1:
        raise ShardcError(f"outer: Input arrays must be one-dimensional, but they are "
                          f"x1.ndim={aval(x1).ndim} x2.ndim={aval(x2).ndim}")
    return multiply(expand_dims(x1, 1), expand_dims(x2, 0))


def matrix_transpose(x, /):
    check_arraylike("matrix_transpose", x)
    if aval(x).ndim < 2:
        raise ShardcError(f"matrix_transpose requires at least 2 dimensions; got "
                          f"ndim={aval(x).ndim}")
    return mT(x)


def diagonal(x, /, *, offset=0):
    check_arraylike("diagonal", x)
    _atleast2("diagonal", x)
    return _diagonal(x, offset)


def trace(x, /, *, offset=0, dtype=None):
    check_arraylike("trace", x)
    _atleast2("trace", x)
    return _sum(_diagonal(x, offset), axis=-1, dtype=dtype)


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    return _matmul(x1, x2)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None):
    return _tensordot(x1, x2, axes=axes)


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    check_arraylike("vecdot", x1, x2)
    s1, s2 = aval(x1).shape, aval(x2).shape
    if s1[axis] != s2[axis]:
        raise ShardcError(f"vecdot: x1 and x2 must have the same size along axis {axis}; "
                          f"got {s1} and {s2}")
    if dtypes.is_complex(aval(x1).dtype):      # conj(x1) . x2, as numpy and jax
        from ...ops.complex import conj_p
        x1 = conj_p.bind(x1)
    return _sum(multiply(x1, x2), axis=axis)


def multi_dot(arrays, *, precision=None):
    arrs = list(arrays)
    check_arraylike("multi_dot", *arrs)
    if len(arrs) < 2:
        raise ShardcError(f"multi_dot requires at least two arrays; got len(arrays)={len(arrs)}")
    nds = [aval(a).ndim for a in arrs]
    if not (nds[0] in (1, 2) and nds[-1] in (1, 2) and all(d == 2 for d in nds[1:-1])):
        raise ShardcError("multi_dot: input arrays must all be two-dimensional, except for "
                          "the first and last array which may be 1 or 2 dimensional. Got "
                          f"array shapes {[aval(a).shape for a in arrs]}")
    out = arrs[0]
    for b in arrs[1:]:
        out = _matmul(out, b)
    return out


def tensorinv(a, ind=2):
    check_arraylike("tensorinv", a)
    ind = int(ind)
    if ind <= 0:
        raise ShardcError(f"tensorinv: ind must be a positive integer; got ind={ind}")
    s = aval(a).shape
    cshape, bshape = s[:ind], s[ind:]
    flat = (math.prod(cshape), math.prod(bshape))
    if flat[0] != flat[1]:
        raise ShardcError("tensorinv is only possible when the product of the first `ind` "
                          f"dimensions equals that of the remaining dimensions. got a.shape="
                          f"{s} with ind={ind}.")
    return reshape(inv(reshape(a, flat)), (*bshape, *cshape))


def tensorsolve(a, b, axes=None):
    check_arraylike("tensorsolve", a, b)
    if axes is not None:
        nd = aval(a).ndim
        a = moveaxis(a, axes, [nd - 1] * len(axes) if len(axes) == 1 else
                     list(range(nd - len(axes), nd)))
    sa, sb = aval(a).shape, aval(b).shape
    out_shape = sa[len(sb):]
    if sa[:len(sb)] != sb:
        raise ShardcError("tensorsolve: After moving axes to end, leading shape of a must "
                          f"match shape of b. got a.shape={sa}, b.shape={sb}")
    if math.prod(sb) != math.prod(out_shape):
        raise ShardcError("tensorsolve: Input arrays must have prod(a.shape[:b.ndim]) == "
                          f"prod(a.shape[b.ndim:]); got a.shape={sa}, b.ndim={len(sb)}.")
    a = reshape(a, (math.prod(sb), math.prod(out_shape)))
    return reshape(solve(a, ravel(b)), out_shape)


# ---------------------------------------------------------------- norms

def _sq(x):
    """|x|^2 elementwise: real(x * conj(x)), as jnp.linalg.norm."""
    if dtypes.is_complex(aval(x).dtype):
        from ...ops.complex import conj_p, real_p
        return real_p.bind(multiply(x, conj_p.bind(x)))
    return multiply(x, x)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    check_arraylike("vector_norm", x)
    (x,) = promote_dtypes_inexact(x)
    if ord is None or ord == 2:
        return sqrt(_sum(_sq(x), axis=axis, keepdims=keepdims))
    ax = abs(x)
    if ord == np.inf:
        return _max(ax, axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return _min(ax, axis=axis, keepdims=keepdims)
    if ord == 0:
        return _sum(not_equal(x, 0).astype(dtypes.real_dtype(aval(x).dtype)), axis=axis,
                    keepdims=keepdims)
    if ord == 1:
        return _sum(ax, axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ShardcError(f"Invalid order '{ord}' for vector norm.")
    return power(_sum(power(ax, ord), axis=axis, keepdims=keepdims), 1.0 / ord)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    return norm(x, ord=ord, keepdims=keepdims, axis=(-2, -1))


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector and matrix norms (as jnp.linalg.norm): ord None/2/1/inf/-inf/0/p for
    vectors; None/'fro'/1/-1/inf/-inf/2/-2/'nuc' for matrices."""
    check_arraylike("norm", x)
    (x,) = promote_dtypes_inexact(x)
    nd = aval(x).ndim
    if axis is None:
        if ord is None:
            return sqrt(_sum(_sq(x), keepdims=keepdims))
        axis = tuple(range(nd))
    axes = norm_axes("norm", axis, nd)
    if len(axes) == 1:
        return vector_norm(x, ord=2 if ord is None else ord, axis=axes, keepdims=keepdims)
    if len(axes) != 2:
        raise ShardcError(f"Improper number of axes for norm: axis={axis}. Pass one axis to "
                          "compute a vector-norm, or two axes to compute a matrix-norm.")
    r, c = (axis if isinstance(axis, (tuple, list)) else axes)
    r, c = r % nd, c % nd
    ax = abs(x)
    if ord is None or ord in ("f", "fro"):
        return sqrt(_sum(_sq(x), axis=(r, c), keepdims=keepdims))
    if ord in (1, -1):
        if not keepdims and c > r:
            c -= 1
        return (_max if ord == 1 else _min)(_sum(ax, axis=r, keepdims=keepdims), axis=c,
                                            keepdims=keepdims)
    if ord in (np.inf, -np.inf):
        if not keepdims and r > c:
            r -= 1
        return (_max if ord > 0 else _min)(_sum(ax, axis=c, keepdims=keepdims), axis=r,
                                           keepdims=keepdims)
    if ord in ("nuc", 2, -2):
        s = svd(moveaxis(x, (r, c), (-2, -1)), compute_uv=False)
        y = _max(s, axis=-1) if ord == 2 else _min(s, axis=-1) if ord == -2 else \
            _sum(s, axis=-1)
        return expand_dims(y, (r, c)) if keepdims else y
    raise ShardcError(f"Invalid order '{ord}' for matrix norm.")


wrap_public(globals())
