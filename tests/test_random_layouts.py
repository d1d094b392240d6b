"""jax's config values that change what a program computes: the threefry counter
layout (`jax_threefry_partitionable=False`: jax's original one), arrays of more than
2**32 random values, and the config being part of shardc.jit's cache key."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
from shardc import random as sr
from shardc.api.random import _threefry
from test_random import ALL, PARAMS, same

jr = jax.random
original = pytest.mark.usefixtures("original_layout")


@pytest.fixture
def original_layout():
    with jax.threefry_partitionable(False):
        yield


# every sampler (a sixth of them and the bits cases in `make test`, all in `make
# test-slow`): the original layout pads odd counts, splits words for 8/16 bits and
# joins them for 64, and the samplers' splits go through it too
CASES = [c if i % 6 == 0 or c.id.startswith("bits") else
         pytest.param(*c.values, id=c.id, marks=[*c.marks, pytest.mark.slow])
         for i, c in enumerate(ALL)]


@original
@pytest.mark.parametrize("case", CASES)
def test_original_layout_jit_matches_jax(case):
    _, call = case
    k = jr.key(11)
    same(shardc.jit(lambda k, p: call(sr, k, p))(k, PARAMS),
         jax.jit(lambda k, p: call(jr, k, p))(k, PARAMS))


@original
@pytest.mark.parametrize("shape", [(), (1,), (5,), (2, 3), (4, 0), (7, 3)])
@pytest.mark.parametrize("dtype", [jnp.uint8, jnp.uint16, jnp.uint32])
def test_original_layout_bits_eager_split_fold_in(shape, dtype):
    k = jr.key(5)
    same(sr.bits(k, shape, dtype), jr.bits(k, shape, dtype))
    for num in (1, 3, (2, 3)):
        same(jr.key_data(sr.split(k, num)), jr.key_data(jr.split(k, num)))
    same(jr.key_data(sr.fold_in(k, 7)), jr.key_data(jr.fold_in(k, 7)))


@original
def test_original_layout_64_bit_values():
    with jax.enable_x64(True):
        k = jr.key(2)
        for shape in [(3,), (2, 5)]:
            same(sr.bits(k, shape, jnp.uint64), jr.bits(k, shape, jnp.uint64))
        same(sr.normal(k, (3, 3), jnp.float64), jr.normal(k, (3, 3), jnp.float64))


@original
def test_original_layout_jax_code_vmap_and_sharded(mesh2x4):
    f = lambda k: jr.normal(jr.split(k)[1], (8, 6))   # noqa: E731  jax's own code
    same(shardc.jit(f)(jr.key(3)), jax.jit(f)(jr.key(3)))
    keys = jr.split(jr.key(4), 3)
    same(shardc.vmap(lambda k: sr.uniform(k, (5,)))(keys),
         jax.vmap(lambda k: jr.uniform(k, (5,)))(keys))
    out = NamedSharding(mesh2x4, P("x", "y"))
    g = lambda k: jr.uniform(k, (8, 12))              # noqa: E731
    got = shardc.jit(lambda k: sr.uniform(k, (8, 12)), out_shardings=out)(jr.key(6))
    assert got.sharding.is_equivalent_to(out, 2)
    same(got, jax.jit(g, out_shardings=out)(jr.key(6)))


@original
def test_original_layout_blocks_of_counters(monkeypatch):
    """More counters than a key hashes (2**32 - 1 in jax; 5 here, to run): the counts
    go in blocks under keys split off the key, as jax's _threefry_random_bits_original
    (its steps, with that block size, are the reference)."""
    from jax._src.random import threefry2x32 as jtf
    monkeypatch.setattr(_threefry, "_BLOCK", 5)
    k = jr.PRNGKey(9)
    n = 13                                    # two full blocks and 3 counters
    keys = jtf.threefry_split(k, (3,))
    want = jnp.concatenate([jtf.threefry_2x32(keys[0], jnp.arange(5, dtype=jnp.uint32)),
                            jtf.threefry_2x32(keys[1], jnp.arange(5, dtype=jnp.uint32)),
                            jtf.threefry_2x32(keys[2], jnp.arange(3, dtype=jnp.uint32))])
    same(shardc.jit(lambda k: _threefry.random_bits(k, 32, (n,)))(k), want)


# ---------------------------------------------------------------- beyond 2**32 values

def test_counters_of_more_than_2_32_elements():
    """The (hi, lo) words of the flat index past 2**32 (a corner of the 4.3e9 counters,
    which XLA computes alone: the slice fuses into the iota arithmetic)."""
    from shardc.ops import lax as L
    shape = (2 ** 12 + 1, 2 ** 20)             # 2**32 + 2**20 elements

    def corner(_):
        return [L.slice(w, (4094, 2 ** 20 - 2), (4097, 2 ** 20))
                for w in _threefry.iota_2x32_shape(shape)]
    hi, lo = shardc.jit(corner)(np.zeros(()))
    flat = (np.arange(4094, 4097)[:, None] * 2 ** 20 + np.arange(2 ** 20 - 2, 2 ** 20))
    same(hi, (flat >> 32).astype(np.uint32))
    same(lo, (flat & 0xFFFFFFFF).astype(np.uint32))
    with pytest.raises(shardc.ShardcError, match="exceeding 2 \\*\\* 64"):
        shardc.jit(lambda k: sr.bits(k, (2 ** 33, 2 ** 32)))(jr.key(0))


# ---------------------------------------------------------------- the cache key

def test_config_values_are_part_of_the_jit_key():
    traces = []

    @shardc.jit
    def f(k, a):
        traces.append(1)
        return sr.uniform(k, (3,)), a @ a
    k, a = jr.key(0), np.eye(4, dtype=np.float32)
    first = f(k, a)[0]
    with jax.threefry_partitionable(False):
        same(f(k, a)[0], jr.uniform(k, (3,)))
        assert not np.array_equal(f(k, a)[0], first)
    with jax.default_matmul_precision("highest"):
        f(k, a)
        assert len(traces) == 3
        assert "HIGHEST" in f.lower(k, a).as_text()
    same(f(k, a)[0], first)
    assert len(traces) == 4                         # the lowering traced once more
    same(sr.uniform(k, (3,)), first)              # eager samplers' own jits too
    with jax.threefry_partitionable(False):
        same(sr.uniform(k, (3,)), jr.uniform(k, (3,)))


def test_another_default_prng_impl_is_followed_as_jax():
    # (it was an error until shardc had jax's rbg PRNG)
    with jax.default_prng_impl("rbg"):
        assert sr.key_impl(sr.key(0)) == jr.key_impl(jr.key(0)) == "rbg"
        assert sr.key(0).dtype == jr.key(0).dtype
        same(jr.key_data(sr.key(5)), jr.key_data(jr.key(5)))
        same(sr.PRNGKey(5), jr.PRNGKey(5))                          # raw: uint32[4]
        same(sr.uniform(sr.PRNGKey(5), (3,)), jr.uniform(jr.PRNGKey(5), (3,)))
        same(jr.key_data(sr.key(1, impl="threefry2x32")),
             jr.key_data(jr.key(1, impl="threefry2x32")))
