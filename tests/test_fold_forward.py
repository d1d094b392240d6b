"""Ops XLA's canonicalizer removes before Shardy (a pad of zero widths) are folded
before propagation, so results are sharded as jax.jit shards them. Values, dtypes and
shardings against jax.jit."""
import jax
import jax.numpy  # noqa: F401  (jax.numpy, as m.numpy)
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import shardc

MESH = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
A = np.arange(128, dtype=np.float32).reshape(8, 16) / 9
B = np.linspace(-2, 2, 128, dtype=np.float32).reshape(8, 16)

CASES = {
    "zero pad then add": (lambda m, a, b: m.lax.pad(a, 0.0, [(0, 0, 0), (0, 0, 0)]) + b,
                          [P(None, "x"), P(None, "y")]),
    "zero pad result": (lambda m, a, b: (m.lax.pad(a, 0.0, [(0, 0, 0), (0, 0, 0)]), b),
                        [P("x", "y"), P("y")]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_folded_ops_shard_as_jax(name):
    f, specs = CASES[name]
    args = [jax.device_put(x, NamedSharding(MESH, s)) for x, s in zip((A, B), specs)]
    want = jax.jit(lambda a, b: f(jax, a, b))(*args)
    got = shardc.jit(lambda a, b: f(shardc, a, b))(*args)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
        assert g.sharding.is_equivalent_to(w.sharding, w.ndim), (g.sharding, w.sharding)


def test_the_folded_ops_are_gone_from_the_propagated_program():
    t = shardc.jit(lambda a: shardc.lax.pad(a, 0.0, [(0, 0, 0), (0, 0, 0)]) * 2).trace(
        jax.device_put(A, NamedSharding(MESH, P("x", "y"))))
    assert "pad" not in t.propagate().ir
