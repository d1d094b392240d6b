"""jax programs under shardc.jit and shardc.grad that a bug hunt found failing or wrong,
each against jax.jit."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc

X = np.array([0.5, -1.0, 2.0], np.float32)


@jax.custom_jvp
def _scaled(x, n):
    return x * n


_scaled.defjvp(lambda p, t: (_scaled(*p), t[0] * p[1] + t[1]))

LITERAL_OPERANDS = {
    # jax.nn.softplus is jax.jit(logaddexp(x, 0)): the literal 0.0 of the inner jaxpr
    # is an operand of a custom_jvp, whose zero tangent was float0 (a crash)
    "softplus": lambda x: jnp.sum(jax.nn.softplus(x)),
    "log_sigmoid": lambda x: jnp.sum(jax.nn.log_sigmoid(x)),
    "mish": lambda x: jnp.sum(jax.nn.mish(x)),
    "custom_jvp_float_literal": lambda x: jnp.sum(jax.jit(lambda v: _scaled(v, 3.0))(x)),
}


@pytest.mark.parametrize("name", sorted(LITERAL_OPERANDS))
def test_grad_through_custom_jvp_with_a_literal_operand(name):
    f = LITERAL_OPERANDS[name]
    want = jax.jit(jax.grad(f))(X)
    np.testing.assert_allclose(np.asarray(shardc.jit(shardc.grad(f))(X)), np.asarray(want),
                               rtol=1e-6)


VMAPPED_COLLECTIVES = {
    # jax.vmap turns a collective over its axis name into one over array dims (psum's
    # positional axes), which shardc called jax.pmap's and refused
    "psum": jax.vmap(lambda t: jax.lax.psum(t, "v"), axis_name="v"),
    "pmax": jax.vmap(lambda t: jax.lax.pmax(t, "v") - t, axis_name="v"),
    "pmin": jax.vmap(lambda t: jax.lax.pmin(t * t, "v"), axis_name="v"),
    "pmean": jax.vmap(lambda t: jax.lax.pmean(t, "v"), axis_name="v"),
    "nested": jax.vmap(jax.vmap(lambda t: jax.lax.psum(t, ("v", "w")), axis_name="w"),
                       axis_name="v"),
    "grad": jax.grad(lambda x: jax.vmap(lambda t: jax.lax.psum(t ** 2, "v"),
                                        axis_name="v")(x).sum()),
}


@pytest.mark.parametrize("name", sorted(VMAPPED_COLLECTIVES))
def test_collectives_over_vmap_axes(name):
    f = VMAPPED_COLLECTIVES[name]
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(np.asarray(shardc.jit(f)(x)), np.asarray(jax.jit(f)(x)))


def _mesh(*kinds):
    return jax.make_mesh((2, 4), ("X", "Y"), axis_types=kinds)


def _x(mesh, spec):
    from jax.sharding import NamedSharding
    return jax.device_put(np.arange(64, dtype=np.float32).reshape(8, 8),
                          NamedSharding(mesh, spec))


E, A = jax.sharding.AxisType.Explicit, jax.sharding.AxisType.Auto
P = jax.sharding.PartitionSpec
SHARDINGS = {
    # device_put to P() on a mesh with Explicit axes reshards them away (it was
    # dropped: the type kept 8@X, and b @ b was a false sharding error)
    "device_put_replicated_explicit": ((E, E), P("X", "Y"), lambda a: (
        lambda b: (b @ b, jax.typeof(b).sharding.spec == P(None, None)))(
            jax.device_put(a, P()))),
    "device_put_replicated_mixed": ((E, A), P("X", "Y"),
                                    lambda a: jax.device_put(a * 2, P()) + 1),
    # reshard to P() on an all-Auto mesh constrains nothing (it pinned replicated)
    "reshard_auto_mesh": ((A, A), P("X", "Y"), lambda a: jax.sharding.reshard(a, P()) * 2),
    "explicit_axes_auto_mesh": ((A, A), P(), lambda a: jax.sharding.explicit_axes(
        lambda z: z * 2, axes=("X", "Y"), in_sharding=P("X", "Y"))(a)),
    # an unreduced out_sharding through jnp (a crash iterating the spec)
    "unreduced_matmul": ((E, E), P(None, "Y"), lambda a: jax.sharding.reshard(
        jnp.matmul(a, a.T, out_sharding=P(None, None, unreduced={"Y"})), P())),
}


@pytest.mark.parametrize("name", sorted(SHARDINGS))
def test_resharding_as_jax(name):
    kinds, spec, f = SHARDINGS[name]
    mesh = _mesh(*kinds)
    x = _x(mesh, spec)
    with jax.set_mesh(mesh):
        want, got = jax.jit(f)(x), shardc.jit(f)(x)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
        if getattr(w, "ndim", 0):
            assert g.sharding.is_equivalent_to(w.sharding, w.ndim), (g.sharding, w.sharding)


OOB = np.array([2, 5, -9, 0], np.int32)
OUT_OF_RANGE = {
    # indexing clamps an out-of-range index, its gradient drops it (jax's transpose of
    # the promise_in_bounds gather is a scatter-add XLA drops it from); shardc added the
    # cotangent onto the edge row
    "getitem": lambda np_, L, x, i: np_.sum(x[i]),
    "getitem_cols": lambda np_, L, x, i: np_.sum(x[:, i] * 2),
    "getitem_pair": lambda np_, L, x, i: np_.sum(x[i, i + 1]),
    "vmapped_take": lambda np_, L, x, i: np_.sum(jax.vmap(lambda r, j: r[j])(
        x[:2], np_.stack([i[:2], i[2:]]))),
    "take_along_clip": lambda np_, L, x, i: np_.sum(np_.take_along_axis(
        x, np_.broadcast_to(i[:3, None], (3, 1)), 1, mode="clip") ** 2),
    "take_along_promise": lambda np_, L, x, i: np_.sum(np_.take_along_axis(
        x, np_.broadcast_to(i[:3, None], (3, 1)), 1, mode="promise_in_bounds")),
    "scatter_add_promise": lambda np_, L, x, i: np_.sum(x.at[i].add(
        x[0] * 3, mode="promise_in_bounds") ** 2),
    "scatter_add_clip": lambda np_, L, x, i: np_.sum(x.at[i].add(
        x[0] * 3, mode="clip") ** 2),
}


@pytest.mark.parametrize("name", sorted(OUT_OF_RANGE))
def test_out_of_range_indices_gradients_as_jax(name):
    import shardc.numpy as snp
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    f = OUT_OF_RANGE[name]
    want = jax.jit(jax.grad(lambda x, i: f(jnp, jax.lax, x, i)))(x, OOB)
    got = shardc.jit(jax.grad(lambda x, i: f(jnp, jax.lax, x, i)))(x, OOB)   # translated
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    np.testing.assert_allclose(  # the values, out-of-range updates dropped as XLA's
        np.asarray(shardc.jit(lambda x, i: f(snp, shardc.lax, x, i))(x, OOB)),
        np.asarray(jax.jit(lambda x, i: f(jnp, jax.lax, x, i))(x, OOB)), rtol=1e-6)
    if name != "vmapped_take":
        got = shardc.jit(shardc.grad(lambda x, i: f(snp, shardc.lax, x, i)))(x, OOB)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


CONSTANT_STARTS = {
    # jax's starts reach shardc as converts (and jnp's negative-index selects) of
    # literals: folded, the slice keeps its sliced dim sharded, as XLA's canonicalizer
    # leaves jax's (a dynamic_slice there gave P('x'))
    "in_dim": lambda a: jax.lax.dynamic_slice_in_dim(a, 8, 8, axis=1),
    "both": lambda a: jax.lax.dynamic_slice(a, (0, 4), (8, 8)),
    "normalized": lambda a: jax.lax.dynamic_slice(a, (jnp.int32(0), -24), (8, 8)),
    "clamped": lambda a: jax.lax.dynamic_slice(a, (0, 30), (8, 8)),
    "index": lambda a: jax.lax.dynamic_index_in_dim(a, 17, axis=1),
    # a traced start stays a dynamic_slice, whose sliced dim is whole
    "traced": lambda a: jax.lax.dynamic_slice(a, (0, a[0, 0].astype(jnp.int32)), (8, 8)),
}


@pytest.mark.parametrize("name", sorted(CONSTANT_STARTS))
def test_dynamic_slice_at_constant_starts_keeps_its_sharding(name):
    f = CONSTANT_STARTS[name]
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    a = jax.device_put(np.arange(256, dtype=np.float32).reshape(8, 32) % 13,
                       jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x", "y")))
    got, want = shardc.jit(f)(a), jax.jit(f)(a)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert got.sharding.spec == want.sharding.spec, (got.sharding.spec, want.sharding.spec)


def test_unsigned_constant_start_as_eager_jax():
    # a uint8 start of 250 clamps to the last window, as StableHLO's dynamic_slice and
    # eager jax (jax.jit of a constant 250 gives 0: XLA's folding reads it as -6)
    x = np.arange(16, dtype=np.float32)
    want = jax.lax.dynamic_slice(jnp.asarray(x), (jnp.uint8(250),), (4,))
    for start in (jnp.uint8(250), jnp.uint8(100) + jnp.uint8(150)):
        got = shardc.jit(lambda a: jax.lax.dynamic_slice(a, (start,), (4,)))(x)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


EMPTY_BROADCASTS = {
    # jax's lax ops broadcast a size-1 dim against size 0; shardc broadcast to the
    # larger size, 1, and refused
    "var": lambda a: jnp.var(a, axis=0),
    "outer": lambda a: jnp.outer(a, a),
    "logsumexp": lambda a: jax.nn.logsumexp(a, axis=0),
    "sub_size_one": lambda a: jax.lax.sub(a, jnp.ones((1, 4), jnp.float32)),
}


@pytest.mark.parametrize("name", sorted(EMPTY_BROADCASTS))
def test_size_one_broadcasts_against_size_zero(name):
    f, e = EMPTY_BROADCASTS[name], np.zeros((0, 4), np.float32)
    want = jax.jit(f)(e)
    got = shardc.jit(f)(e)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
