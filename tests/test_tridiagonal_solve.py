"""shardc.lax.linalg.tridiagonal_solve against jax's (LAPACK's gtsv on CPU): systems that
need pivoting (shardc's old unpivoted Thomas algorithm gave NaN for a zero leading
pivot and lost accuracy near one), singular ones (NaN, or finite with
perturb_singular), batches sharded, complex, gradients of all four operands, vmap,
eager use, and jax's own call inside shardc.jit."""
import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
from helpers import Case, compare_cases

tri = shardc.lax.linalg.tridiagonal_solve
rng = np.random.default_rng(0)


def system(batch, m, n, dtype=np.float32, seed=0):
    r = np.random.default_rng(seed)
    shape = (*batch, m)

    def draw(s):
        v = r.normal(size=s)
        if np.issubdtype(dtype, np.complexfloating):
            v = v + 1j * r.normal(size=s)
        return v.astype(dtype)
    return draw(shape), draw(shape), draw(shape), draw((*batch, m, n))


# a zero first pivot and a tiny one: elimination without pivoting breaks down
PIV = (np.array([0, 1, 1e-7, 1], np.float32), np.array([0, 1, 1e-7, 2], np.float32),
       np.array([1, 1, 1, 0], np.float32), np.arange(8, dtype=np.float32).reshape(4, 2))
SING = (np.zeros(3, np.float32), np.array([1, 0, 1], np.float32), np.zeros(3, np.float32),
        np.ones((3, 2), np.float32))


def ops(m):
    return shardc.lax if m.nn is shardc.nn else jax.lax


def test_tridiagonal_solve_as_jax(mesh2x4):
    def f(perturb=False):
        return lambda m, *a: ops(m).linalg.tridiagonal_solve(*a, perturb_singular=perturb)
    b8 = system((8,), 16, 4, seed=1)
    cases = [
        Case("pivoting", f(), PIV, numpy_ref=False),
        Case("singular", f(), SING, numpy_ref=False),
        Case("singular perturbed", f(True), SING, numpy_ref=False),
        Case("batch sharded", f(), b8, [P("x")] * 3 + [P("x", None, "y")], numpy_ref=False),
        Case("batch sharded perturbed", f(True), b8, [P(("x", "y"))] * 4, numpy_ref=False),
        Case("rows sharded", f(), system((), 16, 8, seed=2), [P("x")] * 3 + [P("x", "y")],
             numpy_ref=False),
        Case("complex", f(), system((2,), 8, 3, np.complex64, seed=3), numpy_ref=False),
    ]
    compare_cases(cases, mesh2x4)


def test_pivoted_answer_solves_the_system():
    """Independent of jax: A x = b with A built densely from the diagonals."""
    dl, d, du, b = system((3,), 12, 2, seed=4)
    d[:, 0] = 0          # needs a row exchange
    x = np.asarray(shardc.jit(tri)(dl, d, du, b), np.float64)
    dense = np.zeros((3, 12, 12), np.float64)
    i = np.arange(12)
    dense[:, i, i] = d
    dense[:, i[1:], i[:-1]] = dl[:, 1:]
    dense[:, i[:-1], i[1:]] = du[:, :-1]
    np.testing.assert_allclose(dense @ x, b, rtol=1e-4, atol=1e-4)


def test_gradients_as_jax():
    args = system((2,), 6, 3, seed=5)
    args[1][...] += 4        # well conditioned
    w = rng.normal(size=args[3].shape).astype(np.float32)

    def loss(solve):
        return lambda *a: (solve(*a) * w).sum()
    got = shardc.jit(shardc.grad(loss(tri), argnums=(0, 1, 2, 3)))(*args)
    want = jax.grad(loss(jax.lax.linalg.tridiagonal_solve), argnums=(0, 1, 2, 3))(*args)
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5)
    # dl[..., 0] and du[..., m - 1] are ignored, so their gradients are zero
    assert not np.asarray(got[0])[:, 0].any() and not np.asarray(got[2])[:, -1].any()


def test_vmap_eager_and_jax_inside_shardc_jit():
    dl, d, du, b = system((4,), 8, 2, seed=6)
    want = jax.vmap(jax.lax.linalg.tridiagonal_solve, in_axes=(0, 0, 0, 0))(dl, d, du, b)
    np.testing.assert_allclose(shardc.vmap(tri)(dl, d, du, b), want, rtol=1e-5, atol=1e-6)
    shared = (None, None, None, 0)       # one matrix, a batch of right-hand sides
    np.testing.assert_allclose(
        shardc.vmap(tri, in_axes=shared)(dl[0], d[0], du[0], b),
        jax.vmap(jax.lax.linalg.tridiagonal_solve, in_axes=shared)(dl[0], d[0], du[0], b),
        rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tri(*PIV), jax.lax.linalg.tridiagonal_solve(*PIV), rtol=1e-5)
    np.testing.assert_allclose(shardc.jit(jax.lax.linalg.tridiagonal_solve)(*PIV),
                               jax.lax.linalg.tridiagonal_solve(*PIV), rtol=1e-5)


def test_errors():
    dl, d, du, b = PIV
    with pytest.raises(shardc.ShardcError, match="same dtypes"):
        tri(dl, d, du, b.astype(np.float64) if jax.config.jax_enable_x64 else
            b.astype(np.complex64))
    with pytest.raises(shardc.ShardcError, match="does not accept dtype int32"):
        tri(*(v.astype(np.int32) for v in PIV))
    with pytest.raises(shardc.ShardcError, match="must be"):
        tri(dl, d, du, b[:3])
