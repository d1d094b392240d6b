"""jax.numpy's ufunc objects in shardc.numpy (add, multiply, maximum, logaddexp, ... and
frompyfunc's): reduce / accumulate / at / reduceat / outer against jax's under jit on a
2x4 mesh (values, dtypes, output shardings), their fast paths and scan-based generic
paths, bool / int / float inputs, gradients, eager calls, attributes and jax's errors."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import Case, compare_cases

NAMES = ["add", "bitwise_and", "bitwise_or", "bitwise_xor", "logaddexp", "logaddexp2",
         "logical_and", "logical_or", "logical_xor", "maximum", "minimum", "multiply",
         "negative", "subtract"]
rng = np.random.default_rng(0)
F = rng.normal(size=(4, 8)).astype(np.float32)
W = rng.random((4, 8)) > 0.4                            # a where= mask
I = rng.integers(-20, 20, (4, 8)).astype(np.int32)
U = rng.integers(0, 255, (8, 4)).astype(np.uint8)
B = rng.random((4, 8)) > 0.5
H = rng.normal(size=(8,)).astype(np.float16)
IDX = np.array([0, 2, 2, -1], np.int32)                 # repeated and negative
SEG = np.array([0, 3, 2, 6], np.int32)                  # not increasing: numpy's rule
XY, X, Y, R = P("x", "y"), P("x"), P(None, "y"), P()


def lax(m):
    return shardc.lax if m.nn is shardc.nn else jax.lax


def _reduce_cases():
    def floats(m, f, w, h):
        return [m.add.reduce(f), m.add.reduce(f, axis=-1, keepdims=True, initial=1.5),
                m.add.reduce(f, axis=(0, 1), where=w), m.add.reduce(f, initial=f[0, 0]),
                m.add.reduce(h, initial=0.1), m.multiply.reduce(h, dtype=m.float32),
                m.multiply.reduce(f, axis=1, keepdims=True, where=w),
                m.maximum.reduce(f, axis=None, keepdims=True),
                m.maximum.reduce(f, axis=1, where=w, initial=0.5),
                m.minimum.reduce(f, axis=0, dtype=m.int32),
                m.logaddexp.reduce(f, axis=-1), m.logaddexp.reduce(f, axis=None, initial=0.5),
                m.logaddexp.reduce(f, axis=0, where=w, keepdims=True),
                m.logaddexp2.reduce(f, axis=(0, 1), initial=1.0),
                m.subtract.reduce(f, axis=1),
                m.subtract.reduce(f, axis=None, keepdims=True, initial=2.0),
                m.subtract.reduce(f, axis=-2, where=w, initial=f[1, 1])]

    def ints(m, i, u):
        return [m.add.reduce(u), m.add.reduce(i, axis=1, dtype=m.float32),
                m.multiply.reduce(u, axis=1, initial=2), m.maximum.reduce(i, axis=-1),
                m.minimum.reduce(u, axis=None, initial=7),
                m.bitwise_and.reduce(i, axis=1), m.bitwise_and.reduce(u, axis=0, initial=63),
                m.bitwise_or.reduce(u, axis=None), m.bitwise_or.reduce(u, where=u > 99),
                m.bitwise_xor.reduce(i, axis=-1, keepdims=True),
                m.bitwise_xor.reduce(u, axis=1, where=u > 50, initial=3),
                m.logical_and.reduce(i, axis=1), m.logical_or.reduce(u, keepdims=True),
                m.logical_xor.reduce(i, axis=1), m.logical_and.reduce(u, dtype=m.int32),
                m.subtract.reduce(i, axis=1)]

    def bools(m, b, f):
        return [m.add.reduce(b), m.multiply.reduce(b, axis=1), m.add.reduce(b, dtype=bool),
                m.maximum.reduce(b, axis=1), m.minimum.reduce(b, axis=None),
                m.logical_xor.reduce(b, axis=1), m.logical_or.reduce(f, axis=1, where=b),
                m.bitwise_xor.reduce(b, axis=1), m.bitwise_and.reduce(b, axis=None),
                m.logical_and.reduce(f, axis=0, dtype=m.int32)]
    # (XLA on CPU cannot all-reduce integers by and / or / xor, nor booleans by xor: jax.jit
    # fails to compile those over a sharded dim, so these reduce unsharded ones)
    return [Case("reduce.float", floats, [F, W, H], [XY, XY, X], numpy_ref=False),
            Case("reduce.int", ints, [I, U], [X, R], numpy_ref=False),
            Case("reduce.bool", bools, [B, F], [X, Y], numpy_ref=False)]


def _accumulate_cases():
    def acc(m, f, i, b):
        return [m.add.accumulate(f, axis=1), m.add.accumulate(f[0], axis=None),
                m.add.accumulate(b, axis=0),
                m.multiply.accumulate(i, axis=0, dtype=m.float32),
                m.maximum.accumulate(f, axis=0), m.minimum.accumulate(i, axis=1),
                m.subtract.accumulate(i, axis=-1), m.subtract.accumulate(f, dtype=m.int32),
                m.logaddexp.accumulate(f, axis=1), m.logical_or.accumulate(b, axis=1),
                m.logical_and.accumulate(f, axis=0), m.bitwise_xor.accumulate(i, axis=0)]
    # (a cumprod next to a cumsum of one operand split along their axis: jax.jit's
    # partitioned program gives the wrong products there -- an XLA bug shardc avoids, see
    # tests/test_cumulative_sharded.py -- so jax's reference runs it on its own)
    return [Case("accumulate", acc, [F, I, B], [XY, Y, X], numpy_ref=False),
            Case("accumulate.multiply", lambda m, f: m.multiply.accumulate(f, axis=-1),
                 [F], [XY], numpy_ref=False)]


def _at_cases():
    def at(m, f, i, b, idx):
        return [m.add.at(f, (idx, 2), 1.5, inplace=False),
                m.add.at(f, idx, f[0], inplace=False),
                m.add.at(b, idx, True, inplace=False),
                m.subtract.at(f, (1, -1), 2.0, inplace=False),
                m.subtract.at(i, (idx, idx), 3, inplace=False),
                m.multiply.at(f, (idx, idx), 3.0, inplace=False),
                m.multiply.at(b, (0, idx), False, inplace=False),
                m.maximum.at(f, (idx, idx), f[0, :4], inplace=False),
                m.minimum.at(i, idx, i[:4], inplace=False),
                m.negative.at(f, idx, inplace=False),
                m.negative.at(i, (idx, -1), inplace=False),
                m.negative.at(f, (0, 1), inplace=False),
                m.logical_or.at(b, (idx, 3), True, inplace=False),
                m.bitwise_xor.at(i, (2, idx), 5, inplace=False),
                m.logaddexp.at(f, (idx, 0), 1.0, inplace=False)]
    return [Case("at", at, [F, I, B, IDX], [XY, X, Y, R], numpy_ref=False)]


def _reduceat_outer_cases():
    def reduceat(m, f, i, b, seg):
        return [m.add.reduceat(f, seg, axis=1), m.multiply.reduceat(f, seg[:3], axis=-1),
                m.maximum.reduceat(i, seg[:2], axis=0), m.subtract.reduceat(f[0], seg),
                m.logical_or.reduceat(b, seg, axis=1), m.bitwise_or.reduceat(i, seg, 1),
                m.add.reduceat(f, seg, axis=1, dtype=m.float16)]

    def outer(m, f, i, b):
        return [m.multiply.outer(f[0], f[:, 0]), m.add.outer(i, i[0]),
                m.subtract.outer(f[0, :3], 2.0), m.logical_xor.outer(b[0], b[1]),
                m.maximum.outer(1.5, f[1]), m.logaddexp.outer(f[2], f[3, :2])]
    return [Case("reduceat", reduceat, [F, I, B, SEG], [XY, Y, X, R], numpy_ref=False),
            Case("outer", outer, [F, I, B], [XY, X, Y], numpy_ref=False)]


def _pyfunc_and_call_cases():
    def pyfunc(m, f, idx, seg):
        g = m.frompyfunc(lambda p, q: p * q + 1, 2, 1)
        h = m.frompyfunc(lambda p, q: m.where(p > q, p, q), 2, 1, identity=-10.0)
        return [g(f, 2.0), g.reduce(f, axis=1), g.accumulate(f, axis=0),
                g.outer(f[0, :3], f[1, :2]), g.at(f[0], idx, 2.0, inplace=False),
                g.reduceat(f, seg, axis=1), h.reduce(f, axis=None, where=f > 0),
                h.reduce(f, axis=0, keepdims=True)]

    def calls(m, f, i, b):
        return [m.add(f, i), m.negative(i), m.add(f, 1, out=None, where=None),
                m.logical_xor(i, b), m.logaddexp2(f, 1), f - i, b * b,
                lax(m).reduce(f, 0.0, m.add, (1,)), lax(m).reduce(i, 0, m.maximum, (0,))]
    return [Case("frompyfunc", pyfunc, [F, IDX, SEG], [XY, R, R], numpy_ref=False),
            Case("call", calls, [F, I, B], [XY, XY, XY], numpy_ref=False)]


def _error_cases():
    fi = [F, I]

    def err(label, fn):
        return Case("error." + label, fn, fi, [XY, XY], numpy_ref=False)
    ix2 = np.zeros((2, 2), np.int32)
    return [
        err("at_inplace", lambda m, f, i: m.add.at(f, 0, 1.0)),
        err("at_no_b", lambda m, f, i: m.add.at(f, 0, inplace=False)),
        err("at_list", lambda m, f, i: m.negative.at(f[0], [0, 1], inplace=False)),
        err("unary_reduce", lambda m, f, i: m.negative.reduce(f)),
        err("unary_accumulate", lambda m, f, i: m.negative.accumulate(f)),
        err("unary_outer", lambda m, f, i: m.negative.outer(f, f)),
        err("unary_reduceat", lambda m, f, i: m.negative.reduceat(f, SEG)),
        err("tuple_axes", lambda m, f, i: m.subtract.reduce(f, axis=(0, 1))),
        err("where_no_identity", lambda m, f, i: m.maximum.reduce(f, where=f > 0)),
        err("where_not_bool", lambda m, f, i: m.add.reduce(f, where=i)),
        err("accumulate_axis_none", lambda m, f, i: m.subtract.accumulate(f, axis=None)),
        err("bitwise_float", lambda m, f, i: m.bitwise_and.reduce(f)),
        err("initial_not_scalar", lambda m, f, i: m.add.reduce(f, initial=f[0])),
        err("empty_no_identity", lambda m, f, i: m.subtract.reduce(f[:0])),
        err("empty_max", lambda m, f, i: m.maximum.reduce(f[:, :0], axis=1)),
        err("reduceat_2d", lambda m, f, i: m.add.reduceat(f, ix2)),
        err("reduceat_axis", lambda m, f, i: m.add.reduceat(f, SEG, axis=None)),
        err("reduceat_list", lambda m, f, i: m.subtract.reduceat(f, [0, 1])),
        err("call_where", lambda m, f, i: m.add(f, f, where=True)),
        err("call_arity", lambda m, f, i: m.add(f, f, f)),
        err("reduce_list", lambda m, f, i: m.add.reduce([1, 2])),
    ]


def test_ufunc_methods_as_jax(mesh2x4):
    cases = (_reduce_cases() + _accumulate_cases() + _at_cases() + _reduceat_outer_cases() +
             _pyfunc_and_call_cases() + _error_cases())
    results = compare_cases(cases, mesh2x4)
    assert len(results) == len(cases) - len(_error_cases())


def test_gradients_and_eager():
    w = jnp.asarray(np.arange(32, dtype=np.float32).reshape(4, 8) / 10)
    fns = [lambda m, f: m.logaddexp.reduce(f, axis=-1),
           lambda m, f: m.multiply.accumulate(f, axis=1),
           lambda m, f: m.subtract.reduce(f, axis=0, where=W, initial=1.0),
           lambda m, f: m.maximum.accumulate(f, axis=0),
           lambda m, f: m.add.at(f, (IDX, 1), f[0, :4] * 2, inplace=False),
           lambda m, f: m.logaddexp.reduceat(f, SEG, axis=1)]
    for k, fn in enumerate(fns):
        ours = shardc.jit(shardc.grad(lambda f: (fn(snp, f) * w[0, 0]).sum()))(F)
        ref = jax.grad(lambda f: (fn(jnp, f) * w[0, 0]).sum())(F)
        np.testing.assert_allclose(ours, ref, rtol=2e-5, atol=1e-6, err_msg=str(k))
    # eager: each method at once on concrete arrays (the generic ones compile a scan)
    eager = [Case("eager", lambda m, f, i: [
        m.add.reduce(f, axis=1), m.subtract.accumulate(i, axis=1),
        m.maximum.at(f, (IDX, 0), 9.0, inplace=False), m.logaddexp.reduce(f),
        m.minimum.reduceat(f, SEG, axis=1), m.multiply.outer(i[0], i[1]),
        m.frompyfunc(lambda p, q: p - 2 * q, 2, 1).reduce(f, axis=1)], [F, I],
        numpy_ref=False)]
    compare_cases(eager, eager=True)


def test_attributes_as_jax():
    for name in NAMES:
        ours, ref = getattr(snp, name), getattr(jnp, name)
        assert isinstance(ours, snp.ufunc), name
        got = (ours.__name__, repr(ours), ours.nin, ours.nout, ours.nargs, ours.identity)
        want = (ref.__name__, repr(ref), ref.nin, ref.nout, ref.nargs, ref.identity)
        assert got == want, (got, want)
        with pytest.raises(AttributeError):
            ours.identity = 1       # read-only, as jax's (ufuncs may be static arguments)
    assert snp.add == snp.add and snp.add != snp.subtract and hash(snp.add) == hash(snp.add)
    g = snp.frompyfunc(lambda p, q: p + q, 2, 1, identity=0)
    assert (g.nin, g.nout, g.identity, g.__name__) == (2, 1, 0, "<lambda>")
    assert not isinstance(snp.divide, snp.ufunc)    # a plain function in jax too
    # the plain call is the function it was, with its positional-only signature
    assert snp.add(np.float32(1), 2).dtype == np.float32
    with pytest.raises(shardc.ShardcError, match="cannot be broadcast"):
        snp.add(np.ones(3), np.ones(4))
