"""shardc.lax.linalg: the matrix decompositions, as jax.lax.linalg (names, signatures,
result order)."""
from __future__ import annotations

import enum

from ..errors import ArgumentError, ShardcError, ShardcTypeError, wrap_public
from ..ops import lax as L
from ..ir import dtypes
from ..ops import linalg_decomp as D
from ..ops import linalg_forms as F
from ..ops import linalg_tridiagonal as T
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
    b = _arg("triangular_solve", b, min_ndim=1)
    a, b = promote_dtypes_inexact(a, b)
    # b one dim short of a: a (stack of) vector(s), solved as one column (or row), as jax
    singleton = aval(b).ndim == aval(a).ndim - 1
    if singleton:
        sb = aval(b).shape
        b = L.reshape(b, (*sb, 1) if left_side else (*sb[:-1], 1, sb[-1]))
    if aval(b).ndim < 2:
        raise ShardcError(f"triangular_solve needs b of at least 2 dims (or one less than "
                          f"a's), got shape {aval(b).shape}")
    if conjugate_a and not transpose_a:     # LAPACK conjugates only with a transpose
        a = conj_p.bind(a) if dtypes.is_complex(aval(a).dtype) else a
        conjugate_a = False
    out = D.triangular_solve_p.bind(a, b, left_side=bool(left_side), lower=bool(lower),
                                    transpose_a=bool(transpose_a),
                                    conjugate_a=bool(conjugate_a),
                                    unit_diagonal=bool(unit_diagonal))
    if singleton:
        nd = aval(out).ndim
        out = L.reshape(out, aval(out).shape[:nd - 1] if left_side else
                        (*aval(out).shape[:nd - 2], aval(out).shape[-1]))
    return out


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
    """(q, r) of x (Householder QR, as LAPACK's geqrf/orgqr); with pivoting, (q, r, p)
    where x[..., p] = q @ r and p orders the columns as LAPACK's geqp3 does."""
    x = _arg("qr", x)
    if not pivoting:
        return tuple(D.qr_p.bind(x, full_matrices=bool(full_matrices)))
    a = aval(x)
    if 0 in a.shape[-2:]:
        q, r = D.qr_p.bind(x, full_matrices=bool(full_matrices))
        return q, r, L.zeros((*a.shape[:-2], a.shape[-1]), dtypes.int32)
    _, p, _ = _geqp3(x, L.zeros((*a.shape[:-2], a.shape[-1]), dtypes.int32))
    p = L.sub(p, 1)
    # geqp3 factors x with its columns permuted by p: q and r are that matrix's QR, and
    # the permutation is constant where differentiable, so qr's own gradient (jax's
    # rule, which permutes the tangent the same way) holds
    from . import numpy as snp
    xp = snp.take_along_axis(x, snp.broadcast_to(p[..., None, :], a.shape), axis=-1)
    q, r = D.qr_p.bind(xp, full_matrices=bool(full_matrices))
    return q, r, p


def eigh(x, *, lower=True, symmetrize_input=True, sort_eigenvalues=True,
         subset_by_index=None, implementation=None):
    """(v, w): eigenvectors (columns) and ascending eigenvalues of each Hermitian matrix
    (LAPACK's syevd / heevd)."""
    x = _arg("eigh", x)
    _full_subset(subset_by_index, aval(x).shape[-1], "eigh")
    _eigh_algorithm(implementation)
    if symmetrize_input:
        x = symmetrize(x)
    return tuple(D.eigh_p.bind(x, lower=bool(lower), sort_eigenvalues=bool(sort_eigenvalues)))


class SvdAlgorithm(enum.Enum):
    """svd's algorithm, as jax's: on CPU DEFAULT and DIVIDE_AND_CONQUER are LAPACK's
    gesdd, QR its gesvd; JACOBI and POLAR are TPU/GPU algorithms."""
    DEFAULT = "default"
    QR = "QR"
    JACOBI = "Jacobi"
    POLAR = "polar"
    DIVIDE_AND_CONQUER = "divide_and_conquer"


class EigImplementation(enum.Enum):
    """eig's implementation, as jax's (shardc runs LAPACK's, on CPU)."""
    CUSOLVER = "cusolver"
    MAGMA = "magma"
    LAPACK = "lapack"


class EighImplementation(enum.Enum):
    """eigh's algorithm, as jax's (on CPU LAPACK's syevd; JACOBI and QDWH are not)."""
    QR = "qr"
    JACOBI = "jacobi"
    QDWH = "qdwh"


def _lapack_svd(algorithm):
    name = getattr(algorithm, "name", None)             # shardc's enum or jax's
    if algorithm is None or name in ("DEFAULT", "DIVIDE_AND_CONQUER"):
        return "gesdd"
    if name == "QR":
        return "gesvd"
    if name in ("JACOBI", "POLAR"):
        raise NotImplementedError("The SVD Jacobi and Polar algorithms are not implemented "
                                  "on CPU.")
    raise ShardcError(f"svd: algorithm must be a shardc.lax.linalg.SvdAlgorithm, got "
                      f"{algorithm!r}")


def _full_subset(subset_by_index, k, name):
    """jax runs subset_by_index on TPU only; the whole range is no subset."""
    if subset_by_index is not None and tuple(subset_by_index) != (0, k):
        raise NotImplementedError(f"{name}: subset_by_index not supported on CPU and GPU "
                                  "(as jax); slice the full result")


def _eigh_algorithm(algorithm):
    algorithm = getattr(algorithm, "name", algorithm)    # shardc's enum or jax's
    if algorithm == "QDWH":
        raise NotImplementedError("QDWH implementation is only supported on TPU")
    if algorithm == "JACOBI":
        raise NotImplementedError("Jacobi implementation is not supported on CPU")


def svd(x, *, full_matrices=True, compute_uv=True, subset_by_index=None, algorithm=None):
    """(u, s, vh) of x (LAPACK's gesdd, or gesvd for SvdAlgorithm.QR), or s alone if not
    compute_uv."""
    x = _arg("svd", x)
    _full_subset(subset_by_index, min(aval(x).shape[-2:]), "svd")
    routine = _lapack_svd(algorithm)
    if 0 in aval(x).shape[-2:]:
        return _empty_svd(x, full_matrices, compute_uv)
    outs = D.svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv),
                        algorithm=routine)
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
        enable_eigvec_derivs=False, implementation=None, use_magma=None):
    """[w, vl?, vr?]: eigenvalues and left/right eigenvectors of each square matrix
    (LAPACK's geev; complex results, as jax's CPU eig). Differentiable as jax's: the
    eigenvalues always, the eigenvectors with enable_eigvec_derivs=True."""
    from .lax_eig import eig as eig_jvp
    if use_magma is not None:
        implementation = "magma" if use_magma else "lapack"
    name = getattr(implementation, "value", implementation)
    if name is not None and str(name).lower() != "lapack":
        raise ArgumentError("Only the lapack implementation is supported on CPU.")
    x = _arg("eig", x)
    return eig_jvp(x, bool(compute_left_eigenvectors), bool(compute_right_eigenvectors),
                   bool(enable_eigvec_derivs))


def tridiagonal_solve(dl, d, du, b, *, perturb_singular=False):
    """x with A x = b for the tridiagonal A of sub-, main and super-diagonals dl, d, du
    (each [..., m]; dl[..., 0] and du[..., m - 1] are ignored) and b [..., m, n], as
    jax.lax.linalg.tridiagonal_solve on CPU: LAPACK's gtsv, with partial pivoting, NaN
    where A is singular. `perturb_singular`: tiny pivots are nudged instead, so that a
    singular system has a finite solution (for inverse iteration)."""
    from . import numpy as snp
    dl, d, du, b = (snp.asarray(v) for v in (dl, d, du, b))
    for v in (dl, d, du, b):
        if not dtypes.is_inexact(aval(v).dtype):
            raise ShardcTypeError(f"tridiagonal_solve does not accept dtype {aval(v).dtype}: "
                                  "it takes floating or complex arrays")
    dts = [aval(v).dtype for v in (dl, d, du, b)]
    if len(set(dts)) > 1:
        raise ShardcTypeError("lax.tridiagonal_solve requires arguments to have the same "
                              f"dtypes, got {', '.join(map(str, dts))}.")
    for name, v in (("dl", dl), ("du", du)):
        if aval(v).shape != aval(d).shape:
            raise ShardcError(f"tridiagonal_solve: {name} has shape {aval(v).shape}, d has "
                              f"{aval(d).shape}; all three diagonals must be [..., m]")
    if aval(b).ndim < 2 or aval(b).shape[:-1] != aval(d).shape:
        raise ShardcError(f"tridiagonal_solve: b has shape {aval(b).shape}; it must be "
                          f"[..., m, n] with [..., m] = {aval(d).shape}")
    if aval(d).shape[-1] == 0:
        return b
    return T.tridiagonal_solve_p.bind(dl, d, du, b, perturb_singular=bool(perturb_singular))


def schur(x, *, compute_schur_vectors=True, sort_eig_vals=False, select_callable=None):
    """(t, vs): the Schur form and Schur vectors of each square matrix (LAPACK's gees;
    CPU only, as jax's), or (t,) without vectors."""
    if sort_eig_vals:
        raise NotImplementedError("The sort feature of LAPACK's gees routine is not "
                                  "implemented.")
    x = _arg("schur", x)
    return tuple(F.schur_p.bind(x, compute_schur_vectors=bool(compute_schur_vectors)))


def hessenberg(a):
    """(a, taus): the upper Hessenberg form above the first subdiagonal, the Householder
    reflectors below it and their scales (LAPACK's gehrd; CPU only, as jax's)."""
    a = _arg("hessenberg", a)
    return tuple(F.hessenberg_p.bind(a))


def tridiagonal(a, *, lower=True):
    """(arr, d, e, taus): a Hermitian matrix reduced to tridiagonal form (LAPACK's
    sytrd / hetrd): the reflectors in arr, the diagonal d, off-diagonal e, and taus."""
    a = _arg("tridiagonal", a)
    return tuple(F.tridiagonal_p.bind(a, lower=bool(lower)))


def _geqp3(a, jpvt):
    """(a, jpvt, taus): column-pivoted QR (LAPACK's geqp3): R above the diagonal,
    reflectors below, 1-based pivots (a nonzero jpvt entry fixes that column first)."""
    a = _arg("geqp3", a)
    check_arraylike("geqp3", jpvt)
    return tuple(F.geqp3_p.bind(a, jpvt))


def ormqr(a, taus, c, *, left=True, transpose=False):
    """Q @ c, Q^H @ c, c @ Q or c @ Q^H for the Q of geqrf's reflectors in a and taus,
    without forming Q (LAPACK's ormqr / unmqr)."""
    a = _arg("ormqr", a)
    check_arraylike("ormqr", taus, c)
    a, taus, c = promote_dtypes_inexact(a, taus, c)
    return F.ormqr_p.bind(a, taus, c, left=bool(left), transpose=bool(transpose))


def cholesky_update(r_matrix, w_vector):
    """The upper Cholesky factor of R^T R + w w^T from R's, in O(n^2): a Givens rotation
    per row folds w into R (jax's algorithm)."""
    from . import numpy as snp
    from .control import fori_loop
    check_arraylike("cholesky_update", r_matrix, w_vector)
    r, w = promote_dtypes_inexact(r_matrix, w_vector)
    n = aval(r).shape[-1] if aval(r).ndim == 2 else -1
    if aval(r).shape != (n, n) or aval(w).shape != (n,):
        raise ShardcError(f"cholesky_update needs an (n, n) matrix and an (n,) vector; got "
                          f"{aval(r).shape} and {aval(w).shape}")
    if dtypes.is_complex(aval(r).dtype):
        raise ShardcError("cholesky_update needs real float arrays (as jax's)")
    one, zero = snp.ones((), aval(r).dtype), snp.zeros((), aval(r).dtype)

    def row(k, rw):
        r, w = rw
        x, y = r[k, k], w[k]
        big = snp.maximum(snp.abs(x), snp.abs(y))
        safe = snp.where(y == 0, one, big)
        xs, ys = x / safe, y / safe
        rh = 1 / snp.sqrt(xs * xs + ys * ys)
        c = snp.where(y == 0, one, xs * rh)
        s = snp.where(y == 0, zero, -ys * rh)
        rk = r[k]
        return r.at[k].set(c * rk - s * w), c * w + s * rk
    return fori_loop(0, n, row, (r, w))[0]


def symmetric_product(a_matrix, c_matrix, *, alpha=1., beta=0., symmetrize_output=False):
    """alpha * a @ a^T + beta * c for a [..., m, n] and c [..., m, m]; with
    symmetrize_output the upper triangle mirrors the lower one (as jax's)."""
    from .numpy._linalg import matmul
    check_arraylike("symmetric_product", a_matrix, c_matrix)
    a, c = promote_dtypes_inexact(a_matrix, c_matrix)
    if dtypes.is_complex(aval(a).dtype):
        raise ShardcError("symmetric_product needs real float arrays (as jax's); got "
                          f"{aval(a).dtype}")
    sa, sc = aval(a).shape, aval(c).shape
    if len(sa) < 2 or len(sc) != len(sa) or sc[-1] != sc[-2] or sa[-2] != sc[-1] or \
            sa[:-2] != sc[:-2]:
        raise ShardcError("symmetric_product expects a rectangular matrix of shape (..., m, n) "
                          f"and a square matrix of shape (..., m, m); got {sa} and {sc}")
    out = L.add(L.mul(alpha, matmul(a, _mT(a), precision="highest")), L.mul(beta, c))
    if symmetrize_output:
        from .numpy import tril
        lower = tril(out)
        out = L.add(lower, _mT(tril(out, -1)))
    return out


wrap_public(globals())

from .lax_qdwh import qdwh  # noqa: E402,F401  (built on the functions above)
