"""Gradients a bug hunt found silently wrong, each checked against jax.jit(jax.grad):
eigvalsh at repeated eigenvalues (NaN: the eigenvector term ran on a zero cotangent),
complex sort/cumprod/cummax/cummin (zeros: the rules skipped complex operands),
cholesky(symmetrize_input=False) (symmetrized), and complex inverse hyperbolics
(refused), log2/log10 at complex 0, deg2rad/rad2deg/sinc of complex numbers."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp

T = np.arange(9, dtype=np.float32).reshape(3, 3) / 10
SYM = {"repeated": np.eye(3, dtype=np.float32) * 2,
       "distinct": np.array([[1., .3, -.2], [.3, 2., .5], [-.2, .5, 3.]], np.float32)}


def _close(got, want, tol=1e-4):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol,
                               equal_nan=True)


def _grads(jf, sf, x):
    """shardc's gradient (and jax's frontend path under shardc.grad) against jax's."""
    want = jax.jit(jax.grad(jf))(x)
    _close(shardc.jit(shardc.grad(sf))(x), want)
    _close(shardc.jit(shardc.grad(jf))(x), want)
    return want


EIGH_LOSSES = {
    "eigvalsh_sq": (lambda np_: lambda a: np_.sum(np_.linalg.eigvalsh(a) ** 2)),
    "eigh_w": (lambda np_: lambda a: np_.sum(np_.linalg.eigh(a)[0])),
    # eigenvectors with a cotangent: jax's gradient is NaN at repeated eigenvalues too
    "eigh_v": (lambda np_: lambda a: np_.sum(np_.linalg.eigh(a)[1] ** 2 * T)),
}


@pytest.mark.parametrize("mat", list(SYM))
@pytest.mark.parametrize("loss", list(EIGH_LOSSES))
def test_eigh_grad_repeated_eigenvalues(loss, mat):
    jf, sf = EIGH_LOSSES[loss](jnp), EIGH_LOSSES[loss](snp)
    x = SYM[mat]
    want = _grads(jf, sf, x)
    assert np.isnan(want).any() == (loss == "eigh_v" and mat == "repeated")
    # forward mode too (shardc's is the transposed reverse pass)
    jt = jax.jit(lambda a: jax.jvp(jf, (a,), (T,))[1])(x)
    _close(shardc.jit(lambda a: shardc.jvp(sf, (a,), (T,))[1])(x), jt)


Z = np.array([1 + 2j, -1 + .5j, .3 - 1j, .2 + 0j], np.complex64)
CUM = {
    "sort": (jnp.sort, snp.sort),
    "sort_by_real": (lambda x: jax.lax.sort((x.real, x), num_keys=1)[1],
                     lambda x: shardc.lax.sort((x.real, x), num_keys=1)[1]),
    "cumprod": (jnp.cumprod, snp.cumprod),
    "cumprod_rev": (lambda x: jax.lax.cumprod(x, reverse=True),
                    lambda x: shardc.lax.cumprod(x, reverse=True)),
    "cummax": (jax.lax.cummax, shardc.lax.cummax),
    "cummin": (jax.lax.cummin, shardc.lax.cummin),
}


@pytest.mark.parametrize("name", list(CUM))
def test_complex_sort_cumulative_grads(name):
    j, s = CUM[name]
    _close(shardc.jit(s)(Z), jax.jit(j)(Z), 1e-6)
    want = _grads(lambda x: jnp.sum(jnp.abs(j(x)) ** 2 + j(x).imag),
                  lambda x: snp.sum(snp.abs(s(x)) ** 2 + s(x).imag), Z)
    assert np.abs(want).max() > 1


A = np.array([[4., 1.], [1., 3.]], np.float32)
W = np.array([[1., 0.], [2., 3.]], np.float32)


@pytest.mark.parametrize("sym", [True, False])
def test_cholesky_grad_symmetrize_input(sym):
    want = _grads(lambda a: jnp.sum(jax.lax.linalg.cholesky(a, symmetrize_input=sym) * W),
                  lambda a: snp.sum(shardc.lax.linalg.cholesky(a, symmetrize_input=sym) * W),
                  A)
    assert np.allclose(want, want.T) == sym
    # jax.scipy's cholesky (symmetrize_input=False inside), either triangle
    for lower in (True, False):
        f = lambda a: jnp.sum(jax.scipy.linalg.cholesky(a, lower=lower) * W)  # noqa: E731
        _close(shardc.jit(shardc.grad(f))(A), jax.jit(jax.grad(f))(A))


# the complex plane, both sides of the branch cuts (on the axes) and signed zeros
_RE = np.array([-3, -1.5, -1, -.5, -0., 0, .5, 1, 1.5, 3], np.float32)
_IM = np.array([-2, -.5, -0., 0, .7, 2], np.float32)
GRID = (_RE[:, None] + 1j * _IM[None, :]).astype(np.complex64).ravel()
COMPLEX_FNS = ["arcsinh", "arccosh", "arctanh", "arcsin", "arccos", "arctan", "sinh",
               "cosh", "log2", "log10", "deg2rad", "rad2deg", "sinc"]


@pytest.mark.parametrize("name", COMPLEX_FNS)
def test_complex_elementwise_as_jax(name):
    j, s = getattr(jnp, name), getattr(snp, name)
    want = jax.jit(j)(GRID)
    for got in (shardc.jit(s)(GRID), shardc.jit(j)(GRID)):
        _close(got, want, 1e-5)
    _grads(lambda x: jnp.sum(j(x).real * .7 + j(x).imag * .3),
           lambda x: snp.sum(s(x).real * .7 + s(x).imag * .3), GRID)


@pytest.mark.parametrize("name", ["asinh", "acosh", "atanh"])
def test_lax_inverse_hyperbolics_complex(name):
    j, s = getattr(jax.lax, name), getattr(shardc.lax, name)
    _close(shardc.jit(s)(GRID), jax.jit(j)(GRID), 1e-5)
    _grads(lambda x: jnp.sum(j(x).imag), lambda x: snp.sum(s(x).imag), GRID)
