"""A collective's dimension argument out of range is an error, as jax's (all_gather's
ValueError; jax's psum_scatter and all_to_all fail in the lowering), not wrapped around;
in range, negative ones count from the end (jax's psum_scatter and all_to_all reject
them in the lowering: compared with the positive dimension there)."""
import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc

V = np.arange(64, dtype=np.float32).reshape(16, 4)

CALLS = {
    "all_gather": lambda M, axis: lambda a: M.lax.all_gather(a, "x", axis=axis),
    "all_gather_tiled": lambda M, axis: lambda a: M.lax.all_gather(a, "x", axis=axis,
                                                                   tiled=True),
    "psum_scatter": lambda M, axis: lambda a: M.lax.psum_scatter(
        M.numpy.tile(a, (4, 8)), "x", scatter_dimension=axis, tiled=True),
    "all_to_all": lambda M, axis: lambda a: M.lax.all_to_all(
        M.numpy.tile(a, (4, 8)), "x", axis, 0, tiled=True),
}


def _run(M, mesh, name, axis):
    return M.jit(M.shard_map(CALLS[name](M, axis), mesh=mesh, in_specs=P("x"),
                             out_specs=P("x"), check_vma=False))(V)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_out_of_range_dimensions_are_errors(mesh8, name):
    for axis in (3, -4):
        with pytest.raises(Exception):   # noqa: B017 -- jax's kinds differ (see above)
            _run(jax, mesh8, name, axis)
        with pytest.raises(ValueError, match=f"axis {axis} is out of bounds"):
            _run(shardc, mesh8, name, axis)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_negative_dimensions_count_from_the_end(mesh8, name):
    ref = -1 if name.startswith("all_gather") else 1
    np.testing.assert_array_equal(np.asarray(_run(shardc, mesh8, name, -1)),
                                  np.asarray(_run(jax, mesh8, name, ref)))
