"""jax.lax.linalg.qdwh: the polar decomposition x = u h by the QR-based dynamically
weighted Halley iteration (Nakatsukasa & Higham), with jax's static schedule of weights,
its convergence test and its padded ("dynamic") shapes. scipy.linalg.polar uses it."""
from __future__ import annotations

import operator

import numpy as np

from ..errors import ArgumentError, ShardcTypeError, wrap_public
from ..trace import core
from . import lax as slax
from . import lax_linalg as LL
from . import numpy as snp
from .control import fori_loop, while_loop
from .numpy import linalg as snl
from .numpy._util import aval

__all__ = ["qdwh"]


def _mH(x):
    return snp.conj(snp.swapaxes(x, -1, -2))


def _mask(x, dims, alternative=0):
    """x where every index is below `dims` (None: the whole dim), else `alternative`."""
    keep = None
    for i, d in enumerate(dims):
        if d is not None:
            k = slax.broadcasted_iota(np.int32, aval(x).shape, i) < d
            keep = k if keep is None else keep & k
    return x if keep is None else snp.where(keep, x, alternative)


def _qr_step(u, m, n, params):
    """One step by QR of [sqrt(c) u; I] (stable while c is large); with a dynamic m the
    identity goes right under u's m true rows."""
    a_minus_e_by_sqrt_c, sqrt_c, e = params
    M, N = aval(u).shape
    eye = snp.eye(N, dtype=aval(u).dtype)
    if m is None:
        y = snp.concatenate([sqrt_c * u, eye], axis=0)
    else:
        y = slax.dynamic_update_slice_in_dim(
            snp.pad(sqrt_c * u, ((0, N), (0, 0))), eye, m, 0)
    q, _ = LL.qr(y, full_matrices=False)
    q1 = _mask(q[:M, :N], (m, n))
    q2 = _mH(_mask(slax.dynamic_slice_in_dim(q, M if m is None else m, N, 0), (n, n)))
    return e * u + a_minus_e_by_sqrt_c * (q1 @ q2)


def _chol_step(u, m, n, params):
    """One step by Cholesky of c u^H u + I (its padded corner the identity, so that it
    stays positive definite)."""
    a_minus_e, c, e = params
    N = aval(u).shape[1]
    eye = snp.eye(N, dtype=aval(u).dtype)
    x = _mask(c * (_mH(u) @ u) + eye, (n, n), eye)
    y = LL.cholesky(x, symmetrize_input=False)
    z = snp.conj(LL.triangular_solve(y, u.T, left_side=True, lower=True, conjugate_a=True))
    z = _mH(LL.triangular_solve(y, z, left_side=True, lower=True, transpose_a=True,
                                conjugate_a=True))
    return e * u + a_minus_e * z


def _weights(eps, max_iterations):
    """The static schedule: the QR steps' and the Cholesky steps' parameters, following
    the lower bound l of u's singular values (in Python, as jax's)."""
    l, tol_l = eps, 10. * eps / 2.
    qr_coefs, chol_coefs = [], []
    k = 0
    while l + tol_l < 1 and k < max_iterations:
        k += 1
        l2 = l * l
        dd = (4 * (1 / l2 - 1) / l2) ** (1 / 3)
        sqd = (1. + dd) ** (1 / 2)
        a = sqd + (2 - dd + 2 * (2 - l2) / (l2 * sqd)) ** (1 / 2)
        b = (a - 1) ** 2 / 4
        c = a + b - 1
        l = l * (a + b * l2) / (1 + c * l2)
        if c > 100:
            qr_coefs.append(((a - b / c) / c ** (1 / 2), c ** (1 / 2), b / c))
        else:
            chol_coefs.append((a - b / c, c, b / c))
    return qr_coefs, chol_coefs


def _qdwh(x, m, n, max_iterations, eps):
    dt = aval(x).dtype
    if eps is None:
        eps = float(np.finfo(dt).eps)
    one_norm = snl.norm(x, ord=1)
    inf_norm = snl.norm(x, ord=np.inf)
    alpha_inv = slax.rsqrt(one_norm) * slax.rsqrt(inf_norm)
    alpha_inv = snp.where(one_norm == 0, 1, alpha_inv)
    u = x * alpha_inv.astype(dt)
    tol_norm = snp.cbrt(10. * eps / 2.)
    qr_coefs, chol_coefs = _weights(eps, max_iterations)

    def run(u, coefs, step, test):
        if not coefs:
            return u, snp.asarray(True)
        table = snp.array(coefs).astype(dt)

        def body(i, state):
            u_prev = state[0]
            u = step(u_prev, m, n, tuple(slax.dynamic_index_in_dim(table, i, keepdims=False)))
            return u, (snl.norm(u - u_prev) > tol_norm) if test else snp.asarray(True)
        return fori_loop(0, len(coefs), body, (u, snp.asarray(True)))
    u, _ = run(u, qr_coefs, _qr_step, False)
    u, not_converged = run(u, chol_coefs, _chol_step, True)
    halley = (3 - 1 / 3, 3, 1 / 3)      # the weights once l has reached 1

    def body(state):
        i, u, _ = state
        u_new = _chol_step(u, m, n, halley)
        return i + 1, u_new, snl.norm(u_new - u) > tol_norm
    num_iters, u, not_converged = while_loop(
        lambda s: snp.logical_and(s[2], s[0] < max_iterations), body,
        (len(qr_coefs) + len(chol_coefs), u, not_converged))     # (weak, as jax's)
    u = 1.5 * u - 0.5 * u @ (_mH(u) @ u)      # one Newton-Schulz step
    h = _mH(u) @ x
    return u, (h + _mH(h)) / 2, num_iters, snp.logical_not(not_converged)


def _static(value, what, kind):
    if core.is_tracer(value):
        raise ShardcTypeError(f"The `{what}` argument must be statically specified to use "
                              "`qdwh` within JAX transformations.")
    return kind(value)


def qdwh(x, *, is_hermitian=False, max_iterations=None, eps=None, dynamic_shape=None):
    """(u, h, num_iters, is_converged): the polar decomposition x = u h of an M x N
    matrix (M >= N; zero-padded from `dynamic_shape`'s (m, n) when given), the number
    of iterations run and whether they converged within `max_iterations` (default 10).
    `is_hermitian` is unused, as in jax."""
    _static(is_hermitian, "is_hermitian", bool)
    max_iterations = 10 if max_iterations is None else \
        _static(max_iterations, "max_iterations", operator.index)
    x = snp.asarray(x)
    if aval(x).ndim != 2:
        raise ArgumentError(f"qdwh takes one M x N matrix, got shape {aval(x).shape}")
    M, N = aval(x).shape
    if M < N:
        raise ArgumentError("The input matrix of shape M x N must have M >= N.")
    if dynamic_shape is not None:
        m, n = dynamic_shape
        x = _mask(x, (m, n))
    else:
        m = n = None
    return _qdwh(x, m, n, max_iterations, eps)


wrap_public(globals())
