"""The differentiation API where it differed from jax's: a Python-scalar primal stays
weakly typed, and gradients jax refuses (zeta in s, polygamma in m, nextafter) raise
instead of being silently zero."""

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


# ---------------------------------------------------------------- refused gradients

S = np.array([2., 3.5], np.float32)
Q = np.array([1.5, 0.7], np.float32)
REFUSED = {     # jax's error types: NotImplementedError (no rule), ValueError (polygamma)
    "zeta_s": (lambda M: lambda s: M.lax.zeta(s, Q), NotImplementedError, "zeta"),
    "polygamma_m": (lambda M: lambda m: M.lax.polygamma(m, Q), ValueError,
                    "polygamma gradient with respect to m"),
    "nextafter_x": (lambda M: lambda x: M.lax.nextafter(x, x + 1), NotImplementedError,
                    "nextafter"),
    "nextafter_y": (lambda M: lambda y: M.lax.nextafter(Q, y), NotImplementedError,
                    "nextafter"),
}
HOW = {
    "grad": lambda M, f: M.grad(lambda a: f(a).sum())(S),
    "jvp": lambda M, f: M.jvp(f, (S,), (S,))[1],
    "scan": lambda M, f: M.grad(lambda a: M.lax.scan(
        lambda c, _: (f(c), None), a, None, length=2)[0].sum())(S),
}


@pytest.mark.parametrize("how", list(HOW))
@pytest.mark.parametrize("case", list(REFUSED))
def test_gradient_jax_refuses_raises(case, how):
    make, err, msg = REFUSED[case]
    with pytest.raises(err, match=msg):
        HOW[how](jax, make(jax))
    with pytest.raises(err, match=msg) as e:
        HOW[how](shardc, make(shardc))
    assert __file__ in str(e.value)         # names the user's line


def test_undifferentiated_operand_keeps_its_gradient():
    """zeta in q, polygamma in x, nextafter on a constant: still differentiable (jax's
    lax.zeta has no rule at all: its q-derivative is checked against scipy's zeta)."""
    got = shardc.jit(shardc.grad(lambda q: shardc.lax.zeta(S, q).sum()))(Q)
    _close(got, jax.grad(lambda q: jax.scipy.special.zeta(S, q).sum())(Q))
    m = np.float32(1) + 0 * S
    got = shardc.jit(shardc.grad(lambda x: shardc.lax.polygamma(m, x).sum()))(Q)
    _close(got, jax.grad(lambda x: jax.lax.polygamma(m, x).sum())(Q))
    f = lambda M: lambda x: (x * M.lax.nextafter(S, S + 1)).sum()  # noqa: E731
    _close(shardc.grad(f(shardc))(Q), jax.grad(f(jax))(Q))
    t = shardc.jvp(lambda q: shardc.lax.zeta(S, q), (Q,), (Q,))[1]
    _close(t, jax.jvp(lambda q: jax.scipy.special.zeta(S, q), (Q,), (Q,))[1])
