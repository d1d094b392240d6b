"""shardc.scipy.signal, .ndimage and .interpolate vs jax.scipy's under jit on a 2x4 mesh:
values, dtypes, weak types and output shardings (each test's cases compiled as one
program), gradients vs jax.grad, eager calls, and the errors jax raises."""
import jax
import jax.numpy as jnp
import jax.scipy.interpolate as JI
import jax.scipy.ndimage as JN
import jax.scipy.signal as JS
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.scipy.interpolate as SI
import shardc.scipy.ndimage as SN
import shardc.scipy.signal as SS
from helpers import Case, assert_close, compare_cases


def mods(m):
    """(signal, ndimage, interpolate) matching a test namespace: shardc's or jax's."""
    return (SS, SN, SI) if m.nn is shardc.nn else (JS, JN, JI)


def sig(m):
    return mods(m)[0]


RNG = np.random.default_rng(0)
X = RNG.standard_normal((8, 16)).astype(np.float32)          # a 2-d signal / image
K = RNG.standard_normal((3, 5)).astype(np.float32)           # a small kernel
V = RNG.standard_normal(64).astype(np.float32)               # a 1-d signal
XC = (X + 1j * X[::-1]).astype(np.complex64)
XY, ROWS, REP = P("x", "y"), P("x", None), P()


def _conv_cases():
    cases = []
    for mode in ("full", "same", "valid"):
        cases += [
            Case(f"convolve-{mode}", lambda m, a, k, mode=mode: sig(m).convolve(a, k, mode),
                 [X, K], [XY, REP]),
            Case(f"convolve-swap-{mode}",
                 lambda m, k, a, mode=mode: sig(m).convolve(k, a, mode), [K, X], [REP, ROWS]),
            Case(f"convolve-fft-{mode}",
                 lambda m, a, k, mode=mode: sig(m).convolve(a, k, mode, method="fft"),
                 [X, K], [ROWS, REP]),
            Case(f"correlate-{mode}", lambda m, a, b, mode=mode: sig(m).correlate(a, b, mode),
                 [V, V[:7]], [P("y"), REP]),
            Case(f"convolve2d-{mode}",
                 lambda m, a, k, mode=mode: sig(m).convolve2d(a, k, mode), [X, K], [XY, REP]),
            Case(f"correlate2d-{mode}",
                 lambda m, a, k, mode=mode: sig(m).correlate2d(a, k, mode), [XC, K],
                 [ROWS, REP]),
            Case(f"correlate2d-swap-{mode}",
                 lambda m, k, a, mode=mode: sig(m).correlate2d(k, a, mode), [K, X], [REP, XY]),
            Case(f"fftconvolve-axes-{mode}",
                 lambda m, a, b, mode=mode: sig(m).fftconvolve(a, b, mode, axes=1),
                 [X, X[:, :5]], [XY, ROWS]),
        ]
    cases += [
        # (not sharded along its last dim: XLA:CPU's complex FFT then fails a layout
        # check, under jax.jit as well)
        Case("fftconvolve-complex", lambda m, a, k: sig(m).fftconvolve(a, k), [XC, K],
             [ROWS, REP]),
        Case("convolve-int", lambda m, a, k: sig(m).convolve(a, k),
             [(X * 4).astype(np.int32), np.ones((2, 2), np.int32)], [XY, REP]),
        Case("correlate2d-same-shape", lambda m, a, b: sig(m).correlate2d(a, b, "valid"),
             [K, K[::-1]], [REP, REP]),
        # shardc.numpy orders complex numbers as jnp (XLA has no complex comparison)
        Case("complex-order", lambda m, a, b: (a > b, a <= b, m.less(a, 0.5)), [XC, XC.conj()],
             [XY, REP]),
        Case("detrend", lambda m, a: sig(m).detrend(a), [X], [XY]),
        Case("detrend-bp", lambda m, a: sig(m).detrend(a, axis=0, bp=[3, 5]), [X], [XY]),
        Case("detrend-constant", lambda m, a: sig(m).detrend(a, axis=0, type="constant"),
             [X], [ROWS]),
    ]
    return cases


def test_convolutions(mesh2x4):
    compare_cases(_conv_cases(), mesh2x4)


def test_spectral(mesh2x4):
    X2 = RNG.standard_normal((4, 48)).astype(np.float32)
    z = JS.stft(X2, nperseg=8)[2]
    z2 = JS.stft(V, nperseg=8, noverlap=6, return_onesided=False)[2]
    cases = [
        Case("stft", lambda m, x: sig(m).stft(x, nperseg=8), [X2], [ROWS]),
        Case("stft-odd-axis0", lambda m, x: sig(m).stft(
            x, nperseg=6, noverlap=2, nfft=8, boundary="odd", axis=0, detrend="constant"),
            [X2.T], [P(None, "x")]),
        Case("stft-even-twosided", lambda m, x: sig(m).stft(
            x, fs=2.0, nperseg=6, boundary="even", return_onesided=False, padded=False),
            [X2], [XY]),
        Case("stft-edge-hamming", lambda m, x: sig(m).stft(
            x, nperseg=5, boundary="constant", window="hamming"), [V], [P("x")]),
        Case("welch", lambda m, x: sig(m).welch(x, nperseg=8), [X2], [ROWS]),
        Case("welch-median", lambda m, x: sig(m).welch(
            x, fs=3.0, nperseg=8, average="median", scaling="spectrum",
            window=np.hanning(8).astype(np.float32)), [V], [P("y")]),
        Case("csd", lambda m, x, y: sig(m).csd(x, y, nperseg=16, noverlap=4), [X2, X2[::-1]],
             [ROWS, ROWS]),
        Case("csd-median-unequal", lambda m, x, y: sig(m).csd(
            x, y, nperseg=4, average="median", axis=0), [V, V[:40]], [P("x"), REP]),
        Case("istft", lambda m, z: sig(m).istft(z), [z], [P("x", None, None)]),
        Case("istft-twosided", lambda m, z: sig(m).istft(
            z, nperseg=8, noverlap=6, input_onesided=False, boundary=False), [z2], [REP]),
        Case("istft-axes", lambda m, z: sig(m).istft(z, time_axis=0, freq_axis=2),
             [np.transpose(z, (2, 0, 1))], [P(None, "x", None)]),
    ]
    for c in cases:
        c.numpy_ref = False
    compare_cases(cases, mesh2x4)


# ---------------------------------------------------------------- ndimage, interpolate

IMG = RNG.standard_normal((6, 8)).astype(np.float32)
COORDS = RNG.uniform(-3, 10, (2, 8, 16)).astype(np.float32)
COORDS[:, 0, :6] = [[0.5, -0.5, 2.5, 5.0, 6.0, -3.0], [1.5, 7.5, 8.0, -1.0, 0.0, 9.5]]


def test_map_coordinates(mesh2x4):
    cases = [Case(f"map_coordinates-{order}-{mode}",
                  lambda m, im, c, order=order, mode=mode: mods(m)[1].map_coordinates(
                      im, [c[0], c[1]], order, mode=mode, cval=1.5), [IMG, COORDS],
                  [REP, P(None, "x", "y")], numpy_ref=False)
             for order in (0, 1) for mode in ("constant", "nearest", "wrap", "mirror",
                                              "reflect")]
    cases += [
        Case("map_coordinates-int", lambda m, im, c: mods(m)[1].map_coordinates(
            im, [c[0], c[1]], 1), [(IMG * 10).astype(np.int32), COORDS], [XY, REP],
            numpy_ref=False),
        Case("map_coordinates-int-coords", lambda m, im, c: mods(m)[1].map_coordinates(
            im, (c[0], c[1]), 0, mode="wrap"), [IMG, COORDS.astype(np.int32)],
            [ROWS, P(None, None, "y")], numpy_ref=False),
        Case("map_coordinates-bf16", lambda m, im, c: mods(m)[1].map_coordinates(
            im, [c[0], c[1]], 1, mode="nearest"), [IMG.astype(jnp.bfloat16), COORDS],
            [REP, REP], numpy_ref=False),
    ]
    compare_cases(cases, mesh2x4)


G0 = np.array([0, 1, 2.5, 4, 5, 7], np.float32)
G1 = np.linspace(-1, 1, 6).astype(np.float32)
VALS = RNG.standard_normal((6, 6, 4)).astype(np.float32)
Q = RNG.uniform(-1.5, 7.5, (16, 2)).astype(np.float32)
Q[:, 1] = Q[:, 1] / 2 - 0.8


def test_regular_grid_interpolator(mesh2x4):
    def rgi(m, *args, **kw):
        return mods(m)[2].RegularGridInterpolator(*args, **kw)
    cases = [
        Case("rgi-linear", lambda m, g0, g1, v, q: rgi(m, (g0, g1), v)(q),
             [G0, G1, VALS, Q], [REP, REP, P(None, None, "y"), ROWS]),
        Case("rgi-nearest-nofill", lambda m, g0, g1, v, q: rgi(
            m, (g0, g1), v, method="nearest", fill_value=None)(q), [G0, G1, VALS, Q],
            [REP, REP, REP, ROWS]),
        Case("rgi-tuple-points", lambda m, g0, g1, v, q: rgi(
            m, (g0, g1), v[..., 0], fill_value=-1.0)((q[:, 0], q[:, 1]), method="nearest"),
            [G0, G1, VALS, Q], [REP, REP, REP, P("y")]),
        Case("rgi-1d", lambda m, g0, v, q: rgi(m, (g0,), v[:, 0, 0])(q[:, 0]),
             [G0, VALS, Q], [REP, REP, ROWS]),
        Case("rgi-int-values", lambda m, g0, g1, v, q: rgi(m, (g0, g1), v)(q),
             [G0, G1, (VALS[..., 0] * 5).astype(np.int32), Q], [REP, REP, REP, REP]),
    ]
    for c in cases:
        c.numpy_ref = False
    compare_cases(cases, mesh2x4)


# ---------------------------------------------------------------- gradients, eager

GRADS = {  # name: (function of ((signal, ndimage, interpolate), x), x)
    "map_coordinates-linear": (lambda s, c: s[1].map_coordinates(
        jnp.asarray(IMG), [c[0], c[1]], 1, mode="reflect"), COORDS[:, :2] / 1.7),
    "map_coordinates-image": (lambda s, im: s[1].map_coordinates(
        im, [COORDS[0], COORDS[1]], 1, mode="constant"), IMG),
    "convolve": (lambda s, x: s[0].convolve(x, K, "same"), X),
    "fftconvolve": (lambda s, x: s[0].fftconvolve(x, K, "valid"), X),
    "welch": (lambda s, x: s[0].welch(x, nperseg=8)[1], X),
    "rgi-values": (lambda s, v: s[2].RegularGridInterpolator((G0, G1), v)(Q), VALS),
    "rgi-points": (lambda s, q: s[2].RegularGridInterpolator(
        (G0, G1), VALS, fill_value=0.0)(q), Q),
}


def test_gradients(mesh2x4):
    names = sorted(GRADS)
    xs = [jax.device_put(jnp.asarray(GRADS[n][1]), NamedSharding(mesh2x4, P("x")))
          for n in names]

    def run(ms, grad):
        def f(*xs):
            return [grad(lambda x, n=n: (GRADS[n][0](ms, x) ** 2).sum())(x)
                    for n, x in zip(names, xs)]
        return f
    ours = shardc.jit(run((SS, SN, SI), shardc.grad))(*xs)
    ref = jax.jit(run((JS, JN, JI), jax.grad))(*xs)
    for n, o, r in zip(names, ours, ref):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=1e-4, atol=1e-4,
                                   err_msg=f"grad of {n}")


def test_eager(mesh2x4):
    """Outside jit the functions run op by op on sharded arrays."""
    compare_cases([
        Case("convolve2d", lambda m, a: sig(m).convolve2d(a, K, "same"), [X], [XY],
             numpy_ref=False),
        Case("map_coordinates", lambda m, c: mods(m)[1].map_coordinates(
            IMG, [c[0], c[1]], 1, mode="mirror"), [COORDS], [P(None, "x")],
            numpy_ref=False),
    ], mesh2x4, eager=True)
    f, t, z = SS.stft(V, nperseg=8)
    fj, tj, zj = JS.stft(V, nperseg=8)
    for o, r in ((f, fj), (t, tj), (z, zj)):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=1e-5, atol=1e-5)


ERRORS = {  # jax rejects these; shardc must too, naming the user's line
    "convolve-mode": lambda s, x: s[0].convolve(x, x, mode="bad"),
    "convolve-method": lambda s, x: s[0].convolve(x, x, method="winograd"),
    "convolve-ndim": lambda s, x: s[0].convolve(x, x[0]),
    "convolve-shapes": lambda s, x: s[0].convolve(x[:3], x[:, :3].T),
    "convolve2d-boundary": lambda s, x: s[0].convolve2d(x, x, boundary="wrap"),
    "correlate2d-3d": lambda s, x: s[0].correlate2d(x[None], x[None]),
    "fftconvolve-valid": lambda s, x: s[0].fftconvolve(x[:3], x[:, :3].T, "valid"),
    "detrend-type": lambda s, x: s[0].detrend(x, type="quadratic"),
    "stft-noverlap": lambda s, x: s[0].stft(x, nperseg=4, noverlap=4),
    "welch-average": lambda s, x: s[0].welch(x, nperseg=4, average="mode"),
    "stft-boundary": lambda s, x: s[0].stft(x, nperseg=4, boundary="periodic"),
    "istft-1d": lambda s, x: s[0].istft(x[0]),
    "map_coordinates-order": lambda s, x: s[1].map_coordinates(x, [x, x], 3),
    "map_coordinates-mode": lambda s, x: s[1].map_coordinates(x, [x, x], 1, "grid-wrap"),
    "map_coordinates-len": lambda s, x: s[1].map_coordinates(x, [x], 1),
    "rgi-method": lambda s, x: s[2].RegularGridInterpolator((x[0], x[1]), x, "cubic"),
    "rgi-bounds": lambda s, x: s[2].RegularGridInterpolator((x[0],), x, bounds_error=True),
    "rgi-dims": lambda s, x: s[2].RegularGridInterpolator((x[0], x[0]), x)(x[:, :3]),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors(name):
    fn = ERRORS[name]
    compare_cases([Case(name, lambda m, x: fn(mods(m), x), [X], numpy_ref=False)])


def test_namespace():
    for ours, theirs in ((SS, JS), (SN, JN), (SI, JI)):
        public = {n for n in dir(theirs) if not n.startswith("_")}
        assert not sorted(public - set(dir(ours))), sorted(public - set(dir(ours)))
    assert_close(SS.correlate(V[:5], V[:3], "valid"), JS.correlate(V[:5], V[:3], "valid"))
