"""Gradients: every op's VJP against jax.grad and finite differences, under shardings;
the API (grad, value_and_grad, vjp, jvp, custom_vjp, stop_gradient, grad of grad)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.trace.core import PRIMITIVES

RNG = np.random.default_rng(0)
X = RNG.uniform(0.2, 0.9, size=(8, 16)).astype(np.float32)
Y = RNG.uniform(0.2, 0.9, size=(8, 16)).astype(np.float32)
W = RNG.normal(size=(8, 16)).astype(np.float32)


def test_every_primitive_has_a_vjp_rule():
    missing = [name for name, p in PRIMITIVES.items() if p.vjp is None]
    assert not missing, f"primitives without a gradient rule: {missing}"


def grad_both(fn, arrays, specs, mesh, argnums=0, fd=True):
    """jit(grad) under shardc and jax on placed inputs: values agree, and shardc's
    gradients are sharded like their primals — as jax's are when asked to with
    out_shardings; a finite-difference check of a random direction agrees too."""
    inputs = [jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(arrays, specs)]
    ours = shardc.jit(shardc.grad(lambda *xs: fn(snp, shardc.nn, *xs), argnums))(*inputs)
    nums = (argnums,) if isinstance(argnums, int) else argnums
    like = tuple(inputs[k].sharding for k in nums)
    ref = jax.jit(jax.grad(lambda *xs: fn(jnp, jax.nn, *xs), argnums),
                  out_shardings=like[0] if isinstance(argnums, int) else like)(*inputs)
    for o, r in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=2e-4, atol=2e-5)
        if isinstance(r.sharding, jax.sharding.SingleDeviceSharding):
            # jax returns results that are constants without running the program
            assert o.sharding.is_fully_replicated
        else:
            assert o.sharding.is_equivalent_to(r.sharding, o.ndim), (o.sharding.spec,
                                                                      r.sharding.spec)
    if fd:
        nums = (argnums,) if isinstance(argnums, int) else argnums
        gs = (ours,) if isinstance(argnums, int) else ours
        f64 = lambda *xs: fn(np, None, *xs)   # noqa: E731
        rng = np.random.default_rng(1)   # not the module's RNG: xdist's test order varies
        for k, g in zip(nums, gs):
            v = rng.normal(size=arrays[k].shape)
            eps = 1e-6   # f64; small enough that no input is crossed over a kink (clip, abs)
            xp = [a.astype(np.float64) for a in arrays]
            xm = [a.astype(np.float64) for a in arrays]
            xp[k] = xp[k] + eps * v
            xm[k] = xm[k] - eps * v
            numeric = (f64(*xp) - f64(*xm)) / (2 * eps)
            np.testing.assert_allclose(np.sum(np.asarray(g, np.float64) * v), numeric,
                                       rtol=2e-3, atol=2e-3)
    return ours


def _np_or(m, name, fallback):
    return getattr(m, name) if hasattr(m, name) else fallback


UNARY = {
    "exp": lambda m, x: m.exp(x), "log": lambda m, x: m.log(x),
    "log1p": lambda m, x: m.log1p(x), "expm1": lambda m, x: m.expm1(x),
    "sqrt": lambda m, x: m.sqrt(x), "square": lambda m, x: m.square(x),
    "reciprocal": lambda m, x: m.reciprocal(x), "sin": lambda m, x: m.sin(x),
    "cos": lambda m, x: m.cos(x), "tan": lambda m, x: m.tan(x), "tanh": lambda m, x: m.tanh(x),
    "arcsin": lambda m, x: m.arcsin(x), "arccos": lambda m, x: m.arccos(x),
    "arctan": lambda m, x: m.arctan(x), "sinh": lambda m, x: m.sinh(x),
    "cosh": lambda m, x: m.cosh(x), "abs": lambda m, x: m.abs(x - 0.5),
    "negative": lambda m, x: -x, "power3": lambda m, x: x ** 3,
    "power_neg": lambda m, x: x ** -2, "pow_float": lambda m, x: m.power(x, 1.7),
    "clip": lambda m, x: m.clip(x, 0.3, 0.8), "where": lambda m, x: m.where(x > 0.5, x, -x * 2),
    "astype_f16_roundtrip": lambda m, x: x.astype(m.float32) * 2,
}
SPECS = [P(), P("x", "y"), P(None, ("x", "y"))]


@pytest.mark.parametrize("name", list(UNARY))
def test_unary(mesh2x4, name):
    f = UNARY[name]
    for spec in SPECS[:2] if name not in ("exp", "tanh") else SPECS:
        # a float64 finite difference cannot see through a cast to float32 (its step
        # is lost to rounding): astype's gradient is checked against jax's alone
        grad_both(lambda m, nn, x: (f(m, x) * W).sum(), [X], [spec], mesh2x4,
                  fd=not name.startswith("astype"))


def test_special_functions(mesh2x4):
    from jax.scipy.special import erf as jerf
    from scipy.special import erf as serf
    inputs = [jax.device_put(X, NamedSharding(mesh2x4, P("x", "y")))]
    ours = shardc.jit(shardc.grad(lambda x: (snp.erf(x) + snp.logistic(x) + snp.rsqrt(x)).sum()))
    ref = jax.jit(jax.grad(lambda x: (jerf(x) + jax.nn.sigmoid(x) + jax.lax.rsqrt(x)).sum()))
    np.testing.assert_allclose(ours(*inputs), ref(*inputs), rtol=2e-5, atol=1e-6)
    _ = serf


BINARY = {
    "add": lambda m, x, y: x + y, "sub": lambda m, x, y: x - y, "mul": lambda m, x, y: x * y,
    "div": lambda m, x, y: x / y, "pow": lambda m, x, y: x ** y,
    "max": lambda m, x, y: m.maximum(x, y), "min": lambda m, x, y: m.minimum(x, y),
    "arctan2": lambda m, x, y: m.arctan2(x, y), "remainder": lambda m, x, y: m.remainder(x, y),
    "broadcast": lambda m, x, y: x * y[0], "scalar": lambda m, x, y: x * 2.0 + y.sum(),
}


@pytest.mark.parametrize("name", list(BINARY))
def test_binary(mesh2x4, name):
    f = BINARY[name]
    grad_both(lambda m, nn, x, y: (f(m, x, y) * W).sum(), [X, Y], [P("x", "y"), P(None, "y")],
              mesh2x4, argnums=(0, 1), fd=name not in ("remainder", "max", "min"))


def test_max_ties_split_like_jax(mesh2x4):
    a = np.ones((8, 16), np.float32)
    grad_both(lambda m, nn, x, y: m.maximum(x, y).sum() + m.max(x, axis=1).sum(),
              [a, a], [P("x"), P()], mesh2x4, argnums=(0, 1), fd=False)


REDUCE = {
    "sum0": lambda m, x: m.sum(x, axis=0), "sum": lambda m, x: m.sum(x),
    "mean_keep": lambda m, x: m.mean(x, axis=1, keepdims=True),
    "max": lambda m, x: m.max(x, axis=0), "min": lambda m, x: m.min(x, axis=1),
    "prod": lambda m, x: m.prod(x, axis=1), "var": lambda m, x: m.var(x, axis=0),
    "std": lambda m, x: m.std(x, axis=1), "cumsum": lambda m, x: m.cumsum(x, axis=1),
    "logsumexp": lambda m, x: (jax.nn.logsumexp if m is jnp else shardc.nn.logsumexp
                               if m is snp else _np_logsumexp)(x, axis=1),
}


def _np_logsumexp(x, axis):
    mx = x.max(axis, keepdims=True)
    return np.log(np.exp(x - mx).sum(axis)) + mx.squeeze(axis)


@pytest.mark.parametrize("name", list(REDUCE))
def test_reductions(mesh2x4, name):
    f = REDUCE[name]
    for spec in (P("x", "y"), P(None, "x")):
        grad_both(lambda m, nn, x: (f(m, x) ** 2).sum(), [X], [spec], mesh2x4)


def test_prod_with_zeros(mesh2x4):
    a = X.copy()
    a[0, 3] = 0
    a[1, 2] = a[1, 5] = 0
    grad_both(lambda m, nn, x: m.prod(x, axis=1).sum(), [a], [P("x")], mesh2x4, fd=False)


SHAPE = {
    "reshape": lambda m, x: x.reshape(4, 32), "transpose": lambda m, x: x.T,
    "expand": lambda m, x: m.expand_dims(x, 1), "squeeze": lambda m, x: m.squeeze(x[None]),
    "broadcast_to": lambda m, x: m.broadcast_to(x[0], (3, 16)),
    "concat": lambda m, x: m.concatenate([x, x * 2], axis=1),
    "stack": lambda m, x: m.stack([x, -x], axis=0), "split": lambda m, x: m.split(x, 2, 1)[1],
    "pad": lambda m, x: m.pad(x, ((1, 2), (0, 3))), "slice": lambda m, x: x[1:7:2, ::3],
    "rev": lambda m, x: x[::-1], "index": lambda m, x: x[2, None, 3:9],
    "gather": lambda m, x: x[np.array([3, 1, 3, 0])],
    "gather1": lambda m, x: x[:, np.array([5, -1, 5])],
    "swapaxes": lambda m, x: m.swapaxes(x.reshape(2, 4, 16), 0, 2),
}


@pytest.mark.parametrize("name", list(SHAPE))
def test_shape_ops(mesh2x4, name):
    f = SHAPE[name]
    for spec in (P("x", "y"), P(None, "x")):
        grad_both(lambda m, nn, x: (m.sin(f(m, x)) ** 2).sum(), [X], [spec], mesh2x4)


LINALG = {
    "matmul": (lambda m, a, b: a @ b.T, [(8, 16), (4, 16)]),
    "bmm": (lambda m, a, b: m.matmul(a, b), [(2, 8, 16), (2, 16, 4)]),
    "bcast_bmm": (lambda m, a, b: m.matmul(a, b), [(2, 8, 16), (16, 4)]),
    "einsum": (lambda m, a, b: m.einsum("bij,bkj->bik", a, b), [(2, 8, 16), (2, 4, 16)]),
    "tensordot": (lambda m, a, b: m.tensordot(a, b, axes=([1, 2], [0, 1])),
                  [(4, 8, 16), (8, 16, 2)]),
    "dot_vec": (lambda m, a, b: m.dot(a, b[0]), [(8, 16), (4, 16)]),
}


@pytest.mark.parametrize("name", list(LINALG))
def test_linalg(mesh2x4, name):
    f, shapes = LINALG[name]
    arrays = [RNG.normal(size=s).astype(np.float32) for s in shapes]
    specs = [P(*(["x"] + [None] * (len(s) - 1))) for s in shapes]
    grad_both(lambda m, nn, a, b: m.tanh(f(m, a, b)).sum(), arrays, specs, mesh2x4,
              argnums=(0, 1))


NN = ["relu", "gelu", "sigmoid", "silu", "softmax", "log_softmax"]


@pytest.mark.parametrize("name", NN)
def test_nn(mesh2x4, name):
    def f(m, nn, x):
        nn = nn if nn is not None else _NP_NN
        return (getattr(nn, name)(x * 3 - 1.5) * W).sum()
    grad_both(f, [X], [P("x", "y")], mesh2x4)


def test_relu_gradient_at_zero_is_jaxs(mesh2x4):
    # jax.nn.relu has its own derivative: 0 at x == 0, where maximum's splits the tie
    x = np.array([[-1.0, 0.0, 2.0, 0.0]] * 8, np.float32)
    placed = jax.device_put(x, NamedSharding(mesh2x4, P("x")))
    want = jax.grad(lambda a: jax.nn.relu(a).sum())(x)
    np.testing.assert_array_equal(want[0], [0, 0, 1, 0])
    for arg in (x, placed):
        np.testing.assert_array_equal(shardc.grad(lambda a: shardc.nn.relu(a).sum())(arg), want)
        np.testing.assert_array_equal(
            shardc.jit(shardc.grad(lambda a: shardc.nn.relu(a).sum()))(arg), want)
    _, tangent = shardc.jvp(shardc.nn.relu, (x,), (np.ones_like(x),))
    np.testing.assert_array_equal(tangent, want)
    # relu's forward is maximum alone; its mask is built in the backward pass only
    ir = shardc.jit(shardc.nn.relu).trace(x).ir
    assert "custom_vjp_call(%x) {bwd=<_relu_bwd>, num_out=1}" in ir
    assert "= max(%1, 0.0:f32)" in ir and "gt(" not in ir
    assert "gt(" not in shardc.jit(shardc.nn.relu).trace(x).ir


class _NP_NN:
    relu = staticmethod(lambda x: np.maximum(x, 0))
    sigmoid = staticmethod(lambda x: 1 / (1 + np.exp(-x)))
    silu = staticmethod(lambda x: x / (1 + np.exp(-x)))
    gelu = staticmethod(lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) *
                                                         (x + 0.044715 * x ** 3))))

    @staticmethod
    def softmax(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    @staticmethod
    def log_softmax(x):
        s = x - x.max(-1, keepdims=True)
        return s - np.log(np.exp(s).sum(-1, keepdims=True))


def test_embedding_lookup_scatter_adds(mesh2x4):
    table = RNG.normal(size=(16, 8)).astype(np.float32)
    idx = np.array([3, 3, 0, 15, 7, 3], np.int32)
    ours = grad_both(lambda m, nn, t: (m.tanh(t[idx]) * 2).sum(), [table], [P(None, "y")],
                     mesh2x4)
    assert np.asarray(ours)[3].sum() != 0


def test_cotangent_keeps_the_constraint(mesh2x4):
    c = NamedSharding(mesh2x4, P("y", None))

    def loss(m, x):
        h = m.sin(x)
        if m is snp:
            h = shardc.with_sharding_constraint(h, c)
        else:
            h = jax.lax.with_sharding_constraint(h, c)
        return (h * h).sum()
    x = jax.device_put(X, NamedSharding(mesh2x4, P("x", None)))
    g = shardc.jit(shardc.grad(lambda a: loss(snp, a)))
    text = g.trace(x).ir
    assert text.count("sharding_constraint(") == 2
    np.testing.assert_allclose(g(x), jax.jit(jax.grad(lambda a: loss(jnp, a)))(x), rtol=1e-5)


# ---------------------------------------------------------------- API


def test_value_and_grad_argnums_has_aux():
    def f(a, b):
        return snp.sum(a * b), {"aux": a.sum()}
    (v, aux), (ga, gb) = shardc.value_and_grad(f, argnums=(0, 1), has_aux=True)(X, Y)
    np.testing.assert_allclose(v, (X * Y).sum(), rtol=1e-5)
    np.testing.assert_allclose(aux["aux"], X.sum(), rtol=1e-5)
    np.testing.assert_allclose(ga, Y)
    np.testing.assert_allclose(gb, X)
    g, aux2 = shardc.grad(f, has_aux=True)(X, Y)
    np.testing.assert_allclose(g, Y)


def test_grad_of_pytree_params():
    params = {"w": X, "b": [Y[0], np.float32(2.0)]}

    def loss(p):
        return snp.sum(snp.tanh(p["w"] + p["b"][0]) * p["b"][1])
    g = shardc.grad(loss)(params)
    ref = jax.grad(lambda p: jnp.sum(jnp.tanh(p["w"] + p["b"][0]) * p["b"][1]))(params)
    for a, b in zip(jax.tree_util.tree_leaves(g), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_allclose(a, b, rtol=1e-5)


def test_vjp_and_jvp_match_jax():
    f = lambda m: (lambda a, b: (m.sin(a) * b, m.exp(a).sum()))  # noqa: E731
    out, fn = shardc.vjp(f(snp), X, Y)
    ref_out, ref_fn = jax.vjp(f(jnp), X, Y)
    ct = (W, np.float32(2.0))
    for a, b in zip(fn(ct), ref_fn(ct)):
        np.testing.assert_allclose(a, b, rtol=1e-5)
    o, t = shardc.jvp(f(snp), (X, Y), (W, X))
    ro, rt = jax.jvp(f(jnp), (X, Y), (W, X))
    for a, b in zip(jax.tree_util.tree_leaves((o, t)), jax.tree_util.tree_leaves((ro, rt))):
        np.testing.assert_allclose(a, b, rtol=1e-4)


def test_grad_of_grad():
    f = lambda m: (lambda t: m.sin(t) * t ** 3 + m.exp(-t * t))  # noqa: E731
    for x in (0.3, 1.7):
        np.testing.assert_allclose(shardc.grad(shardc.grad(f(snp)))(x),
                                   jax.grad(jax.grad(f(jnp)))(x), rtol=1e-5)
        np.testing.assert_allclose(shardc.grad(shardc.grad(shardc.grad(f(snp))))(x),
                                   jax.grad(jax.grad(jax.grad(f(jnp))))(x), rtol=1e-4)


def test_hessian_vector_product_of_matrix_function(mesh2x4):
    def f(m, w):
        return m.sum(m.tanh(w @ w.T))
    v = W
    ours = shardc.jit(lambda w: shardc.jvp(shardc.grad(lambda a: f(snp, a)), (w,), (v,))[1])(X)
    ref = jax.jit(lambda w: jax.jvp(jax.grad(lambda a: f(jnp, a)), (w,), (v,))[1])(X)
    np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-5)


def test_stop_gradient():
    g = shardc.grad(lambda a: snp.sum(a * shardc.lax.stop_gradient(a)))(X)
    np.testing.assert_allclose(g, X)


def test_custom_vjp():
    @shardc.custom_vjp
    def clip_grad(x):
        return x

    def fwd(x):
        return x, None

    def bwd(_, g):
        return (snp.clip(g, -0.1, 0.1),)
    clip_grad.defvjp(fwd, bwd)
    g = shardc.grad(lambda a: snp.sum(clip_grad(a) * W))(X)
    np.testing.assert_allclose(g, np.clip(W, -0.1, 0.1))

    @shardc.custom_vjp
    def f(x, y):
        return snp.sin(x) * y

    def f_fwd(x, y):
        return f(x, y), (snp.cos(x), snp.sin(x), y)

    def f_bwd(res, g):
        cos_x, sin_x, y = res
        return (cos_x * g * y, sin_x * g)
    f.defvjp(f_fwd, f_bwd)
    ga, gb = shardc.grad(lambda a, b: snp.sum(f(a, b)), argnums=(0, 1))(X, Y)
    np.testing.assert_allclose(ga, np.cos(X) * Y, rtol=1e-5)
    np.testing.assert_allclose(gb, np.sin(X), rtol=1e-5)


def test_custom_vjp_call_is_one_op_with_its_forward_region():
    @shardc.custom_vjp
    def twice(x):
        y = x * 2
        return y, y

    twice.defvjp(lambda x: (twice(x), None), lambda _, g: (g[0] * 10 + g[1] * 100,))
    ir = shardc.jit(lambda a: twice(a)).trace(X).ir
    # one op whose region is fwd; its results are the region's (a repeat included)
    assert ir.count("custom_vjp_call(") == 1 and "custom_vjp_out" not in ir
    assert "return %3, %3" in ir
    g = shardc.grad(lambda a: snp.sum(twice(a)[0]) + 2 * snp.sum(twice(a)[1]))(X)
    np.testing.assert_allclose(g, np.full_like(X, 10 + 200))


def test_grad_errors():
    with pytest.raises(shardc.ShardcError, match="scalar output"):
        shardc.grad(lambda a: a * 2)(X)
    with pytest.raises(shardc.ShardcError, match="sub-dtype of np.inexact"):
        shardc.grad(lambda a: snp.sum(a * 1.0))(np.ones(3, np.int32))


def test_grad_outside_jit_takes_static_non_array_arguments():
    def loss(w, mode, act):
        return snp.sum(act(w) * (2.0 if mode == "train" else 1.0))
    g = shardc.grad(loss)(X, "train", snp.sin)
    np.testing.assert_allclose(g, 2 * np.cos(X), rtol=1e-5)


def test_custom_vjp_called_twice_with_different_structures():
    @shardc.custom_vjp
    def f(x):
        return x * 2

    f.defvjp(lambda x: (x * 2, None), lambda _, g: (g * 10,))

    @shardc.custom_vjp
    def pair(x):
        return x, x

    pair.defvjp(lambda x: ((x, x), None), lambda _, g: (g[0] + g[1] * 3,))

    def loss(a):
        u, v = pair(a)
        return snp.sum(f(a)) + snp.sum(u) + snp.sum(f(v))
    g = shardc.grad(loss)(X)
    # f: 10 per use; pair: u gets 1, v's path gets 10 -> 1 + 3 * 10
    np.testing.assert_allclose(g, np.full_like(X, 10 + 1 + 30))
