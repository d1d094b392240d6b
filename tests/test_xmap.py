"""shardc.xmap, the named-axis map jax removed (its API kept), against NumPy."""
import jax
import numpy as np
import pytest
from jax.sharding import Mesh, PartitionSpec as P

import shardc
import shardc.numpy as snp

X = np.random.RandomState(0).randn(8, 4).astype(np.float32)
W = np.random.RandomState(1).randn(4, 3).astype(np.float32)


def test_named_dims_not_in_out_axes_stay_positional():
    f = shardc.xmap(lambda x: x.sum(), in_axes=["batch", "features"], out_axes=["batch"])
    np.testing.assert_allclose(f(X), X.sum(1), rtol=1e-6)
    f = shardc.xmap(lambda x: x.mean(), in_axes={1: "features", 0: "batch"}, out_axes=["batch"])
    np.testing.assert_allclose(f(X), X.mean(1), rtol=1e-6)


def test_collectives_over_names_and_trailing_out_axes():
    g = shardc.xmap(lambda x: x - shardc.lax.pmean(x, "batch"), in_axes=["batch", ...],
                    out_axes=[..., "batch"])
    np.testing.assert_allclose(g(X), (X - X.mean(0)).T, rtol=1e-5, atol=1e-6)


def test_two_names_and_an_output_only_axis():
    f = shardc.xmap(lambda a, b: a * b, in_axes=(["i"], ["j"]), out_axes=["j", "i"])
    np.testing.assert_allclose(f(X[:, 0], W[0]), np.outer(W[0], X[:, 0]), rtol=1e-6)
    h = shardc.xmap(lambda a: a + snp.float32(1), in_axes=[...], out_axes=["k", ...],
                    axis_sizes={"k": 3})
    np.testing.assert_allclose(h(W[0]), np.broadcast_to(W[0] + 1, (3, 3)))


def test_axis_resources_shard_arguments_and_results():
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))
    h = shardc.xmap(lambda x, w: x @ w, in_axes=(["batch", ...], [...]), out_axes=["batch", ...],
                    axis_resources={"batch": "x"})
    with shardc.set_mesh(mesh):
        out = h(X, W)
    np.testing.assert_allclose(out, X @ W, rtol=1e-5)
    assert out.sharding.spec == P("x")


def test_inconsistent_sizes_are_an_error():
    f = shardc.xmap(lambda a, b: a + b, in_axes=(["i", ...], ["i", ...]), out_axes=["i", ...])
    with pytest.raises(shardc.ShardcError, match="named axis 'i' has sizes"):
        f(X, W)
