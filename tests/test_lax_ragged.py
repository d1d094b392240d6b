"""lax.ragged_dot / ragged_dot_general against jax's: the three modes, per-batch group
sizes, gradients, sharded operands under jit, jax's ragged_dot inside shardc.jit, and
the errors for bad group sizes."""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import shardc  # noqa: E402

_rng = np.random.default_rng(0)


def _r(*shape):
    return _rng.normal(size=shape).astype(np.float32)


CASES = {
    # name: (dot dims, lhs ragged, rhs group, lhs, rhs, group sizes)
    "noncontracting": ((([1], [1]), ([], [])), [0], [0], _r(10, 6), _r(3, 6, 5),
                       np.array([3, 0, 5], np.int32)),
    "noncontracting_batched": ((([2], [2]), ([0], [1])), [1], [0], _r(2, 7, 6),
                               _r(3, 2, 6, 5), np.array([[2, 3, 2], [1, 1, 4]], np.int32)),
    "contracting": ((([1], [0]), ([], [])), [1], [], _r(4, 6), _r(6, 5),
                    np.array([2, 4], np.int32)),
    "batch": ((([2], [1]), ([0], [0])), [0], [], _r(3, 4, 6), _r(3, 6, 5),
              np.array([1, 2], np.int32)),
}


def _close(a, b, tol=1e-5):
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(CASES))
def test_modes_and_gradients_match_jax(name):
    dims, lr, rg, lhs, rhs, gs = CASES[name]
    dn_s = shardc.lax.RaggedDotDimensionNumbers(dims, lr, rg)
    dn_j = jax.lax.RaggedDotDimensionNumbers(dims, lr, rg)

    def loss(lax, dn):
        if lax is jax.lax and name in ("batch", "contracting"):
            # jax has no gradient rule for these modes: its CPU value function's
            from jax._src.lax.lax import _ragged_dot_general_impl as impl
            return lambda a, b: (impl(a, b, gs, dn) ** 2).sum()
        return lambda a, b: (lax.ragged_dot_general(a, b, gs, dn) ** 2).sum()
    got = shardc.jit(lambda a, b: shardc.lax.ragged_dot_general(a, b, gs, dn_s))(lhs, rhs)
    want = jax.lax.ragged_dot_general(lhs, rhs, gs, dn_j)
    assert got.shape == want.shape and got.dtype == want.dtype
    _close(got, want)
    _close(shardc.jit(shardc.grad(loss(shardc.lax, dn_s), argnums=(0, 1)))(lhs, rhs),
           jax.grad(loss(jax.lax, dn_j), argnums=(0, 1))(lhs, rhs), 1e-4)


def test_sharded_experts_and_jax_code_inside_shardc_jit():
    mesh = jax.make_mesh((2, 4), ("data", "expert"),
                         axis_types=(jax.sharding.AxisType.Auto,) * 2)
    tokens = jax.device_put(_r(16, 8), NamedSharding(mesh, P("data")))
    experts = jax.device_put(_r(4, 8, 12), NamedSharding(mesh, P("expert")))
    gs = np.array([5, 3, 0, 8], np.int32)

    def moe(x, w, g):
        return jnp.tanh(jax.lax.ragged_dot(x, w, g, preferred_element_type=jnp.float32))
    got, want = shardc.jit(moe)(tokens, experts, gs), jax.jit(moe)(tokens, experts, gs)
    _close(got, want)
    got = shardc.jit(lambda x, w, g: shardc.lax.ragged_dot(x, w, g))(tokens, experts, gs)
    _close(got, jax.lax.ragged_dot(tokens, experts, gs))
    # rows past the groups give zeros, as jax
    short = np.array([2, 1, 0, 3], np.int32)
    out = np.asarray(shardc.jit(shardc.lax.ragged_dot)(tokens, experts, short))
    assert not out[6:].any() and out[:6].any()


def test_bad_group_sizes():
    lhs, rhs = _r(10, 6), _r(3, 6, 5)
    with pytest.raises(TypeError, match="integer dtype"):
        shardc.lax.ragged_dot(lhs, rhs, np.ones(3, np.float32))
    with pytest.raises(TypeError, match="3 groups|the 2 groups"):
        shardc.lax.ragged_dot(lhs, rhs, np.ones(2, np.int32))
    with pytest.raises(shardc.ShardcError, match="group_offset"):
        shardc.lax.ragged_dot(lhs, rhs, np.ones(3, np.int32), group_offset=np.zeros(1, np.int32))
