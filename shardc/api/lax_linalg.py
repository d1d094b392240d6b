"""shardc.lax.linalg: the matrix decompositions, as jax.lax.linalg (names, signatures,
result order)."""
from __future__ import annotations

from ..errors import ShardcError, wrap_public
from ..ops import lax as L
from ..ops import linalg_decomp as D
from .numpy._util import aval, check_arraylike, promote_dtypes_inexact


def _arg(name, x, min_ndim=2):
    check_arraylike(name, x)
    (x,) = promote_dtypes_inexact(x)
    if aval(x).ndim < min_ndim:
        raise ShardcError(f"{name} needs an array of at least {min_ndim} dims, got shape "
                          f"{aval(x).shape}")
    return x


def _mT(x):
    nd = aval(x).ndim
    return L.transpose(x, (*range(nd - 2), nd - 1, nd - 2))


def symmetrize(x):
    """(x + x^H) / 2, as jax's symmetrize."""
    return L.div(L.add(x, _mT(x)), 2)


def cholesky(x, *, symmetrize_input=True):
    """The lower Cholesky factor of each (symmetric positive definite) matrix of x; NaN
    where the factorization fails."""
    x = _arg("cholesky", x)
    if symmetrize_input:
        x = symmetrize(x)
    return D.cholesky_p.bind(x)


def triangular_solve(a, b, *, left_side=False, lower=False, transpose_a=False,
                     conjugate_a=False, unit_diagonal=False):
    """x with op(a) @ x = b (left_side) or x @ op(a) = b, a triangular."""
    a = _arg("triangular_solve", a)
    b = _arg("triangular_solve", b)
    a, b = promote_dtypes_inexact(a, b)
    return D.triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                     transpose_a=bool(transpose_a),
                                     conjugate_a=bool(conjugate_a),
                                     unit_diagonal=bool(unit_diagonal))


def lu(x):
    """(lu, pivots, permutation) of x with partial pivoting, as jax.lax.linalg.lu."""
    x = _arg("lu", x)
    return tuple(D.lu_p.bind(x))


def qr(x, *, pivoting=False, full_matrices=True, use_magma=None):
    """(q, r) of x (Householder QR, as LAPACK's geqrf/orgqr)."""
    if pivoting:
        raise ShardcError("qr: pivoting=True is not supported by shardc (jax runs it with "
                          "LAPACK's geqp3 only); use pivoting=False")
    x = _arg("qr", x)
    return tuple(D.qr_p.bind(x, full_matrices=bool(full_matrices)))


def eigh(x, *, lower=True, symmetrize_input=True, sort_eigenvalues=True,
         subset_by_index=None):
    """(v, w): eigenvectors (columns) and ascending eigenvalues of each Hermitian matrix."""
    if subset_by_index is not None:
        raise ShardcError("eigh: subset_by_index is not supported by shardc on CPU (as jax's "
                          "LAPACK path); slice the full result")
    x = _arg("eigh", x)
    if symmetrize_input:
        x = symmetrize(x)
    return tuple(D.eigh_p.bind(x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues)))


def svd(x, *, full_matrices=True, compute_uv=True, subset_by_index=None, algorithm=None):
    """(u, s, vh) of x (LAPACK's gesdd), or s alone if not compute_uv."""
    if subset_by_index is not None:
        raise ShardcError("svd: subset_by_index is not supported by shardc on CPU; slice the "
                          "full result")
    x = _arg("svd", x)
    outs = D.svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    if not compute_uv:
        return outs[0]
    s, u, vt = outs
    return u, s, vt


wrap_public(globals())
