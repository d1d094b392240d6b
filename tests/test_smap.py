"""shardc.smap (jax.smap): shard_map over one mesh axis, with vmap-style in_axes and
out_axes; values, output shardings and errors vs jax."""
import jax
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import shardc

X = np.arange(64, dtype=np.float32).reshape(8, 8)


def body(lib):
    def f(a, b):
        return a * 2 + b.sum(), lib.lax.psum(a.sum(), "x")
    return f


def both(types, kw, place):
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=types)
    out = []
    for lib in (jax, shardc):
        with lib.set_mesh(mesh):
            args = [jax.device_put(a, NamedSharding(mesh, s)) for a, s in place]
            out.append(lib.jit(lib.smap(body(lib), **kw))(*args))
    return out


@pytest.mark.parametrize("types,kw,place", [
    ((AxisType.Auto,) * 2, dict(in_axes=(0, None), out_axes=(0, None), axis_name="x"),
     [(X, P("x", None)), (X[:2], P())]),
    ((AxisType.Auto,) * 2, dict(in_axes=1, out_axes=(1, None), axis_name="x"),
     [(X, P(None, "x")), (X, P(None, "x"))]),
    ((AxisType.Explicit,) * 2, dict(out_axes=(0, None), axis_name="x"),    # in_axes inferred
     [(X, P("x", None)), (X[:2], P())]),
])
def test_smap_matches_jax(types, kw, place):
    (j0, j1), (s0, s1) = both(types, kw, place)
    np.testing.assert_allclose(s0, j0)
    np.testing.assert_allclose(s1, j1)
    assert s0.sharding.is_equivalent_to(j0.sharding, 2)


def test_smap_errors_as_jax():
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    for lib in (jax, shardc):
        with pytest.raises(TypeError, match="axis_name should be a `str`"):
            lib.smap(lambda a: a, out_axes=0, axis_name=("x",))
        with pytest.raises(TypeError, match="in_axes must be an int, None"):
            lib.smap(lambda a: a, in_axes=[0], out_axes=0, axis_name="x")
        with pytest.raises(TypeError, match="out_axes must be an int, None"):
            lib.smap(lambda a: a, out_axes="0", axis_name="x")
        with lib.set_mesh(mesh), pytest.raises(TypeError, match="in_axes was not specified"):
            lib.jit(lib.smap(lambda a: a, out_axes=0, axis_name="x"))(X)
