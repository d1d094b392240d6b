"""shardc.scipy.sparse.linalg: the Krylov solvers cg, bicgstab and gmres, as
jax.scipy.sparse.linalg's. `A` and the preconditioner `M` are matrices or functions,
x and b any pytrees of arrays. Each solve is a lax.custom_linear_solve, so gradients
come from another solve of the (transposed) system, never by differentiating through
the iteration (a while loop)."""
from __future__ import annotations

import functools
import operator

import jax
import numpy as np

from ..errors import ArgumentError, ShardcTypeError, wrap_public
from ..trace import core
from . import numpy as snp
from .control import fori_loop, while_loop
from .lax_linalg import cholesky, triangular_solve
from .lax_solve import custom_linear_solve
from .numpy._util import aval, convert, result_type
from ..trace import pytree as _tree

__all__ = ["cg", "gmres", "bicgstab"]

_HI = "highest"


def _dot(a, b):
    return snp.dot(a, b, precision=_HI)


def _vdot(a, b):
    return snp.vdot(a, b, precision=_HI)


def _vdot_real_part(x, y):
    """Re(x^H y) without the real-imaginary cross terms: a real result."""
    out = _vdot(snp.real(x), snp.real(y))
    if snp.iscomplexobj(x) or snp.iscomplexobj(y):
        out = out + _vdot(snp.imag(x), snp.imag(y))
    return out


def _vdot_real_tree(x, y):
    return sum(_tree.tree_leaves(_tree.tree_map(_vdot_real_part, x, y)))


def _vdot_tree(x, y):
    return sum(_tree.tree_leaves(_tree.tree_map(_vdot, x, y)))


def _norm(x):
    xs = _tree.tree_leaves(x)
    return snp.sqrt(sum(map(_vdot_real_part, xs, xs)))


def _mul(scalar, tree):
    return _tree.tree_map(lambda v: scalar * v, tree)


def _add(a, b):
    return _tree.tree_map(operator.add, a, b)


def _sub(a, b):
    return _tree.tree_map(operator.sub, a, b)


def _identity(x):
    return x


def _lattice(tree):
    """(dtype, weak) the leaves promote to (jax's lattice_result_type)."""
    return result_type(*_tree.tree_leaves(tree))


def _is_array(f):
    return isinstance(f, (np.ndarray, jax.Array)) or core.is_tracer(f)


def _normalize_matvec(f):
    """A function computing A @ x from a matrix, matmul-able object or function."""
    if callable(f) and not core.is_tracer(f):
        return f
    if _is_array(f):
        shape = np.shape(f)
        if len(shape) != 2 or shape[0] != shape[1]:
            raise ArgumentError(f"linear operator must be a square matrix, but has shape: "
                             f"{shape}")
        return functools.partial(_dot, f)
    if hasattr(f, "__matmul__"):
        if hasattr(f, "shape") and (len(f.shape) != 2 or f.shape[0] != f.shape[1]):
            raise ArgumentError(f"linear operator must be a square matrix, but has shape: "
                             f"{f.shape}")
        return functools.partial(operator.matmul, f)
    raise ShardcTypeError(f"linear operator must be either a function or ndarray: {f}")


def _cg_solve(A, b, x0=None, *, maxiter, tol=1e-5, atol=0.0, M=_identity):
    atol2 = snp.maximum(snp.square(tol) * _vdot_real_tree(b, b), snp.square(atol))

    def cond(value):
        _, r, gamma, _, k = value
        rs = snp.real(gamma) if M is _identity else _vdot_real_tree(r, r)
        return (rs > atol2) & (k < maxiter)

    def body(value):
        x, r, gamma, p, k = value
        ap = A(p)
        alpha = gamma / snp.astype(_vdot_real_tree(p, ap), dtype)
        x_ = _add(x, _mul(alpha, p))
        r_ = _sub(r, _mul(alpha, ap))
        z_ = M(r_)
        gamma_ = snp.astype(_vdot_real_tree(r_, z_), dtype)
        return x_, r_, gamma_, _add(z_, _mul(gamma_ / gamma, p)), k + 1

    r0 = _sub(b, A(x0))
    p0 = z0 = M(r0)
    dtype = _lattice(p0)[0]
    gamma0 = snp.astype(_vdot_real_tree(r0, z0), dtype)
    return while_loop(cond, body, (x0, r0, gamma0, p0, 0))[0]


def _bicgstab_solve(A, b, x0=None, *, maxiter, tol=1e-5, atol=0.0, M=_identity):
    atol2 = snp.maximum(snp.square(tol) * _vdot_real_tree(b, b), snp.square(atol))

    def cond(value):
        _, r, *_, k = value
        return (_vdot_real_tree(r, r) > atol2) & (k < maxiter) & (k >= 0)

    def body(value):
        x, r, rhat, alpha, omega, rho, p, q, k = value
        rho_ = _vdot_tree(rhat, r)
        beta = rho_ / rho * alpha / omega
        p_ = _add(r, _mul(beta, _sub(p, _mul(omega, q))))
        phat = M(p_)
        q_ = A(phat)
        alpha_ = rho_ / _vdot_tree(rhat, q_)
        s = _sub(r, _mul(alpha_, q_))
        exit_early = _vdot_real_tree(s, s) < atol2
        shat = M(s)
        t = A(shat)
        omega_ = _vdot_tree(t, s) / _vdot_tree(t, t)
        pick = functools.partial(snp.where, exit_early)
        x_ = _tree.tree_map(pick, _add(x, _mul(alpha_, phat)),
                            _add(x, _add(_mul(alpha_, phat), _mul(omega_, shat))))
        r_ = _tree.tree_map(pick, s, _sub(s, _mul(omega_, t)))
        # negative k: a breakdown (rho, omega or alpha vanished) stops the loop
        k_ = snp.where((omega_ == 0) | (alpha_ == 0), -11, k + 1)
        k_ = snp.where(rho_ == 0, -10, k_)
        return x_, r_, rhat, alpha_, omega_, rho_, p_, q_, k_

    r0 = _sub(b, A(x0))
    one = convert(1, *_lattice(b))
    return while_loop(cond, body, (x0, r0, r0, one, one, one, r0, r0, 0))[0]


def _shapes(tree):
    return [np.shape(v) for v in _tree.tree_leaves(tree)]


def _prepare(A, b, x0, M):
    b = _tree.tree_map(snp.asarray, b)
    x0 = _tree.tree_map(snp.zeros_like, b) if x0 is None else \
        _tree.tree_map(snp.asarray, x0)
    A = _normalize_matvec(A)
    M = _identity if M is None else _normalize_matvec(M)
    if _tree.tree_structure(x0) != _tree.tree_structure(b):
        raise ArgumentError("x0 and b must have matching tree structure: "
                         f"{_tree.tree_structure(x0)} vs {_tree.tree_structure(b)}")
    return A, b, x0, M


def _isolve(solve, A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None,
            check_symmetric=False):
    A, b, x0, M = _prepare(A, b, x0, M)
    if maxiter is None:
        maxiter = 10 * sum(int(np.prod(s)) for s in _shapes(b))    # as scipy
    if _shapes(x0) != _shapes(b):
        raise ArgumentError(f"arrays in x0 and b must have matching shapes: {_shapes(x0)} vs "
                         f"{_shapes(b)}")
    isolve = functools.partial(solve, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M)
    # a real symmetric A is its own transpose: the backward solve reuses `isolve`
    symmetric = check_symmetric and all(not snp.iscomplexobj(v)
                                        for v in _tree.tree_leaves(b))
    x = custom_linear_solve(A, b, solve=isolve, transpose_solve=isolve, symmetric=symmetric)
    return x, None


def cg(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Conjugate gradients for a Hermitian positive definite A, as
    jax.scipy.sparse.linalg.cg: (x, None)."""
    return _isolve(_cg_solve, A=A, b=b, x0=x0, tol=tol, atol=atol, maxiter=maxiter, M=M,
                   check_symmetric=True)


def bicgstab(A, b, x0=None, *, tol=1e-5, atol=0.0, maxiter=None, M=None):
    """Bi-conjugate gradients stabilized for a general A, as
    jax.scipy.sparse.linalg.bicgstab: (x, None)."""
    return _isolve(_bicgstab_solve, A=A, b=b, x0=x0, tol=tol, atol=atol, maxiter=maxiter,
                   M=M)


# ------------------------------------------------------------------------------ GMRES

def _safe_normalize(x, thresh=None):
    """(x / |x|, |x|), or zeros and 0 when |x| is at most `thresh` (default: eps)."""
    norm = _norm(x)
    dtype, weak = _lattice(x)
    if thresh is None:
        thresh = np.finfo(aval(norm).dtype).eps
    thresh = snp.real(snp.astype(thresh, dtype))
    use = norm > thresh
    norm_cast = convert(norm, dtype, weak)
    return (_tree.tree_map(lambda y: snp.where(use, y / norm_cast, 0.0), x),
            snp.where(use, norm, 0.0))


def _project_on_columns(Q, v):
    """Q^H v for Q a tree of (..., n) column stacks."""
    proj = _tree.tree_map(
        lambda X, y: snp.einsum("...n,...->n", snp.conj(X), y, precision=_HI), Q, v)
    return _tree.tree_reduce(operator.add, proj)


def _classical_gram_schmidt(Q, x, xnorm, max_iterations=2):
    """x orthogonalized against Q's columns (repeated while |r| < |x| / sqrt 2):
    (unit q, the overlaps r)."""
    Q0 = _tree.tree_leaves(Q)[0]
    r = snp.zeros(aval(Q0).shape[-1], dtype=aval(Q0).dtype)

    def body(carry):
        k, q, r, qnorm_scaled = carry
        h = _project_on_columns(Q, q)
        q = _sub(q, _tree.tree_map(lambda X: _dot(X, h), Q))
        r = _add(r, h)

        def qcond(c):
            k, not_done, _, _ = c
            return snp.logical_and(not_done, k < (max_iterations - 1))

        def qbody(c):
            k, _, q, _ = c
            return k, False, q, _safe_normalize(q)[1] / snp.sqrt(2.0)
        _, _, q, qnorm_scaled = while_loop(qcond, qbody, (k, True, q, qnorm_scaled))
        return k + 1, q, r, qnorm_scaled

    def cond(carry):
        k, _, r, qnorm_scaled = carry
        return snp.logical_and(k < (max_iterations - 1),
                               _safe_normalize(r)[1] < qnorm_scaled)
    carry = body((0, x, r, xnorm / snp.sqrt(2.0)))
    _, q, r, _ = while_loop(cond, body, carry)
    return q, r


def _arnoldi_step(k, A, M, V, H):
    """Adds the k'th Krylov vector M(A(V[:, k])), orthonormalized, as V[:, k+1] and its
    overlaps as H[k, :]; breakdown: it was (numerically) in the span already."""
    dtype = _lattice(V)[0]
    eps = np.finfo(dtype).eps
    v = M(A(_tree.tree_map(lambda X: X[..., k], V)))
    _, v_norm_0 = _safe_normalize(v)
    v, h = _classical_gram_schmidt(V, v, v_norm_0, max_iterations=2)
    unit_v, v_norm_1 = _safe_normalize(v, thresh=eps * v_norm_0)
    V = _tree.tree_map(lambda X, y: X.at[..., k + 1].set(y), V, unit_v)
    h = h.at[k + 1].set(snp.astype(v_norm_1, dtype))
    return V, H.at[k, :].set(h), v_norm_1 == 0.0


def _rotate(H, i, cs, sn):
    x1, y1 = H[i], H[i + 1]
    H = H.at[i].set(snp.conj(cs) * x1 - snp.conj(sn) * y1)
    return H.at[i + 1].set(sn * x1 + cs * y1)


def _givens(a, b):
    b_zero = abs(b) == 0
    a_lt_b = abs(a) < abs(b)
    t = -snp.where(a_lt_b, a, b) / snp.where(a_lt_b, b, a)
    r = snp.astype(snp.rsqrt(1 + abs(t) ** 2), aval(t).dtype)
    cs = snp.where(b_zero, 1, snp.where(a_lt_b, r * t, r))
    sn = snp.where(b_zero, 0, snp.where(a_lt_b, r, r * t))
    return cs, sn


def _apply_givens(row, givens, k):
    """The stored rotations applied to row, then a new one zeroing row[k + 1]."""
    row = fori_loop(0, k, lambda i, row: _rotate(row, i, givens[i, 0], givens[i, 1]), row)
    cs, sn = _givens(row[k], row[k + 1])
    givens = givens.at[k, :].set(snp.stack([cs, sn]))
    return _rotate(row, k, cs, sn), givens


def _krylov_basis(unit_residual, restart):
    return _tree.tree_map(
        lambda x: snp.pad(x[..., None], ((0, 0),) * aval(x).ndim + ((0, restart),)),
        unit_residual)


def _gmres_incremental(A, b, x0, unit_residual, residual_norm, ptol, restart, M):
    """One restart, with H's QR factorization built by Givens rotations as the basis
    grows (so the residual is known and the restart can stop early)."""
    V = _krylov_basis(unit_residual, restart)
    dtype = _lattice(b)[0]
    R = snp.eye(restart, restart + 1, dtype=dtype)
    givens = snp.zeros((restart, 2), dtype=dtype)
    beta = snp.zeros(restart + 1, dtype=dtype).at[0].set(snp.astype(residual_norm, dtype))

    def cond(carry):
        k, err, *_ = carry
        return snp.logical_and(k < restart, err > ptol)

    def body(carry):
        k, _, V, R, beta, givens = carry
        V, H, _ = _arnoldi_step(k, A, M, V, R)
        row, givens = _apply_givens(H[k, :], givens, k)
        R = R.at[k, :].set(row)
        beta = _rotate(beta, k, givens[k, 0], givens[k, 1])
        return k + 1, abs(beta[k + 1]), V, R, beta, givens
    _, _, V, R, beta, _ = while_loop(cond, body, (0, residual_norm, V, R, beta, givens))
    y = triangular_solve(R[:, :-1].T, beta[:-1, None], left_side=True, lower=False)[:, 0]
    x = _add(x0, _tree.tree_map(lambda X: _dot(X[..., :-1], y), V))
    return (x, *_safe_normalize(M(_sub(b, A(x)))))


def _lstsq(a, b):
    """Normal equations solved by Cholesky (jax's scipy solve with assume_a='pos')."""
    a2 = _dot(snp.conj(a.T), a)
    b2 = _dot(snp.conj(a.T), b)[:, None]
    c = snp.conj(cholesky(snp.conj(a2.T), symmetrize_input=False).T)     # upper factor
    z = triangular_solve(c, b2, left_side=True, lower=False, transpose_a=True,
                         conjugate_a=True)
    return triangular_solve(c, z, left_side=True, lower=False)[:, 0]


def _gmres_batched(A, b, x0, unit_residual, residual_norm, ptol, restart, M):
    """One restart: the whole Krylov basis, then a dense least-squares solve."""
    V = _krylov_basis(unit_residual, restart)
    dtype, weak = _lattice(b)
    H = convert(snp.eye(restart, restart + 1, dtype=dtype), dtype, weak)

    def body(carry):
        V, H, _, k = carry
        return (*_arnoldi_step(k, A, M, V, H), k + 1)
    V, H, _, _ = while_loop(lambda c: snp.logical_and(c[3] < restart, ~c[2]), body,
                            (V, H, False, 0))
    beta = snp.zeros_like(H, shape=(restart + 1,)).at[0].set(
        snp.astype(residual_norm, dtype))
    y = _lstsq(H.T, beta)
    x = _add(x0, _tree.tree_map(lambda X: _dot(X[..., :-1], y), V))
    return (x, *_safe_normalize(M(_sub(b, A(x)))))


def _gmres_solve(A, b, x0, atol, ptol, restart, maxiter, M, restart_fn):
    """Restarts until the residual is within atol (or maxiter restarts)."""
    unit_residual, residual_norm = _safe_normalize(M(_sub(b, A(x0))))

    def body(value):
        x, k, unit_residual, residual_norm = value
        x, unit_residual, residual_norm = restart_fn(A, b, x, unit_residual, residual_norm,
                                                     ptol, restart, M)
        return x, k + 1, unit_residual, residual_norm
    return while_loop(lambda v: snp.logical_and(v[1] < maxiter, v[3] > atol), body,
                      (x0, 0, unit_residual, residual_norm))[0]


def gmres(A, b, x0=None, *, tol=1e-5, atol=0.0, restart=20, maxiter=None, M=None,
          solve_method="batched"):
    """GMRES with restarts for a general A, as jax.scipy.sparse.linalg.gmres:
    (x, info), info -1 if x is NaN else 0. solve_method 'incremental' (Givens QR as
    the basis grows, early exit) or 'batched' (one least-squares solve per restart)."""
    A, b, x0, M = _prepare(A, b, x0, M)
    size = sum(int(np.prod(s)) for s in _shapes(b))
    if maxiter is None:
        maxiter = 10 * size     # as scipy
    restart = min(restart, size)
    if solve_method == "incremental":
        restart_fn = _gmres_incremental
    elif solve_method == "batched":
        restart_fn = _gmres_batched
    else:
        raise ArgumentError(f"invalid solve_method {solve_method}, must be either "
                         "'incremental' or 'batched'")
    b_norm = _norm(b)
    atol = snp.maximum(tol * b_norm, atol)
    ptol = _norm(M(b)) * snp.minimum(1.0, atol / b_norm)

    def solve(A, b):
        return _gmres_solve(A, b, x0, atol, ptol, restart, maxiter, M, restart_fn)
    x = custom_linear_solve(A, b, solve=solve, transpose_solve=solve)
    return x, snp.where(snp.isnan(_norm(x)), -1, 0)


wrap_public(globals())
