"""Cumulative ops along a split axis: each runs with the axis whole on every device.
XLA's partitioner gave two reduce_windows of one operand split along the window dim a
single padded copy, so the second read the first's init value as padding: cumsum next
to cumprod summed wrong, and shardc's gradients (whose forward pass keeps cumprod next to
cumlogsumexp) came out inf, with no error. jax.jit has the forward bug itself."""
import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.lax as slax

A = np.arange(1, 17, dtype=np.float32).reshape(8, 2) / 8

PAIRS = {
    "cumsum_cumprod": lambda L, m: (L.cumprod(m, axis=0), L.cumsum(m, axis=0)),
    "cummax_cummin": lambda L, m: (L.cummax(m, axis=0), L.cummin(m, axis=0),
                                   L.cumsum(m, axis=0)),
    "lse_prod_reverse": lambda L, m: (L.cumlogsumexp(m, axis=0, reverse=True),
                                      L.cumprod(m, axis=0, reverse=True)),
}


@pytest.mark.parametrize("spec", [P("x", None), P("x", "y"), P(None, "y")])
@pytest.mark.parametrize("name", sorted(PAIRS))
def test_cumulative_pairs_on_a_split_axis(name, spec):
    mesh = shardc.make_mesh((4, 2), ("x", "y"), axis_types=(shardc.AxisType.Auto,) * 2)
    m = jax.device_put(A, NamedSharding(mesh, spec))
    f = PAIRS[name]
    for got, want in zip(shardc.jit(lambda m: f(slax, m))(m), f(jax.lax, A)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)


def test_gradient_of_cumprod_and_cumlogsumexp_on_a_split_axis():
    mesh = shardc.make_mesh((8,), ("x",), axis_types=(shardc.AxisType.Auto,))
    m = jax.device_put(A, NamedSharding(mesh, P("x", None)))

    def g(grad, lax):
        return grad(lambda m: lax.cumprod(m, axis=0).sum() + lax.cumlogsumexp(m, axis=0).sum())
    got = shardc.jit(g(shardc.grad, slax))(m)
    np.testing.assert_allclose(np.asarray(got), np.asarray(g(jax.grad, jax.lax)(A)), rtol=1e-5)
    assert got.sharding.is_equivalent_to(m.sharding, 2)
