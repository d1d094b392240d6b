"""grad through shard_map: the backward shard_map's sdy.manual_computation must keep its
out_specs' manual axes even when the gradient is tied (sharding_group) to a replicated
primal; it lost them and XLA refused the program ('result shape ... must match')."""
import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc

X = np.arange(32.).reshape(4, 8)


BODIES = {"square": lambda lax, y: lax.psum(y * y, "a"),
          "axis_index": lambda lax, y: lax.psum(y * lax.axis_index("a"), "a")}


def _loss(sm, lax, jnp, mesh, axis_names, body="square"):
    kw = {"axis_names": axis_names} if axis_names else {}
    h = sm(lambda y: BODIES[body](lax, y), mesh=mesh, in_specs=P("a"), out_specs=P(), **kw)
    return lambda y: jnp.sum(h(y) ** 2)


@pytest.mark.parametrize("body", sorted(BODIES))
@pytest.mark.parametrize("axis_names", [{"a"}, None], ids=["partial_manual", "full_manual"])
def test_grad_through_shard_map_matches_jax(axis_names, body):
    mesh = shardc.make_mesh((2, 4), ("a", "b"), axis_types=(shardc.AxisType.Auto,) * 2)
    jmesh = jax.make_mesh((2, 4), ("a", "b"),
                          axis_types=(shardc.AxisType.Auto,) * 2)
    got = shardc.jit(shardc.grad(_loss(shardc.shard_map, shardc.lax, shardc.numpy, mesh,
                                       axis_names, body)))(X)
    want = jax.jit(jax.grad(_loss(jax.shard_map, jax.lax, jax.numpy, jmesh, axis_names,
                                  body)))(X)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want))
    assert got.dtype == want.dtype
