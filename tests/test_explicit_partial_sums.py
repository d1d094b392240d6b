"""A value claimed to be partial sums over mesh axes must be one: a dot's out_sharding=
with unreduced= axes its contraction is not sharded on, and the gradient of a value
reduced over axes its cotangent is not summed over, are errors as in jax (shardc added
up the copies of a whole value: 2x, 4x, 8x results). The programs jax accepts still
match it (tests/test_explicit.py: the FSDP gradient)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.errors import ShardingTypeError

A = np.arange(8 * 16, dtype=np.float32).reshape(8, 16) / 100
B = np.arange(16 * 4, dtype=np.float32).reshape(16, 4) / 10
V = np.arange(16, dtype=np.float32) / 10


def _mesh(m):
    return m.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Explicit,) * 2)


CASES = {
    # the contraction is not sharded at all, yet its result is said to be partial over Y
    "dot out_sharding": lambda m, n: m.jit(lambda x, w: m.reshard(n.matmul(
        m.reshard(x, P("X", None)), w, out_sharding=P("X", None, unreduced={"Y"})), P()))(A, B),
    # the cotangent of w sums over X (the batch), but w is said to be reduced over Y
    "grad, other axis": lambda m, n: m.jit(m.grad(lambda w: ((m.reshard(
        np.ones((8, 8, 16), np.float32), P("X")) @ m.reshard(w, P(None, None, reduced={"Y"})))
        ** 2).sum()))(B),
    # an einsum's result is a transpose of its dot's: the claim is checked through it
    "einsum out_sharding": lambda m, n: m.jit(lambda x, w: m.reshard(n.einsum(
        "ij,jk->ki", m.reshard(x, P("X", None)), w, out_sharding=P(None, "X", unreduced={"Y"})),
        P()))(A, B),
    # an elementwise op (jax: inputs cannot be sharded on the axes another is reduced on)
    "grad, elementwise": lambda m, n: m.jit(m.grad(lambda w, x: (m.reshard(x, P("X")) * m.reshard(
        w, P(reduced={"X"}))).sum()))(V, A),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_claim_of_partial_sums_that_is_false_is_an_error_as_in_jax(name):
    with jax.set_mesh(_mesh(jax)):
        with pytest.raises((jax.errors.JaxRuntimeError, Exception)) as e:
            CASES[name](jax, jnp)
    assert "ShardingTypeError" in type(e.value).__name__
    with shardc.set_mesh(_mesh(shardc)):
        with pytest.raises(ShardingTypeError,
                           match="not partial sums over mesh axes|another operand is reduced"):
            CASES[name](shardc, snp)


def test_a_dot_whose_contraction_is_sharded_on_the_axes_is_partial_sums():
    def f(m, n, x, w):
        return m.reshard(n.matmul(m.reshard(x, P(None, "Y")), m.reshard(w, P("Y", None)),
                                  out_sharding=P(None, None, unreduced={"Y"})), P())
    with jax.set_mesh(_mesh(jax)):
        want = jax.jit(lambda x, w: f(jax, jnp, x, w))(A, B)
    with shardc.set_mesh(_mesh(shardc)):
        got = shardc.jit(lambda x, w: f(shardc, snp, x, w))(A, B)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got), A @ B, rtol=1e-5)


def test_reshard_with_reduced_outside_jit_keeps_the_spec():
    # (the spec's unreduced/reduced sets made `tuple(spec)` raise inside shardc)
    mesh = _mesh(shardc)
    w = jax.device_put(V, NamedSharding(mesh, P()))
    with shardc.set_mesh(mesh):
        got = shardc.jit(lambda: shardc.reshard(w, P(reduced={"Y"})) * 2)()
    np.testing.assert_allclose(np.asarray(got), V * 2)


W16 = np.arange(16 * 16, dtype=np.float32).reshape(16, 16) / 100


@pytest.mark.parametrize("name", ["checkpoint", "scan"])
def test_fsdp_gradients_through_regions_match_jax(name):
    def f(m, n):
        def r(w):
            return m.reshard(w, P(*([None] * np.ndim(w)), reduced={"X"}))
        if name == "checkpoint":
            loss = lambda w, x: (m.checkpoint(lambda w, x: n.tanh(x @ w))(  # noqa: E731
                r(w), m.reshard(x, P("X"))) ** 2).sum()
            return m.jit(m.grad(loss))(W16, A)
        loss = lambda ws, x: (m.lax.scan(lambda h, w: (n.tanh(h @ w), None),  # noqa: E731
                                         m.reshard(x, P("X")), r(ws))[0] ** 2).sum()
        return m.jit(m.grad(loss))(np.stack([W16, W16 / 2, W16 / 4]), A)
    with jax.set_mesh(_mesh(jax)):
        want = f(jax, jnp)
    with shardc.set_mesh(_mesh(shardc)):
        got = f(shardc, snp)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=1e-6)
