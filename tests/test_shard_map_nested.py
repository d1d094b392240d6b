"""shard_map nested in a shard_map (each over its own mesh axes): values, shardings
and variance vs jax.shard_map, gradients vs jax.grad of the same computation unsharded
(jax cannot transpose a nested shard_map yet), errors, and the frontend."""
from types import SimpleNamespace as NS

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import shardc
from shardc.errors import ShardcError

JAX = NS(shard_map=jax.shard_map, lax=jax.lax, jit=jax.jit, vmap=jax.vmap)
OURS = NS(shard_map=shardc.shard_map, lax=shardc.lax, jit=shardc.jit, vmap=shardc.vmap)
RNG = np.random.default_rng(0)
A = RNG.normal(size=(8, 8)).astype(np.float32)
W = RNG.normal(size=(8, 4)).astype(np.float32)


@pytest.fixture(scope="module")
def mesh3():
    return jax.make_mesh((2, 2, 2), ("x", "y", "z"), axis_types=(AxisType.Auto,) * 3)


def program(m, with_scan=True):
    """Outer shard_map manual over x (z stays automatic), inner ones over y: a
    contraction split over y, a psum over the outer axis x inside the inner body,
    axis indices of both, and an inner shard_map in a scan of the outer body."""
    def inner(b, w, c):
        part = m.lax.psum(b @ w, "y")
        tot = m.lax.psum(c, "x").sum()
        idx = (m.lax.axis_index("x") * 10 + m.lax.axis_index("y")).astype(b.dtype)
        return part + tot + idx

    def outer(a, w):
        c = a[:1, :4] * 2.0
        sm = m.shard_map(inner, in_specs=(P(None, "y"), P("y"), P()),
                         out_specs=P(None, "y"), axis_names={"y"})

        def step(carry, _):
            if not with_scan:
                return carry, carry.sum()
            r = sm(carry, w, c)
            return carry * 0.5 + r.sum() * 0.01, r.sum()
        carry, ys = m.lax.scan(step, a, None, length=2)
        return sm(a, w, c) + ys.sum(), carry
    return m.shard_map(outer, in_specs=(P("x"), P()), out_specs=(P("x"), P("x")),
                       axis_names={"x"})


def dense(a, w):
    """program(.., with_scan=False) without shard_map: what it computes, in jnp."""
    rows = []
    for x in range(2):
        ax = a[4 * x:4 * x + 4]
        tot = 2.0 * (a[0, :4] + a[4, :4]).sum()
        ys = 2.0 * ax.sum()
        blocks = [ax @ w + tot + (10 * x + y) for y in range(2)]
        rows.append(jnp.concatenate(blocks, axis=1) + ys)
    return jnp.concatenate(rows, axis=0), a


def _placed(mesh):
    return (jax.device_put(A, NamedSharding(mesh, P("x", "y"))),
            jax.device_put(W, NamedSharding(mesh, P("y", None))))


def _check(ours, ref):
    for o, r in zip(jax.tree.leaves(ours), jax.tree.leaves(ref)):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=2e-5, atol=2e-4)
        assert o.sharding.is_equivalent_to(r.sharding, o.ndim), (o.sharding, r.sharding)


def test_nested_values_and_shardings(mesh3):
    with jax.set_mesh(mesh3):
        a, w = _placed(mesh3)
        _check(OURS.jit(program(OURS))(a, w), JAX.jit(program(JAX))(a, w))


def test_nested_gradient(mesh3):
    def loss(f):
        def total(a, w):
            o, c = f(a, w)
            return (o ** 2).sum() + (c * c).sum()
        return total
    with jax.set_mesh(mesh3):
        a, w = _placed(mesh3)
        np.testing.assert_allclose(np.asarray(OURS.jit(program(OURS, False))(a, w)[0]),
                                   np.asarray(dense(A, W)[0]), rtol=2e-5, atol=2e-4)
        ours = shardc.jit(shardc.grad(loss(program(OURS, False)), argnums=(0, 1)))(a, w)
    ref = jax.grad(loss(dense), argnums=(0, 1))(A, W)
    for o, r in zip(ours, ref):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=1e-4, atol=1e-3)


def test_vmap_of_nested(mesh3):
    ab = np.stack([A, 2 * A])

    def f(m):
        return m.jit(m.vmap(lambda a: program(m)(a, jnp.asarray(W))[0]))
    with jax.set_mesh(mesh3):
        x = jax.device_put(ab, NamedSharding(mesh3, P(None, "x")))
        _check(f(OURS)(x), f(JAX)(x))


def test_explicit_mesh_default_axis_names():
    """On an Explicit mesh, the inner shard_map's default axis_names are the axes still
    automatic; in_specs are read from the types; typeof shows the variance."""
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    seen = {}

    def prog(m, typeof):
        def inner(b):
            seen.setdefault(id(m), []).append(str(typeof(b)))
            return m.lax.psum(b, "y") * 2.0

        def outer(a):
            return m.shard_map(inner, in_specs=P(None, "y"), out_specs=P())(a) + 1.0
        return m.jit(m.shard_map(outer, in_specs=P("x"), out_specs=P("x"), axis_names={"x"}))
    with jax.set_mesh(mesh):
        x = jax.device_put(A, NamedSharding(mesh, P("x", "y")))
        _check(prog(OURS, shardc.typeof)(x), prog(JAX, jax.typeof)(x))
    assert seen[id(OURS)] == seen[id(JAX)], seen


ERRORS = {
    "claims_replicated": "says output 0 is the same on every device along mesh axes \\['y'\\]",
    "outer_axis_in_spec": "mesh axis 'x' is manual already, in the enclosing shard_map",
    "same_axes": "mesh axis 'y' is not manual here",
    "psum_free": "psum: unknown axis name 'z'",
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_nested_errors(mesh3, case):
    def inner(b):
        return shardc.lax.psum(b, "z") if case == "psum_free" else b * 2.0

    def outer(a):
        if case == "claims_replicated":     # b varies over y; P() says it does not
            sm = shardc.shard_map(inner, in_specs=P(None, "y"), out_specs=P(),
                                  axis_names={"y"})
        elif case == "outer_axis_in_spec":  # x is already manual: not the inner's
            sm = shardc.shard_map(inner, in_specs=P("x"), out_specs=P("x"),
                                  axis_names={"y"})
        elif case == "same_axes":           # nothing new to make manual
            sm = shardc.shard_map(inner, in_specs=P(None, "y"), out_specs=P(None, "y"),
                                  axis_names={"x"})
        else:                               # z stays automatic: no collective over it
            sm = shardc.shard_map(inner, in_specs=P(None, "y"), out_specs=P(None, "y"),
                                  axis_names={"y"})
        return sm(a)
    # no mesh context: the inner shard_maps take the outer one's
    f = shardc.jit(shardc.shard_map(outer, mesh=mesh3, in_specs=P("x"), out_specs=P("x"),
                                    axis_names={"x"}))
    with pytest.raises(ShardcError, match=ERRORS[case]):
        f(A)
