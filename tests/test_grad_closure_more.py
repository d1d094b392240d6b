"""Gradients of functions that close over the value being differentiated (perturbation
confusion), more cases: intermediate primals, custom_vjp, 1-D sharded; checked against jax."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp

X = np.arange(1., 9., dtype=np.float32)


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-6)


def test_grad_closes_over_primal_in_jit():
    got = shardc.jit(lambda x: shardc.grad(lambda p: snp.sum(p * x))(x))(X)
    want = jax.jit(lambda x: jax.grad(lambda p: jnp.sum(p * x))(x))(X)
    _close(got, want)


def test_grad_closes_over_intermediate_primal():
    def f(m, x):
        y = x * 2.
        return m.grad(lambda p: m.np.sum(p * y * y))(y)
    got = shardc.jit(lambda x: f(_S, x))(X)
    want = jax.jit(lambda x: f(_J, x))(X)
    _close(got, want)


class _S:
    grad, np = staticmethod(shardc.grad), snp


class _J:
    grad, np = staticmethod(jax.grad), jnp


def test_value_and_grad_argnums_has_aux_closure():
    def f(m, x, y):
        def loss(a, b):
            return m.np.sum(a * x + b * y * x), a * y
        (v, aux), (ga, gb) = m.value_and_grad(loss, argnums=(0, 1), has_aux=True)(x, y)
        return v, aux, ga, gb
    S = type("S", (), {"value_and_grad": staticmethod(shardc.value_and_grad), "np": snp})
    J = type("J", (), {"value_and_grad": staticmethod(jax.value_and_grad), "np": jnp})
    got = shardc.jit(lambda x, y: f(S, x, y))(X, X + 1)
    want = jax.jit(lambda x, y: f(J, x, y))(X, X + 1)
    for a, b in zip(got, want):
        _close(a, b)


def test_vjp_and_jvp_closure():
    def sv(x):
        out, fn = shardc.vjp(lambda p: p * x * x, x)
        _, t = shardc.jvp(lambda p: p * x, (x,), (snp.ones_like(x),))
        return out, fn(snp.ones_like(x))[0], t

    def jv(x):
        out, fn = jax.vjp(lambda p: p * x * x, x)
        _, t = jax.jvp(lambda p: p * x, (x,), (jnp.ones_like(x),))
        return out, fn(jnp.ones_like(x))[0], t
    for a, b in zip(shardc.jit(sv)(X), jax.jit(jv)(X)):
        _close(a, b)


@pytest.mark.parametrize("jit", [False, True])
def test_nested_grad_inner_closes_over_outer(jit):
    s = np.float32(3.)
    sf = shardc.grad(lambda x: shardc.grad(lambda y: x * y * y)(x))
    jf = jax.grad(lambda x: jax.grad(lambda y: x * y * y)(x))
    _close((shardc.jit(sf) if jit else sf)(s), jax.jit(jf)(s))


def test_custom_vjp_closure():
    @shardc.custom_vjp
    def sq(a):
        return a * a
    sq.defvjp(lambda a: (a * a, a), lambda a, ct: (3. * a * ct,))

    @jax.custom_vjp
    def jsq(a):
        return a * a
    jsq.defvjp(lambda a: (a * a, a), lambda a, ct: (3. * a * ct,))
    got = shardc.jit(lambda x: shardc.grad(lambda p: snp.sum(sq(p) * x))(x))(X)
    want = jax.jit(lambda x: jax.grad(lambda p: jnp.sum(jsq(p) * x))(x))(X)
    _close(got, want)


def test_closure_grad_sharded():
    mesh = jax.make_mesh((2, 4), ("a", "b"))
    sh = NamedSharding(mesh, P(("a", "b")))
    x = jax.device_put(X, sh)
    got = shardc.jit(lambda x: shardc.grad(lambda p: snp.sum(p * x * x))(x))(x)
    want = jax.jit(lambda x: jax.grad(lambda p: jnp.sum(p * x * x))(x))(x)
    _close(got, want)
    assert got.sharding.is_equivalent_to(want.sharding, 1)


def test_grad_at_a_concrete_jax_array_inside_jit():
    """A primal that is a jax.Array (not a traced value) becomes a constant of the trace;
    it raised AttributeError ('ArrayImpl' has no 'value') before."""
    c = jnp.arange(4.0)
    got = shardc.jit(lambda: shardc.grad(lambda x: snp.sum(snp.sin(x)))(c))()
    want = jax.jit(lambda: jax.grad(lambda x: jnp.sum(jnp.sin(x)))(c))()
    _close(got, want)
