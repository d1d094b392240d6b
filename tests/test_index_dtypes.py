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
