"""Gradients of complex cholesky, eigh, qr and svd (and so eigvalsh, pinv) vs jax's.

shardc refused these ("differentiates X of real matrices only"); its rules are now the
transposes of jax's complex jvp rules (conjugate transposes, the i*Im(diag) terms of
qr's omega and of svd's u). Real losses of the outputs are compared with jax.grad,
gauge-invariant ones for eigenvectors and singular vectors (|v|, u diag(s) vh, paired
columns u[:, j] vh[j, :]); vjp with arbitrary cotangents and jvp are compared too, after
checking that the outputs themselves (so their phases) are jax's."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp

RNG = np.random.default_rng(0)


def cplx(*shape, dtype=np.complex64):
    return (RNG.normal(size=shape) + 1j * RNG.normal(size=shape)).astype(dtype)


def herm(*shape, dtype=np.complex64):
    a = cplx(*shape, dtype=dtype)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dtype)


WC = cplx(5, 5)            # complex weights, sliced to each output's last two dims


def wsum(m, o):
    """A real, phase-sensitive function of o: Re sum(o * w) + sum(|o|^2)."""
    w = WC[:o.shape[-2], :o.shape[-1]] if o.ndim >= 2 else WC[0, :o.shape[-1]]
    return m.sum(m.real(o * w)) + m.sum(m.abs(o) ** 2)


def _svd_loss(L, m, a, **kw):
    u, s, vh = L.svd(a, **kw)
    rec = (u * s[..., None, :]) @ vh
    return wsum(m, rec) + wsum(m, m.abs(u)) + wsum(m, m.abs(vh)) + wsum(m, s) + \
        wsum(m, u[..., :, 1:2] * vh[..., 1:2, :])


def _eigh_loss(L, m, a):
    v, w = L.eigh(a)
    rec = (v * m.sin(w)[..., None, :]) @ m.conj(m.swapaxes(v, -1, -2))
    return wsum(m, w) + wsum(m, m.abs(v)) + wsum(m, rec) + wsum(m, v[..., :, :1] *
                                                                  m.conj(v[..., :1, :1]))


LOSSES = {   # name: (loss of (lax.linalg, numpy) modules and x, x)
    "cholesky": (lambda L, m, a: wsum(m, L.cholesky(a)), herm(2, 4, 4)),
    "eigh": (_eigh_loss, herm(2, 4, 4)),
    "eigvalsh": (lambda L, m, a: wsum(m, m.linalg.eigvalsh(a)), herm(4, 4)),
    "qr_square": (lambda L, m, a: sum(wsum(m, o) for o in L.qr(a)), cplx(2, 4, 4)),
    "qr_wide": (lambda L, m, a: sum(wsum(m, o) for o in L.qr(a)), cplx(3, 5)),
    "svd_s": (lambda L, m, a: wsum(m, L.svd(a, compute_uv=False)), cplx(2, 5, 3)),
    "svd_square": (lambda L, m, a: _svd_loss(L, m, a), cplx(2, 4, 4)),
    "svd_wide": (lambda L, m, a: _svd_loss(L, m, a, full_matrices=False), cplx(3, 5)),
    "pinv": (lambda L, m, a: wsum(m, m.linalg.pinv(a)), cplx(2, 5, 3)),
}


def _pair(body):
    return (lambda a: body(shardc.lax.linalg, snp, a),
            lambda a: body(jax.lax.linalg, jnp, a))


def _close(got, want, tol):
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_complex_grad_matches_jax(name):
    body, x = LOSSES[name]
    ours, ref = _pair(body)
    _close(shardc.jit(shardc.grad(ours))(x), jax.jit(jax.grad(ref))(x), 2e-4)


OUTS = {   # all outputs, for vjp with arbitrary cotangents and for jvp
    "cholesky": (lambda L, a: (L.cholesky(a),), herm(2, 3, 3)),
    "eigh": (lambda L, a: tuple(L.eigh(a)), herm(2, 3, 3)),
    "qr_tall": (lambda L, a: tuple(L.qr(a, full_matrices=False)), cplx(2, 4, 3)),
    "svd_tall": (lambda L, a: tuple(L.svd(a, full_matrices=False)), cplx(2, 4, 3)),
    "svd_wide": (lambda L, a: tuple(L.svd(a, full_matrices=False)), cplx(3, 4)),
}


def _vjp_jvp(name, dtype, tol):
    body, x = OUTS[name]
    x = x.astype(dtype)
    rng = np.random.default_rng(1)
    t = (rng.normal(size=x.shape) + 1j * rng.normal(size=x.shape)).astype(dtype)
    cts = tuple((rng.normal(size=o.shape) + 1j * rng.normal(size=o.shape)).astype(o.dtype)
                if np.iscomplexobj(o) else rng.normal(size=o.shape).astype(o.dtype)
                for o in jax.eval_shape(lambda a: body(jax.lax.linalg, a), x))

    def run(jit, vjp, jvp, L):
        def f(a):
            return body(L, a)
        return jit(lambda a, c, t: (f(a), vjp(f, a)[1](c), jvp(f, (a,), (t,))))(x, cts, t)
    (outs, *got) = run(shardc.jit, shardc.vjp, shardc.jvp, shardc.lax.linalg)
    (want_outs, *want) = run(jax.jit, jax.vjp, jax.jvp, jax.lax.linalg)
    # the same outputs (phases of u, v included), so the gauge-dependent vjp must agree
    _close(outs, want_outs, 10 * tol)
    _close(got, want, tol)


@pytest.mark.parametrize("name", sorted(OUTS))
def test_complex_vjp_jvp_match_jax(name):
    _vjp_jvp(name, np.complex64, 1e-3)


@pytest.mark.parametrize("name", ["eigh", "svd_wide"])
def test_complex128_vjp_jvp_match_jax(name):
    with jax.enable_x64(True):
        _vjp_jvp(name, np.complex128, 1e-9)


def test_complex_vmap_of_grad():
    body, _ = LOSSES["qr_square"]
    ours, ref = _pair(body)
    x = cplx(2, 4, 4)
    _close(shardc.jit(shardc.vmap(shardc.grad(ours)))(x), jax.jit(jax.vmap(jax.grad(ref)))(x),
           2e-4)
