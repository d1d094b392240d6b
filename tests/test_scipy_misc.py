"""shardc.scipy.fft (dct, dctn, idct, idctn), shardc.scipy.integrate.trapezoid and
shardc.scipy.cluster.vq.vq vs jax.scipy's under jit: values, dtypes (integer and
complex inputs included), output shardings on the 2x4 mesh, gradients, eager calls and
jax's errors. Each test compiles its cases as one program."""
import inspect

import jax
import jax.numpy as jnp
import jax.scipy.cluster.vq as JV
import jax.scipy.fft as JF
import jax.scipy.integrate as JI
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.scipy.cluster.vq as SV
import shardc.scipy.fft as SF
import shardc.scipy.integrate as SI
from helpers import Case, assert_close, compare_cases, data


def mods(m):
    """(fft, integrate, vq) modules matching a test namespace."""
    return (SF, SI, SV) if m.nn is shardc.nn else (JF, JI, JV)


X = data((8, 4, 6), np.float32, seed=0)
XC = (X + 1j * data((8, 4, 6), np.float32, seed=1)).astype(np.complex64)
XI = data((8, 5), np.int32, seed=2)


def _fft(label, fn, arrays, specs):
    return Case(label, lambda m, *xs: fn(mods(m)[0], *xs), arrays, specs, numpy_ref=False)


def test_dct(mesh2x4):
    cases = []
    for f in ("dct", "idct"):
        cases += [
            _fft(f"{f}", lambda s, x, f=f: getattr(s, f)(x), [X], [P("x")]),
            _fft(f"{f}-ortho-axis0", lambda s, x, f=f: getattr(s, f)(x, axis=0, norm="ortho"),
                 [X], [P(None, "y")]),
            _fft(f"{f}-pad", lambda s, x, f=f: getattr(s, f)(x, n=7, axis=1,
                                                             norm="backward"),
                 [X], [P("x", "y")]),
            _fft(f"{f}-cut", lambda s, x, f=f: getattr(s, f)(x, n=3), [X], [P(("x", "y"))]),
            _fft(f"{f}-complex", lambda s, x, f=f: getattr(s, f)(x, norm="ortho"), [XC],
                 [P("y")]),
            _fft(f"{f}-int", lambda s, x, f=f: getattr(s, f)(x), [XI], [P("x")]),
        ]
    compare_cases(cases, mesh2x4)


def test_dctn(mesh2x4):
    cases = []
    for f in ("dctn", "idctn"):
        cases += [
            _fft(f"{f}", lambda s, x, f=f: getattr(s, f)(x), [X], [P("x")]),
            _fft(f"{f}-2d-ortho", lambda s, x, f=f: getattr(s, f)(x, axes=(0, 2),
                                                                  norm="ortho"),
                 [X], [P(None, "y")]),
            _fft(f"{f}-s", lambda s, x, f=f: getattr(s, f)(x, s=(5, 6)), [X], [P("y")]),
            _fft(f"{f}-1axis", lambda s, x, f=f: getattr(s, f)(x, s=3, axes=(1,)), [X],
                 [P("x")]),
            _fft(f"{f}-complex", lambda s, x, f=f: getattr(s, f)(x, axes=(1, 2)), [XC],
                 [P("x", "y")]),
        ]
    compare_cases(cases, mesh2x4)


def test_trapezoid_and_vq(mesh2x4):
    t = np.sort(data((6,), np.float32, seed=3))
    obs, book = data((16, 3), np.float32, seed=4), data((5, 3), np.float32, seed=5)

    def integ(label, fn, arrays, specs):
        return Case(label, lambda m, *xs: fn(mods(m)[1], *xs), arrays, specs,
                    numpy_ref=False)

    def vq(label, fn, arrays, specs):
        return Case(label, lambda m, *xs: fn(mods(m)[2], *xs), arrays, specs,
                    numpy_ref=False)
    compare_cases([
        integ("trapezoid", lambda s, y: s.trapezoid(y), [X], [P("x", "y")]),
        integ("trapezoid-x", lambda s, y, x: s.trapezoid(y, x, axis=2), [X, t],
              [P("x"), P()]),
        integ("trapezoid-dx", lambda s, y: s.trapezoid(y, dx=0.25, axis=0), [X], [P("x")]),
        integ("trapezoid-int", lambda s, y: s.trapezoid(y), [XI], [P()]),
        vq("vq", lambda s, o, c: s.vq(o, c), [obs, book], [P("x"), P()]),
        vq("vq-1d", lambda s, o, c: s.vq(o, c), [obs[:, 0], book[:, 0]], [P(("x", "y")), P()]),
        vq("vq-int", lambda s, o, c: s.vq(o, c), [XI, XI[:3] + 1], [P("x"), P()]),
    ], mesh2x4)


def test_eager(mesh2x4):
    compare_cases([
        _fft("dct", lambda s, x: s.dct(x, norm="ortho"), [X], [P("x")]),
        _fft("idctn", lambda s, x: s.idctn(x, axes=(0, 1)), [X], [P("x")]),
        Case("vq", lambda m, o, c: mods(m)[2].vq(o, c), [X[:, :, 0], X[:2, :, 1]],
             [P("x"), P()], numpy_ref=False),
    ], mesh2x4, eager=True)


GRADS = {
    "dct": lambda f, i, v, x: f.dct(x, norm="ortho"),
    "idct": lambda f, i, v, x: f.idct(x, n=5, axis=0),
    "dctn": lambda f, i, v, x: f.dctn(x),
    "idctn": lambda f, i, v, x: f.idctn(x, norm="ortho"),
    "trapezoid": lambda f, i, v, x: i.trapezoid(x * x, axis=0),
    "vq": lambda f, i, v, x: v.vq(x, x[:2] * 0.5)[1],
}


def test_gradients(mesh2x4):
    names = sorted(GRADS)
    x = jax.device_put(jnp.asarray(X[0]), NamedSharding(mesh2x4, P()))

    def run(ms, grad):
        def weighted(n):
            def f(x):
                y = GRADS[n](*ms, x)
                return (y * jnp.arange(1, y.size + 1).reshape(y.shape)).sum()
            return f
        return lambda x: [grad(weighted(n))(x) for n in names]
    ours = shardc.jit(run((SF, SI, SV), shardc.grad))(x)
    ref = jax.jit(run((JF, JI, JV), jax.grad))(x)
    for n, o, r in zip(names, ours, ref):
        assert_close(o, r, f"grad of {n}")


ERRORS = {  # jax rejects these; shardc must too, naming the user's line
    "dct_type": lambda f, i, v, x: f.dct(x, type=3),
    "idct_norm": lambda f, i, v, x: f.idct(x, norm="forward"),
    "dctn_s": lambda f, i, v, x: f.dctn(x, s=(1, 2, 3, 4)),
    "idctn_axis": lambda f, i, v, x: f.idctn(x, axes=(0, 5)),
    "vq_rank": lambda f, i, v, x: v.vq(x, x[0]),
    "vq_3d": lambda f, i, v, x: v.vq(x, x),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors(name):
    fn = ERRORS[name]
    compare_cases([Case(name, lambda m, x: fn(*mods(m), x), [X], numpy_ref=False)])


def test_namespaces():
    """jax's names, with jax's signatures; the cluster package holds the vq module."""
    import shardc.scipy.cluster
    assert shardc.scipy.cluster.vq is SV
    for ours, ref in ((SF, JF), (SI, JI), (SV, JV)):
        public = {n for n in dir(ref) if not n.startswith("_")}
        assert not sorted(public - set(dir(ours))), ours.__name__
        for n in public:
            params = [[(p.name, p.kind, p.default) for p in
                       inspect.signature(getattr(mod, n)).parameters.values()]
                      for mod in (ours, ref)]
            assert params[0] == params[1], n
