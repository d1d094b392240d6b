"""Differential testing: run one function under shardc.jit and jax.jit and compare.

Test functions take the numpy module as first argument (`shardc.numpy` for shardc,
`jax.numpy` for jax, `numpy` for the NumPy reference), so one body serves all three.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp


_PARAM = type(pytest.param(0))


def sample(cases, every, unpack=False):
    """A sweep's parametrize list with every `every`-th case in `make test` and the rest
    marked slow (`make test-slow` runs them all). `unpack`: plain cases are tuples of
    several arguments."""
    out = []
    for i, c in enumerate(cases):
        if not isinstance(c, _PARAM):
            c = pytest.param(*c) if unpack else pytest.param(c)
        if i % every:
            c = pytest.param(*c.values, id=c.id, marks=[*c.marks, pytest.mark.slow])
        out.append(c)
    return out


def place(mesh, arrays, specs):
    """device_put each array with its spec; Python scalars pass through (weak)."""
    return [a if isinstance(a, (bool, int, float)) else
            jax.device_put(a, NamedSharding(mesh, s if s is not None else P()))
            for a, s in zip(arrays, specs)]


def same_sharding(a, b, ndim) -> bool:
    """Equivalent shardings; jax places outputs that are constants on one device, which
    counts as replicated."""
    single = jax.sharding.SingleDeviceSharding
    if isinstance(a, single) or isinstance(b, single):
        return a.is_fully_replicated and b.is_fully_replicated
    return a.is_equivalent_to(b, ndim)


def tol(dtype):
    dtype = np.dtype(dtype)
    if dtype.name.startswith(("float8", "float4")):
        return dict(rtol=0.13, atol=0.13)
    if dtype == np.float16 or dtype.name == "bfloat16":
        return dict(rtol=2e-2, atol=2e-2)
    if dtype in (np.float32, np.complex64):
        return dict(rtol=2e-5, atol=2e-5)
    return dict(rtol=1e-12, atol=1e-12)


def assert_close(got, want, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if got.dtype.kind in "fc" or got.dtype.name.startswith(("bfloat16", "float")):
        wide = np.complex128 if got.dtype.kind == "c" else np.float64
        np.testing.assert_allclose(got.astype(wide), want.astype(wide),
                                   equal_nan=True, err_msg=what, **tol(got.dtype))
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


class NS:
    """A numpy-like namespace: `base`'s names plus a few extras (nn, rsqrt, constrain, ...)."""

    def __init__(self, base, **extra):
        self._base = base
        self.__dict__.update(extra)

    def __getattr__(self, name):
        return getattr(self._base, name)


def _np_erf(x):
    import scipy.special
    return scipy.special.erf(x)


def _np_logsumexp(a, axis=None, keepdims=False):
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def _np_softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis, keepdims=True))
    return e / np.sum(e, axis, keepdims=True)


def _np_one_hot(x, num_classes, dtype=np.float32, axis=-1):
    x = np.asarray(x)
    out = np.expand_dims(x, axis) == np.expand_dims(
        np.arange(num_classes), [d for d in range(x.ndim + 1) if d != axis % (x.ndim + 1)])
    return out.astype(dtype)


def _np_float(x):
    x = np.asarray(x)
    return x.astype(np.float32) if x.dtype.kind in "biu" else x


def _np_sigmoid(x):
    x = _np_float(x)
    return 1 / (1 + np.exp(-x))


NP_NN = NS(None, relu=lambda x: np.maximum(x, 0),
           sigmoid=_np_sigmoid,
           silu=lambda x: x * _np_sigmoid(x),
           gelu=lambda x, approximate=True: (
               0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
               if approximate else 0.5 * x * (1 + _np_erf(x / np.sqrt(2)))),
           softmax=_np_softmax,
           log_softmax=lambda x, axis=-1: np.log(_np_softmax(x, axis)),
           logsumexp=_np_logsumexp, one_hot=_np_one_hot)


def namespaces(mesh=None):
    """The (shardc, jax, numpy) namespaces test bodies get as `m`.

    Besides numpy's names each has `nn`, `rsqrt`, `erf`, `logistic`, `iota` (from lax /
    jax.nn / jax.scipy where jax.numpy lacks them) and `constrain(x, spec)`, a sharding
    constraint on `mesh` (a no-op for numpy)."""
    import jax.scipy.special
    from jax import lax

    def ours_constrain(x, spec):
        return shardc.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))

    def jax_constrain(x, spec):
        return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))
    ours = NS(snp, nn=shardc.nn, constrain=ours_constrain)
    def inexact(f):
        """lax.rsqrt / jax.nn.sigmoid take floats; shardc.numpy promotes as jnp.exp does."""
        return lambda x: f(jnp.asarray(x, jnp.result_type(x, 1.0)))
    ref = NS(jnp, nn=jax.nn, rsqrt=inexact(lax.rsqrt), erf=jax.scipy.special.erf,
             logistic=inexact(jax.nn.sigmoid), iota=lax.iota, constrain=jax_constrain)
    npy = NS(np, nn=NP_NN, rsqrt=lambda x: 1 / np.sqrt(_np_float(x)), erf=_np_erf,
             logistic=_np_sigmoid, iota=lambda dtype, size: np.arange(size, dtype=dtype),
             constrain=lambda x, spec: x, bfloat16=jnp.bfloat16)
    return ours, ref, npy


def _numpy_inputs(arrays):
    """NumPy has no fast, accurate half precision: the reference computes in f32."""
    out = []
    for a in arrays:
        a = np.asarray(a)
        out.append(a.astype(np.float32) if a.dtype in (np.float16, jnp.bfloat16) else a)
    return out


def check_outputs(ours, ref, mesh=None, check_sharding=True, what="jax"):
    """Values, dtypes, weak types and (with a mesh) shardings of two output pytrees."""
    ours_l, ref_l = jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(ref)
    assert len(ours_l) == len(ref_l), f"{len(ours_l)} outputs vs {len(ref_l)} from {what}"
    for i, (o, r) in enumerate(zip(ours_l, ref_l)):
        assert isinstance(o, jax.Array), f"output {i} is a {type(o).__name__}, not a jax.Array"
        assert_close(o, r, f"output {i} vs {what}")
        assert o.weak_type == r.weak_type, \
            f"output {i}: weak_type {o.weak_type} vs {r.weak_type} from {what}"
        if check_sharding and mesh is not None:
            assert same_sharding(o.sharding, r.sharding, o.ndim), (
                f"output {i}: shardc {o.sharding.spec} vs {what} {r.sharding.spec}")
    return ours_l


def _loosest(*dts):
    """NumPy computes bool inputs of float functions in float16: the looser tolerance."""
    return max((tol(d) for d in dts), key=lambda t: t["rtol"])


def check_numpy(ours_l, want):
    for i, (o, w) in enumerate(zip(ours_l, jax.tree_util.tree_leaves(want))):
        w = np.asarray(w)
        assert np.shape(o) == w.shape, f"output {i}: shape {np.shape(o)} vs numpy {w.shape}"
        wide = np.complex128 if np.iscomplexobj(o) or np.iscomplexobj(w) else np.float64
        np.testing.assert_allclose(np.asarray(o).astype(wide),
                                   w.astype(wide), equal_nan=True,
                                   err_msg=f"output {i} vs numpy", **_loosest(o.dtype, w.dtype))


def compare(fn, arrays, specs=None, mesh=None, numpy_ref=True, check_sharding=True,
            static=()):
    """shardc.jit(fn) vs jax.jit(fn) on the same placed inputs: values and shardings.

    `fn(m, *arrays, *static)` gets a numpy-like namespace `m` (see `namespaces`).
    Returns the shardc outputs (flat list)."""
    specs = specs or [None] * len(arrays)
    if mesh is not None:
        inputs = place(mesh, arrays, specs)
    else:
        inputs = [a if isinstance(a, (bool, int, float)) else jnp.asarray(a) for a in arrays]
    ours_m, ref_m, np_m = namespaces(mesh)
    ours = shardc.jit(lambda *xs: fn(ours_m, *xs, *static))(*inputs)
    ref = jax.jit(lambda *xs: fn(ref_m, *xs, *static))(*inputs)
    ours_l = check_outputs(ours, ref, mesh, check_sharding)
    if numpy_ref:
        check_numpy(ours_l, fn(np_m, *_numpy_inputs(arrays), *static))
    return ours_l


def compare_eager(fn, arrays, specs=None, mesh=None, numpy_ref=True, check_sharding=True):
    """fn run at once (no jit) on concrete jax.Arrays: shardc.numpy vs jax.numpy."""
    specs = specs or [None] * len(arrays)
    inputs = place(mesh, arrays, specs) if mesh is not None else [jnp.asarray(a) for a in arrays]
    ours_m, ref_m, np_m = namespaces(mesh)
    ours_l = check_outputs(fn(ours_m, *inputs), fn(ref_m, *inputs), mesh, check_sharding,
                           "jax eager")
    if numpy_ref:
        check_numpy(ours_l, fn(np_m, *_numpy_inputs(arrays)))
    return ours_l


def compare_or_raises(fn, arrays, specs=None, mesh=None, **kw):
    """As `compare`, but when jax rejects the program shardc must too, with a ShardcError
    that names the user's line (this file's caller)."""
    specs = specs or [None] * len(arrays)
    inputs = place(mesh, arrays, specs) if mesh is not None else [jnp.asarray(a) for a in arrays]
    _, ref_m, _ = namespaces(mesh)
    try:
        jax.jit(lambda *xs: fn(ref_m, *xs))(*inputs)
    except (TypeError, ValueError, NotImplementedError) as e:
        ours_m, _, _ = namespaces(mesh)
        try:
            shardc.jit(lambda *xs: fn(ours_m, *xs))(*inputs)
        except shardc.ShardcError as err:
            assert err.loc.line > 0 and not err.loc.file.startswith("<"), (
                f"error does not name the user's line: {err}")
            return None
        raise AssertionError(f"jax raises {type(e).__name__}: {e}; shardc does not")
    return compare(fn, arrays, specs, mesh, **kw)


def data(shape, dtype, kind="any", seed=0):
    """Small test arrays in a domain: any pos unit gt-1 nonzero exp small special."""
    rng = np.random.default_rng(seed)
    dt = jnp.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    dt = np.dtype(dt)
    if dt == np.bool_:
        if kind in ("nonzero", "pos"):
            return np.ones(shape, bool)
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        lo, hi = {"pos": (1, 10), "unit": (-1, 1), "nonzero": (1, 6), "exp": (0, 3),
                  "small": (-3, 3), "gt-1": (0, 10)}.get(kind, (-5, 5))
        if dt.kind == "u":
            lo = max(lo, 0 if kind not in ("nonzero", "pos") else 1)
        out = rng.integers(lo, hi + 1, size=shape)
        if kind == "nonzero" and dt.kind == "i":
            out = out * rng.choice([-1, 1], size=shape)
        return out.astype(dt)
    if kind == "pos":
        out = rng.uniform(0.1, 3, shape)
    elif kind == "unit":
        out = rng.uniform(-0.9, 0.9, shape)
    elif kind == "gt-1":
        out = rng.uniform(-0.9, 3, shape)
    elif kind == "nonzero":
        out = rng.uniform(0.5, 3, shape) * rng.choice([-1, 1], size=shape)
    elif kind == "small":
        out = rng.integers(-3, 4, size=shape).astype(np.float64)
    elif kind == "special":
        out = rng.uniform(-2, 2, shape)
        flat = out.reshape(-1)
        flat[::5], flat[1::7], flat[2::11] = np.nan, np.inf, -np.inf
    else:
        out = rng.uniform(-2, 2, shape)
    return out.astype(dt)


def _ident(m, a):
    return a


# (id, spec of a 8x16 argument on the 2x4 mesh, transform applied inside the function)
LAYOUTS_2D = [
    ("rep", P(), _ident),
    ("d0", P("x", None), _ident),
    ("d1", P(None, "y"), _ident),
    ("2d", P("x", "y"), _ident),
    ("2ax", P(None, ("x", "y")), _ident),
    ("uneven", P(("x", "y"), None), lambda m, a: a[1:]),
    ("uneven_wsc", P(), lambda m, a: m.constrain(a[:, :15], P("y", ("x",)))),
]


class Case:
    """One small program for `compare_cases`: fn(m, *arrays) with arrays placed by specs."""

    def __init__(self, label, fn, arrays, specs=None, numpy_ref=True, check_sharding=True):
        self.label, self.fn, self.arrays = label, fn, list(arrays)
        self.specs = list(specs) if specs is not None else [None] * len(self.arrays)
        self.numpy_ref, self.check_sharding = numpy_ref, check_sharding


def _expect_shardc_error(fn, inputs, label, jax_error):
    try:
        fn(*inputs)
    except shardc.ShardcError as err:
        assert err.loc.line > 0 and not err.loc.file.startswith("<"), (
            f"[{label}] error does not name the user's line: {err}")
        return err
    raise AssertionError(f"[{label}] jax raises {type(jax_error).__name__}: {jax_error}; "
                         "shardc does not")


def compare_cases(cases, mesh=None, eager=False):
    """Many cases compiled as ONE shardc program and ONE jax program (compiles are the
    cost of this suite), each case on its own inputs so that their shardings do not
    interact. Cases jax rejects must be rejected by shardc too, with a ShardcError at
    the user's line. With eager=True the functions run at once instead (no jit)."""
    ours_m, ref_m, np_m = namespaces(mesh)
    accepted = []
    for c in cases:
        inputs = place(mesh, c.arrays, c.specs) if mesh is not None else \
            [a if isinstance(a, (bool, int, float)) else jnp.asarray(a) for a in c.arrays]
        try:
            jax.eval_shape(lambda *xs: c.fn(ref_m, *xs), *inputs)
        except (TypeError, ValueError, NotImplementedError, IndexError) as e:
            if eager:
                _expect_shardc_error(lambda *xs: c.fn(ours_m, *xs), inputs, c.label, e)
            else:
                _expect_shardc_error(shardc.jit(lambda *xs: c.fn(ours_m, *xs)).trace, inputs,
                                     c.label, e)
            continue
        accepted.append((c, inputs))
    if not accepted:
        return []
    if eager:
        ours = [c.fn(ours_m, *xs) for c, xs in accepted]
        ref = [c.fn(ref_m, *xs) for c, xs in accepted]
    else:
        flat = [x for _, xs in accepted for x in xs]

        def run(m):
            def f(*flat):
                out, k = [], 0
                for c, xs in accepted:
                    out.append(c.fn(m, *flat[k:k + len(xs)]))
                    k += len(xs)
                return out
            return f
        ours = shardc.jit(run(ours_m))(*flat)
        ref = jax.jit(run(ref_m))(*flat)
    results = []
    for (c, _), o, r in zip(accepted, ours, ref):
        what = f"{'jax eager' if eager else 'jax'} [{c.label}]"
        ours_l = check_outputs(o, r, mesh, c.check_sharding, what)
        if c.numpy_ref:
            try:
                check_numpy(ours_l, c.fn(np_m, *_numpy_inputs(c.arrays)))
            except AssertionError as e:
                raise AssertionError(f"[{c.label}] {e}") from None
        results.append(ours_l)
    return results


def close_by_shard(got, ref, rtol=1e-5, atol=1e-3):
    """`got` equals `ref` as a whole and on every device's block (not only gathered)."""
    ref = np.asarray(ref)
    np.testing.assert_allclose(np.asarray(got), ref, rtol=rtol, atol=atol)
    for s in got.addressable_shards:
        np.testing.assert_allclose(np.asarray(s.data), ref[s.index], rtol=rtol, atol=atol)
