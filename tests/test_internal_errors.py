"""Programs jax.jit runs that once reached users as "XLA could not compile ... a
shardc bug" (or an XLA CHECK-failure abort): each against jax.jit."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc

from helpers import compare


@pytest.mark.parametrize("mesh_shape", [(4, 2), (8, 1)], ids=str)
def test_strided_slices_of_a_split_dim(mesh_shape):
    mesh = shardc.make_mesh(mesh_shape, ("a", "b"), axis_types=(shardc.AxisType.Auto,) * 2)
    x = jax.device_put(np.arange(8, dtype=np.float32), NamedSharding(mesh, P("a")))
    for s, t, st in itertools.product(range(0, 8, 2), range(1, 9, 3), (2, 3, 5)):
        if t > s:
            got = shardc.jit(lambda x: shardc.lax.slice(x, (s,), (t,), (st,)))(x)
            np.testing.assert_array_equal(got, np.arange(8)[s:t:st], err_msg=f"{s}:{t}:{st}")


STRIDED = {
    "issue": lambda m, x: x[5:8:3],
    "neg_step": lambda m, x: x[6:1:-2],
    "rev": lambda m, x: x[::-1],
    "rev_step": lambda m, x: x[::-3],
    "2d_rows": lambda m, x: x.reshape(4, 2)[1::2],
    "2d_cols": lambda m, x: x.reshape(2, 4)[:, 3:0:-2],
}


@pytest.mark.parametrize("name", sorted(STRIDED))
def test_strided_indexing_vs_jax(name):
    mesh = shardc.make_mesh((4, 2), ("a", "b"), axis_types=(shardc.AxisType.Auto,) * 2)
    compare(STRIDED[name], [np.arange(8, dtype=np.float32)], [P("a")], mesh)


EMPTY = {
    "cumsum": lambda m, x: m.cumsum(x),
    "cumsum_axis0": lambda m, x: m.cumsum(x.reshape(0, 3), axis=0),
    "cumsum_axis1": lambda m, x: m.cumsum(x.reshape(0, 3), axis=1),
    "sum": lambda m, x: m.sum(x),
    "mean": lambda m, x: m.mean(x),
    "max_initial": lambda m, x: m.max(x, initial=-1.0),
    "prod": lambda m, x: m.prod(x),
    "sum_axis": lambda m, x: m.sum(x.reshape(0, 3), axis=0),
}


@pytest.mark.parametrize("name", sorted(EMPTY))
def test_reductions_of_empty_arrays(name):
    compare(EMPTY[name], [np.zeros((0,), np.float32)], numpy_ref=False)


def test_cumsum_of_empty_under_grad():
    g = shardc.jit(shardc.grad(lambda x: shardc.numpy.cumsum(x).sum()))(np.zeros(0, np.float32))
    ref = jax.jit(jax.grad(lambda x: jnp.cumsum(x).sum()))(np.zeros(0, np.float32))
    assert g.shape == ref.shape == (0,)


MASKED = {
    "max_initial": lambda m, x: m.max(x, axis=1, initial=0.5),
    "min_where": lambda m, x: m.min(x, axis=0, where=x > 0, initial=9.0),
    "sum_where": lambda m, x: m.sum(x, where=x < 1),
    "sum_initial": lambda m, x: m.sum(x, axis=1, initial=2.0, keepdims=True),
    "prod_where": lambda m, x: m.prod(x, axis=1, where=x > -1),
}


@pytest.mark.parametrize("name", sorted(MASKED))
def test_reductions_with_initial_and_where(name, mesh2x4):
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    compare(MASKED[name], [x], [P("x", "y")], mesh2x4, numpy_ref=False)


PADS = [(-1, 2, 1), (-2, -1, 2), (-3, 0, 1), (1, -2, 1), (-1, 2, 0), (2, 3, 2)]


@pytest.mark.parametrize("cfg", PADS, ids=str)
@pytest.mark.parametrize("spec", [P("a"), P(("a", "b"))], ids=str)
def test_negative_and_interior_pad_of_a_split_dim(cfg, spec):
    """XLA aborts the process on a negative low pad with interior padding of a split dim
    (jax.jit too); the reference is jax.jit on an unsplit input."""
    mesh = shardc.make_mesh((4, 2), ("a", "b"), axis_types=(shardc.AxisType.Auto,) * 2)
    x = np.arange(1, 17, dtype=np.float32)
    xs = jax.device_put(x, NamedSharding(mesh, spec))
    want = jax.jit(lambda x: jax.lax.pad(x, 0., [cfg]))(x)
    np.testing.assert_array_equal(shardc.jit(lambda x: shardc.lax.pad(x, 0., [cfg]))(xs), want)
    loss = lambda lax: lambda x: (lax.pad(x, 0., [cfg]) ** 2 * 0.5).sum()  # noqa: E731
    g = shardc.jit(shardc.grad(loss(shardc.lax)))(xs)
    np.testing.assert_array_equal(g, jax.jit(jax.grad(loss(jax.lax)))(x))
    assert g.sharding.is_equivalent_to(xs.sharding, 1)
