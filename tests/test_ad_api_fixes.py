"""The differentiation API where it differed from jax's: a Python-scalar primal stays
weakly typed."""

import jax
import numpy as np
import pytest

import shardc

X = np.array([0.5, 1.0, 2.0], np.float32)


def _close(got, want):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


def _same(got, want):
    """Equal values and the same type, weak type included."""
    assert str(jax.typeof(got)) == str(jax.typeof(want))
    _close(got, want)


# ---------------------------------------------------------------- weak types

WEAK_CASES = {
    "grad": lambda M: M.grad(M.numpy.sin)(3.0),
    "grad_mul": lambda M: M.grad(lambda x: x * 2.0)(3.0),
    "value": lambda M: M.value_and_grad(lambda x: x * 2.0)(3.0)[0],
    "vjp": lambda M: M.vjp(M.numpy.sin, 3.0)[1](1.0)[0],
    "jvp_tangent": lambda M: M.jvp(M.numpy.sin, (3.0,), (1.0,))[1],
    "jvp_primal": lambda M: M.jvp(M.numpy.sin, (3.0,), (1.0,))[0],
    "strong_arg": lambda M: M.grad(lambda x, y: x * y, argnums=1)(3.0, np.float32(2)),
}


@pytest.mark.parametrize("case", list(WEAK_CASES))
def test_python_scalar_primal_stays_weak(case):
    f = WEAK_CASES[case]
    _same(shardc.jit(lambda: f(shardc))(), jax.jit(lambda: f(jax))())


def test_weak_gradient_promotes_with_float16():
    h = np.float16(1.5)
    got = shardc.jit(lambda h: shardc.grad(lambda x: x * 2.0)(3.0) * h)(h)
    want = jax.jit(lambda h: jax.grad(lambda x: x * 2.0)(3.0) * h)(h)
    assert got.dtype == want.dtype == np.float16
    _close(got, want)


@pytest.mark.parametrize("p,c", [(1.0, 2.0), (1.0, np.float32(2)), (np.float32(1), 2.0)])
def test_linear_transpose_python_scalar_weak(p, c):
    got = shardc.linear_transpose(lambda x: 3 * x, p)(c)[0]
    want = jax.linear_transpose(lambda x: 3 * x, p)(c)[0]
    _same(got, want)

