"""shardc.lax.linalg: the matrix decompositions, as jax.lax.linalg (names, signatures,
result order)."""
from __future__ import annotations

from ..errors import ShardcError, wrap_public
from ..ops import lax as L
from ..ir import dtypes
from ..ops import linalg_decomp as D
from ..ops.complex import conj_p
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


def H(x):
    """The conjugate transpose of each matrix."""
    t = _mT(x)
    return conj_p.bind(t) if dtypes.is_complex(aval(x).dtype) else t


def symmetrize(x):
    """(x + x^H) / 2, as jax's symmetrize."""
    return L.div(L.add(x, H(x)), 2)


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
    if conjugate_a and not transpose_a:     # LAPACK conjugates only with a transpose
        a = conj_p.bind(a) if dtypes.is_complex(aval(a).dtype) else a
        conjugate_a = False
    return D.triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                     transpose_a=bool(transpose_a),
                                     conjugate_a=bool(conjugate_a),
                                     unit_diagonal=bool(unit_diagonal))


def lu(x):
    """(lu, pivots, permutation) of x with partial pivoting, as jax.lax.linalg.lu."""
    x = _arg("lu", x)
    return tuple(D.lu_p.bind(x))


def lu_pivots_to_permutation(pivots, permutation_size):
    """The permutation the swaps of LU's pivots make (as jax.lax.linalg's)."""
    check_arraylike("lu_pivots_to_permutation", pivots)
    if aval(pivots).dtype != dtypes.int32:
        pivots = L.convert_element_type(pivots, dtypes.int32)
    return D.lu_pivots_to_permutation_p.bind(pivots, permutation_size=int(permutation_size))


def householder_product(a, taus):
    """The product of the Householder reflectors geqrf leaves in `a` (its Q), as
    jax.lax.linalg.householder_product."""
    a = _arg("householder_product", a)
    check_arraylike("householder_product", taus)
    return D.householder_product_p.bind(a, taus)


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
    if 0 in aval(x).shape[-2:]:
        return _empty_svd(x, full_matrices, compute_uv)
    outs = D.svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    if not compute_uv:
        return outs[0]
    s, u, vt = outs
    return u, s, vt


def _empty_svd(x, full_matrices, compute_uv):
    """An empty matrix's SVD, as jax's _empty_svd (LAPACK rejects empty input)."""
    a = aval(x)
    batch, (m, n) = a.shape[:-2], a.shape[-2:]
    s = L.zeros((*batch, 0), dtypes.real_dtype(a.dtype))
    if not compute_uv:
        return s
    if full_matrices:
        k = max(m, n)
        eye = L.convert_element_type(L.eq(L.iota(dtypes.int32, (k, k), 0),
                                          L.iota(dtypes.int32, (k, k), 1)), a.dtype)
        u = L.broadcast_in_dim(eye, (*batch, k, k), (len(batch), len(batch) + 1))
    else:
        u = L.zeros((*batch, m, n), a.dtype)
    v = L.zeros((*batch, 0, 0), a.dtype)
    if m < n:
        u, v = v, u
    return u, s, v


def eig(x, *, compute_left_eigenvectors=True, compute_right_eigenvectors=True,
        use_magma=None, implementation=None):
    """[w, vl?, vr?]: eigenvalues and left/right eigenvectors of each square matrix
    (LAPACK's geev; complex results, as jax's CPU eig)."""
    x = _arg("eig", x)
    return list(D.eig_p.bind(x, compute_left_eigenvectors=bool(compute_left_eigenvectors),
                             compute_right_eigenvectors=bool(compute_right_eigenvectors)))


def tridiagonal_solve(dl, d, du, b, *, perturb_singular=False):
    """x with A x = b for the tridiagonal A of sub-, main and super-diagonals dl, d, du
    (each [..., m]; dl[..., 0] and du[..., m - 1] are ignored) and b [..., m, n], as
    jax.lax.linalg.tridiagonal_solve: the Thomas algorithm, a forward elimination and a
    back substitution, each a scan over the m rows (differentiable as scans are). It
    does not pivot, as jax's GPU solver; LAPACK's gtsv, jax's on CPU, does, which matters
    only for systems far from diagonally dominant. `perturb_singular`: a pivot below
    eps * max|A| becomes that (with its sign), so a singular system has a finite
    solution (as jax's, for inverse iteration)."""
    from . import numpy as snp
    from .control import scan
    dl, d, du, b = (snp.asarray(v) for v in (dl, d, du, b))
    m = aval(d).shape[-1] if aval(d).ndim else 0
    for name, v in (("dl", dl), ("du", du)):
        if aval(v).shape != aval(d).shape:
            raise ShardcError(f"tridiagonal_solve: {name} has shape {aval(v).shape}, d has "
                              f"{aval(d).shape}; all three diagonals must be [..., m]")
    if aval(b).ndim < 2 or aval(b).shape[:-1] != aval(d).shape:
        raise ShardcError(f"tridiagonal_solve: b has shape {aval(b).shape}; it must be "
                          f"[..., m, n] with [..., m] = {aval(d).shape}")
    if m == 0:
        return b
    row = snp.arange(m)
    dl = snp.where(row == 0, snp.zeros_like(dl), dl)
    du = snp.where(row == m - 1, snp.zeros_like(du), du)
    rows = [snp.moveaxis(v, -1, 0) for v in (dl, d, du)] + [snp.moveaxis(b, -2, 0)]
    tiny = None
    if perturb_singular:
        scale = snp.max(snp.stack([snp.abs(dl), snp.abs(d), snp.abs(du)]), axis=(0, -1))
        tiny = snp.finfo(aval(d).dtype).eps * scale

    def eliminate(carry, xs):
        c_prev, y_prev = carry
        l_i, d_i, u_i, b_i = xs
        w = d_i - l_i * c_prev
        if tiny is not None:
            w = snp.where(snp.abs(w) < tiny, snp.where(w < 0, -tiny, tiny), w)
        c = u_i / w
        y = (b_i - l_i[..., None] * y_prev) / w[..., None]
        return (c, y), (c, y)
    init = (snp.zeros_like(rows[1][0]), snp.zeros_like(rows[3][0]))
    _, (c, y) = scan(eliminate, init, rows)

    def substitute(x_next, xs):
        c_i, y_i = xs
        x = y_i - c_i[..., None] * x_next
        return x, x
    _, x = scan(substitute, snp.zeros_like(y[0]), (c, y), reverse=True)
    return snp.moveaxis(x, 0, -2)


wrap_public(globals())
