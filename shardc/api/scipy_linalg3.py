"""shardc.scipy.linalg, part 3: eigh_tridiagonal, as jax's: eigenvalues by bisection on
Sturm sequence counts (LAPACK's stebz: every wanted eigenvalue bisected at once, in a
while loop until the brackets are below tolerance), eigenvectors by inverse iteration
from random starts (jax's key 42), re-orthogonalized within clusters of close
eigenvalues."""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError, ShardcNotImplementedError, ShardcTypeError, wrap_public
from ..ir import dtypes
from . import lax as slax
from . import numpy as snp
from .control import fori_loop, scan, while_loop
from .numpy import linalg as snl
from .numpy._util import aval

__all__ = ["eigh_tridiagonal"]

_SUPPORTED = (np.float32, np.float64, np.complex64, np.complex128)


def _sturm(alpha, beta_sq, pivmin, alpha0_perturbation, x):
    """How many eigenvalues lie below each x: the negative pivots of the LDL^T of
    T - x I, pivots kept away from zero by pivmin (as LAPACK's dlaebz)."""
    n = aval(alpha).shape[0]
    q = alpha[0] - x
    count = snp.where(q < 0, 1, 0).astype(np.int32)
    q = snp.where(alpha[0] == x, alpha0_perturbation, q)

    def step(i, qc):
        q, count = qc
        q = alpha[i] - beta_sq[i - 1] / q - x
        small = q <= pivmin
        return snp.where(small, snp.minimum(q, -pivmin), q), snp.where(small, count + 1, count)
    return fori_loop(1, n, step, (q, count))[1]


# ---------------------------------------------------------------- the inner solver

def _perturb_pivot(p, row, perturb, safemin, bignum):
    """Nudge pivots so that row / p cannot overflow, as LAPACK's xLAGTS (and jax's
    kernel): a tiny pivot gets +perturb (doubled each time) while the quotient would
    overflow, or, if it is merely subnormal, is scaled up with its row."""
    pert = snp.copysign(snp.maximum(snp.abs(perturb), safemin), snp.real(p))
    maxf = snp.max(snp.abs(row), axis=-1)

    def body(state):
        p, pert, row, active = state
        absp = snp.abs(p)
        active = active & (absp < 1)
        tiny = absp < safemin
        bump = active & snp.where(tiny, (absp == 0) | (maxf * safemin > absp),
                                  maxf > absp * bignum)
        scale = active & tiny & ~bump
        p = snp.where(bump, p + pert.astype(aval(p).dtype), snp.where(scale, p * bignum, p))
        row = snp.where(scale[..., None], row * bignum, row)
        return p, snp.where(bump, pert * 2, pert), row, bump
    init = (p, pert, row, snp.abs(p) < 1)
    p, _, row, _ = while_loop(lambda s: snp.any(s[3]), body, init)
    return p, row


def _rounded(p):
    """The product p rounded on its own: XLA:CPU would fuse `a - b * c` into one FMA,
    whose single rounding differs from the kernel jax runs (no FMA); inverse iteration
    amplifies that difference up to the sign of an eigenvector. The select (a no-op)
    keeps the product out of the subtraction."""
    return snp.where(snp.isnan(p), np.nan, p)


def _tridiagonal_solve_perturbed(dl, d, du, b):
    """x with T x = b, T tridiagonal (dl, d, du: [..., n], b: [..., n, r]), by Gaussian
    elimination with partial pivoting, tiny pivots perturbed by eps * max|U| so that a
    singular T still gives a finite x: LAPACK's xLAGTF + xLAGTS, which jax's CPU
    tridiagonal_solve(perturb_singular=True) runs and inverse iteration needs (the
    unpivoted shardc.lax.linalg.tridiagonal_solve would lose the eigenvector's sign).
    Elimination is a scan over the rows carrying the current one (the pivot choice may
    swap it with the next); back substitution a reverse scan over the three
    diagonals of U."""
    n = aval(d).shape[-1]
    rdt = np.finfo(aval(d).dtype).dtype
    fi = np.finfo(rdt)
    small = rdt.type(1) / fi.max
    safemin = fi.tiny if small < fi.tiny else small * (1 + fi.eps)
    bignum = rdt.type(1) / safemin
    if n == 1:
        p, row = _perturb_pivot(d[..., 0], b[..., 0, :], fi.eps * snp.abs(d[..., 0]), safemin,
                                bignum)
        return (row / p[..., None])[..., None, :]
    rows = lambda v: snp.moveaxis(v, -1, 0)     # noqa: E731  rows first, for the scans
    dl_r, d_r, du_r, b_r = rows(dl), rows(d), rows(du), snp.moveaxis(b, -2, 0)
    zero = snp.zeros_like(d_r[0])

    def eliminate(carry, xs):
        u0, u1, xk, scale1, maxu = carry
        sub, dg, sup, rhs, inner = xs
        scale2 = snp.abs(sub) + snp.abs(dg) + snp.where(inner, snp.abs(sup), 0)
        piv1 = snp.where(u0 == 0, 0, snp.abs(u0) / scale1)
        swap = (sub != 0) & (snp.abs(sub) / scale2 > piv1)
        keep = (sub != 0) & ~swap
        f_keep = snp.where(keep, sub / snp.where(keep, u0, 1), 0)      # row k+1 -= f row k
        f_swap = snp.where(swap, u0 / snp.where(swap, sub, 1), 0)      # rows swapped first
        sup_in = snp.where(inner, sup, 0)
        # row k, final
        r0, r1 = snp.where(swap, sub, u0), snp.where(swap, dg, u1)
        r2 = snp.where(swap, sup_in, zero)
        rx = snp.where(swap[..., None], rhs, xk)
        # row k + 1, still to be eliminated
        n0 = snp.where(swap, u1 - _rounded(f_swap * dg), dg - _rounded(f_keep * u1))
        n1 = snp.where(swap, -f_swap * sup_in, sup)
        nx = snp.where(swap[..., None], xk - _rounded(f_swap[..., None] * rhs),
                       rhs - _rounded(f_keep[..., None] * xk))
        nscale = snp.where(swap, snp.abs(n0) + snp.abs(n1), scale2)
        row_max = snp.maximum(snp.maximum(snp.abs(r0), snp.abs(r1)), snp.abs(r2))
        maxu = snp.where(inner, snp.maximum(maxu, row_max), maxu)
        return (n0, n1, nx, nscale, maxu), (r0, r1, r2, rx)
    u0, u1 = d_r[0], du_r[0]
    init = (u0, u1, b_r[0], snp.abs(u0) + snp.abs(u1), snp.maximum(snp.abs(u0), snp.abs(u1)))
    inner = snp.arange(n - 1) < n - 2
    (l0, l1, lx, _, maxu), (U0, U1, U2, X) = scan(
        eliminate, init, (dl_r[1:], d_r[1:], du_r[1:], b_r[1:], inner))
    maxu = snp.maximum(maxu, snp.abs(l0))
    U0 = snp.concatenate([U0, l0[None]])
    U1 = snp.concatenate([U1, l1[None]])
    U2 = snp.concatenate([U2, snp.zeros_like(l0)[None]])
    X = snp.concatenate([X, lx[None]])
    perturb = fi.eps * maxu

    def substitute(carry, xs):
        x1, x2 = carry
        u0, u1, u2, xk = xs
        row = xk - _rounded(u1[..., None] * x1) - _rounded(u2[..., None] * x2)
        p, row = _perturb_pivot(u0, row, perturb, safemin, bignum)
        x = row * (1 / p)[..., None]
        return (x, x1), x
    zx = snp.zeros_like(X[0])
    _, x = scan(substitute, (zx, zx), (U0, U1, U2, X), reverse=True)
    return snp.moveaxis(x, 0, -2)


# ---------------------------------------------------------------- eigh_tridiagonal

def _eigenvectors(alpha, beta, eigvals, key):
    """Inverse iteration: up to 5 tridiagonal solves of (T - lambda I) v = v per
    eigenvalue, stopped once no norm grows by 10%; the vectors of each cluster of close
    eigenvalues are re-orthogonalized (QR) after every solve."""
    from .random import normal
    n, k = aval(alpha).shape[0], aval(eigvals).shape[0]
    dl = snp.pad(snp.conj(beta), (1, 0))
    du = snp.pad(beta, (0, 1))
    eps = np.finfo(aval(eigvals).dtype).eps
    t_norm = snp.maximum(snp.abs(eigvals[0]), snp.abs(eigvals[-1]))
    close = (eigvals[1:] - eigvals[:-1]) < np.sqrt(eps) * t_norm
    left_close = snp.pad(close, (1, 0), constant_values=False)
    right_close = snp.pad(close, (0, 1), constant_values=False)
    starts_mask = snp.logical_and(snp.logical_not(left_close), right_close)
    ends_mask = snp.logical_and(left_close, snp.logical_not(right_close))
    max_clusters = k // 2 + 1
    starts = snp.nonzero(starts_mask, size=max_clusters)[0]
    ends = snp.nonzero(ends_mask, size=max_clusters)[0] + 1
    num_clusters = snp.sum(starts_mask)
    arange_k = snp.arange(k)
    solve_dt = np.result_type(aval(alpha).dtype, aval(beta).dtype)
    base_dt = np.finfo(solve_dt).dtype
    v = normal(key, (k, n), dtype=base_dt).astype(solve_dt)
    v = v / snl.norm(v, axis=-1, keepdims=True).astype(solve_dt)

    def orthogonalize(ev):
        def cluster(i, ev):
            start, end = starts[i], ends[i]
            # the cluster's rows, padded to k rows (dynamic size), orthonormalized by QR
            block = slax.dynamic_slice(snp.pad(ev, ((0, k), (0, 0))), (start, 0), (k, n))
            mask = (arange_k < end - start).astype(aval(ev).dtype)
            q, _ = snl.qr((block * mask[:, None]).T)
            update = slax.dynamic_update_slice(snp.zeros((2 * k, n), dtype=aval(ev).dtype),
                                               q.T * mask[:, None], (start, 0))[:k]
            inside = (arange_k >= start) & (arange_k < end)
            return snp.where(inside[:, None], update, ev)
        return fori_loop(0, num_clusters, cluster, ev)
    shifted = (alpha[None, :] - eigvals[:, None]).astype(solve_dt)
    dl_k = snp.broadcast_to(dl[None, :], (k, n)).astype(solve_dt)
    du_k = snp.broadcast_to(du[None, :], (k, n)).astype(solve_dt)

    def step(state):
        i, v, nrm, _ = state
        v_new = _tridiagonal_solve_perturbed(dl_k, shifted, du_k,
                                             v[:, :, None].astype(solve_dt))[..., 0]
        nrm_new = snl.norm(v_new, axis=-1, keepdims=True)
        v_new = v_new / nrm_new.astype(aval(v_new).dtype)
        return i + 1, orthogonalize(v_new), nrm_new[:, 0], nrm

    def go_on(state):
        i, _, nrm, nrm_old = state
        return snp.logical_and(i < 5, snp.any(nrm >= 1.1 * nrm_old))
    edt = aval(eigvals).dtype
    init = (0, v, snp.ones(k, dtype=edt), snp.zeros(k, dtype=edt))
    return while_loop(go_on, step, init)[1]


def eigh_tridiagonal(d, e, *, eigvals_only=False, select="a", select_range=None, tol=None,
                     key=None):
    """Eigenvalues (ascending) and, unless eigvals_only, eigenvectors (columns) of the
    Hermitian tridiagonal matrix with diagonal d and off-diagonal e. select 'a': all;
    'i': those of indices select_range[0]..select_range[1]. `key` seeds the inverse
    iteration's start vectors (jax's default: key 42)."""
    alpha, beta = snp.asarray(d), snp.asarray(e)
    if aval(alpha).dtype != aval(beta).dtype:
        raise ShardcTypeError("diagonal and off-diagonal values must have same dtype, got "
                              f"{aval(alpha).dtype} and {aval(beta).dtype}")
    if aval(alpha).dtype not in _SUPPORTED:
        raise ShardcTypeError("Only float32 and float64 inputs are supported as inputs to "
                              "shardc.scipy.linalg.eigh_tridiagonal, got "
                              f"{aval(alpha).dtype} and {aval(beta).dtype}")
    if aval(alpha).ndim != 1 or aval(beta).ndim != 1:
        raise ArgumentError(f"eigh_tridiagonal needs 1-D d and e, got shapes "
                            f"{aval(alpha).shape} and {aval(beta).shape}")
    if not eigvals_only and key is None:
        from .random import key as make_key
        key = make_key(42)
    n = aval(alpha).shape[0]
    if n <= 1:
        if eigvals_only:
            return snp.real(alpha)
        return snp.real(alpha), snp.eye(n, dtype=aval(alpha).dtype)
    if aval(beta).shape[0] != n - 1:
        raise ArgumentError(f"eigh_tridiagonal: e needs n - 1 = {n - 1} entries, got "
                            f"{aval(beta).shape[0]}")
    if dtypes.is_complex(aval(alpha).dtype):
        alpha = snp.real(alpha)
        beta_sq = snp.real(beta * snp.conj(beta))
        beta_abs = snp.sqrt(beta_sq)
    else:
        beta_abs = snp.abs(beta)
        beta_sq = snp.square(beta)
    # Gershgorin bounds of the spectrum
    row_sum = snp.concatenate([beta_abs[:1], beta_abs[:-1] + beta_abs[1:], beta_abs[-1:]])
    est_max = snp.max(alpha + row_sum)
    est_min = snp.min(alpha - row_sum)
    t_norm = snp.maximum(snp.abs(est_min), snp.abs(est_max))
    dt = aval(alpha).dtype
    finfo = np.finfo(dt)
    one = np.ones([], dtype=dt)
    safemin = np.maximum(one / finfo.max, (one + finfo.eps) * finfo.tiny)
    pivmin = safemin * snp.maximum(1, snp.max(beta_sq))
    alpha0_perturbation = snp.square(finfo.eps * beta_abs[0])
    abs_tol = finfo.eps * t_norm
    if tol is not None:
        abs_tol = snp.maximum(tol, abs_tol)
    max_it = finfo.nmant + 1
    if select == "a":
        target = snp.arange(n, dtype=np.int32)
    elif select == "i":
        if select_range is None:
            raise ArgumentError("for select='i', select_range must be specified.")
        if select_range[0] > select_range[1]:
            raise ArgumentError("Got empty index range in select_range.")
        target = snp.arange(select_range[0], select_range[1] + 1, dtype=np.int32)
    elif select == "v":
        raise ShardcNotImplementedError(
            "eigh_tridiagonal(..., select='v') is not implemented")
    else:
        raise ArgumentError("'select must have a value in {'a', 'i', 'v'}.")
    fudge = 2.1
    norm_slack = snp.array(n, dt) * fudge * finfo.eps * t_norm
    shape = aval(target).shape
    lower = snp.broadcast_to(est_min - norm_slack - 2 * fudge * pivmin, shape)
    upper = snp.broadcast_to(est_max + norm_slack + fudge * pivmin, shape)
    mid = 0.5 * (upper + lower)
    pivmin = snp.broadcast_to(pivmin, shape)
    alpha0_perturbation = snp.broadcast_to(alpha0_perturbation, shape)

    def go_on(state):
        i, lower, _, upper = state
        return snp.logical_and(i < max_it, abs_tol < snp.max(upper - lower))

    def bisect(state):
        i, lower, mid, upper = state
        counts = _sturm(alpha, beta_sq, pivmin, alpha0_perturbation, mid)
        lower = snp.where(counts <= target, mid, lower)
        upper = snp.where(counts > target, mid, upper)
        return i + 1, lower, 0.5 * (lower + upper), upper
    mid = while_loop(go_on, bisect, (0, lower, mid, upper))[2]
    if eigvals_only:
        return mid
    return mid, _eigenvectors(alpha, beta, mid, key).T


wrap_public(globals())
