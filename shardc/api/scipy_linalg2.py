"""shardc.scipy.linalg, part 2: expm (Pade approximation with scaling and squaring: the
degree and the number of squarings depend on the data, chosen by lax.switch and a
scan of lax.conds as jax's, so it differentiates the same way), expm_frechet (expm's
JVP), polar (QDWH or SVD) and block_diag."""
from __future__ import annotations

from functools import partial

import numpy as np

from ..errors import ArgumentError, ShardcNotImplementedError, ShardcTypeError, wrap_public
from . import lax_linalg as LL
from . import numpy as snp
from .control import cond, scan, switch
from .numpy import linalg as snl
from .numpy._util import aval, promote_dtypes, promote_dtypes_inexact
from .lax_qdwh import qdwh
from .scipy_linalg import solve_triangular

__all__ = ["expm", "expm_frechet", "polar", "block_diag"]


def _dot(a, b):
    return snp.dot(a, b, precision="highest")


# ---------------------------------------------------------------- expm

# Pade coefficients b_0..b_q of degrees 3, 5, 7, 9 and 13 (Higham 2005, table 2.3)
_PADE = {
    3: (120., 60., 12., 1.),
    5: (30240., 15120., 3360., 420., 30., 1.),
    7: (17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.),
    9: (17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880.,
        3960., 90., 1.),
    13: (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
         129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
         40840800., 960960., 16380., 182., 1.),
}


def _pade(q):
    """(U, V): the odd and even parts of the degree-q Pade approximant's numerator."""
    b = _PADE[q]

    def fn(A):
        n = aval(A).shape[0]
        ident = snp.eye(n, n, dtype=aval(A).dtype)
        A2 = _dot(A, A)
        if q == 13:     # Higham's evaluation: three products for degrees 8..13
            A4 = _dot(A2, A2)
            A6 = _dot(A4, A2)
            U = _dot(A, _dot(A6, b[13] * A6 + b[11] * A4 + b[9] * A2) + b[7] * A6 +
                     b[5] * A4 + b[3] * A2 + b[1] * ident)
            V = _dot(A6, b[12] * A6 + b[10] * A4 + b[8] * A2) + b[6] * A6 + b[4] * A4 + \
                b[2] * A2 + b[0] * ident
            return U, V
        powers = [ident, A2]        # A^0, A^2, A^4, ...
        for _ in range(2, q // 2 + 1):
            powers.append(_dot(powers[-1], A2))
        odd = even = None
        for i in range(q // 2, 0, -1):      # highest power first, as jax sums them
            odd = b[2 * i + 1] * powers[i] if odd is None else odd + b[2 * i + 1] * powers[i]
            even = b[2 * i] * powers[i] if even is None else even + b[2 * i] * powers[i]
        U = _dot(A, odd + b[1] * ident)
        V = even + b[0] * ident
        return U, V
    return fn


# the 1-norm bounds below which each degree is accurate enough, and the norm above which
# A is scaled down (Higham 2005, table 2.3; jax's values)
_F64 = (5.371920351148152, (0.01495585217958292, 0.253939833006323, 0.9504178996162932,
                            2.097847961257068), (3, 5, 7, 9, 13))
_F32 = (3.92572478313866, (0.4258730016922831, 1.880152677804762), (3, 5, 7))


def _calc_p_q(A):
    dt = np.dtype(aval(A).dtype)
    if dt in (np.float64, np.complex128):
        maxnorm, conds, degrees = _F64
    elif dt in (np.float32, np.complex64):
        maxnorm, conds, degrees = _F32
    else:
        raise ShardcTypeError(f"A.dtype={dt} is not supported.")
    a_l1 = snl.norm(A, 1)
    n_squarings = snp.maximum(0, snp.floor(snp.log2(a_l1 / maxnorm)))
    A = A / 2 ** n_squarings.astype(dt)
    idx = snp.digitize(a_l1, snp.array(conds, dtype=aval(a_l1).dtype))
    U, V = switch(idx, [_pade(q) for q in degrees], A)
    return U + V, -U + V, n_squarings


def _squaring(R, n_squarings, max_squarings):
    """R squared n_squarings times: a scan of max_squarings conditional squarings."""
    def step(c, i):
        return cond(i < n_squarings, lambda x: _dot(x, x), lambda x: x, c), None
    out, _ = scan(step, R, snp.arange(max_squarings, dtype=aval(n_squarings).dtype))
    return out


def expm(A, *, upper_triangular=False, max_squarings=16):
    """The matrix exponential of each square matrix; NaN where more than max_squarings
    squarings would be needed. upper_triangular: A is upper triangular (a triangular
    solve replaces the LU one)."""
    (A,) = promote_dtypes_inexact(snp.asarray(A))
    s = aval(A).shape
    if len(s) < 2 or s[-1] != s[-2]:
        raise ArgumentError(f"Expected A to be a (batched) square matrix, got A.shape={s}.")
    if len(s) > 2:
        return snp.vectorize(partial(expm, upper_triangular=upper_triangular,
                                     max_squarings=max_squarings),
                             signature="(n,n)->(n,n)")(A)
    P, Q, n_squarings = _calc_p_q(A)

    def nan(args):
        return snp.full_like(args[0], np.nan)

    def compute(args):
        _, P, Q = args
        R = solve_triangular(Q, P) if upper_triangular else snl.solve(Q, P)
        return _squaring(R, n_squarings, int(max_squarings))
    return cond(n_squarings > max_squarings, nan, compute, (A, P, Q))


def expm_frechet(A, E, *, method=None, compute_expm=True):
    """The Frechet derivative of expm at A in the direction E (expm's JVP), with expm(A)
    first unless compute_expm is False."""
    from .grad import jvp
    del method
    A, E = snp.asarray(A), snp.asarray(E)
    sa, se = aval(A).shape, aval(E).shape
    if len(sa) < 2 or sa[-2] != sa[-1]:
        raise ArgumentError(f"expected A to be a (batched) square matrix, got A.shape={sa}")
    if len(se) < 2 or se[-2] != se[-1]:
        raise ArgumentError(f"expected E to be a (batched) square matrix, got E.shape={se}")
    if sa != se:
        raise ArgumentError(f"expected A and E to be the same shape, got A.shape={sa} "
                            f"E.shape={se}")
    expm_a, frechet = jvp(partial(expm, upper_triangular=False, max_squarings=16), (A,), (E,))
    return (expm_a, frechet) if compute_expm else frechet


# ---------------------------------------------------------------- polar (QDWH)

def _mH(x):
    return snp.conj(snp.swapaxes(x, -1, -2))


def _qdwh(a, eps):
    return qdwh(a, eps=eps)[:2]


def _polar_2d(a, side, method, eps):
    m, n = aval(a).shape
    if method == "qdwh":
        if m >= n and side == "right":
            return _qdwh(a, eps)
        if m < n and side == "left":
            u, h = _qdwh(_mH(a), eps)
            return _mH(u), _mH(h)
        raise ShardcNotImplementedError(
            f"method='qdwh' only supports mxn matrices where m < n where side='right' and "
            f"m >= n side='left', got {(m, n)} with side={side!r}")
    if method == "svd":
        u, s, vh = LL.svd(a, full_matrices=False)
        s = s.astype(aval(u).dtype)
        if side == "right":
            return u @ vh, _mH(vh) * s[None, :] @ vh
        return u @ vh, u * s[None, :] @ _mH(u)
    raise ArgumentError(f"Unknown polar decomposition method {method}.")


def polar(a, side="right", *, method="qdwh", eps=None, max_iterations=None):
    """(unitary, posdef): a = unitary @ posdef (side 'right') or posdef @ unitary
    ('left'), by QDWH or the SVD. max_iterations is accepted and, as jax's, unused."""
    del max_iterations
    a = snp.asarray(a)
    if aval(a).ndim < 2:
        raise ArgumentError("The input `a` must be at least a 2-D array.")
    if side not in ("right", "left"):
        raise ArgumentError("The argument `side` must be either 'right' or 'left'.")
    sig = "(m,n)->(m,n),(n,n)" if side == "right" else "(m,n)->(m,n),(m,m)"
    return snp.vectorize(partial(_polar_2d, side=side, method=method, eps=eps),
                         signature=sig)(a)


# ---------------------------------------------------------------- block_diag

def block_diag(*arrs):
    """The block diagonal matrix of the given (at most 2-D) arrays."""
    if not arrs:
        arrs = (snp.zeros((1, 0)),)
    arrs = tuple(promote_dtypes(*arrs))
    bad = [i for i, a in enumerate(arrs) if aval(a).ndim > 2]
    if bad:
        raise ArgumentError("Arguments to shardc.scipy.linalg.block_diag must have at most 2 "
                            f"dimensions, got {aval(arrs[bad[0]]).shape} at argument "
                            f"{bad[0]}.")
    mats = [snp.atleast_2d(a) for a in arrs]
    total = sum(aval(a).shape[1] for a in mats)
    rows, col = [], 0
    for a in mats:
        cols = aval(a).shape[1]
        rows.append(snp.pad(a, ((0, 0), (col, total - cols - col))))
        col += cols
    return snp.concatenate(rows, axis=0)


wrap_public(globals())
