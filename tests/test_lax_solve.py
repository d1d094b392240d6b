"""lax.custom_linear_solve and lax.custom_root against jax's: values, gradients with
respect to the right-hand side and to what matvec / f close over (first and second
order), has_aux, pytree right-hand sides, vmap, the errors, and jax.scipy's iterative
solvers (custom_linear_solve inside) running inside shardc.jit."""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import shardc  # noqa: E402
import shardc.numpy as snp  # noqa: E402

_rng = np.random.default_rng(0)
_M = _rng.normal(size=(4, 4)).astype(np.float32)
A_SPD = _M @ _M.T + 4 * np.eye(4, dtype=np.float32)
A_GEN = _M + 5 * np.eye(4, dtype=np.float32)
B = _rng.normal(size=4).astype(np.float32)
SHARDC = (shardc, shardc.lax, snp)
JAX = (jax, jax.lax, jnp)


def _close(a, b, tol=1e-5):
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=tol, atol=tol)


def _linear_loss(lib, symmetric, has_aux=False):
    _, lax, np_ = lib

    def loss(A, b):
        def solve(_, r):
            x = np_.linalg.solve(A, r)
            return (x, np_.sum(r)) if has_aux else x

        def tsolve(_, r):
            x = np_.linalg.solve(A.T, r)
            return (x, np_.sum(r)) if has_aux else x
        out = lax.custom_linear_solve(lambda x: A @ x, b, solve,
                                      None if symmetric else tsolve, symmetric=symmetric,
                                      has_aux=has_aux)
        x = out[0] + out[1] if has_aux else out
        return (x ** 2).sum() + np_.sin(x[0])
    return loss


@pytest.mark.parametrize("symmetric,has_aux", [(True, False), (False, False), (False, True)])
def test_custom_linear_solve_gradients_match_jax(symmetric, has_aux):
    A = A_SPD if symmetric else A_GEN
    ls, lj = _linear_loss(SHARDC, symmetric, has_aux), _linear_loss(JAX, symmetric, has_aux)
    _close(shardc.jit(ls)(A, B), jax.jit(lj)(A, B))
    _close(shardc.jit(shardc.grad(ls, argnums=(0, 1)))(A, B),
           jax.jit(jax.grad(lj, argnums=(0, 1)))(A, B))
    if has_aux:     # (jax's own hessian with has_aux fails inside vmap)
        return
    # second order: the backward pass's transposed solve is implicit too
    _close(shardc.jit(shardc.hessian(ls, argnums=1))(A, B),
           jax.jit(jax.hessian(lj, argnums=1))(A, B), 1e-4)


def test_pytree_rhs_and_vmap():
    def run(lib):
        _, lax, np_ = lib

        def f(b):
            mv = lambda x: {"u": 2.0 * x["u"], "v": x["v"] * 3.0}     # noqa: E731
            solve = lambda _, r: {"u": r["u"] / 2.0, "v": r["v"] / 3.0}  # noqa: E731
            x = lax.custom_linear_solve(mv, b, solve, symmetric=True)
            return np_.sum(x["u"] * x["v"])
        return f
    b = {"u": B, "v": B[::-1].copy()}
    _close(shardc.grad(run(SHARDC))(b), jax.grad(run(JAX))(b))
    bs = {"u": np.stack([B, 2 * B]), "v": np.stack([B, -B])}
    _close(shardc.jit(shardc.vmap(run(SHARDC)))(bs), jax.vmap(run(JAX))(bs))


def test_custom_linear_solve_errors():
    f = shardc.lax.custom_linear_solve
    with pytest.raises(ValueError, match="transpose_solve required") as e:
        shardc.grad(lambda b: f(lambda x: 2.0 * x, b, lambda _, r: r / 2.0).sum())(B)
    assert "test_lax_solve.py" in str(e.value)
    np.testing.assert_allclose(f(lambda x: 2.0 * x, B, lambda _, r: r / 2.0), B / 2)
    with pytest.raises(ValueError, match="matvec\\(\\) output shapes must match b"):
        shardc.jit(lambda b: f(lambda x: x[:2], b, lambda _, r: r))(B)
    with pytest.raises(ValueError, match="solve\\(\\) output pytree structure"):
        shardc.jit(lambda b: f(lambda x: x, b, lambda _, r: (r, r)))(B)


def _sqrt(lib):
    _, lax, np_ = lib

    def sqrt(a):
        def solve(f, x0):
            return lax.fori_loop(0, 30, lambda i, x: x - f(x) / (2 * x), x0)
        return lax.custom_root(lambda x: x ** 2 - a, 1.0 + 0 * a, solve,
                               lambda g, y: y / g(1.0))
    return sqrt


def _vector_root(lib):
    api, lax, np_ = lib

    def root(w):
        f = lambda x: np_.tanh(x) + x - w           # noqa: E731
        solve = lambda f, x0: lax.fori_loop(       # noqa: E731
            0, 40, lambda i, x: x - f(x) / (2.0 - np_.tanh(x) ** 2), x0)

        def tangent_solve(g, y):
            return np_.linalg.solve(api.jacobian(g)(y), y)
        x = lax.custom_root(f, np_.zeros_like(w), solve, tangent_solve, has_aux=False)
        return np_.sum(x ** 3)
    return root


def test_custom_root_matches_jax():
    s, j = _sqrt(SHARDC), _sqrt(JAX)
    a = np.float32(2.0)
    _close(shardc.jit(s)(a), np.sqrt(2.0))
    _close(shardc.jit(shardc.grad(s))(a), jax.grad(j)(a))
    _close(shardc.jit(shardc.grad(shardc.grad(s)))(a), jax.grad(jax.grad(j))(a))
    vs, vj = _vector_root(SHARDC), _vector_root(JAX)
    w = np.linspace(-1, 1, 4).astype(np.float32)
    _close(shardc.jit(vs)(w), jax.jit(vj)(w))
    _close(shardc.jit(shardc.grad(vs))(w), jax.jit(jax.grad(vj))(w), 1e-4)


@pytest.mark.parametrize("solver", ["cg", "gmres", "bicgstab"])
def test_jax_scipy_iterative_solvers_inside_shardc_jit(solver):
    A = A_SPD if solver == "cg" else A_GEN

    def loss(A, b):
        fn = getattr(jax.scipy.sparse.linalg, solver)
        x, _ = fn(lambda v: A @ v, b, tol=1e-6)
        return (x ** 2).sum()
    _close(shardc.jit(loss)(A, B), jax.jit(loss)(A, B), 1e-4)
    _close(shardc.jit(jax.grad(loss, argnums=(0, 1)))(A, B),
           jax.jit(jax.grad(loss, argnums=(0, 1)))(A, B), 1e-4)
