"""shardc.scipy.linalg, part 5: what jax.scipy.linalg builds on a Schur decomposition
(schur, hessenberg, rsf2csf, sqrtm, funm, solve_sylvester), with jax's signatures,
dtypes and failure values (NaN, where the recurrences divide by zero). The
recurrences on triangular matrices advance one superdiagonal (or one row) per loop
step, every entry of it at once, so a matrix of size n takes n - 1 steps, not n^2."""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError, ShardcNotImplementedError, ShardcTypeError, wrap_public
from ..ir import dtypes
from ..transforms.custom_jvp import custom_jvp
from . import lax as slax
from . import lax_linalg as LL
from . import numpy as snp
from .control import cond, fori_loop
from .numpy import linalg as snl
from .numpy._util import aval, check_arraylike, promote_dtypes_inexact

__all__ = ["schur", "hessenberg", "rsf2csf", "sqrtm", "funm", "solve_sylvester"]

_HIGHEST = slax.Precision.HIGHEST


def _mH(x):
    return snp.conj(snp.swapaxes(x, -1, -2))


def _complex_of(dt):
    """jax's to_complex_dtype: 64-bit types (int64 too) to complex128, the rest to
    complex64."""
    dt = np.dtype(dt)
    if dtypes.is_complex(dt):
        return dt
    wide = dt in (np.dtype(np.float64), np.dtype(np.int64), np.dtype(np.uint64))
    return np.dtype(np.complex128 if wide else np.complex64)


def _inexact_only(name, a):
    """LAPACK's decompositions take floating or complex arrays only (jax's TypeError,
    where shardc.lax.linalg would promote an integer array)."""
    dt = aval(a).dtype
    if not dtypes.is_inexact(dt):
        raise ShardcTypeError(f"{name} does not accept dtype {dtypes.short_name(dt)}. "
                              "Accepted dtypes are subtypes of floating, complexfloating.")


def _nonempty(name, n):
    if n == 0:
        raise ArgumentError(f"{name}: the matrix is empty (size 0); jax's {name} fails on "
                            "empty matrices too (its recurrence indexes element [0, 0])")


# ---------------------------------------------------------------- Schur, Hessenberg

def schur(a, output="real"):
    """(T, Z) with a = Z T Z^H, Z unitary: T upper triangular (output='complex') or
    quasi upper triangular with 2x2 blocks for complex eigenvalue pairs ('real', the
    default, for a real matrix). LAPACK's gees: CPU only, as jax's."""
    if output not in ("real", "complex"):
        raise ArgumentError(f"Expected 'output' to be either 'real' or 'complex', got "
                            f"output={output!r}.")
    check_arraylike("schur", a)
    a = snp.asarray(a)
    if output == "complex":
        a = a.astype(_complex_of(aval(a).dtype))
    else:
        _inexact_only("schur", a)
    return tuple(LL.schur(a))


def hessenberg(a, *, calc_q=False, overwrite_a=False, check_finite=True):
    """H, zero below its first subdiagonal, with a = Q H Q^H; (H, Q) with calc_q.
    LAPACK's gehrd: CPU only, as jax's."""
    del overwrite_a, check_finite
    check_arraylike("hessenberg", a)
    a = snp.asarray(a)
    shape = aval(a).shape
    if len(shape) < 2:
        raise ShardcTypeError(f"Input 0 to hessenberg must have rank at least 2, but got "
                              f"shape={shape}")
    if shape[-1] == 0:      # as jax: any dtype, no reduction to run
        return (snp.zeros_like(a), snp.zeros_like(a)) if calc_q else snp.zeros_like(a)
    _inexact_only("hessenberg", a)
    packed, taus = LL.hessenberg(a)
    h = snp.triu(packed, -1)
    if not calc_q:
        return h
    # the reflectors act on coordinates 1..n-1 only: Q = diag(1, Q')
    q = LL.householder_product(packed[..., 1:, :-1], taus)
    q = snp.pad(q, [(0, 0)] * (len(shape) - 2) + [(1, 0), (1, 0)])
    return h, q.at[..., 0, 0].set(1)


# ---------------------------------------------------------------- rsf2csf

def _eigvals2_impl(block):
    return snl.eigvals(block)


# The 2x2 block's eigenvalues come from geev, as jax's, because which one geev lists
# first decides the rotation (and so the phases of the result). shardc's eig has no
# derivative; a simple eigenvalue w of M solves w^2 - tr(M) w + det(M) = 0, so
# dw = (w dtr - ddet) / (2 w - tr), what jax's eigenvalue JVP gives for a 2x2 block.
_eigvals2 = custom_jvp(_eigvals2_impl)


@_eigvals2.defjvp
def _eigvals2_jvp(primals, tangents):
    (m,), (dm,) = primals, tangents
    w = _eigvals2_impl(m)
    tr = m[0, 0] + m[1, 1]
    dtr = dm[0, 0] + dm[1, 1]
    ddet = dm[0, 0] * m[1, 1] + m[0, 0] * dm[1, 1] - dm[0, 1] * m[1, 0] - m[0, 1] * dm[1, 0]
    return w, (w * dtr - ddet) / (2 * w - tr)


def _rotate(m, t, z):
    """Split the 2x2 block at rows/columns m-1, m: a Givens rotation G (from the block's
    first eigenvalue) applied as T <- G T G^H, Z <- Z G^H, on the parts of T a real
    Schur form leaves nonzero. Rows and columns are replaced through masks, not
    dynamic update slices: XLA's SPMD partitioner miscomputes a dynamic_update_slice
    along a sharded dim followed by a dynamic slice or update at an overlapping traced
    index (jax's programs too), which a row-sharded T would hit."""
    n = aval(t).shape[0]
    sub = t[m, m - 1]
    mu = _eigvals2(slax.dynamic_slice(t, (m - 1, m - 1), (2, 2)))[0] - t[m, m]
    r = snl.norm(snp.stack([mu, sub])).astype(aval(t).dtype)
    c, s = mu / r, sub / r
    idx = snp.arange(n)
    row, col = idx[:, None], idx[None, :]
    # rows m-1, m (columns m-1 on) <- G @ rows, G = [[conj(c), s], [-s, c]]
    top, bot = t[m - 1][None, :], t[m][None, :]
    right = col >= m - 1
    t = snp.where(right & (row == m - 1), snp.conj(c) * top + s * bot,
                  snp.where(right & (row == m), c * bot - s * top, t))

    def times_gh(x, keep):
        """Columns m-1, m of x @ G^H, rows where `keep`."""
        a, b = x[:, m - 1][:, None], x[:, m][:, None]
        x = snp.where(keep & (col == m - 1), c * a + snp.conj(s) * b, x)
        return snp.where(keep & (col == m), snp.conj(c) * b - snp.conj(s) * a, x)
    return times_gh(t, row < m + 1), times_gh(z, True)


def _rsf2csf_2d(t, z):
    cdt = _complex_of(snp.result_type(t, z))
    t, z = t.astype(cdt), z.astype(cdt)
    n = aval(t).shape[0]
    if n == 1:
        return t, z
    eps = float(dtypes.finfo(dtypes.real_dtype(cdt)).eps)

    def step(i, tz):
        t, z = tz
        m = n - i       # from the bottom block up, as scipy
        split = snp.abs(t[m, m - 1]) > eps * (snp.abs(t[m - 1, m - 1]) + snp.abs(t[m, m]))
        t, z = cond(split, _rotate, lambda m, t, z: (t, z), m, t, z)
        idx = snp.arange(n)
        return snp.where((idx[:, None] == m) & (idx[None, :] == m - 1), 0, t), z
    return fori_loop(1, n, step, (t, z))


def rsf2csf(T, Z, check_finite=True):
    """(T, Z) of a complex Schur form from schur's real one: each 2x2 diagonal block
    (a complex eigenvalue pair) split by a Givens rotation; Z's batch dims broadcast
    with T's."""
    del check_finite
    check_arraylike("rsf2csf", T, Z)
    t, z = snp.asarray(T), snp.asarray(Z)
    st, sz = aval(t).shape, aval(z).shape
    if len(st) < 2 or st[-1] != st[-2]:
        raise ArgumentError(f"Input 'T' must be square, got shape {st}.")
    if len(sz) < 2 or sz[-1] != sz[-2]:
        raise ArgumentError(f"Input 'Z' must be square, got shape {sz}.")
    if st[-1] != sz[-1]:
        raise ArgumentError(f"Input array shapes must match: Z: {sz} vs. T: {st}")
    _nonempty("rsf2csf", st[-1])
    return snp.vectorize(_rsf2csf_2d, signature="(n,n),(n,n)->(n,n),(n,n)")(t, z)


# ---------------------------------------------------------------- sqrtm, funm

def _offsets(n):
    """idx, and j - i for each entry (i, j)."""
    idx = snp.arange(n)
    return idx, idx[None, :] - idx[:, None]


def _column_entries(x, cols):
    """out[i, k] = x[k, cols[i]]: column cols[i] of x, as row i."""
    return snp.swapaxes(snp.take(x, cols, axis=1), 0, 1)


def _sqrtm_triangular(t):
    """The upper triangular U with U @ U = t (Bjorck & Hammarling): U's diagonal is the
    square roots of t's; U[i, j] = (t[i, j] - sum_{i<k<j} U[i, k] U[k, j]) /
    (U[i, i] + U[j, j]), which needs only nearer superdiagonals, so one superdiagonal
    is filled per step. 0 where the numerator is exactly 0 (a 0/0 otherwise)."""
    n = aval(t).shape[0]
    root = snp.sqrt(snp.diagonal(t))
    idx, off = _offsets(n)

    def step(k, u):
        j = snp.minimum(idx + k, n - 1)
        inner = (off > 0) & (off < k)
        s = snp.sum(snp.where(inner, u * _column_entries(u, j), 0), axis=1)
        tij = t[idx, j]
        val = snp.where(tij == s, snp.zeros_like(s), (tij - s) / (root + root[j]))
        return snp.where(off == k, val[:, None], u)
    return fori_loop(1, n, step, snp.diag(root))


def sqrtm(A, blocksize=1):
    """The principal square root of a matrix (complex Schur method, Bjorck & Hammarling;
    always complex, as jax's). blocksize > 1 (scipy's blocked variant) is not
    implemented, as in jax."""
    if blocksize > 1:
        raise ShardcNotImplementedError("Blocked version is not implemented yet.")
    check_arraylike("sqrtm", A)
    a = snp.asarray(A)
    if aval(a).ndim > 2:
        raise ArgumentError(f"sqrtm takes one (N, N) matrix, got shape {aval(a).shape} "
                            "(jax's sqrtm does not batch either); use shardc.vmap")
    t, z = schur(a, output="complex")
    _nonempty("sqrtm", aval(a).shape[-1])
    u = _sqrtm_triangular(t)
    return snp.matmul(snp.matmul(z, u, precision=_HIGHEST), _mH(z), precision=_HIGHEST)


def _parlett(f, t):
    """F = f(T) above the diagonal from F's diagonal, T upper triangular (Parlett's
    recurrence, Golub & Van Loan alg. 11.1.1): F[i, j] = (T[i, j] (F[j, j] - F[i, i]) +
    sum_{i<k<j} (T[i, k] F[k, j] - F[i, k] T[k, j])) / (T[j, j] - T[i, i]), left
    undivided where T has a repeated eigenvalue (as jax). One superdiagonal per step.
    Also the smallest |T[j, j] - T[i, i]| (and |T[0, 0]|), for funm's error estimate."""
    n = aval(t).shape[0]
    idx, off = _offsets(n)
    fd, td = snp.diagonal(f), snp.diagonal(t)

    def step(p, carry):
        f, minden = carry
        j = snp.minimum(idx + p, n - 1)
        inner = (off > 0) & (off < p)
        s = (t[idx, j] * (fd[j] - fd)
             + snp.sum(snp.where(inner, t * _column_entries(f, j), 0), axis=1)
             - snp.sum(snp.where(inner, f * _column_entries(t, j), 0), axis=1))
        den = td[j] - td
        s = snp.where(den != 0, s / den, s)
        gaps = snp.where(idx + p < n, snp.abs(den), np.inf)
        return snp.where(off == p, s[:, None], f), snp.minimum(minden, snp.min(gaps))
    return fori_loop(1, n, step, (f, snp.abs(t[0, 0])))


def funm(A, func, disp=True):
    """func of a square matrix: func on the eigenvalues (the complex Schur form's
    diagonal), spread by Parlett's recurrence; complex. With disp=False, (F, err), err
    estimating F's relative error (1 when T has repeated eigenvalues)."""
    check_arraylike("funm", A)
    a = snp.asarray(A)
    shape = aval(a).shape
    if len(shape) != 2 or shape[0] != shape[1]:
        raise ArgumentError(f"expected square array_like input, got shape {shape}")
    _nonempty("funm", shape[0])
    t, z = rsf2csf(*schur(a))
    f = snp.diag(func(snp.diagonal(t))).astype(aval(t).dtype)
    f, minden = _parlett(f, t)
    f = z @ f @ _mH(z)
    if disp:
        return f
    # jax's tolerance: complex64 results take float32's eps, complex128 float64's
    tol = float(np.finfo(np.float32 if aval(f).dtype == np.complex64 else np.float64).eps)
    minden = snp.where(minden == 0, tol, minden)
    est = snp.minimum(1, snp.maximum(tol, tol / minden * snl.norm(snp.triu(t, 1), 1)))
    return f, snp.where(snp.any(snp.isinf(f)), np.inf, est)


# ---------------------------------------------------------------- solve_sylvester

def _sylvester_triangular(r, sh, f):
    """Y with r Y + Y sh = f, r upper and sh lower triangular (Bartels-Stewart): row i
    of Y solves y (r[i, i] I + sh) = f[i] - r[i, i+1:] Y[i+1:], a triangular solve, from
    the last row up."""
    m, n = aval(f).shape
    idx = snp.arange(m)
    eye = snp.eye(n, dtype=aval(sh).dtype)

    def row(k, y):
        i = m - 1 - k
        ri = r[i]
        rhs = f[i] - snp.where(idx > i, ri, 0) @ y
        yi = LL.triangular_solve(sh + ri[i] * eye, rhs[None, :], left_side=False,
                                 lower=True)
        return snp.where(idx[:, None] == i, yi, y)     # (not a dynamic_update_slice: see _rotate)
    return fori_loop(0, m, row, snp.zeros_like(f))


def _sylvester_2d(a, b, c, tol, *, method):
    if method == "schur":
        # a = U R U^H, b^H = V S V^H: A X + X B = C becomes R Y + Y S^H = U^H C V
        r, u = schur(a, output="complex")
        s, v = schur(_mH(b), output="complex")
        y = _sylvester_triangular(r, _mH(s), _mH(u) @ c.astype(aval(r).dtype) @ v)
        x = u @ y @ _mH(v)
    else:
        # a = UA diag(wa) UA^-1, b likewise: Y = UA^-1 C UB / (wa_i + wb_j)
        wa, ua = snl.eig(a)
        wb, ub = snl.eig(b)
        f = snl.solve(ua, c.astype(aval(wa).dtype) @ ub)
        x = ua @ (f / (wa[:, None] + wb[None, :])) @ snl.inv(ub)
    if not dtypes.is_complex(aval(c).dtype):
        x = snp.real(x)
    # no unique solution when an eigenvalue of a and one of -b (nearly) coincide: NaN
    gap = snp.abs(snl.eigvals(a)[:, None] + snl.eigvals(b)[None, :])
    return snp.where(snp.any(gap < tol), np.nan, x)


def solve_sylvester(A, B, C, *, method="schur", tol=1e-8):
    """X with A X + X B = C (A (..., m, m), B (..., n, n), C (..., m, n), batch dims
    broadcast): 'schur' (Bartels-Stewart on complex Schur forms, the default) or
    'eigen' (eigendecompositions; faster, less accurate for ill-conditioned A, B). NaN
    where some eigenvalue sum of A and B is below tol in modulus."""
    check_arraylike("solve_sylvester", A, B, C)
    a, b, c = promote_dtypes_inexact(snp.asarray(A), snp.asarray(B), snp.asarray(C))
    sa, sb, sc = aval(a).shape, aval(b).shape, aval(c).shape
    if len(sc) < 2 or sa[-2:] != (sc[-2],) * 2 or sb[-2:] != (sc[-1],) * 2:
        raise ArgumentError(f"Incompatible shapes for Sylvester equation:\nA: {sa}\nB: "
                            f"{sb}\nC: {sc}")
    if method not in ("schur", "eigen"):
        raise ArgumentError(f"Unrecognized method {method}. The two valid methods are "
                            "either \"schur\" or \"eigen\".")
    _nonempty("solve_sylvester", min(sc[-2:]))
    return snp.vectorize(lambda a, b, c: _sylvester_2d(a, b, c, tol, method=method),
                         signature="(m,m),(n,n),(m,n)->(m,n)")(a, b, c)


wrap_public(globals())
