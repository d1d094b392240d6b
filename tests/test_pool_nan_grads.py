"""Max/min pooling's derivatives at NaN and at windows holding only the init value, as
jax's: the JVP is select_and_gather_add (a scan from the init, padding skipped), the
gradient its transpose select_and_scatter_add (a scan from the window's first element,
padding taking part as -inf), which differ there."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.lax as slax

INF, NAN = np.inf, np.nan
# windows with a NaN first, last and in the middle, all -inf, -inf then a value, +inf,
# and a NaN at the edge that padding follows
X = np.array([[1., 2., NAN, 0., -INF, -INF, 3., -1.],
              [NAN, 0., 5., NAN, -INF, -INF, -INF, 2.],
              [5., 5., -INF, -2., INF, 1., NAN, 4.],
              [-3., 2., -INF, -INF, 0., INF, 1., NAN]], np.float32)
T = np.arange(1, 33, dtype=np.float32).reshape(4, 8)
CFGS = {"valid": ((2, 2), (2, 2), "VALID"),
        "padded_overlapping": ((2, 3), (1, 2), ((1, 1), (0, 2)))}


@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("cfg", list(CFGS))
def test_pool_jvp_and_grad_at_nan_and_empty_windows_as_jax(op, cfg):
    init = -INF if op == "max" else INF
    x = X if op == "max" else -X

    def pool(lax):
        return lambda x: lax.reduce_window(x, init, getattr(lax, op), *CFGS[cfg])
    fj, fs = pool(jax.lax), pool(slax)
    ct = np.asarray(fj(T))      # a cotangent of distinct entries per window
    want_t = jax.jit(lambda x: jax.jvp(fj, (x,), (T,))[1])(x)
    want_g = jax.jit(lambda x: jax.vjp(fj, x)[1](ct)[0])(x)
    got_t, got_g = shardc.jit(lambda x: (shardc.jvp(fs, (x,), (T,))[1],
                                         shardc.vjp(fs, x)[1](ct)[0]))(x)
    np.testing.assert_array_equal(np.asarray(got_t), np.asarray(want_t))
    np.testing.assert_array_equal(np.asarray(got_g), np.asarray(want_g))


def test_jax_pool_derivatives_traced_by_shardc():
    """jax's own select_and_gather_add / select_and_scatter_add in a traced jax function,
    and shardc's derivatives of jax's reduce_window_max."""
    def f(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (2, 2), (2, 2), "VALID")

    def both(x):
        return jax.jvp(f, (x,), (T,))[1], jax.grad(lambda x: f(x).sum())(x)
    for got, want in zip(shardc.jit(both)(X), jax.jit(both)(X)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    got = shardc.jit(lambda x: (shardc.jvp(f, (x,), (T,))[1],
                                shardc.grad(lambda x: f(x).sum())(x)))(X)
    for g, w in zip(got, jax.jit(both)(X)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
