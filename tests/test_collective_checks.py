"""Collective arguments as jax reads them: negative ppermute indices count from the end
of the axis; a repeated axis name, an empty or unmappable pmap axis are clear errors."""
import jax
import numpy as np
import pytest
from jax.sharding import AxisType, PartitionSpec as P

import shardc


@pytest.mark.parametrize("perm", [[(0, -1), (-1, 0)], [(-8, 3), (2, -2)]])
def test_ppermute_negative_indices_as_jax(perm):
    m = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
    x = np.arange(8, dtype=np.float32) + 1
    got = shardc.jit(shardc.shard_map(lambda t: shardc.lax.ppermute(t, "x", perm), mesh=m,
                                      in_specs=P("x"), out_specs=P("x")))(x)
    want = jax.jit(jax.shard_map(lambda t: jax.lax.ppermute(t, "x", perm), mesh=m,
                                 in_specs=P("x"), out_specs=P("x")))(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    f = jax.shard_map(lambda t: jax.lax.ppermute(t, "x", perm), mesh=m, in_specs=P("x"),
                      out_specs=P("x"))
    np.testing.assert_array_equal(np.asarray(shardc.jit(f)(x)), np.asarray(want))


def test_repeated_axis_name_is_an_error():
    m = jax.make_mesh((2, 4), ("a", "b"), axis_types=(AxisType.Auto,) * 2)
    f = shardc.shard_map(lambda t: shardc.lax.psum(t, ("a", "a", "b")), mesh=m,
                         in_specs=P("a", "b"), out_specs=P())
    with pytest.raises(ValueError, match="names an axis more than once"):
        shardc.jit(f)(np.ones((8, 8), np.float32))


def test_pmap_of_an_empty_or_missing_axis_is_an_error():
    with pytest.raises(ValueError, match="size 0"):
        shardc.pmap(lambda t: t)(np.zeros((0, 2), np.float32))
    with pytest.raises(ValueError, match="out of bounds"):
        shardc.pmap(lambda t: t)(np.float32(1))
