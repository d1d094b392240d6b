"""PositionalSharding (jax 0.4's, dropped by jax): views of a device array, placing data
as the equivalent NamedSharding does, accepted wherever shardc takes a sharding."""
import jax
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.sharding import PositionalSharding

X = np.arange(32, dtype=np.float32).reshape(8, 4)
DEVS = jax.devices()


def grid(shape, names):
    return Mesh(np.array(DEVS).reshape(shape), names)


def same_placement(a, b, shape):
    assert a.devices_indices_map(shape) == b.devices_indices_map(shape)


# each view and the NamedSharding that places blocks the same way (jax 0.4's semantics:
# block idx lives on the devices of cell idx; replicate merges cells)
VIEWS = [
    (lambda s: s.reshape(8, 1), grid((8,), ("a",)), P("a", None)),
    (lambda s: s.reshape(4, 2), grid((4, 2), ("a", "b")), P("a", "b")),
    (lambda s: s.reshape(2, 4), grid((2, 4), ("a", "b")), P("a", "b")),
    (lambda s: s.reshape(4, 2).replicate(0), grid((4, 2), ("a", "b")), P(None, "b")),
    (lambda s: s.reshape(4, 2).replicate(1), grid((4, 2), ("a", "b")), P("a", None)),
    (lambda s: s.reshape(4, 2).replicate(), grid((4, 2), ("a", "b")), P()),
    (lambda s: s.reshape(2, 4).T, grid((2, 4), ("a", "b")), P("b", "a")),
    (lambda s: s.reshape(2, 4).transpose(1, 0), grid((2, 4), ("a", "b")), P("b", "a")),
    (lambda s: s.reshape(2, 2, 2).replicate(1, keepdims=False), grid((2, 2, 2), ("a", "b", "c")),
     P("a", "c")),
]


@pytest.mark.parametrize("k", range(len(VIEWS)))
def test_views_place_as_the_named_sharding(k):
    view, mesh, spec = VIEWS[k]
    ps = view(PositionalSharding(DEVS))
    named = NamedSharding(mesh, spec)
    same_placement(ps, named, X.shape)
    same_placement(ps.named(), named, X.shape)
    assert ps.shard_shape(X.shape) == named.shard_shape(X.shape)
    assert ps.is_fully_replicated == named.is_fully_replicated
    out = shardc.device_put(X, ps)
    np.testing.assert_array_equal(out, X)
    same_placement(out.sharding, named, X.shape)
    assert out.committed


def test_shape_ndim_repr_eq():
    ps = PositionalSharding(DEVS)
    assert ps.shape == (8,) and ps.ndim == 1
    r = ps.reshape(4, 2).replicate(0)
    assert r.shape == (1, 2) and r.ndim == 2
    assert ps.reshape(4, 2).replicate(0, keepdims=False).shape == (2,)
    assert repr(r).startswith("PositionalSharding([[{CPU 0, 2, 4, 6} {CPU 1, 3, 5, 7}]]")
    assert r == ps.reshape(4, 2).replicate(0) and hash(r) == hash(ps.reshape(4, 2).replicate(0))
    assert r != ps.reshape(1, 8)
    assert PositionalSharding(np.array(DEVS).reshape(2, 4)).shape == (2, 4)
    assert isinstance(ps, jax.sharding.Sharding) and ps.device_set == set(DEVS)
    assert ps.num_devices == 8 and ps.is_fully_addressable
    with pytest.raises(ValueError, match="at least one device"):
        PositionalSharding([])


def test_rank_must_match_unless_replicated():
    ps = PositionalSharding(DEVS).reshape(4, 2)
    with pytest.raises(shardc.ShardcError, match="only valid for values of rank 2"):
        ps.devices_indices_map((8,))
    with pytest.raises(shardc.ShardcError, match="only valid for values of rank 2"):
        shardc.jit(lambda v: v, in_shardings=ps)(np.ones(8))
    rep = ps.replicate()
    np.testing.assert_array_equal(shardc.jit(lambda v: v + 1, in_shardings=rep)(np.ones(8)),
                                  np.full(8, 2.0))


def test_jit_in_and_out_shardings():
    ps = PositionalSharding(DEVS)
    f = shardc.jit(lambda a: a * 2, in_shardings=ps.reshape(4, 2), out_shardings=ps.reshape(8, 1))
    out = f(X)
    np.testing.assert_array_equal(out, X * 2)
    same_placement(out.sharding, NamedSharding(grid((8,), ("a",)), P("a")), X.shape)
    ref = jax.jit(lambda a: a * 2, out_shardings=NamedSharding(grid((8,), ("a",)), P("a")))(X)
    np.testing.assert_array_equal(out, ref)


def test_with_sharding_constraint_in_and_out_of_jit():
    ps = PositionalSharding(DEVS)
    want = NamedSharding(grid((2, 4), ("a", "b")), P(None, "b"))
    g = shardc.jit(lambda a: shardc.with_sharding_constraint(a + 1, ps.reshape(2, 4).replicate(0)))
    out = g(shardc.device_put(X, ps.reshape(4, 2)))
    np.testing.assert_array_equal(out, X + 1)
    same_placement(out.sharding, want, X.shape)
    eager = shardc.with_sharding_constraint(X, ps.reshape(2, 4).replicate(0))
    same_placement(eager.sharding, want, X.shape)


def test_said_on_the_programs_mesh(mesh2x4):
    """With arguments on a NamedSharding's mesh, a positional sharding is said on that
    mesh (one mesh per program); one that mesh cannot say is an error naming it."""
    ps = PositionalSharding(DEVS)
    x = jax.device_put(X, NamedSharding(mesh2x4, P("x", "y")))
    f = shardc.jit(lambda a: shardc.with_sharding_constraint(a * 3, ps.reshape(2, 4).T))
    out = f(x)
    np.testing.assert_array_equal(out, X * 3)
    assert out.sharding.mesh == mesh2x4
    same_placement(out.sharding, NamedSharding(mesh2x4, P("y", "x")), X.shape)
    h = shardc.jit(lambda a: shardc.with_sharding_constraint(a, ps.reshape(4, 2)))
    with pytest.raises(shardc.ShardcError, match="cannot be expressed on the program's mesh"):
        h(x)


def test_creation_op_device_takes_it():
    ps = PositionalSharding(DEVS).reshape(8, 1)
    out = snp.zeros((8, 4), device=ps)
    same_placement(out.sharding, NamedSharding(grid((8,), ("a",)), P("a")), (8, 4))
