"""Gradients at a value reduced over mesh axes (P(reduced={'X'})), whose cotangent is
partial sums (unreduced) in explicit mode, as jax's. A gradient rule's ops are traced
untyped; those on partial sums were lowered as whole values, so XLA reduced the
cotangent and then took the rule's result for partial sums again: tanh's
(ct + ct*t)*(1-t) gave twice the gradient on a 2-way axis (jax.jit: right). Each op
of a rule linear in the partial sums is now typed partial, and the sums a nonlinear op
reduced are resharded to partial sums whole."""
import jax
import jax.numpy as jnp
import jax.nn as jnn
import jax.scipy.special as jss
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import shardc
import shardc.nn as snn
import shardc.numpy as snp
import shardc.scipy.special as sss

X = np.arange(8 * 16, dtype=np.float32).reshape(8, 16) / 100 - 0.6
W = np.arange(16 * 4, dtype=np.float32).reshape(16, 4) / 10 - 3
W2 = np.cos(np.arange(4 * 8, dtype=np.float32)).reshape(4, 8)


def _clip_grad(m, n):
    """The identity, whose gradient rule clips the cotangent (nonlinear in it)."""
    @m.custom_vjp
    def f(w):
        return w
    f.defvjp(lambda w: (w, None), lambda _, g: (n.clip(g, -0.5, 0.5),))
    return f


# f(m, n, w): jax's names are (jax, jnp), shardc's (shardc, snp)
CASES = {
    "tanh": lambda m, n, w: n.tanh(w),
    "sigmoid": lambda m, n, w: 1.0 / (1.0 + n.exp(-w)),
    "abs": lambda m, n, w: n.abs(w),
    "reciprocal": lambda m, n, w: 1.0 / (w * w + 1),
    "quotient": lambda m, n, w: w / (w * w + 1),
    "product": lambda m, n, w: n.cos(w) * n.sin(w),
    "erf": lambda m, n, w: (jss if m is jax else sss).erf(w),
    "gelu": lambda m, n, w: (jnn if m is jax else snn).gelu(w),
    "clipped gradient": lambda m, n, w: n.tanh(_clip_grad(m, n)(w)),
}


def _mesh():
    return shardc.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Explicit,) * 2)


def _placed(mesh, *arrays):
    return [jax.device_put(a, NamedSharding(mesh, P("X"))) for a in arrays]


@pytest.mark.parametrize("name", list(CASES))
def test_elementwise_gradient_at_a_reduced_value_matches_jax(name):
    f = CASES[name]
    want = jax.grad(lambda w: ((X @ f(jax, jnp, w)) ** 2).sum())(W)
    mesh = _mesh()
    with shardc.set_mesh(mesh):
        x, w = _placed(mesh, X, W)

        def loss(w):
            wr = shardc.reshard(w, P(None, None, reduced={"X"}))
            return (snp.matmul(x, f(shardc, snp, wr), out_sharding=P("X", None)) ** 2).sum()
        got = shardc.jit(shardc.grad(loss))(w)
    assert got.sharding.spec == P("X", None)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-5)


def test_two_layer_mlp_with_reduced_params_matches_jax_and_numpy():
    # y = tanh(x @ tanh(w1)) @ w2: the first layer's weights pass through an elementwise op
    def loss(m, n, w1, w2, x):
        if m is shardc:
            w1 = m.reshard(w1, P(None, None, reduced={"X"}))
            w2 = m.reshard(w2, P(None, None, reduced={"X"}))
            h = n.tanh(n.matmul(x, n.tanh(w1), out_sharding=P("X", None)))
            return (n.matmul(h, w2, out_sharding=P("X", None)) ** 2).sum()
        return ((n.tanh(x @ n.tanh(w1)) @ w2) ** 2).sum()
    want = jax.grad(lambda a, b: loss(jax, jnp, a, b, X), argnums=(0, 1))(W, W2)
    t1 = np.tanh(W.astype(np.float64))
    h = np.tanh(X @ t1)
    dy = 2 * h @ W2
    np_want = (X.T @ (dy @ W2.T * (1 - h * h)) * (1 - t1 * t1), h.T @ dy)
    mesh = _mesh()
    with shardc.set_mesh(mesh):
        w1, w2, x = _placed(mesh, W, W2, X)
        got = shardc.jit(shardc.grad(lambda a, b: loss(shardc, snp, a, b, x),
                                     argnums=(0, 1)))(w1, w2)
    for g, j, nw in zip(got, want, np_want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(j), rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(np.asarray(g), nw, rtol=1e-4, atol=1e-4)
