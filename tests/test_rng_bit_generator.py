"""lax.rng_bit_generator (XLA's bit generator) against jax.jit on the same backend: every
dtype and algorithm, sharded bits and keys, vmap (jax's rule: the first key draws for
every example), explicit mode's out_sharding, jax code inside shardc.jit, and bad input."""
import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
from helpers import check_outputs

KEY = np.array([7, 1, 2026, 11], np.uint32)
ALGS = list(jax.lax.RandomAlgorithm)


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32])
@pytest.mark.parametrize("alg", ALGS, ids=str)
def test_bits_as_jax(dtype, alg):
    def f(lax, k):
        return lax.rng_bit_generator(k, (6, 10), dtype, alg)
    ours = shardc.jit(lambda k: f(shardc.lax, k))(KEY)
    ref = jax.jit(lambda k: f(jax.lax, k))(KEY)
    check_outputs(ours, ref)
    assert ours[1].dtype == np.dtype(dtype)
    assert not np.array_equal(np.asarray(ours[0]), KEY)        # the key moved on


@pytest.mark.parametrize("spec", [P("x", "y"), P("y"), P(None, ("x", "y")), P(("y", "x"))])
def test_sharded_bits_are_the_unsharded_bits(mesh2x4, spec):
    s = NamedSharding(mesh2x4, spec)
    ours = shardc.jit(lambda k: shardc.lax.rng_bit_generator(k, (8, 16))[1], out_shardings=s)
    ref = jax.jit(lambda k: jax.lax.rng_bit_generator(k, (8, 16))[1], out_shardings=s)
    check_outputs(ours(KEY), ref(KEY), mesh2x4)
    whole = shardc.jit(lambda k: shardc.lax.rng_bit_generator(k, (8, 16))[1])(KEY)
    np.testing.assert_array_equal(np.asarray(ours(KEY)), np.asarray(whole))


def test_a_sharded_key_is_gathered(mesh2x4):
    k = jax.device_put(KEY, NamedSharding(mesh2x4, P("y")))

    def f(lax, k):
        nk, b = lax.rng_bit_generator(k, (4, 8))
        return nk, b * 2

    check_outputs(shardc.jit(lambda k: f(shardc.lax, k))(k), jax.jit(lambda k: f(jax.lax, k))(k),
                  mesh2x4, check_sharding=False)


def test_vmap_draws_from_the_first_key_as_jax():
    keys = np.arange(12, dtype=np.uint32).reshape(3, 4)
    ref = jax.jit(jax.vmap(lambda k: jax.lax.rng_bit_generator(k, (5, 2))))(keys)
    ours = shardc.jit(shardc.vmap(lambda k: shardc.lax.rng_bit_generator(k, (5, 2))))(keys)
    check_outputs(ours, ref)
    # eager shardc.vmap and jax's vmap traced by shardc.jit
    check_outputs(shardc.vmap(lambda k: shardc.lax.rng_bit_generator(k, (5, 2)))(keys), ref)
    check_outputs(shardc.jit(jax.vmap(lambda k: jax.lax.rng_bit_generator(k, (5, 2))))(keys),
                  ref)
    # an unbatched key under vmap of something else: one draw, broadcast
    xs = np.ones((3, 2), np.uint32)
    g = lambda lax: lambda x: lax.rng_bit_generator(KEY, (2,))[1] + x  # noqa: E731
    check_outputs(shardc.jit(shardc.vmap(g(shardc.lax)))(xs), jax.jit(jax.vmap(g(jax.lax)))(xs))


def test_jax_code_inside_shardc_jit(mesh2x4):
    s = NamedSharding(mesh2x4, P("x"))

    def f(k):
        k2, b = jax.lax.rng_bit_generator(k, (8, 4), np.uint16,
                                          jax.lax.RandomAlgorithm.RNG_PHILOX)
        return k2, jax.lax.with_sharding_constraint(b.astype(np.float32) / 65536.0, s)
    check_outputs(shardc.jit(f)(KEY), jax.jit(f)(KEY), mesh2x4)


def test_explicit_out_sharding():
    mesh = shardc.make_mesh((2, 4), ("x", "y"), axis_types=(shardc.AxisType.Explicit,) * 2)

    def f(lax, k):
        return lax.rng_bit_generator(k, (8, 4), out_sharding=P("x", "y"))[1]
    with shardc.set_mesh(mesh):
        ours = shardc.jit(lambda k: f(shardc.lax, k))(KEY)
    with jax.set_mesh(mesh):
        ref = jax.jit(lambda k: f(jax.lax, k))(KEY)
    check_outputs(ours, ref, mesh)
    assert ours.sharding.spec == P("x", "y")


def test_gradient_flows_around_the_bits():
    def f(lax, x):
        b = lax.rng_bit_generator(KEY, (3,))[1]
        return (x * (b % 7).astype(np.float32)).sum()
    x = np.arange(3, dtype=np.float32)
    check_outputs(shardc.jit(shardc.grad(lambda x: f(shardc.lax, x)))(x),
                  jax.jit(jax.grad(lambda x: f(jax.lax, x)))(x))


def test_bad_input_is_a_clear_error():
    with pytest.raises(shardc.ShardcError, match="key must be uint32\\[4\\]"):
        shardc.jit(lambda k: shardc.lax.rng_bit_generator(k, (3,)))(np.zeros(2, np.uint32))
    with pytest.raises(TypeError, match="unsupported dtype"):
        shardc.jit(lambda k: shardc.lax.rng_bit_generator(k, (3,), np.int32))(KEY)
