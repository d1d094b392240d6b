"""jax.shard_map and jax's collectives inside shardc.jit (the jaxpr-import frontend):
each function under shardc.jit and jax.jit, values, dtypes and output shardings; their
gradients both ways (shardc.grad, and jax.grad inside shardc.jit); platform_dependent."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import shardc
from helpers import check_outputs


def both(fn, *args, mesh=None):
    ours = shardc.jit(fn)(*args)
    ref = jax.jit(fn)(*args)
    check_outputs(ours, ref, mesh)
    return ours


def put(mesh, x, spec):
    return jax.device_put(x, NamedSharding(mesh, spec))


def arr(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def smap(mesh, in_specs, out_specs, **kw):
    return lambda body: jax.shard_map(body, mesh=mesh, in_specs=in_specs,
                                      out_specs=out_specs, **kw)


def test_data_parallel_matmul_with_psum(mesh2x4):
    x, w = put(mesh2x4, arr(16, 8), P(("x", "y"))), put(mesh2x4, arr(8, 4, seed=1), P())

    def f(x, w):
        @smap(mesh2x4, (P(("x", "y")), P()), P())
        def body(x, w):
            return jax.lax.psum(jnp.sum(jnp.tanh(x @ w), axis=0), ("x", "y"))
        return body(x, w)
    both(f, x, w, mesh=mesh2x4)


def megatron_mlp(mesh):
    @smap(mesh, (P("x"), P(None, "y"), P("y", None)), P("x"))
    def mlp(x, w1, w2):
        h = jax.nn.gelu(x @ w1)             # column-parallel: h's columns split over y
        return jax.lax.psum(h @ w2, "y")    # row-parallel: partial sums over y
    return mlp


def test_megatron_column_row_parallel_mlp(mesh2x4):
    x = put(mesh2x4, arr(8, 16), P("x"))
    w1 = put(mesh2x4, arr(16, 32, seed=1), P(None, "y"))
    w2 = put(mesh2x4, arr(32, 16, seed=2), P("y", None))
    both(megatron_mlp(mesh2x4), x, w1, w2, mesh=mesh2x4)


@pytest.mark.parametrize("check", [True, False])
def test_all_gather_tiled_and_untiled(mesh2x4, check):
    x = put(mesh2x4, arr(8, 16), P("x", "y"))
    # jax's all_gather results still vary over the gathered axes where checked
    outs = ((P("x", "y"), P("x", None, "y"), P("x", "y"), P("x", "y")) if check else
            (P(None, "y"), P(None, None, "y"), P("x"), P()))

    def f(x):
        @smap(mesh2x4, P("x", "y"), outs, check_vma=check)
        def body(b):
            return (jax.lax.all_gather(b, "x", tiled=True),
                    jax.lax.all_gather(b, "x", axis=1),
                    jax.lax.all_gather(b, "y", axis=1, tiled=True),
                    jax.lax.all_gather(b, ("x", "y"), axis=0))
        return body(x)
    both(f, x, mesh=mesh2x4)


def test_psum_scatter_tiled_and_untiled(mesh2x4):
    x = put(mesh2x4, arr(8, 16), P("x"))

    def f(x):
        @smap(mesh2x4, P("x"), (P("x", "y"), P("x", "y")))
        def body(b):
            return (jax.lax.psum_scatter(b, "y", scatter_dimension=1, tiled=True),
                    jax.lax.psum_scatter(b.reshape(4, 4, 4), "y", scatter_dimension=1))
        return body(x)
    both(f, x, mesh=mesh2x4)


def test_ppermute_ring_shift_and_all_to_all(mesh2x4):
    x = put(mesh2x4, arr(8, 16), P("x", "y"))

    def f(x):
        @smap(mesh2x4, P("x", "y"), (P("x", "y"), P("x", "y"), P("x", "y")))
        def body(b):
            ring = jax.lax.ppermute(b, "y", [(i, (i + 1) % 4) for i in range(4)])
            tiled = jax.lax.all_to_all(b, "y", 1, 0, tiled=True)
            untiled = jax.lax.all_to_all(b, "y", 0, 1).reshape(1, 16)
            return ring, tiled, untiled
        return body(x)
    both(f, x, mesh=mesh2x4)


def test_axis_index_pmax_pmin_pmean_and_pcast(mesh2x4):
    x = put(mesh2x4, arr(8, 16), P("x", "y"))

    def f(x):
        @smap(mesh2x4, P("x", "y"), (P("x", "y"), P("x"), P(), P("x"), P(None, "y")))
        def body(b):
            i = jax.lax.axis_index("y") * 10 + jax.lax.axis_index("x")
            size = jax.lax.axis_size("y")
            c = jax.lax.pcast(jnp.ones((1, 1)), "y", to="varying")
            return (b + i * size, jax.lax.pmax(b, "y"), jax.lax.pmean(b, ("x", "y")),
                    jax.lax.pmin(b, "y") + jax.lax.psum(c, "y"),
                    jax.lax.psum(2.0 * b, "x"))
        return body(x)
    both(f, x, mesh=mesh2x4)


@pytest.mark.filterwarnings("ignore:jax.experimental.shard_map is deprecated")
def test_unchecked_body_and_experimental_shard_map(mesh2x4):
    from jax.experimental.shard_map import shard_map
    x = put(mesh2x4, arr(8, 16), P("x", "y"))

    def f(x):
        def body(b):    # unchecked: psum of a replicated value sums its copies
            return jax.lax.psum(jnp.sum(b), "y") + jax.lax.psum(1.0, "x"), b * 2
        return shard_map(body, mesh2x4, P("x", "y"), (P(), P("x", "y")), check_rep=False)(x)
    both(f, x, mesh=mesh2x4)


def test_partial_manual_shard_map(mesh2x4):
    x = put(mesh2x4, arr(8, 16), P("x", "y"))
    w = put(mesh2x4, arr(16, 4, seed=1), P("y"))

    def f(x, w):
        @smap(mesh2x4, (P("x"), P()), P("x"), axis_names={"x"})
        def body(b, w):     # y stays automatic inside: jax's matmul over it
            return jax.lax.psum(b @ w, "x") + b[:, :4] * jax.lax.axis_index("x")
        return body(x, w)
    both(f, x, w, mesh=mesh2x4)


def test_shard_map_in_jax_jit_and_with_context_mesh(mesh2x4):
    x = put(mesh2x4, arr(8, 16), P("x"))
    w1 = put(mesh2x4, arr(16, 32, seed=1), P(None, "y"))
    w2 = put(mesh2x4, arr(32, 16, seed=2), P("y", None))
    inner = jax.jit(megatron_mlp(mesh2x4))
    both(lambda x, w1, w2: inner(x, w1, w2) * 2, x, w1, w2, mesh=mesh2x4)

    def g(x):     # the mesh from the context (an abstract mesh in jax's params)
        return jax.shard_map(lambda b: jax.lax.psum(b, "y"), in_specs=P("x", "y"),
                             out_specs=P("x"))(x)
    with jax.set_mesh(mesh2x4):
        both(g, put(mesh2x4, arr(8, 16), P("x", "y")), mesh=mesh2x4)


def test_explicit_mesh_with_inferred_in_specs():
    emesh = shardc.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    x = put(emesh, arr(8, 16), P("x", "y"))

    def f(x):     # in_specs read from x's type, as jax does
        return jax.shard_map(lambda b: jax.lax.psum(b, "y") * 2, out_specs=P("x"))(x)
    with jax.set_mesh(emesh):
        both(f, x, mesh=emesh)


def test_keys_literals_and_weak_results(mesh2x4):
    """Typed PRNG keys in and out of a body (dropout-style per-device keys), permuted
    keys, and literal / weakly typed results."""
    x = put(mesh2x4, arr(8, 16), P("x", "y"))

    def f(x, key):
        @smap(mesh2x4, (P("x", "y"), P()), (P("x", "y"), P("y"), P(), P(("x", "y"))))
        def body(b, k):
            k = jax.random.fold_in(k, jax.lax.axis_index("y"))
            ks = jax.lax.ppermute(k, "y", [(i, (i + 1) % 4) for i in range(4)])
            return (b + jax.random.normal(k, b.shape), k[None], jax.lax.psum(2.0, "y"),
                    jax.lax.pmax(b[:1, 0] * 0 + 3, "y") + jax.random.key_data(ks)[:1])
        out, keys, two, three = body(x, key)
        return out, jax.random.key_data(keys), two, three
    for key in (jax.random.key(0), jax.random.PRNGKey(1)):
        if key.dtype == np.uint32:
            key = jax.random.wrap_key_data(key)
        both(f, x, key, mesh=mesh2x4)


def test_body_closes_over_a_traced_value(mesh2x4):
    x, s = put(mesh2x4, arr(8, 16), P("x", "y")), put(mesh2x4, arr(16), P())

    def f(x, s):
        t = jnp.cos(s)
        body = smap(mesh2x4, P("x", "y"), P("x"))(
            lambda b: jax.lax.psum(b * t.reshape(4, 4)[0], "y"))
        return body(x)
    both(f, x, s, mesh=mesh2x4)


GRAD_CASES = {
    "megatron": lambda m: (lambda x, w1, w2: jnp.sum(megatron_mlp(m)(x, w1, w2) ** 2)),
    "collectives": lambda m: (lambda x, w1, w2: jnp.sum(smap(
        m, (P("x", "y"), P(None, "y"), P("y", None)), P())(
        lambda b, u, v: jax.lax.pmean(jnp.sum(jax.lax.all_gather(b, "y", axis=1, tiled=True)
                                              @ u @ v * jax.lax.ppermute(b, "x", [(0, 1), (1, 0)])
                                              [:, :1]), ("x", "y")))(x, w1, w2))),
    # unchecked: the cotangent of a replicated output is split among its copies
    "unchecked": lambda m: (lambda x, w1, w2: jnp.sum(smap(
        m, (P("x", "y"), P(None, "y"), P("y", None)), P(), check_vma=False)(
        lambda b, u, v: jax.lax.psum(jnp.sum(jnp.tanh(b @ u[:4, :4]) * v[:4, :4]), ("x", "y")))(
        x, w1, w2))),
    # partial manual: y stays automatic inside
    "partial": lambda m: (lambda x, w1, w2: jnp.sum(smap(
        m, (P("x"), P(), P()), P(), axis_names={"x"})(
        lambda b, u, v: jax.lax.pmean(jnp.sum(jnp.sin(b @ u @ v)), "x"))(x, w1, w2))),
}


@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_gradients_both_ways(mesh2x4, case):
    x = put(mesh2x4, arr(8, 16), P("x", "y"))
    w1 = put(mesh2x4, arr(16, 32, seed=1) / 4, P(None, "y"))
    w2 = put(mesh2x4, arr(32, 16, seed=2) / 4, P("y", None))
    loss = GRAD_CASES[case](mesh2x4)
    want = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(x, w1, w2)
    ours = shardc.jit(shardc.grad(loss, argnums=(0, 1, 2)))(x, w1, w2)
    # shardc's own AD keeps a gradient sharded like its primal where the body leaves an
    # axis free (partial manual); jax's leaves it to its partitioner
    check_outputs(ours, want, None if case == "partial" else mesh2x4, what="jax.grad")
    for g, p in zip(ours if case == "partial" else (), (x, w1, w2)):
        assert g.sharding.is_equivalent_to(p.sharding, p.ndim), (g.sharding, p.sharding)
    check_outputs(shardc.jit(jax.grad(loss, argnums=(0, 1, 2)))(x, w1, w2), want,
                  mesh2x4, what="jax.grad")


def test_scanned_shard_map_layers_and_their_gradients(mesh2x4):
    x = put(mesh2x4, arr(8, 16), P("x"))
    ws = put(mesh2x4, arr(3, 16, 16, seed=1) / 4, P(None, None, "y"))
    vs = put(mesh2x4, arr(3, 16, 16, seed=2) / 4, P(None, "y", None))
    layer = smap(mesh2x4, (P("x"), P(None, "y"), P("y", None)), P("x"))(
        lambda h, a, b: jax.lax.psum(jnp.tanh(h @ a) @ b, "y"))

    def loss(x, ws, vs):
        h, _ = jax.lax.scan(lambda h, w: (layer(h, *w), None), x, (ws, vs))
        return jnp.sum(h ** 2)
    both(loss, x, ws, vs, mesh=mesh2x4)
    want = jax.jit(jax.grad(loss, argnums=(1, 2)))(x, ws, vs)
    for grad in (shardc.grad, jax.grad):
        check_outputs(shardc.jit(grad(loss, argnums=(1, 2)))(x, ws, vs), want, mesh2x4)


@pytest.mark.parametrize("check", [True, False])
def test_jax_collectives_in_a_shardc_shard_map_body(mesh2x4, check):
    """Mixed code: jax.lax collectives in shardc.shard_map's body (jax's axis sizes are
    there; where checked an invariant operand is made varying first, as jax does, so
    the gradient of psum(w) sums) against the same body in jax.shard_map."""
    x = put(mesh2x4, arr(8, 16), P("x", "y"))
    w = put(mesh2x4, arr(16, seed=1), P())

    def body(b, w):
        return (jax.lax.psum(w[:4], "x")[None] * jnp.sin(b) + jax.lax.pmean(b, "y")
                + jax.lax.all_gather(w[:1], "y", tiled=True) + jax.lax.axis_index("y")
                + jax.lax.psum_scatter(jnp.concatenate([b] * 4, 1), "y", scatter_dimension=1,
                                       tiled=True))

    def loss(sm):
        return lambda x, w: jnp.sum(sm(body, mesh=mesh2x4, in_specs=(P("x", "y"), P()),
                                       out_specs=P("x", "y"), check_vma=check)(x, w) ** 2)
    ours, ref = loss(shardc.shard_map), loss(jax.shard_map)
    check_outputs(shardc.jit(ours)(x, w), jax.jit(ref)(x, w), mesh2x4)
    check_outputs(shardc.jit(shardc.grad(ours, argnums=(0, 1)))(x, w),
                  jax.jit(jax.grad(ref, argnums=(0, 1)))(x, w), mesh2x4)


def test_locations_and_pbroadcast(mesh2x4):
    """The collectives of a jax body name its lines; pbroadcast (which jax lowers only
    for GPUs) copies the source device's block, against NumPy."""
    x = put(mesh2x4, arr(8, 16), P("x", "y"))

    def f(x):
        @smap(mesh2x4, P("x", "y"), (P("x"), P("x", "y")))
        def body(b):
            return (jax.lax.psum(b, "y"),             # the psum's line
                    jax.lax.pbroadcast(b, "y", 2))
        return body(x)
    line = f.__code__.co_firstlineno + 4
    text = shardc.jit(f).trace(x).ir
    assert re.search(rf'psum\(.*loc\("test_frontend_shard_map.py":{line}\)', text), text
    _, got = shardc.jit(f)(x)
    want = np.asarray(x).reshape(8, 4, 4)[:, 2:3].repeat(4, axis=1).reshape(8, 16)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_platform_dependent_picks_the_target_platform(mesh2x4):
    x = put(mesh2x4, arr(8, 16), P("x"))

    def f(x):
        a = jax.lax.platform_dependent(x, cpu=jnp.sin, tpu=jnp.cos, default=jnp.tanh)
        b = jax.lax.platform_dependent(x, cuda=jnp.cos, rocm=jnp.cos, default=jnp.exp)
        return a, b, jax.jit(lambda v: jax.lax.platform_dependent(
            v, tpu=jnp.cos, cpu=jnp.square))(x)
    ours = both(f, x, mesh=mesh2x4)
    np.testing.assert_allclose(np.asarray(ours[1]), np.exp(np.asarray(x)), rtol=1e-6)

    def none(x):
        return jax.lax.platform_dependent(x, tpu=jnp.cos)
    with pytest.raises(shardc.ShardcError, match="no branch for the platform 'cpu'"):
        shardc.jit(none)(x)


def _ragged(b):
    z = jnp.zeros((4,), jnp.int32)
    return jax.lax.ragged_all_to_all(b, jnp.zeros_like(b), z, z + 1, z, z + 1, axis_name="y",
                                     axis_index_groups=[[0, 1], [2, 3]])


def _grouped(b):
    return jax.lax.all_gather(b, "y", axis_index_groups=[[0, 1], [2, 3]], tiled=True)[:4]


@pytest.mark.parametrize("op,name,at", [(_ragged, "ragged_all_to_all", 2),
                                        (_grouped, "all_gather", 1)])
def test_untranslatable_collective_names_it_and_the_line(mesh2x4, op, name, at):
    x = put(mesh2x4, arr(8, 16), P("x", "y"))

    def f(x):
        return jax.shard_map(lambda b: op(b) * 2, mesh=mesh2x4, in_specs=P("x", "y"),
                             out_specs=P("x", "y"), check_vma=False)(x)
    line = op.__code__.co_firstlineno + at       # the collective's line
    jax.jit(f).lower(x)     # jax takes it
    with pytest.raises(shardc.ShardcError) as e:
        shardc.jit(f)(x)
    msg = str(e.value)
    assert f"`{name}`" in msg and f"test_frontend_shard_map.py:{line}" in msg, msg


def test_nested_shard_map(mesh2x4):
    """A jax shard_map over y inside one over x: both jax's, translated."""
    x, w = put(mesh2x4, arr(8, 16), P("x", "y")), put(mesh2x4, arr(16, 4, seed=1), P("y"))

    def f(x, w):
        def inner(b, w):
            return jax.lax.psum(b @ w, "y") + jax.lax.axis_index("x").astype(b.dtype)

        def outer(a, w):
            return jax.shard_map(inner, in_specs=(P(None, "y"), P("y")), out_specs=P(),
                                 axis_names={"y"})(a, w) * 2.0
        return jax.shard_map(outer, mesh=mesh2x4, in_specs=(P("x"), P()), out_specs=P("x"),
                             axis_names={"x"})(x, w)
    both(f, x, w, mesh=mesh2x4)
