"""Gradients of models under DP, TP and FSDP, and through shard_map with collectives:
values and gradient shardings equal jax's."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp

RNG = np.random.default_rng(0)


def mlp_loss(m, nn, params, x, y):
    h = x
    for w, b in params:
        h = nn.gelu(h @ w + b)
    return m.mean((h - y) ** 2)


def block_loss(m, nn, params, x):
    """A transformer block: attention + MLP, with layer norms."""
    wq, wk, wv, wo, w1, w2 = params
    b, s, d = x.shape
    h = 4

    def norm(t):
        mu = m.mean(t, axis=-1, keepdims=True)
        var = m.mean((t - mu) ** 2, axis=-1, keepdims=True)
        return (t - mu) / m.sqrt(var + 1e-5)
    t = norm(x)
    q = (t @ wq).reshape(b, s, h, d // h)
    k = (t @ wk).reshape(b, s, h, d // h)
    v = (t @ wv).reshape(b, s, h, d // h)
    att = nn.softmax(m.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d // h), axis=-1)
    o = m.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, s, d) @ wo
    x = x + o
    x = x + nn.gelu(norm(x) @ w1) @ w2
    return m.mean(x ** 2)


def put(mesh, a, spec):
    return jax.device_put(np.asarray(a, np.float32), NamedSharding(mesh, spec))


def check(mesh, loss, params, params_specs, args, arg_specs):
    params = jax.tree_util.tree_map(lambda a, s: put(mesh, a, s), params, params_specs,
                                    is_leaf=lambda x: isinstance(x, np.ndarray))
    args = [put(mesh, a, s) for a, s in zip(args, arg_specs)]
    ours = shardc.jit(shardc.value_and_grad(lambda p, *a: loss(snp, shardc.nn, p, *a)))
    # jax, asked for gradients sharded like the parameters (shardc's default)
    like = jax.tree_util.tree_map(lambda a: a.sharding, params)
    ref = jax.jit(jax.value_and_grad(lambda p, *a: loss(jnp, jax.nn, p, *a)),
                  out_shardings=(NamedSharding(mesh, P()), like))
    (v, g), (rv, rg) = ours(params, *args), ref(params, *args)
    np.testing.assert_allclose(v, rv, rtol=1e-4)
    for a, b, p in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(rg),
                       jax.tree_util.tree_leaves(params)):
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-5)
        assert a.sharding.is_equivalent_to(b.sharding, a.ndim), (a.sharding.spec, b.sharding.spec)
        # gradients come out sharded like their parameters
        assert a.sharding.is_equivalent_to(p.sharding, a.ndim), (a.sharding.spec, p.sharding.spec)
    return ours, params, args


SIZES = [(32, 64), (64, 64), (64, 16)]
MLP_LAYOUTS = {
    "dp": (P("data"), [(P(), P()) for _ in SIZES]),
    "tp": (P("data"), [(P(None, "model"), P("model")), (P("model", None), P()),
                       (P(None, "model"), P("model"))]),
    "fsdp": (P(("data", "model")), [(P(("data", "model")), P()) for _ in SIZES]),
}


@pytest.mark.parametrize("layout", list(MLP_LAYOUTS))
def test_mlp_gradients(layout):
    mesh = shardc.make_mesh((2, 4), ("data", "model"), axis_types=(shardc.AxisType.Auto,) * 2)
    x_spec, p_specs = MLP_LAYOUTS[layout]
    params = [(RNG.normal(size=s) / np.sqrt(s[0]), RNG.normal(size=s[1]) * 0.1) for s in SIZES]
    x, y = RNG.normal(size=(16, 32)), RNG.normal(size=(16, 16))
    check(mesh, mlp_loss, params, p_specs, [x, y], [x_spec, x_spec])


@pytest.mark.parametrize("layout", ["dp", "tp", "fsdp"])
def test_transformer_block_gradients(layout):
    mesh = shardc.make_mesh((2, 4), ("data", "model"), axis_types=(shardc.AxisType.Auto,) * 2)
    d, f = 32, 64
    shapes = [(d, d)] * 4 + [(d, f), (f, d)]
    params = [RNG.normal(size=s) / np.sqrt(s[0]) for s in shapes]
    if layout == "dp":
        specs = [P()] * 6
    elif layout == "tp":
        specs = [P(None, "model")] * 3 + [P("model", None), P(None, "model"), P("model", None)]
    else:
        specs = [P(("data", "model"))] * 6
    x = RNG.normal(size=(4, 8, d))
    check(mesh, block_loss, params, specs, [x], [P("data")])


def test_fsdp_relu_mlp_moves_what_jax_moves():
    # the backward pass keeps activations batch-sharded, as jax's does: the same
    # collectives (kinds, shapes, axes), no all-to-all of activations to feature
    # sharding (relu's mask comes first in its gradient's select, as in jax.nn.relu)
    from shardc.tools import report
    mesh = shardc.make_mesh((8,), ("fsdp",), axis_types=(shardc.AxisType.Auto,))

    def loss(m, nn, params, x):
        for w1, w2 in params:
            x = x + nn.relu(x @ w1) @ w2
        return m.mean(x * x)
    params = [(RNG.normal(size=(32, 64)) / 6, RNG.normal(size=(64, 32)) / 8) for _ in range(2)]
    specs = [(P("fsdp", None), P("fsdp", None))] * 2
    ours, params, args = check(mesh, loss, params, specs, [RNG.normal(size=(16, 32))],
                               [P("fsdp", None)])
    ref = jax.jit(jax.value_and_grad(lambda p, *a: loss(jnp, jax.nn, p, *a)))

    def moved(hlo):
        """Each collective's kind, type and axes (the one combined all-reduce of the
        gradients by its bytes: XLA orders its tuple as the program's outputs come)."""
        cs = report.collectives(hlo, mesh)
        return sorted((c.kind, c.type, c.axes) for c in cs if c.kind != "all-reduce"), \
            sum(c.bytes for c in cs if c.kind == "all-reduce")
    mine = moved(ours.lower(params, *args).compile().as_text())
    assert mine == moved(ref.lower(params, *args).compile().as_text())
    assert sum(kind == "all-to-all" for kind, *_ in mine[0]) <= len(params)


def test_grad_through_shard_map_with_collectives():
    mesh = shardc.make_mesh((2, 4), ("x", "y"), axis_types=(shardc.AxisType.Auto,) * 2)

    def f(m, L, sm, w, x):
        def body(wb, xb):
            h = m.tanh(xb @ wb)                              # [b/2, 16/4]
            g = L.all_gather(h, "y", axis=1, tiled=True)     # [b/2, 16]
            s = L.psum_scatter(g * g, "y", scatter_dimension=1, tiled=True)
            p = L.ppermute(s, "x", [(0, 1), (1, 0)])
            t = L.all_to_all(p, "y", 0, 1, tiled=True)
            return L.psum(m.sum(t) + m.sum(s * h), ("x", "y"))
        out = sm(body, mesh=mesh, in_specs=(P(None, "y"), P("x", None)), out_specs=P())(w, x)
        return out
    w = put(mesh, RNG.normal(size=(8, 16)), P(None, "y"))
    x = put(mesh, RNG.normal(size=(8, 8)), P("x", None))
    ours = shardc.jit(shardc.grad(lambda a, b: f(snp, shardc.lax, shardc.shard_map, a, b),
                                  argnums=(0, 1)))(w, x)
    ref = jax.jit(jax.grad(lambda a, b: f(jnp, jax.lax, jax.shard_map, a, b),
                           argnums=(0, 1)))(w, x)
    for a, b in zip(ours, ref):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
        assert a.sharding.is_equivalent_to(b.sharding, a.ndim), (a.sharding.spec,
                                                                  b.sharding.spec)


def test_grad_of_replicated_input_to_shard_map_is_summed():
    mesh = shardc.make_mesh((8,), ("x",), axis_types=(shardc.AxisType.Auto,))

    def f(m, L, sm, w, b, x):
        return sm(lambda wb, bb, xb: L.psum(m.sum(m.sin(xb @ wb + bb)), "x"), mesh=mesh,
                  in_specs=(P(), P(), P("x")), out_specs=P())(w, b, x)
    w, b = RNG.normal(size=(4, 3)), RNG.normal(size=(3,))
    x = RNG.normal(size=(16, 4))
    args = [put(mesh, w, P()), put(mesh, b, P()), put(mesh, x, P("x"))]
    ours = shardc.jit(shardc.grad(lambda *a: f(snp, shardc.lax, shardc.shard_map, *a),
                                  argnums=(0, 1)))(*args)
    ref = jax.jit(jax.grad(lambda *a: f(jnp, jax.lax, jax.shard_map, *a), argnums=(0, 1)))(*args)
    for a, r in zip(ours, ref):
        np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-5)


def test_training_loop_loss_falls():
    """30 SGD steps under shardc.jit follow jax.jit's step by step, and the loss falls."""
    mesh = shardc.make_mesh((2, 4), ("data", "model"), axis_types=(shardc.AxisType.Auto,) * 2)
    x_spec, p_specs = MLP_LAYOUTS["tp"]
    rng = np.random.default_rng(7)   # its own: the shared one's state depends on test order
    params = [(rng.normal(size=s) / np.sqrt(s[0]), np.zeros(s[1])) for s in SIZES]
    params = jax.tree_util.tree_map(lambda a, s: put(mesh, a, s), params, p_specs,
                                    is_leaf=lambda x: isinstance(x, np.ndarray))
    x = put(mesh, rng.normal(size=(16, 32)), x_spec)
    y = put(mesh, rng.normal(size=(16, 16)) * 0.5, x_spec)

    def make_step(jit, vg, m, nn):
        @jit
        def step(p, x, y):
            loss, g = vg(lambda q: mlp_loss(m, nn, q, x, y))(p)
            return jax.tree_util.tree_map(lambda a, b: a - 0.1 * b, p, g), loss
        return step
    steps = [make_step(shardc.jit, shardc.value_and_grad, snp, shardc.nn),
             make_step(jax.jit, jax.value_and_grad, jnp, jax.nn)]
    losses, ps = [[], []], [params, params]
    for _ in range(30):
        for k, step in enumerate(steps):
            ps[k], loss = step(ps[k], x, y)
            losses[k].append(float(loss))
    np.testing.assert_allclose(losses[0], losses[1], rtol=1e-4)
    losses = losses[0]
    assert losses[-1] < 0.85 * losses[0], losses
    assert all(b <= a + 1e-6 for a, b in zip(losses, losses[1:])), losses
    params = ps[0]
    assert params[0][0].sharding.spec == P(None, "model")
