"""Silent wrong values vs jax, each checked against jax.jit (and NumPy where it is the
reference) at the points where they went wrong: complex sin and cos near the real axis
and at infinite imaginary parts (XLA's expansion of stablehlo.sine / cosine cancels and
makes inf - inf; jax lowers them from expm1); derivatives of prod where a partial
product overflows (jax differentiates a product tree) and of cumlogsumexp at infinities
(jax differentiates its associative scan of logaddexp)."""
import jax
import jax.numpy as jnp
import numpy as np

import shardc
import shardc.numpy as snp

INF, NAN = np.inf, np.nan


def _parts_close(got, want, rtol):
    """Real and imaginary parts compared apart, so a NaN in either one counts."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype
    for part in (np.real, np.imag):
        np.testing.assert_allclose(part(got), part(want), rtol=rtol, atol=0, equal_nan=True)


def _trig(m, z):
    return m.sin(z), m.cos(z), m.tan(z), m.sinh(z), m.cosh(z), m.tanh(z)


def test_complex_sin_cos_match_jax():
    re = [0.0, -0.0, 1.0, -2.5, 1e-6, 30.0, 1e30, INF, NAN]
    im = [0.0, -0.0, 1e-6, -3e-7, 1e-20, 1.0, -2.0, 100.0, INF, -INF, NAN]
    z = np.array([complex(a, b) for a in re for b in im], np.complex64)
    got, want = shardc.jit(lambda z: _trig(snp, z))(z), jax.jit(lambda z: _trig(jnp, z))(z)
    for g, w in zip(got, want):
        _parts_close(g, w, 2e-6)
    # near the real axis the imaginary part is as exact as NumPy's complex128 one
    # (it was 5% off at 1 + 1e-6j)
    near = np.array([1 + 1e-6j, 0.5 + 3e-7j, 2 - 1e-5j, -1 + 1e-20j], np.complex64)
    wide = near.astype(np.complex128)
    sin, cos = shardc.jit(lambda z: (snp.sin(z), snp.cos(z)))(near)
    _parts_close(np.asarray(sin, np.complex128), np.sin(wide), 1e-6)
    _parts_close(np.asarray(cos, np.complex128), np.cos(wide), 1e-6)


def test_complex_sin_cos_derivatives_match_jax():
    z = np.array([1 + 1e-6j, 0.3 + 0.2j, -1 + 2j, 1e-6 + 1e-6j], np.complex64)
    t = np.full_like(z, 0.5)

    def derivs(M, m, z, t):
        def f(z):
            return m.sin(z) + m.cos(2 * z)
        return (M.jvp(f, (z,), (t,))[1],
                M.grad(lambda z: m.sum(f(z)).real)(z),
                M.vmap(M.grad(lambda z: f(z), holomorphic=True))(z))
    # (arguments, not constants: XLA folds constants with its own exact sin and cos)
    for got, want in zip(shardc.jit(lambda z, t: derivs(shardc, snp, z, t))(z, t),
                         jax.jit(lambda z, t: derivs(jax, jnp, z, t))(z, t)):
        _parts_close(got, want, 2e-6)


def test_prod_derivatives_do_not_overflow():
    """jax differentiates a product tree: each partial product stays within the range
    of the result (the product of all elements before 1e-30 was 1e60: inf in float32)."""
    big = np.float32(1e30)
    x = np.array([[big, big, 1 / big, 1 / big, 1, 1, 1],
                  [big, big, big, 1 / big, 1 / big, 1 / big, 7]], np.float32)
    t = np.full_like(x, 0.5)

    def derivs(M, m, x, t):
        def f(x):
            return m.prod(x, axis=1)
        return (M.grad(lambda x: f(x).sum())(x), M.jvp(f, (x,), (t,))[1],
                M.grad(lambda x: m.prod(x))(x[:, 2:5]),
                M.hessian(lambda x: m.prod(x))(x[0, 1:4]))
    got = shardc.jit(lambda x, t: derivs(shardc, snp, x, t))(x, t)
    want = jax.jit(lambda x, t: derivs(jax, jnp, x, t))(x, t)
    assert np.isfinite(np.asarray(want[0])).all()
    for g, w in zip(got, want):     # (jax's jvp too overflows in the second row)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def test_cumlogsumexp_derivatives_at_infinities_match_jax():
    """jax differentiates cumlogsumexp as its associative scan of logaddexp, whose rule
    reads +inf as 0 (finite values where shardc's closed form met inf - inf) and gives
    NaN for two -inf (where the closed form was finite)."""
    x = np.array([[0.5, np.inf, 1.0, 2.0, -1.0], [-np.inf, -np.inf, 1.0, 2.0, -np.inf],
                  [1.0, -np.inf, 2.0, np.inf, np.inf], [1.0, np.nan, 2.0, 0.0, 3.0]],
                 np.float32)
    t = np.linspace(0.5, 2, x.size, dtype=np.float32).reshape(x.shape)
    w = 1 + np.arange(x.size, dtype=np.float32).reshape(x.shape)

    def derivs(M, x, t):
        out = []
        for reverse in (False, True):
            def f(x):
                return M.lax.cumlogsumexp(x, axis=1, reverse=reverse)

            def loss(x):
                return (f(x) * w).sum()
            out += [M.jvp(f, (x,), (t,))[1], M.grad(loss)(x),
                    M.grad(lambda x: M.grad(loss)(x).sum())(x)]
        return out
    got = shardc.jit(lambda x, t: derivs(shardc, x, t))(x, t)
    want = jax.jit(lambda x, t: derivs(jax, x, t))(x, t)
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w_), rtol=1e-5, atol=1e-5,
                                   equal_nan=True)
