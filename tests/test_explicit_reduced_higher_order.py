"""Explicit mode: a gradient through a value reduced over mesh axes, differentiated
again (Hessian-vector products), against jax.grad on one device (jax's explicit mode
has no rules for most of these). The inner backward pass's partial sums are untyped
values marked unreduced; the outer one gave silent wrong values (4x, 0.52x, 6.4x on a
2x4 mesh): it read a marked value as whole, summed cotangents without marking the sum,
and transposed the inner pass's reshard to partial sums into one to partial sums again
(the cotangent of partial sums is whole)."""
import jax
import jax.nn as jnn
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.nn as snn
import shardc.numpy as snp

from test_explicit_unreduced_types import _mesh

W = (np.arange(64, dtype=np.float32).reshape(16, 4) % 7 - 3) / 5
V = np.cos(np.arange(64, dtype=np.float32)).reshape(16, 4)


def _r(m, w):
    return m.reshard(w, P(None, None, reduced={"Y"})) if m is shardc else w


def _scan_carry(m, n, nn, w):
    body = lambda c, x: (n.tanh(c * 0.5 + x), None)
    return m.lax.scan(body, _r(m, w), n.arange(3.))[0].sum()


# f(m, n, nn, w) -> a scalar whose Hessian-vector product is taken
HVP = {
    "prod": lambda m, n, nn, w: _r(m, w)[:3].prod(axis=0).sum(),
    "softmax": lambda m, n, nn, w: (nn.softmax(_r(m, w), axis=1) * _r(m, V)).sum(),
    "scan carry": _scan_carry,
}


def _hvp(m, f):
    return lambda w, v: m.grad(lambda w: (m.grad(f)(w) * v).sum())(w)


@pytest.mark.parametrize("name", list(HVP))
def test_hessian_vector_product_through_a_reduced_value(name):
    f = HVP[name]
    with shardc.set_mesh(_mesh(shardc)):
        got = shardc.jit(_hvp(shardc, lambda w: f(shardc, snp, snn, w)))(W, V)
    want = _hvp(jax, lambda w: f(jax, jnp, jnn, w))(W, V)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-5)
