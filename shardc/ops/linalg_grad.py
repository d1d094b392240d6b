"""Reverse-mode rules of the decompositions: the transposes of jax's jvp rules
(cholesky_jvp_rule, _triangular_solve_jvp_rule_a, _lu_jvp_rule, qr_jvp_rule,
_eigh_jvp_rule, _svd_jvp_rule), for real and complex matrices.

Complex cotangents follow jax's convention (shardc/ops/complex.py): a rule is the
transpose of the jvp under the pairing Re sum(ct * tangent), so a product's plain
transposes stay plain (A dX B -> A^T G B^T), a conjugate transpose in the jvp stays one in
its transpose (dX^H -> G^H), and the parts taking Re or i*Im of a tangent take the same
part of the cotangent."""
from __future__ import annotations

from ..errors import ShardcError
from ..ir import dtypes
from . import lax as L
from .linalg import dot_general_p
from .linalg_decomp import cholesky_p, eigh_p, lu_p, qr_p, svd_p, triangular_solve_p


def mT(x):
    nd = L.aval(x).ndim
    return L.transpose(x, (*range(nd - 2), nd - 1, nd - 2))


def mm(a, b):
    """Batched a @ b over the leading dims."""
    nd = L.aval(a).ndim
    nb = tuple(range(nd - 2))
    return dot_general_p.bind(a, b, contracting=((nd - 1,), (nd - 2,)), batch=(nb, nb))


def _mask(x, lower, k=0):
    a = L.aval(x)
    nd = a.ndim
    r = L.iota(dtypes.int32, a.shape, nd - 2)
    c = L.iota(dtypes.int32, a.shape, nd - 1)
    if k:
        r = L.add(r, k)
    return L.select(L.ge(r, c) if lower else L.le(r, c), x, L.zeros_like(x))


def tril(x, k=0):
    return _mask(x, True, k)


def triu(x, k=0):
    return _mask(x, False, k)


def eye_like(x):
    a = L.aval(x)
    nd = a.ndim
    r = L.iota(dtypes.int32, a.shape, nd - 2)
    c = L.iota(dtypes.int32, a.shape, nd - 1)
    return L.convert_element_type(L.eq(r, c), a.dtype)


def solve(a, b, **kw):
    return triangular_solve_p.bind(a, b, **kw)


def _row(v):
    """(..., k) -> (..., 1, k)."""
    a = L.aval(v)
    return L.reshape(v, (*a.shape[:-1], 1, a.shape[-1]))


def _col(v):
    a = L.aval(v)
    return L.reshape(v, (*a.shape, 1))


def _bcast_to(x, shape):
    a = L.aval(x)
    return L.broadcast_in_dim(x, shape, tuple(range(a.ndim))) if a.shape != tuple(shape) else x


def _diag(x):
    """(..., n, n) -> (..., n): the diagonal (masked sum)."""
    a = L.aval(x)
    return L.reduce_sum(L.mul(x, eye_like(x)), (a.ndim - 1,))


def _cplx(x):
    return dtypes.is_complex(L.aval(x).dtype)


def _conj(x):
    """conj(x) for complex x, x itself for real."""
    if not _cplx(x):
        return x
    from .complex import conj_p
    return conj_p.bind(x)


def _H(x):
    """The conjugate transpose of the last two dims."""
    return _conj(mT(x))


def _i_imag(x):
    """i * imag(x) as x's complex dtype (real x has none: None)."""
    if not _cplx(x):
        return None
    from .complex import complex_p, imag_p
    im = imag_p.bind(x)
    return complex_p.bind(L.zeros_like(im), im)


def _as(x, like):
    """x (real) in like's dtype."""
    dt = L.aval(like).dtype
    return x if L.aval(x).dtype == dt else L.convert_element_type(x, dt)


# ---------------------------------------------------------------- cholesky

def _chol_vjp(ctx, cts, x):
    (g,) = cts
    lo = ctx.out
    # jax's L' = L phi(L^-1 S' L^-H) is linear in S' (no conjugate of it): its transpose
    # is L^-T phi(L^T G) conj(L)^-1
    p = tril(mm(mT(lo), g))
    p = L.sub(p, L.mul(L.mul(p, eye_like(p)), 0.5))          # diagonal halved
    tmp = solve(lo, p, left_side=True, lower=True, transpose_a=True)
    # not symmetrized: cholesky(symmetrize_input=True) symmetrizes its input before the
    # primitive (whose transpose symmetrizes this), and jax's rule leaves the tangent as is
    return [solve(lo, tmp, left_side=False, lower=True, conjugate_a=_cplx(lo))]


cholesky_p.vjp = _chol_vjp


# ---------------------------------------------------------------- triangular_solve

def _tri_vjp(ctx, cts, a, b, *, left_side=False, lower=False, transpose_a=False,
             conjugate_a=False, unit_diagonal=False):
    (g,) = cts
    x = ctx.out
    # (complex too: the transposes are jax's, unconjugated; conjugate_a's conj is linear)
    bbar = solve(a, g, left_side=left_side, lower=lower, transpose_a=not transpose_a,
                 conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    abar = None
    if ctx.active is None or ctx.active[0]:
        gop = L.neg(mm(bbar, mT(x)) if left_side else mm(mT(x), bbar))
        if transpose_a:
            gop = mT(gop)
        if conjugate_a and dtypes.is_complex(L.aval(gop).dtype):
            from .complex import conj_p
            gop = conj_p.bind(gop)
        k = 1 if unit_diagonal else 0
        abar = tril(gop, -k) if lower else triu(gop, k)
    return [abar, bbar]


triangular_solve_p.vjp = _tri_vjp


# ---------------------------------------------------------------- lu

def _lu_vjp(ctx, cts, x):
    g = cts[0]
    lu, _, perm = ctx.outs
    a = L.aval(lu)
    m, n = a.shape[-2:]
    if m != n:
        raise ShardcError("shardc differentiates lu of square matrices only (jax also has "
                          "the rectangular case)")
    lo = L.add(tril(lu, -1), eye_like(lu))
    up = triu(lu)
    xbar = L.add(tril(mm(mT(lo), g), -1), triu(mm(g, mT(up))))
    t = solve(up, xbar, left_side=False, lower=False, transpose_a=True)
    xp = solve(lo, t, left_side=True, lower=True, unit_diagonal=True, transpose_a=True)
    # rows of the permuted matrix back to their places: abar = P^T xp
    pa = L.aval(perm)
    onehot = L.convert_element_type(
        L.eq(L.broadcast_in_dim(perm, (*pa.shape, m), tuple(range(pa.ndim))),
             L.iota(dtypes.int32, (*pa.shape, m), pa.ndim)), a.dtype)   # P[r, c]
    return [mm(mT(onehot), xp)]


lu_p.vjp = _lu_vjp


# ---------------------------------------------------------------- qr

def _qr_vjp(ctx, cts, x, *, full_matrices=True):
    qbar, rbar = cts
    q, r = ctx.outs
    a = L.aval(x)
    m, n = a.shape[-2:]
    if m > n and full_matrices:
        raise ShardcError("Unimplemented case of QR decomposition derivative: "
                          "full_matrices=True on a tall matrix (use full_matrices=False)")
    if m < n:
        # x = [x1 x2]: (q, r1) = qr(x1) and r2 = q^H x2 (jax's wide-matrix rule, transposed)
        b = a.shape[:-2]

        def cols(v, lo, hi):
            return L.slice(v, (0,) * len(b) + (0, lo), (*b, m, hi))
        x2, r1, rbar1, rbar2 = cols(x, m, n), cols(r, 0, m), cols(rbar, 0, m), cols(rbar, m, n)
        qbar = L.add(qbar, mm(_conj(x2), _H(rbar2)))
        x1bar = _qr_thin_vjp(q, r1, qbar, rbar1)
        return [L.concatenate([x1bar, mm(_conj(q), rbar2)], a.ndim - 1)]
    return [_qr_thin_vjp(q, r, qbar, rbar)]


def _qr_thin_vjp(q, r, qbar, rbar):
    """jax's _thin_qr_jvp transposed: with c = dx r^-1, b = q^H c and
    omega = tril(b, -1) - tril(b, -1)^H + i Im(diag b), dq = q (omega - b) + c and
    dr = (b - omega) r."""
    m1 = mm(mT(q), qbar)
    m2 = mm(rbar, mT(r))
    om = L.sub(m1, m2)                                      # d/d omega
    bbar = L.sub(m2, m1)
    bbar = L.add(bbar, tril(L.sub(om, _H(om)), -1))
    im = _i_imag(om)
    if im is not None:                                      # complex: omega's i Im(diag b)
        bbar = L.add(bbar, L.mul(im, eye_like(im)))
    cbar = L.add(qbar, mm(_conj(q), bbar))
    return solve(r, cbar, left_side=False, lower=False, transpose_a=True)


qr_p.vjp = _qr_vjp


# ---------------------------------------------------------------- eigh

def _eigh_f(w):
    """F[i, j] = 1 / (w[j] - w[i]) off the diagonal, 0 on it."""
    wr, wc = _row(w), _col(w)
    a = L.aval(w)
    shape = (*a.shape, a.shape[-1])
    diff = L.sub(_bcast_to(wr, shape), _bcast_to(wc, shape))
    eye = eye_like(diff)
    return L.sub(L.div(L.ones_like(diff), L.add(diff, eye)), eye)


def _eigh_vjp(ctx, cts, x, *, lower=True, sort_eigenvalues=True):
    vbar, wbar = cts
    v, w = ctx.outs
    a = L.aval(v)
    # the F term only when the eigenvectors have a cotangent (None: nothing reads them),
    # as jax's transpose skips F * vbar for a symbolic zero: F is inf at repeated
    # eigenvalues, and inf * 0 made eigvalsh's gradient NaN there
    terms = []
    if vbar is not None:
        terms.append(L.mul(_as(_eigh_f(w), v), mm(mT(v), vbar)))
    if wbar is not None:
        # (w is real: dw = Re diag(v^H da v), whose transpose takes wbar as complex)
        terms.append(L.mul(eye_like(v), _bcast_to(_row(_as(wbar, v)), a.shape)))
    inner = terms[0] if len(terms) == 1 else L.add(*terms)
    # dv = v (F * (v^H da v)) and dw: da's cotangent is conj(v) inner v^T
    return [mm(mm(_conj(v), inner), mT(v))]


_eigh_vjp.keeps_none = True
eigh_p.vjp = _eigh_vjp


# ---------------------------------------------------------------- svd

def _svd_vjp(ctx, cts, x, *, full_matrices=True, compute_uv=True, algorithm="gesdd"):
    """jax's _svd_jvp_rule transposed: with dS = u^H dA v (v = vt^H),
    ds = Re diag(dS), du = u (F * (dS s + (dS s)^H) + i Im(diag dS) / s) and
    dv = v (F * (s dS + (s dS)^H)), plus the projections off u's (v's) span of a tall
    (wide) matrix."""
    a = L.aval(x)
    m, n = a.shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise ShardcError("Singular value decomposition JVP not implemented for full "
                          "matrices (as jax): use full_matrices=False")
    if compute_uv:
        s, u, vt = ctx.outs
        sbar, ubar, vtbar = cts
    else:
        s, u, vt = svd_p.bind(x, full_matrices=False, compute_uv=True)
        (sbar,) = cts
        ubar = vtbar = None
    k = min(m, n)
    kk = (*a.shape[:-2], k, k)
    eye = eye_like(L.zeros(kk, a.dtype))
    dsbar = L.mul(eye, _bcast_to(_row(_as(sbar, x)), kk))     # d/d dS
    if ubar is not None:
        vbar = _H(vtbar)
        s_row = _bcast_to(_row(_as(s, x)), kk)
        s_col = _bcast_to(_col(_as(s, x)), kk)
        f = _as(_svd_f(_bcast_to(_row(s), kk), _bcast_to(_col(s), kk)), x)
        ut_ubar = mm(mT(u), ubar)
        y = L.mul(f, ut_ubar)
        y2 = L.mul(f, mm(_conj(vt), vbar))                     # v^T vbar
        dsbar = L.add(dsbar, L.mul(L.add(y, _H(y)), s_row))
        dsbar = L.add(dsbar, L.mul(s_col, L.add(y2, _H(y2))))
        im = _i_imag(ut_ubar)
        if im is not None:      # complex: du's i Im(diag dS) / s (0 where s is 0, as jax)
            zero = L.eq(s_row, L.zeros_like(s_row))
            sinv = L.select(zero, L.zeros_like(s_row),
                            L.div(L.ones_like(s_row), L.select(zero, L.ones_like(s_row),
                                                               s_row)))
            dsbar = L.add(dsbar, L.mul(L.mul(im, eye), sinv))
    # dS = u^H dA v: dA's cotangent is conj(u) dsbar v^T = conj(u) dsbar conj(vt)
    out = mm(mm(_conj(u), dsbar), _conj(vt))
    if ubar is not None and m > n:
        # du += (1 - u u^H) dA v / s
        us = L.div(ubar, _bcast_to(_row(_as(s, x)), L.aval(ubar).shape))
        out = L.add(out, mm(L.sub(us, mm(_conj(u), mm(mT(u), us))), _conj(vt)))
    if ubar is not None and n > m:
        # dv += (1 - v v^H) dA^H u / s, v = vt^H
        vs = L.div(vbar, _bcast_to(_row(_as(s, x)), L.aval(vbar).shape))
        out = L.add(out, mm(_conj(u), _H(L.sub(vs, mm(mT(vt), mm(_conj(vt), vs))))))
    return [out]


def _svd_f(s_row, s_col):
    """jax's F: 1 / (s_j^2 - s_i^2) off the diagonal, 0 on it."""
    diffs = L.mul(L.add(s_row, s_col), L.sub(s_row, s_col))
    eye = eye_like(diffs)
    return L.sub(L.div(L.ones_like(diffs), L.add(diffs, eye)), eye)


svd_p.vjp = _svd_vjp
