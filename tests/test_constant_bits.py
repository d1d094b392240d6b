"""Constants keep their exact bits in the lowered program: an array constant whose
elements compare equal but differ in bits (0.0 and -0.0) is not a splat. It was emitted
as one, so jnp.array([0., -0.]) * x inside jit gave [0., 0.] and arctan2 / copysign of
such a constant lost the sign (jax keeps it); NaNs of either sign became one NaN."""
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp


def _same_bits(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


def _signed_zeros(m, x, c):
    return (m.array([0., -0.]) * x,
            m.array([-0., 0.], m.float16) * x.astype(m.float16),
            m.array([0., -0.], m.bfloat16) * x.astype(m.bfloat16),
            m.array([0j, complex(-0., -0.)]) * c,
            m.arctan2(m.array([0., -0., 0., -0.]), m.array([0., 0., -0., -0.])) * x[0],
            m.array([np.nan, -np.nan]) * x)


def test_signed_zero_constants_match_jax():
    x, c = np.ones(2, np.float32), np.complex64(1)
    got = shardc.jit(lambda x, c: _signed_zeros(snp, x, c))(x, c)
    want = jax.jit(lambda x, c: _signed_zeros(jnp, x, c))(x, c)
    for g, w in zip(got, want):
        _same_bits(g, w)
    assert np.signbit(np.asarray(got[0])).tolist() == [False, True]


def test_signed_zero_constant_on_a_mesh(mesh2x4):
    x = jax.device_put(np.full((8, 4), 3., np.float32), NamedSharding(mesh2x4, P("x", "y")))
    def f(m, x):
        return m.copysign(x, m.array([-0., 0., -0., 0.]))
    got = shardc.jit(lambda x: f(snp, x))(x)
    _same_bits(got, jax.jit(lambda x: f(jnp, x))(x))
    assert got.sharding.is_equivalent_to(NamedSharding(mesh2x4, P("x", "y")), 2)
