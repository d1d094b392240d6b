"""jax's PRNGs besides its default threefry2x32 against jax.jit, bit for bit: rbg and
unsafe_rbg (XLA's bit generator, keyed by threefry) and threefry4x32, philox2x32 and
philox4x32 (Random123's hashes). Every sampler through shardc.random inside shardc.jit,
eagerly, and through jax.random inside shardc.jit; batches of keys (jax's vmap draws
every example's bits from the first key for XLA's generator, per key for the hashes);
sharded draws; keys carried by loops and shard_map; the default impl; bad keys; jax's
hash primitives themselves."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
from shardc import random as sr
from helpers import check_outputs, sample

jr = jax.random
IMPLS = ["rbg", "unsafe_rbg", "threefry4x32", "philox2x32", "philox4x32"]


def data(x):
    """Keys as their data, other leaves as they are (to compare pytrees)."""
    return jax.tree_util.tree_map(
        lambda v: jr.key_data(v) if jax.dtypes.issubdtype(v.dtype, jax.dtypes.prng_key)
        else v, x)


SAMPLERS = {
    "split": lambda r, k: r.split(k, 3),
    "split_shape": lambda r, k: r.split(k, (2, 3)),
    "fold_in": lambda r, k: r.fold_in(k, 7),
    "bits8": lambda r, k: r.bits(k, (5,), jnp.uint8),
    "bits32": lambda r, k: r.bits(k, (2, 3), jnp.uint32),
    "uniform": lambda r, k: r.uniform(k, (5, 3), minval=-2.0, maxval=3.0),
    "uniform_bf16": lambda r, k: r.uniform(k, (6,), jnp.bfloat16),
    "normal": lambda r, k: r.normal(k, (4, 2)),
    "randint": lambda r, k: r.randint(k, (6,), -3, 10),
    "randint_i8": lambda r, k: r.randint(k, (6,), 0, 100, jnp.int8),
    "bernoulli": lambda r, k: r.bernoulli(k, 0.3, (7,)),
    "truncated_normal": lambda r, k: r.truncated_normal(k, -1.0, 2.0, (4,)),
    "categorical": lambda r, k: r.categorical(k, jnp.log(jnp.arange(1.0, 6.0)), shape=(3,)),
    "gumbel": lambda r, k: r.gumbel(k, (4,)),
    "exponential": lambda r, k: r.exponential(k, (4,)),
    "laplace": lambda r, k: r.laplace(k, (3,)),
    "permutation": lambda r, k: r.permutation(k, 10),
    "choice": lambda r, k: r.choice(k, 10, (4,), replace=False),
    "choice_p": lambda r, k: r.choice(k, 5, (6,), p=jnp.arange(1.0, 6.0) / 15.0),
    "gamma": lambda r, k: r.gamma(k, jnp.array([0.3, 1.0, 4.0])),
    "beta": lambda r, k: r.beta(k, 2.0, 3.0, (3,)),
    "dirichlet": lambda r, k: r.dirichlet(k, jnp.array([1.0, 2.0, 0.5])),
    "t": lambda r, k: r.t(k, 3.0, (3,)),
    "binomial": lambda r, k: r.binomial(k, 10.0, 0.3, (3,)),
    "orthogonal": lambda r, k: r.orthogonal(k, 3),
    "multivariate_normal": lambda r, k: r.multivariate_normal(
        k, jnp.zeros(2), jnp.array([[2.0, 0.5], [0.5, 1.0]]), (3,)),
    "ball": lambda r, k: r.ball(k, 3),
}
CASES = [(impl, name) for impl in IMPLS for name in SAMPLERS]
# `make test` runs every 7th: each impl with four samplers (tests/test_random.py checks
# every sampler under the default impl); `make test-slow` the rest


@pytest.mark.parametrize("impl,name", sample(CASES, 7, unpack=True))
def test_samplers_as_jax(impl, name):
    f = SAMPLERS[name]
    k = jr.key(2026, impl=impl)
    ref = data(jax.jit(lambda k: f(jr, k))(k))
    check_outputs(data(shardc.jit(lambda k: f(sr, k))(k)), ref)
    check_outputs(data(f(sr, sr.key(2026, impl=impl))), ref, what="jax (shardc eager)")
    check_outputs(data(shardc.jit(lambda k: f(jr, k))(k)), ref, what="jax (jax.random code)")


@pytest.mark.parametrize("impl", IMPLS)
def test_poisson_is_threefry_only_as_jax(impl):
    with pytest.raises(NotImplementedError, match="only implemented for the threefry2x32"):
        jr.poisson(jr.key(0, impl=impl), 3.0)
    with pytest.raises(NotImplementedError, match="only implemented for the threefry2x32"):
        sr.poisson(sr.key(0, impl=impl), 3.0)


@pytest.mark.parametrize("impl", IMPLS)
def test_a_batch_of_keys_as_jax_vmap(impl):
    """Under vmap XLA's generator draws every example's bits from the first key (jax's
    batching rule): split and fold_in stay per key for rbg, not for unsafe_rbg. The
    hashes stay per key."""
    keys = jr.split(jr.key(5, impl=impl), 4)

    def f(r, vmap):
        return lambda ks: vmap(lambda k: (r.normal(k, (3,)), r.split(k), r.fold_in(k, 9),
                                          r.gamma(k, 2.0, (2,))))(ks)
    ref = data(jax.jit(f(jr, jax.vmap))(keys))
    check_outputs(data(shardc.jit(f(sr, shardc.vmap))(keys)), ref)
    check_outputs(data(shardc.jit(f(jr, jax.vmap))(keys)), ref, what="jax (jax.vmap code)")
    # a batch of keys and a batch of messages, and one message for a batch of keys
    g = lambda r, vmap: lambda ks, ms: (vmap(r.fold_in)(ks, ms),  # noqa: E731
                                        vmap(lambda k: r.fold_in(k, 3))(ks))
    ms = jnp.arange(4, dtype=jnp.uint32)
    check_outputs(data(shardc.jit(g(jr, jax.vmap))(keys, ms)), data(jax.jit(g(jr, jax.vmap))(
        keys, ms)))


@pytest.mark.parametrize("impl", IMPLS)
def test_sharded_draws_are_the_unsharded_draws(mesh2x4, impl):
    k = jr.key(11, impl=impl)

    def f(r, constrain):
        return lambda k: constrain(r.normal(k, (8, 16)) + r.uniform(r.fold_in(k, 1), (8, 16)))
    s = NamedSharding(mesh2x4, P("x", "y"))
    ours = shardc.jit(f(sr, lambda x: shardc.lax.with_sharding_constraint(x, s)))(k)
    if impl.startswith("philox"):
        # jax.jit cannot lower lax.mulhi on sharded operands ("Unable to convert MHLO to
        # StableHLO", jax 0.10.2): the values of its unsharded draw, the constraint's
        # sharding
        check_outputs(ours, jax.jit(f(jr, lambda x: x))(k))
        assert ours.sharding.is_equivalent_to(s, 2)
    else:
        check_outputs(ours, jax.jit(f(jr, lambda x: jax.lax.with_sharding_constraint(x, s)))(
            k), mesh2x4)
    np.testing.assert_array_equal(ours, shardc.jit(f(sr, lambda x: x))(k))


@pytest.mark.parametrize("impl", IMPLS)
def test_keys_carried_by_loops_and_returned(impl):
    def f(k):
        def body(k, _):
            k, sub = jr.split(k)
            return k, jr.normal(sub, (2,))
        k, xs = jax.lax.scan(body, k, None, length=3)
        k = jax.lax.fori_loop(0, 2, lambda i, k: jr.fold_in(k, i), k)
        return k, xs
    k = jr.key(1, impl=impl)
    ours, ref = shardc.jit(f)(k), jax.jit(f)(k)
    assert ours[0].dtype == ref[0].dtype            # a key<rbg> jax key array comes back
    check_outputs(data(ours), data(ref))


def test_shard_map_on_rbg_keys(mesh2x4):
    keys = jr.split(jr.key(3, impl="rbg"), 8)

    def f(ks):
        return jax.shard_map(lambda k: jax.vmap(lambda kk: jr.uniform(kk, (2,)))(k),
                             mesh=mesh2x4, in_specs=P(("x", "y")), out_specs=P(("x", "y")))(ks)
    check_outputs(shardc.jit(f)(keys), jax.jit(f)(keys), mesh2x4)


@pytest.mark.parametrize("impl,size", [("unsafe_rbg", 4), ("philox2x32", 1)])
def test_the_default_impl_and_raw_keys(impl, size):
    with jax.default_prng_impl(impl):
        raw = jr.PRNGKey(4)
        np.testing.assert_array_equal(sr.PRNGKey(4), raw)       # uint32[size]
        f = lambda r: lambda k: (r.split(k), r.normal(k, (3,)))  # noqa: E731
        check_outputs(shardc.jit(f(sr))(raw), jax.jit(f(jr))(raw))
        check_outputs(shardc.jit(f(jr))(raw), jax.jit(f(jr))(raw))
        with pytest.raises(TypeError, match=f"key_data.shape to end with \\({size},\\)"):
            sr.normal(np.zeros(2, np.uint32), (3,))
    assert sr.key_impl(sr.key(0, impl="unsafe_rbg")) == "unsafe_rbg"
    assert sr.key_dtype("rbg") == jr.key(0, impl="rbg").dtype
    wrapped = sr.wrap_key_data(np.arange(4, dtype=np.uint32), impl="rbg")
    check_outputs(data(wrapped), data(jr.wrap_key_data(np.arange(4, dtype=np.uint32),
                                                       impl="rbg")))
    with pytest.raises(shardc.ShardcError, match="unrecognized PRNG implementation"):
        sr.key(0, impl="philox")
    with pytest.raises(TypeError, match="\\(4,\\)"):
        sr.wrap_key_data(np.zeros(2, np.uint32), impl="rbg")


def test_flax_dropout_on_the_rbg_default():
    import flax.linen as nn

    class M(nn.Module):
        @nn.compact
        def __call__(self, x):
            return nn.Dropout(0.5, deterministic=False)(nn.Dense(4)(x))
    x = np.ones((2, 3), np.float32)
    with jax.default_prng_impl("rbg"):
        params = M().init(jr.key(0), x)
        f = lambda p, k: M().apply(p, x, rngs={"dropout": k})  # noqa: E731
        k = jr.key(1)
        check_outputs(shardc.jit(f)(params, k), jax.jit(f)(params, k))


def test_jax_hash_primitives_as_jax():
    """jax's counter-based hashes called directly (jax.extend.random.threefry_2x32, the
    primitives under the PRNGs): scalars broadcast against counters, as jax's rule."""
    from jax._src.random import philox2x32, philox4x32, prng, threefry4x32
    from jax.extend import random as jex
    z = np.uint32(0)

    def f(k, x):
        return (jex.threefry_2x32(k, x), jex.threefry_2x32(k, x[:7]),
                jex.threefry2x32_p.bind(k[0], k[1], x, x[::-1]),
                threefry4x32.threefry4x32_p.bind(k[0], k[1], z, k[0], x, x, x, np.uint32(5)),
                philox2x32.philox2x32_p.bind(k[0], x, x),
                philox4x32.philox4x32_p.bind(k[0], k[1], x, x, np.uint32(1), x),
                prng.iota_2x32_shape((3, 4)), prng.iota_2x32_shape(()))
    k, x = jnp.array([3, 99], jnp.uint32), jnp.arange(2 ** 32 - 10, 2 ** 32, dtype=jnp.uint32)
    check_outputs(shardc.jit(f)(k, x), jax.jit(f)(k, x))
