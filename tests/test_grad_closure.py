"""Differentiating inside jit where the function closes over the value being
differentiated (perturbation confusion): the closed-over value is a constant.

Each case is one body run with shardc's transforms and with jax's, under jit on the
same placed inputs; eager shardc is checked too where the transform runs eagerly."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp

from helpers import check_outputs


class T:
    """The transforms and numpy module a case body uses."""

    def __init__(self, m, grad, value_and_grad, vjp, jvp, custom_vjp):
        self.m, self.grad, self.value_and_grad = m, grad, value_and_grad
        self.vjp, self.jvp, self.custom_vjp = vjp, jvp, custom_vjp


OURS = T(snp, shardc.grad, shardc.value_and_grad, shardc.vjp, shardc.jvp, shardc.custom_vjp)
REF = T(jnp, jax.grad, jax.value_and_grad, jax.vjp, jax.jvp, jax.custom_vjp)


def _cube(t):
    @t.custom_vjp
    def cube(x):
        return x * x * x

    def fwd(x):
        return x * x * x, x

    def bwd(x, g):
        return (3.0 * x * x * g,)
    cube.defvjp(fwd, bwd)
    return cube


CASES = {
    "grad": lambda t, x: t.grad(lambda p: t.m.sum(p * x))(x),
    "grad_sin": lambda t, x: t.grad(lambda p: t.m.sum(t.m.sin(p) * x * p))(x),
    "value_and_grad": lambda t, x: t.value_and_grad(lambda p: t.m.sum(p * x * x))(x),
    "has_aux": lambda t, x: t.grad(lambda p: (t.m.sum(p * x), x * 2.0), has_aux=True)(x),
    "argnums_same_array": lambda t, x: t.grad(lambda a, b: t.m.sum(a * b * x),
                                              argnums=(0, 1))(x, x),
    "vjp": lambda t, x: t.vjp(lambda p: p * x, x)[1](t.m.ones_like(x)),
    "vjp_out": lambda t, x: t.vjp(lambda p: t.m.tanh(p) + x, x)[0],
    "jvp": lambda t, x: t.jvp(lambda p: p * x * p, (x,), (t.m.ones_like(x),)),
    "nested_inner_closes_outer": lambda t, x: t.grad(
        lambda p: t.m.sum(t.grad(lambda q: t.m.sum(q * p * x))(p)))(x),
    "nested_scalar": lambda t, x: t.grad(
        lambda p: t.grad(lambda q: t.m.sin(p * q))(p))(x[0]),
    "grad_of_grad": lambda t, x: t.grad(
        lambda p: t.m.sum(t.grad(lambda q: t.m.sum(q * q * q))(p) * x))(x),
    "custom_vjp": lambda t, x: t.grad(lambda p: t.m.sum(_cube(t)(p) * x))(x),
    "custom_vjp_closed_over": lambda t, x: t.grad(
        lambda p: t.m.sum(_cube(t)(x) * p))(x),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_closure_over_primal_inside_jit(name, mesh2x4):
    body = CASES[name]
    x = jax.device_put(np.array([1., 2., -0.5, 3., 0.25, -1., 2., 4.], np.float32),
                       NamedSharding(mesh2x4, P("y")))
    ours = shardc.jit(lambda x: body(OURS, x))(x)
    ref = jax.jit(lambda x: body(REF, x))(x)
    check_outputs(ours, ref, mesh2x4)


@pytest.mark.parametrize("name", ["grad", "value_and_grad", "nested_inner_closes_outer",
                                  "custom_vjp"])
def test_closure_over_primal_eager(name):
    body = CASES[name]
    x = np.array([1., 2., -0.5, 3.], np.float32)
    check_outputs(body(OURS, x), jax.jit(lambda x: body(REF, x))(x))


def test_issue_repro():
    x = np.array([1., 2.], np.float32)
    got = shardc.jit(lambda x: shardc.grad(lambda p: snp.sum(p * x))(x))(x)
    np.testing.assert_array_equal(np.asarray(got), [1., 2.])
