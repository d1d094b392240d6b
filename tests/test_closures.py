"""custom_gradient, closure_convert and jacobian against jax's: gradients (first and
second order) under jit and eagerly, closure conversion through a custom_vjp's
nondiff function argument, bad cotangent shapes, and jax's own versions inside
shardc.jit."""
import functools
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import shardc  # noqa: E402
import shardc.numpy as snp  # noqa: E402

X = np.linspace(0.1, 1.0, 4, dtype=np.float32)


def _two_args(cg, np_):
    @cg
    def f(x, y):
        z = np_.sin(x) * y
        return z, lambda g: (g * np_.cos(x) * y * 3.0, (g * z).sum())
    return f


def _one_arg(cg, np_):
    @cg
    def f(x):
        e = np_.exp(x)
        return e, lambda g: g * e * 10
    return f


def _close(a, b):
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        np.testing.assert_allclose(np.asarray(u), np.asarray(v), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("jit", [True, False])
def test_custom_gradient_matches_jax(jit):
    fs, fj = _two_args(shardc.custom_gradient, snp), _two_args(jax.custom_gradient, jnp)
    y = np.float32(2)
    gs = shardc.grad(lambda x, y: fs(x, y).sum(), argnums=(0, 1))
    gj = jax.grad(lambda x, y: fj(x, y).sum(), argnums=(0, 1))
    _close((shardc.jit(gs) if jit else gs)(X, y), jax.jit(gj)(X, y))
    _close(fs(X, y), fj(X, y))        # the primal, eagerly
    s1, j1 = _one_arg(shardc.custom_gradient, snp), _one_arg(jax.custom_gradient, jnp)
    _close(shardc.jit(shardc.grad(lambda x: s1(x).sum()))(X),
           jax.grad(lambda x: j1(x).sum())(X))
    # the rule is differentiable: second order through it, as jax
    _close(shardc.jit(shardc.hessian(lambda x: s1(x).sum()))(X),
           jax.hessian(lambda x: j1(x).sum())(X))


def test_custom_gradient_with_keyword_arguments_and_its_errors():
    @shardc.custom_gradient
    def f(x, scale=1.0):
        return x * scale, lambda g: (g * 100.0, g * 0.0)
    _close(shardc.grad(lambda x: f(x, scale=np.float32(3.0)))(np.float32(2.0)), 100.0)

    @shardc.custom_gradient
    def bad(x, y):
        return x * y, lambda g: (g, g * snp.ones(3))
    with pytest.raises(ValueError, match=r"output\[1\].*shape \(3,\).*shape \(\)") as e:
        shardc.grad(lambda x, y: bad(x, y), argnums=(0, 1))(np.float32(1), np.float32(2))
    assert "test_closures.py" in str(e.value)


def test_closure_convert_through_custom_vjp_nondiff_function():
    # jax's documented use: a higher-order custom_vjp whose function argument closes
    # over a traced value; converted, the value's cotangent reaches it
    def make(cvjp, cc, np_):
        @functools.partial(cvjp, nondiff_argnums=(0,))
        def apply(fn, x, *consts):
            return fn(x, *consts)

        def fwd(fn, x, *consts):
            return apply(fn, x, *consts), (x, consts)

        def bwd(fn, res, g):
            x, consts = res
            _, pull = jax.vjp(fn, x, *consts) if np_ is jnp else shardc.vjp(fn, x, *consts)
            return pull(g)
        apply.defvjp(fwd, bwd)

        def loss(x, w):
            f = lambda v: np_.sin(v) * w       # noqa: E731  (closes over w)
            conv, consts = cc(f, x)
            return apply(conv, x, *consts).sum()
        return loss
    ls = make(shardc.custom_vjp, shardc.closure_convert, snp)
    lj = make(jax.custom_vjp, jax.closure_convert, jnp)
    w = np.float32(1.5)
    _close(shardc.jit(shardc.grad(ls, argnums=(0, 1)))(X, w),
           jax.jit(jax.grad(lj, argnums=(0, 1)))(X, w))


def test_closure_convert_checks_the_structure_and_is_plain_outside_traces():
    conv, consts = shardc.closure_convert(lambda a, b: a + b, X, X)
    assert consts == []
    _close(conv(X, X), 2 * X)
    with pytest.raises(ValueError, match="same Pytree structure"):
        conv((X, X))

    def f(x):
        conv, consts = shardc.closure_convert(lambda v: v * x, x)
        assert len(consts) == 1
        with pytest.raises(ValueError, match="same Pytree structure"):
            conv([x], *consts)
        return conv(x + 1, *consts)
    _close(shardc.jit(f)(X), (X + 1) * X)


def test_jacobian_is_jacrev_and_jax_custom_gradient_runs_inside_shardc_jit():
    _close(shardc.jit(shardc.jacobian(snp.sin))(X), jax.jacobian(jnp.sin)(X))
    fj = _two_args(jax.custom_gradient, jnp)
    g = lambda x, y: jax.grad(lambda x, y: fj(x, y).sum(), argnums=(0, 1))(x, y)  # noqa: E731
    _close(shardc.jit(g)(X, np.float32(2)), jax.jit(g)(X, np.float32(2)))
