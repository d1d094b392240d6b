"""shardc.lax.linalg.qdwh against jax's: the polar factors, the iteration count and the
convergence flag (max_iterations, eps), padded dynamic shapes (static and traced),
complex input, sharded input, and jax's errors."""
import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
from helpers import Case, compare_cases

rng = np.random.default_rng(0)
X = rng.normal(size=(16, 8)).astype(np.float32)
XC = (rng.normal(size=(8, 8)) + 1j * rng.normal(size=(8, 8))).astype(np.complex64)


def lin(m):
    return shardc.lax.linalg if m.nn is shardc.nn else jax.lax.linalg


def test_qdwh_as_jax(mesh2x4):
    cases = [
        Case("default", lambda m, x: lin(m).qdwh(x), [X], [P("x", "y")], numpy_ref=False),
        Case("max_iterations", lambda m, x: lin(m).qdwh(x, max_iterations=2), [X],
             numpy_ref=False),
        Case("eps", lambda m, x: lin(m).qdwh(x, eps=1e-3, is_hermitian=False), [X],
             numpy_ref=False),
        Case("padded", lambda m, x: lin(m).qdwh(x, dynamic_shape=(12, 6)), [X],
             numpy_ref=False),
        Case("traced padding", lambda m, x, r: lin(m).qdwh(x, dynamic_shape=(r, 5)),
             [X, np.int32(10)], numpy_ref=False),
        Case("complex", lambda m, x: lin(m).qdwh(x), [XC], numpy_ref=False),
    ]
    compare_cases(cases, mesh2x4)


def test_polar_factors():
    u, h, _, ok = shardc.jit(shardc.lax.linalg.qdwh)(X)
    u, h = np.asarray(u, np.float64), np.asarray(h, np.float64)
    assert bool(ok)
    np.testing.assert_allclose(u @ h, X, atol=1e-4)
    np.testing.assert_allclose(u.T @ u, np.eye(8), atol=1e-4)
    assert np.linalg.eigvalsh((h + h.T) / 2).min() > -1e-4


def test_qdwh_errors():
    with pytest.raises(shardc.ShardcError, match="M >= N"):
        shardc.lax.linalg.qdwh(X.T)
    with pytest.raises(shardc.ShardcError, match="statically"):
        shardc.jit(lambda x, k: shardc.lax.linalg.qdwh(x, max_iterations=k))(X, 3)
