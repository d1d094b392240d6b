# ruff: noqa: E501  (the table reads best one entry per line)
"""The batching rules of sort, top_k, approx_top_k, the take_along_axis gather/scatter,
dynamic_slice / dynamic_update_slice (batched and unbatched starts) and the cumulative
ops: shardc.vmap vs jax.vmap (eagerly and under jit, gradients too), and under jit on a
mesh with spmd_axis_name."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import check_outputs, sample

RNG = np.random.RandomState(1)
X = RNG.randn(4, 6, 8).astype(np.float32)
X2 = RNG.randn(6, 8).astype(np.float32)
K = RNG.randint(0, 3, (4, 6, 8)).astype(np.int32)
S = np.array([3, -1, 7, 2], np.int32)          # per-example starts (clamped, negative)
IDX = RNG.randint(-9, 9, (4, 6, 3)).astype(np.int32)


def _ns(ours):
    return (snp, shardc.lax) if ours else (jnp, jax.lax)


CASES = {
    "sort": (lambda m, L: lambda x: L.sort(x, dimension=0), (X,), 0),
    "sort_axis1": (lambda m, L: lambda x: L.sort(x), (X,), 1),
    "sort_multi": (lambda m, L: lambda k, x: L.sort((k, x), num_keys=2), (K, X), 0),
    "sort_mixed": (lambda m, L: lambda k, x: L.sort((k, x), num_keys=1, dimension=0), (K, X2), (0, None)),
    "argsort": (lambda m, L: lambda x: m.argsort(x, axis=0, descending=True), (X,), 2),
    "top_k": (lambda m, L: lambda x: L.top_k(x, 3), (X,), 0),
    "top_k_axis": (lambda m, L: lambda x: L.top_k(x, 2, axis=0), (X,), 1),
    "approx_max_k": (lambda m, L: lambda x: L.approx_max_k(x, 2, reduction_dimension=0), (X,), 0),
    "take_along": (lambda m, L: lambda x, i: m.take_along_axis(x, i, axis=1), (X, IDX), 0),
    "take_along_x": (lambda m, L: lambda x, i: m.take_along_axis(x, i, axis=1, mode="clip"), (X2, IDX), (None, 0)),
    "take_along_i": (lambda m, L: lambda x, i: m.take_along_axis(x, i, axis=1), (X, IDX[0]), (0, None)),
    "ds_starts": (lambda m, L: lambda x, s: L.dynamic_slice(x, (s, 2), (3, 4)), (X2, S), (None, 0)),
    "ds_both": (lambda m, L: lambda x, s: L.dynamic_slice(x, (1, s), (2, 5)), (X, S), 0),
    "ds_operand": (lambda m, L: lambda x, s: L.dynamic_slice(x, (s, 1), (2, 3)), (X, S[0]), (0, None)),
    "dus_update": (lambda m, L: lambda x, u, s: L.dynamic_update_slice(x, u, (s, 3)), (X2, X[:, :2, :4], S[0]), (None, 0, None)),
    "dus_starts": (lambda m, L: lambda x, u, s: L.dynamic_update_slice(x, u, (s, 3)), (X2, X2[:2, :4], S), (None, None, 0)),
    "dus_all": (lambda m, L: lambda x, u, s: L.dynamic_update_slice(x, u, (2, s)), (X, X[:, :3, :2], S), 0),
    "cumprod": (lambda m, L: lambda x: L.cumprod(x, 1, reverse=True), (X,), 0),
    "cummax": (lambda m, L: lambda x: (L.cummax(x, 0), L.cummin(x, 1)), (X,), 2),
    "cumlogsumexp": (lambda m, L: lambda x: L.cumlogsumexp(x, 0), (X,), 1),
    "searchsorted": (lambda m, L: lambda a, v: m.searchsorted(a, v), (np.sort(X[:, 0], axis=-1), X[:, 1]), 0),
    "unique_sized": (lambda m, L: lambda k: m.unique(k, size=4, fill_value=-1), (K,), 0),
    "quantile": (lambda m, L: lambda x: m.quantile(x, 0.3, axis=1), (X,), 0),
}


@pytest.mark.parametrize("jit", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_vmap_matches_jax(name, jit):
    fn, args, in_axes = CASES[name]
    ours = shardc.vmap(fn(*_ns(True)), in_axes=in_axes)
    ref = jax.vmap(fn(*_ns(False)), in_axes=in_axes)
    if jit:
        ours, ref = shardc.jit(ours), jax.jit(ref)
    check_outputs(ours(*args), ref(*args), check_sharding=False, what="jax.vmap")


GRADS = {
    "sort": lambda m, L, x: m.sum(m.sin(L.sort(x, dimension=0)) * m.arange(8.0)),
    "top_k": lambda m, L, x: m.sum(L.top_k(x, 3)[0] ** 2),
    "take_along": lambda m, L, x: m.sum(m.take_along_axis(x, m.argsort(x, axis=1)[:, :3], axis=1) * m.arange(3.0)),
    "dynamic_slice": lambda m, L, x: m.sum(m.sin(L.dynamic_slice(x, (2, 5), (3, 3)))),
    "cumprod": lambda m, L, x: m.sum(m.sin(L.cumprod(x, 1))),
    "cummax": lambda m, L, x: m.sum(L.cummax(x, 1) * m.arange(8.0)),
    "cumlogsumexp": lambda m, L, x: m.sum(m.sin(L.cumlogsumexp(x, 0))),
}


@pytest.mark.parametrize("name", sample(sorted(GRADS), 2))
def test_per_example_gradients(name):
    fn = GRADS[name]
    ours = shardc.jit(shardc.vmap(shardc.grad(lambda x: fn(snp, shardc.lax, x))))(X)
    ref = jax.vmap(jax.grad(lambda x: fn(jnp, jax.lax, x)))(X)
    np.testing.assert_allclose(ours, ref, rtol=2e-5, atol=2e-6)


def test_dynamic_slice_with_batched_starts_under_a_mesh(mesh2x4):
    """Batched starts become a gather; the mapped dim sharded by spmd_axis_name."""
    x = jax.device_put(np.stack([X2] * 8), NamedSharding(mesh2x4, P("x")))
    s = jax.device_put(np.arange(-2, 6, dtype=np.int32), NamedSharding(mesh2x4, P("x")))
    f = lambda L: lambda x, s: L.dynamic_slice(x, (s, 1), (3, 4))  # noqa: E731
    ours = shardc.jit(shardc.vmap(f(shardc.lax), spmd_axis_name="x"))(x, s)
    ref = jax.jit(jax.vmap(f(jax.lax), spmd_axis_name="x"))(x, s)
    check_outputs(ours, ref, mesh2x4, what="jax.vmap")


def test_sort_under_vmap_with_spmd_axis_name(mesh2x4):
    x = jax.device_put(X.reshape(8, 3, 8), NamedSharding(mesh2x4, P("x", None, "y")))
    f = lambda L: lambda x: L.sort(x, dimension=0)  # noqa: E731
    ours = shardc.jit(shardc.vmap(f(shardc.lax), spmd_axis_name="x"))(x)
    ref = jax.jit(jax.vmap(f(jax.lax), spmd_axis_name="x"))(x)
    check_outputs(ours, ref, mesh2x4, what="jax.vmap")
