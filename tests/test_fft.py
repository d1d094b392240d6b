"""shardc.numpy.fft and the fft primitive vs jax.jit (values, dtypes, weak types, output
shardings under four layouts) and jax.grad."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import Case, assert_close, compare_cases, place

LAYOUTS = [P(), P("x", None, None), P(None, "y", None), P("x", None, "y"), P(None, None, "y")]


def rdata(shape=(4, 8, 16), seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)


def cdata(shape=(4, 8, 16), seed=0):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-2, 2, shape) + 1j * rng.uniform(-2, 2, shape)).astype(np.complex64)


FUNCS = {
    "fft": (lambda m, a: m.fft.fft(a), "c"),
    "fft-n-axis": (lambda m, a: m.fft.fft(a, n=6, axis=1), "c"),
    "fft-real-in": (lambda m, a: m.fft.fft(a, norm="ortho"), "r"),
    "ifft": (lambda m, a: m.fft.ifft(a, n=20, norm="forward"), "c"),
    "rfft": (lambda m, a: m.fft.rfft(a), "r"),
    "rfft-axis0": (lambda m, a: m.fft.rfft(a, axis=0, norm="ortho"), "r"),
    "irfft": (lambda m, a: m.fft.irfft(a), "c"),
    "irfft-n": (lambda m, a: m.fft.irfft(a, n=9, axis=1), "c"),
    "fft2": (lambda m, a: m.fft.fft2(a), "c"),
    "ifft2": (lambda m, a: m.fft.ifft2(a, s=(6, 16), axes=(0, 2)), "c"),
    "rfft2": (lambda m, a: m.fft.rfft2(a, norm="forward"), "r"),
    "irfft2": (lambda m, a: m.fft.irfft2(a), "c"),
    "fftn": (lambda m, a: m.fft.fftn(a), "c"),
    "ifftn": (lambda m, a: m.fft.ifftn(a, axes=(1, 0)), "c"),
    "rfftn": (lambda m, a: m.fft.rfftn(a, s=(4, 8, 10)), "r"),
    "irfftn": (lambda m, a: m.fft.irfftn(a, norm="ortho"), "c"),
    "fftn-4d": (lambda m, a: m.fft.fftn(a.reshape(2, 2, 8, 16)), "c"),
    "irfftn-4d": (lambda m, a: m.fft.irfftn(a.reshape(2, 2, 8, 16)), "c"),
    "hfft": (lambda m, a: m.fft.hfft(a), "c"),
    "ihfft": (lambda m, a: m.fft.ihfft(a, n=12), "r"),
    "fftshift": (lambda m, a: (m.fft.fftshift(a), m.fft.fftshift(a, axes=1)), "r"),
    "ifftshift": (lambda m, a: (m.fft.ifftshift(a), m.fft.ifftshift(a, axes=(0, 2))), "r"),
}


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_fft_functions_as_jax(mesh2x4, name):
    f, kind = FUNCS[name]
    make = cdata if kind == "c" else rdata
    cases = [Case(f"{name}-{spec}", f, [make(seed=i)], [spec], numpy_ref=False)
             for i, spec in enumerate(LAYOUTS)]
    compare_cases(cases, mesh2x4)


def test_fft_matches_numpy():
    z, x = cdata(), rdata()
    assert_close(snp.fft.fft(z), np.fft.fft(z).astype(np.complex64))
    np.testing.assert_allclose(snp.fft.irfft(snp.fft.rfft(x)), x, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(shardc.jit(lambda a: snp.fft.rfftn(a))(x), np.fft.rfftn(x),
                               rtol=1e-4, atol=1e-4)


def test_fftfreq_and_rfftfreq(mesh2x4):
    cases = [Case("freq", lambda m, a: (m.fft.fftfreq(7), m.fft.fftfreq(8, 0.25),
                                         m.fft.rfftfreq(9, 2.0), m.fft.rfftfreq(8)),
                  [rdata()], [P()]),
             Case("freq-dtype", lambda m, a: (m.fft.fftfreq(5, dtype=m.float16),
                                               m.fft.rfftfreq(6, dtype=m.bfloat16)),
                  [rdata()], [P()], numpy_ref=False)]
    compare_cases(cases, mesh2x4)
    assert_close(snp.fft.fftfreq(10, 0.1), jnp.fft.fftfreq(10, 0.1))


def test_lax_fft(mesh2x4):
    lax_of = lambda m: shardc.lax if getattr(m, "_base", m) is snp else jax.lax  # noqa: E731
    cases = [Case(f"lax-{spec}", lambda m, a: (
        lax_of(m).fft(a, "FFT", (8, 16)), lax_of(m).fft(a.real, jax.lax.FftType.RFFT, (16,)),
        lax_of(m).fft(a[..., :9], "IRFFT", (16,))), [cdata()], [spec], numpy_ref=False)
        for spec in LAYOUTS[:3]]
    compare_cases(cases, mesh2x4)


def test_transformed_dims_are_gathered_batch_dims_stay_sharded(mesh2x4):
    """Shardy's rule: a batch dim keeps its sharding through the fft."""
    z = jax.device_put(cdata(), NamedSharding(mesh2x4, P("x", "y", None)))
    out = shardc.jit(lambda a: snp.fft.fft(a))(z)
    assert out.sharding.is_equivalent_to(NamedSharding(mesh2x4, P("x", "y", None)), 3)
    text = shardc.jit(lambda a: snp.fft.fft(a)).trace(z).lower().as_text()
    assert "stablehlo.fft" in text and "FFT" in text


GRADS = {
    "rfft-abs2": lambda m, x: m.sum(m.abs(m.fft.rfft(x)) ** 2 * m.arange(9.0)),
    "fft-real": lambda m, x: m.sum(m.real(m.fft.fft(x * (1 + 0.5j))) * x),
    "ifft": lambda m, x: m.sum(m.imag(m.fft.ifft(x + 1j * x[::-1], norm="ortho")) ** 2),
    "irfft": lambda m, x: m.sum(m.fft.irfft(m.fft.rfft(x) * (1 - 2j), n=16) * x),
    "irfft-odd": lambda m, x: m.sum(m.sin(m.fft.irfft(m.fft.rfft(x[:, :15]), n=15))),
    "fft2": lambda m, x: m.sum(m.abs(m.fft.fft2(x))),
    "rfftn": lambda m, x: m.sum(m.abs(m.fft.rfftn(x)) ** 2),
    "irfft2": lambda m, x: m.sum(m.fft.irfft2(m.fft.rfft2(x) * 2j + 1) ** 2),
    "hfft": lambda m, x: m.sum(m.fft.hfft(x + 1j) ** 2),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_fft_gradients_as_jax(mesh2x4, name):
    f = GRADS[name]
    x = rdata((8, 16))
    # (a transformed dim sharded in the backward pass trips XLA CPU's FFT layout check,
    # under jax.jit too: see the fft test below)
    for spec in (P(), P("x", None)):
        (xi,) = place(mesh2x4, [x], [spec])
        got = shardc.jit(shardc.grad(lambda x: f(snp, x)))(xi)
        want = jax.jit(jax.grad(lambda x: f(jnp, x)))(xi)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-4, atol=2e-3,
                                   err_msg=f"{name} {spec}")


def test_fft_vjp_of_complex_input_as_jax():
    z, ct = cdata((4, 8)), cdata((4, 8), seed=5)
    for f in (lambda m, z: m.fft.fft(z), lambda m, z: m.fft.ifft2(z),
              lambda m, z: m.fft.irfft(z)[..., :8].astype(m.complex64)):
        out, fn = shardc.vjp(lambda z: f(snp, z), z)
        rout, rfn = jax.vjp(lambda z: f(jnp, z), z)
        np.testing.assert_allclose(out, rout, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(fn(ct)[0], rfn(ct)[0], rtol=1e-4, atol=1e-4)


def test_fft_errors():
    with pytest.raises(shardc.ShardcError, match="real"):
        shardc.jit(lambda z: snp.fft.rfft(z))(jnp.asarray(cdata()))
    with pytest.raises(shardc.ShardcError, match="norm"):
        shardc.jit(lambda z: snp.fft.fft(z, norm="bad"))(jnp.asarray(cdata()))
    with pytest.raises(shardc.ShardcError, match="multiple axes"):
        snp.fft.fft(jnp.asarray(cdata()), axis=(0, 1))


@pytest.mark.parametrize("in_axes", [0, 1, 2])
def test_fft_batching_rule_as_jax_vmap(in_axes):
    z = jnp.asarray(cdata((4, 6, 8)))
    for f in (lambda m, a: m.fft.fft(a), lambda m, a: m.fft.ifft2(a),
              lambda m, a: m.fft.irfft(a, n=8), lambda m, a: m.fft.rfft(m.real(a), axis=0),
              lambda m, a: m.fft.fftn(a, axes=(0,))):
        got = shardc.jit(shardc.vmap(lambda a: f(snp, a), in_axes=in_axes))(z)
        want = jax.jit(jax.vmap(lambda a: f(jnp, a), in_axes=in_axes))(z)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        assert got.dtype == want.dtype


def test_vmap_of_fft_gradient():
    x = jnp.asarray(rdata((4, 16)))
    f = GRADS["rfft-abs2"]
    got = shardc.vmap(shardc.grad(lambda x: f(snp, x)))(x)
    want = jax.vmap(jax.grad(lambda x: f(jnp, x)))(x)
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-3)
