"""Index arrays of every integer width, against jax.jit: unsigned indices in a fill-mode
read, and 8/16-bit indices into a sharded array (XLA's SPMD partitioner aborts the
process on a gather or scatter whose indices are narrower than 32 bits)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp


@pytest.mark.parametrize("dt", [np.uint8, np.uint16, np.uint32])
def test_fill_mode_read_with_unsigned_indices(dt):
    x = np.arange(8, dtype=np.float32) * 10
    i = np.array([0, 1, 7, 8, 3], dt)
    want = jax.jit(lambda a, i: jnp.asarray(a).at[i].get(mode="fill", fill_value=-1))(x, i)
    got = shardc.jit(lambda a, i: snp.asarray(a).at[i].get(mode="fill", fill_value=-1))(x, i)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    got = shardc.jit(lambda a, i: snp.asarray(a).at[i].get(mode="fill"))(x, i)
    np.testing.assert_array_equal(np.asarray(got), [0, 10, 70, np.nan, 30])


@pytest.mark.parametrize("dt", [np.int8, np.uint8, np.int16, np.uint16])
def test_narrow_indices_into_a_sharded_array(mesh2x4, dt):
    x = jax.device_put(np.arange(40, dtype=np.int32).reshape(8, 5),
                       NamedSharding(mesh2x4, P("x", None)))
    i = np.array([0, 5, 7, 3], dt)
    read = lambda m: lambda a, i: m.asarray(a)[i]  # noqa: E731
    np.testing.assert_array_equal(np.asarray(shardc.jit(read(snp))(x, i)),
                                  np.asarray(jax.jit(read(jnp))(x, i)))
    dn = jax.lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                         scatter_dims_to_operand_dims=(0,))
    add = lambda m: lambda a, i: m.lax.scatter_add(  # noqa: E731
        a, i[:, None], jnp.ones((4, 5), np.int32), dn)
    np.testing.assert_array_equal(np.asarray(shardc.jit(add(shardc))(x, i)),
                                  np.asarray(jax.jit(add(jax))(x, i)))


_HUGE = np.array([0, 7, 8, 2**32 - 1, 2**31, 5], np.uint32)   # past 2**31: not negative


def test_take_with_huge_unsigned_indices():
    x = np.arange(7, dtype=np.float32) * 10
    f = lambda m: lambda a, i: (m.take(a, i), m.take(a, i, mode="clip"),  # noqa: E731
                                m.take(a, i, mode="wrap"))
    for got, want in zip(shardc.jit(f(snp))(x, _HUGE), jax.jit(f(jnp))(x, _HUGE)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_dynamic_slices_with_huge_unsigned_starts():
    x = np.arange(40, dtype=np.float32).reshape(8, 5)
    s, one = np.uint32(2**31), np.uint32(1)

    def f(lax, m):
        return lambda a, s, one, i: (
            lax.dynamic_slice(a, (s, one), (2, 2)),
            lax.dynamic_update_slice(a, m.ones((2, 5), np.float32), (s, one - one)),
            lax.dynamic_index_in_dim(a, s, keepdims=False),
            lax.dynamic_update_index_in_dim(a, m.zeros((5,), np.float32), s, 0),
            m.asarray(a).at[i, 1:3].add(1.0))       # 2**32 - 1 dropped, not read as -1
    got = shardc.jit(f(shardc.lax, snp))(x, s, one, _HUGE)
    want = jax.jit(f(jax.lax, jnp))(x, s, one, _HUGE)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    # a uint32 start beside an int32 one (jax refuses the mix; shardc's starts share
    # int32, the huge one cut to the dim first)
    got = shardc.jit(lambda a, s: shardc.lax.dynamic_slice(a, (s, 1), (2, 2)))(x, s)
    np.testing.assert_array_equal(np.asarray(got), x[6:8, 1:3])


def test_batched_dynamic_slices_with_huge_unsigned_starts():
    x = np.arange(40, dtype=np.float32).reshape(8, 5)
    s = np.array([2**31, 3, 2**32 - 1], np.uint32)

    def f(lax, vmap):
        return lambda a, s: (
            vmap(lambda t: lax.dynamic_slice(a, (t, t), (2, 2)))(s),
            vmap(lambda t: lax.dynamic_update_slice(a, jnp.ones((2, 2)), (t, t)))(s))
    got = shardc.jit(f(shardc.lax, shardc.vmap))(x, s)
    want = jax.jit(f(jax.lax, jax.vmap))(x, s)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_narrow_unsigned_indices_into_a_longer_dim():
    """A uint8 index or start beside a dim longer than 255, or a Python-int start past
    255: bounds and static starts must not be cut to the index's dtype (review)."""
    y = np.arange(1200, dtype=np.float32).reshape(4, 300)
    i = np.array([200, 3, 255, 100], np.uint8)
    s = np.uint8(1)

    def f(m, lax):
        return lambda a, i, s: (
            m.take(a, i, axis=1), m.take(a, i, axis=1, mode="clip"),
            m.asarray(a).at[1:3, i].add(1.0),
            m.asarray(a).at[s, 260].add(1.0), m.asarray(a).at[s, 260:263].set(0.0),
            m.asarray(a).at[s, i].get())
    got = shardc.jit(f(snp, shardc.lax))(y, i, s)
    want = jax.jit(f(jnp, jax.lax))(y, i, s)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    got = shardc.jit(lambda a, s: shardc.lax.dynamic_slice(a, (s, 260), (1, 3)))(y, s)
    np.testing.assert_array_equal(np.asarray(got), y[1:2, 260:263])
