"""shardc.scipy.linalg, part 1: the decompositions and solvers of jax.scipy.linalg
(cholesky, cho_factor, cho_solve, svd, det, eigh, inv, lu, lu_factor, lu_solve, qr,
qr_multiply, solve, solve_triangular) on shardc.lax.linalg, with jax's signatures: the
`overwrite_*` / `check_finite` arguments are accepted and ignored, as jax's."""
from __future__ import annotations

import warnings
from functools import partial

import numpy as np

from ..errors import ArgumentError, ShardcNotImplementedError, wrap_public
from ..ops import linalg_decomp as D
from . import lax_linalg as LL
from . import numpy as snp
from .lax_solve import custom_linear_solve
from .numpy import linalg as snl
from ..transforms.ad import stop_gradient
from .numpy._util import aval, check_arraylike, promote_dtypes_inexact

__all__ = ["cholesky", "cho_factor", "cho_solve", "svd", "det", "eigh", "inv", "lu",
           "lu_factor", "lu_solve", "qr", "qr_multiply", "solve", "solve_triangular"]


def _inexact(*xs):
    return promote_dtypes_inexact(*(snp.asarray(x) for x in xs))


def _mH(x):
    return snp.conj(snp.swapaxes(x, -1, -2))


def _solve_signature(name, a, b, head="(n,n),"):
    """The gufunc signature jax's batched solvers use: b a vector, a (deprecated) stack of
    vectors, or a stack of matrices."""
    sa, sb = aval(a).shape, aval(b).shape
    if len(sb) == 1:
        return head + "(n)->(n)"
    if len(sa) == len(sb) + 1 and sa[-1] == sb[-1]:
        warnings.warn(f"shardc.scipy.linalg.{name}: batched 1D solves with b.ndim > 1 are "
                      "deprecated, and in the future will be treated as a batched 2D solve. "
                      f"Use {name}(..., b[..., None]).squeeze(-1) to avoid this warning.",
                      category=FutureWarning, stacklevel=4)
        return head + "(n)->(n)"
    return head + "(n,k)->(n,k)"


# ---------------------------------------------------------------- Cholesky

def cholesky(a, lower=False, overwrite_a=False, check_finite=True):
    """The Cholesky factor of each Hermitian positive definite matrix: lower (a = L L^H)
    or upper (a = U^H U); NaN where a is not positive definite."""
    del overwrite_a, check_finite
    check_arraylike("cholesky", a)
    (a,) = _inexact(a)
    factor = LL.cholesky(a if lower else _mH(a), symmetrize_input=False)
    return factor if lower else _mH(factor)


def cho_factor(a, lower=False, overwrite_a=False, check_finite=True):
    """(c, lower): the Cholesky factor and its side, for cho_solve."""
    del overwrite_a, check_finite
    return cholesky(a, lower=lower), lower


def _cho_solve(c, b, lower, signature):
    first = partial(LL.triangular_solve, left_side=True, lower=lower,
                    transpose_a=not lower, conjugate_a=not lower)
    second = partial(LL.triangular_solve, left_side=True, lower=lower,
                     transpose_a=lower, conjugate_a=lower)
    b = snp.vectorize(first, signature=signature)(c, b)
    return snp.vectorize(second, signature=signature)(c, b)


def cho_solve(c_and_lower, b, overwrite_b=False, check_finite=True):
    """x with a @ x = b, from cho_factor(a)'s (c, lower)."""
    del overwrite_b, check_finite
    c, lower = c_and_lower
    check_arraylike("cho_solve", c, b)
    c, b = _inexact(c, b)
    return _cho_solve(c, b, bool(lower), _solve_signature("cho_solve", c, b))


# ---------------------------------------------------------------- SVD, eigh, det, inv

def svd(a, full_matrices=True, compute_uv=True, overwrite_a=False, check_finite=True,
        lapack_driver="gesdd"):
    """(u, s, vh) of each matrix, or s alone without compute_uv."""
    del overwrite_a, check_finite, lapack_driver
    check_arraylike("svd", a)
    (a,) = _inexact(a)
    return LL.svd(a, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))


def det(a, overwrite_a=False, check_finite=True):
    """The determinant of each square matrix (jnp.linalg.det, its gradient included)."""
    del overwrite_a, check_finite
    return snl.det(a)


def inv(a, overwrite_a=False, check_finite=True):
    """The inverse of each square matrix."""
    del overwrite_a, check_finite
    return snl.inv(a)


def eigh(a, b=None, lower=True, eigvals_only=False, overwrite_a=False, overwrite_b=False,
         turbo=True, eigvals=None, type=1, check_finite=True):
    """(w, v): ascending eigenvalues and eigenvectors (columns) of each Hermitian matrix,
    or w alone with eigvals_only. Only the standard problem (b=None, type=1,
    eigvals=None), as jax."""
    del overwrite_a, overwrite_b, turbo, check_finite
    if b is not None:
        raise ShardcNotImplementedError("Only the b=None case of eigh is implemented")
    if type != 1:
        raise ShardcNotImplementedError("Only the type=1 case of eigh is implemented.")
    if eigvals is not None:
        raise ShardcNotImplementedError("Only the eigvals=None case of eigh is implemented.")
    check_arraylike("eigh", a)
    (a,) = _inexact(a)
    v, w = LL.eigh(a, lower=bool(lower))
    return w if eigvals_only else (w, v)


# ---------------------------------------------------------------- LU

def lu_factor(a, overwrite_a=False, check_finite=True):
    """(lu, piv): L below the diagonal (unit diagonal implied), U on and above it, and
    LAPACK's 0-based row swaps, for lu_solve."""
    del overwrite_a, check_finite
    check_arraylike("lu_factor", a)
    (a,) = _inexact(a)
    lu_, pivots, _ = LL.lu(a)
    return lu_, pivots


def _lu_solve_2d(lu_, perm, b, trans):
    """One matrix's LU solve: op(A) x = b with A = P^T L U, op as `trans` (0: A,
    1: A^T, 2: A^H)."""
    vec = aval(b).ndim == 1
    x = b[:, None] if vec else b
    if trans == 0:
        x = x[perm, :]
        x = LL.triangular_solve(lu_, x, left_side=True, lower=True, unit_diagonal=True)
        x = LL.triangular_solve(lu_, x, left_side=True, lower=False)
    else:
        conj = trans == 2
        x = LL.triangular_solve(lu_, x, left_side=True, lower=False, transpose_a=True,
                                conjugate_a=conj)
        x = LL.triangular_solve(lu_, x, left_side=True, lower=True, unit_diagonal=True,
                                transpose_a=True, conjugate_a=conj)
        x = x[snp.argsort(perm), :]     # undo the row permutation
    return x[:, 0] if vec else x


def lu_solve(lu_and_piv, b, trans=0, overwrite_b=False, check_finite=True):
    """x with op(a) @ x = b from lu_factor(a)'s (lu, piv); trans 0, 1, 2: a, a^T, a^H."""
    del overwrite_b, check_finite
    lu_, pivots = lu_and_piv
    check_arraylike("lu_solve", lu_, pivots, b)
    if trans not in (0, 1, 2):
        raise ArgumentError(f"'trans' value must be 0, 1, or 2, got {trans}")
    lu_, b = _inexact(lu_, b)
    sl = aval(lu_).shape
    if len(sl) < 2 or sl[-1] != sl[-2]:
        raise ArgumentError("last two dimensions of LU decomposition must be equal, got "
                            f"shape {sl}")
    if aval(b).ndim < 1:
        raise ArgumentError(f"b matrix must have rank >= 1, got shape {aval(b).shape}")
    perm = LL.lu_pivots_to_permutation(pivots, sl[-2])
    sig = _solve_signature("lu_solve", lu_, b, "(n,n),(n),")
    return snp.vectorize(partial(_lu_solve_2d, trans=trans), signature=sig)(lu_, perm, b)


def lu(a, permute_l=False, overwrite_a=False, check_finite=True):
    """(p, l, u) with a = p @ l @ u (p a permutation matrix, l unit lower trapezoidal,
    u upper trapezoidal), or (p @ l, u) with permute_l. One matrix, as jax's."""
    del overwrite_a, check_finite
    check_arraylike("lu", a)
    (a,) = _inexact(a)
    if aval(a).ndim != 2:
        raise ArgumentError(f"lu: expected a 2-D matrix, got shape {aval(a).shape} (jax's "
                            "scipy.linalg.lu is not batched; use lu_factor for stacks)")
    dt = aval(a).dtype
    lu_, _, permutation = LL.lu(a)
    m, n = aval(a).shape
    k = min(m, n)
    # p[i, j] = 1 where row j of l @ u is row i of a; real even for complex a, as jax's
    p = snp.real(snp.asarray(permutation[None, :] == snp.arange(m, dtype=permutation.dtype)
                             [:, None], dtype=dt))
    low = snp.tril(lu_, -1)[:, :k] + snp.eye(m, k, dtype=dt)
    up = snp.triu(lu_)[:k, :]
    if permute_l:
        return snp.matmul(p, low, precision="highest"), up
    return p, low, up


# ---------------------------------------------------------------- QR

def qr(a, overwrite_a=False, lwork=None, mode="full", pivoting=False, check_finite=True):
    """(q, r) of each matrix; mode 'full', 'economic' or 'r' (then (r,)); with pivoting
    the column permutation p is appended (a[:, p] = q @ r)."""
    del overwrite_a, lwork, check_finite
    if mode in ("full", "r"):
        full_matrices = True
    elif mode == "economic":
        full_matrices = False
    else:
        raise ArgumentError(f"Unsupported QR decomposition mode '{mode}'")
    check_arraylike("qr", a)
    (a,) = _inexact(a)
    q, r, *p = LL.qr(a, pivoting=bool(pivoting), full_matrices=full_matrices)
    if mode == "r":
        return (r, p[0]) if pivoting else (r,)
    return (q, r, p[0]) if pivoting else (q, r)


def qr_multiply(a, c, mode="right", pivoting=False, conjugate=False, overwrite_a=False,
                overwrite_c=False):
    """(c @ q or q @ c, r) for a's QR, without forming q (LAPACK's ormqr); with pivoting
    the column permutation is appended."""
    del overwrite_a, overwrite_c
    check_arraylike("qr_multiply", a, c)
    a, c = _inexact(a, c)
    if mode not in ("right", "left"):
        raise ArgumentError(f"mode must be 'right' or 'left', got {mode!r}")
    if aval(a).ndim < 2:
        raise ArgumentError(f"qr_multiply: a must be a (batched) matrix, got shape "
                            f"{aval(a).shape}")
    onedim = aval(c).ndim == 1
    if onedim:
        c = c[:, None] if mode == "left" else c[None, :]
    if aval(c).ndim < 2:
        raise ArgumentError(f"qr_multiply: c must be a vector or a (batched) matrix, got "
                            f"shape {aval(c).shape}")
    m, n = aval(a).shape[-2:]
    k = min(m, n)
    sc = aval(c).shape
    if mode == "left" and sc[-2] != k:
        raise ArgumentError(f"Array shapes are not compatible for Q @ c operation: a has "
                            f"shape {aval(a).shape} so Q has {k} columns, but c has "
                            f"{sc[-2]} rows (expected {k}).")
    if mode == "right" and sc[-1] != m:
        raise ArgumentError(f"Array shapes are not compatible for c @ Q operation: a has "
                            f"shape {aval(a).shape} so Q has {m} rows, but c has {sc[-1]} "
                            f"columns (expected {m}).")
    batch = snp.broadcast_shapes(aval(a).shape[:-2], sc[:-2])
    a = snp.broadcast_to(a, (*batch, m, n))
    c = snp.broadcast_to(c, (*batch, *sc[-2:]))
    p = None
    if pivoting:
        r, p, taus = LL._geqp3(a, snp.zeros((*batch, n), dtype=np.int32))
        p = p - 1
    else:
        r, taus = D.geqrf_p.bind(a)
    if m > n and mode == "left":    # Q is m x m: pad c's rows with zeros
        c = snp.concatenate([c, snp.zeros((*batch, m - k, aval(c).shape[-1]),
                                          dtype=aval(c).dtype)], axis=-2)
    if conjugate:
        c = snp.swapaxes(c, -1, -2)
    left = (mode == "left") != conjugate
    cq = LL.ormqr(r, taus, c, left=left, transpose=bool(conjugate))
    if conjugate:
        cq = snp.swapaxes(cq, -1, -2)
    if mode == "right":
        cq = cq[..., :k]
    if onedim:
        cq = snp.ravel(cq)
    r = snp.triu(r[..., :k, :])
    return (cq, r, p) if pivoting else (cq, r)


# ---------------------------------------------------------------- solvers

def _matvec(a, x):
    """a @ x for stacks of matrices a [..., n, m] and vectors x [..., m], broadcast."""
    return snp.matmul(a, x[..., None], precision="highest")[..., 0]


def _solve_pos(a, b, lower):
    """Positive definite a: Cholesky, differentiated implicitly (custom_linear_solve) so
    the gradient is the solve's, not the factorization's (as jax's)."""
    sa, sb = aval(a).shape, aval(b).shape
    if not (len(sa) >= 2 and len(sb) in (len(sa), len(sa) - 1) and
            sa[-1] == sa[-2] == sb[len(sa) - 2]):
        raise ArgumentError("The arguments to solve must have shapes a=[..., m, m] and "
                            f"b=[..., m, k] or b=[..., m]; got a={sa} and b={sb}")
    factors = cholesky(stop_gradient(a), lower=lower)

    def solve_vec(_, x):
        return _cho_solve(factors, x, lower, "(n,n),(n)->(n)")
    custom = partial(custom_linear_solve, lambda x: _matvec(a, x), solve=solve_vec,
                     symmetric=True)
    if len(sa) == len(sb) + 1:
        return custom(b)
    from .vmap import vmap
    return vmap(custom, len(sb) - 1, max(len(sa), len(sb)) - 1)(b)


def solve(a, b, lower=False, overwrite_a=False, overwrite_b=False, debug=False,
          check_finite=True, assume_a="gen"):
    """x with a @ x = b; assume_a 'pos' solves by Cholesky (a's `lower` triangle),
    'gen', 'sym' and 'her' by LU."""
    del overwrite_a, overwrite_b, debug, check_finite
    valid = ["gen", "sym", "her", "pos"]
    if assume_a not in valid:
        raise ArgumentError(f"Expected assume_a to be one of {valid}; got {assume_a!r}")
    if assume_a != "pos":
        return snl.solve(a, b)
    check_arraylike("solve", a, b)
    a, b = _inexact(a, b)
    return _solve_pos(a, b, bool(lower))


_TRANS = {0: (False, False), "N": (False, False), 1: (True, False), "T": (True, False),
          2: (True, True), "C": (True, True)}


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     debug=None, check_finite=True):
    """x with op(a) @ x = b for triangular a (its `lower` or upper triangle); trans
    0/'N', 1/'T', 2/'C': a, a^T, a^H."""
    del overwrite_b, debug, check_finite
    if isinstance(trans, (bool, np.bool_)) or trans not in _TRANS:
        raise ArgumentError(f"Invalid 'trans' value {trans}")
    transpose_a, conjugate_a = _TRANS[trans]
    check_arraylike("solve_triangular", a, b)
    a, b = _inexact(a, b)
    if aval(a).ndim < 2:
        raise ArgumentError(f"solve_triangular: a must be a (batched) square matrix, got "
                            f"shape {aval(a).shape}")
    sig = _solve_signature("solve_triangular", a, b)
    fn = partial(LL.triangular_solve, left_side=True, lower=bool(lower),
                 transpose_a=transpose_a, conjugate_a=conjugate_a,
                 unit_diagonal=bool(unit_diagonal))
    return snp.vectorize(fn, signature=sig)(a, b)


wrap_public(globals())
