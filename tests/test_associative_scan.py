"""shardc.lax.associative_scan against jax.lax.associative_scan (under jax.jit) and NumPy:
odd, even and prime lengths, 0 and 1, axis != 0, reverse, pytrees, sharded inputs,
gradients, eager calls and the errors. Few compiles, each checking many scans."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import assert_close, check_outputs, data

LENGTHS = (0, 1, 2, 3, 5, 7, 8, 13)


def _lax(m):
    return shardc.lax if m is snp else jax.lax


def _linrec(m):
    """(a1, b1), (a2, b2) -> (a1 a2, b1 a2 + b2): composes h -> a h + b (left first)."""
    def f(x, y):
        (a1, b1), (a2, b2) = x, y
        return a1 * a2, b1 * a2 + b2
    return f


def _np_linrec(a, b, axis=0):
    a, b = np.moveaxis(a, axis, 0), np.moveaxis(b, axis, 0)
    ca, cb = np.cumprod(a, 0), b.copy()
    for t in range(1, len(b)):
        cb[t] = a[t] * cb[t - 1] + b[t]
    return np.moveaxis(ca, 0, axis), np.moveaxis(cb, 0, axis)


def _many(m, xs, ms, a, b, bits, mats, w):
    """Many scans in one program: m is shardc.numpy or jax.numpy."""
    scan = _lax(m).associative_scan
    out = {}
    for x in xs:
        n = x.shape[0]
        out[f"sum{n}"] = scan(m.add, x)
        out[f"sum{n}_rev"] = scan(m.add, x, reverse=True)
    out["max_axis1"] = scan(m.maximum, ms, axis=1)
    out["max_axis1_rev"] = scan(m.maximum, ms, axis=1, reverse=True)
    out["min_axis-2"] = scan(m.minimum, ms, axis=-2)
    out["linrec"] = scan(_linrec(m), (a, b))
    out["list_for_tuple"] = scan(lambda p, q: list(_linrec(m)(p, q)), (a, b))
    out["linrec_axis1_rev"] = scan(_linrec(m), (a.T, b.T), axis=1, reverse=True)
    out["dict"] = scan(lambda p, q: {"s": p["s"] + q["s"], "n": None},
                       {"s": ms, "n": None}, axis=1)
    out["or"] = scan(m.logical_or, bits)
    out["matmul"] = scan(m.matmul, mats)
    # weak-typed elems: the scan's result is strongly typed (its pads' zeros are), as jax's
    out["weak"] = scan(m.add, m.broadcast_to(w, (6, 2)))
    out["weak1"] = scan(m.add, m.broadcast_to(w, (1, 2)))
    return out


@pytest.fixture(scope="module")
def inputs():
    xs = [data((n, 3), np.float32, seed=n) for n in LENGTHS]
    ms = data((4, 11), np.int32)
    a, b = data((9, 5), np.float32, "unit", 1), data((9, 5), np.float32, seed=2)
    bits = np.zeros(10, bool)
    bits[[3, 7]] = True
    mats = data((7, 2, 2), np.float32, "unit", 3)
    return xs, ms, a, b, bits, mats, 1.5


def test_values_vs_jax_and_numpy(inputs):
    xs, ms, a, b, bits, mats, _ = inputs
    ours = shardc.jit(lambda *args: _many(snp, *args))(*inputs)
    ref = jax.jit(lambda *args: _many(jnp, *args))(*inputs)
    assert ours.keys() == ref.keys()
    check_outputs(ours, ref)
    # and NumPy
    for x in xs:
        n = x.shape[0]
        assert_close(ours[f"sum{n}"], np.cumsum(x, 0), f"sum{n}")
        assert_close(ours[f"sum{n}_rev"], np.cumsum(x[::-1], 0)[::-1], f"sum{n}_rev")
    assert_close(ours["max_axis1"], np.maximum.accumulate(ms, 1))
    assert_close(ours["max_axis1_rev"], np.maximum.accumulate(ms[:, ::-1], 1)[:, ::-1])
    assert_close(ours["min_axis-2"], np.minimum.accumulate(ms, 0))
    for got, want in zip(ours["linrec"], _np_linrec(a, b)):
        assert_close(got, want, "linrec")
    assert isinstance(ours["list_for_tuple"], tuple)       # elems' structure
    ra, rb = _np_linrec(a.T[:, ::-1], b.T[:, ::-1], axis=1)
    for got, want in zip(ours["linrec_axis1_rev"], (ra[:, ::-1], rb[:, ::-1])):
        assert_close(got, want, "linrec_axis1_rev")
    assert ours["dict"]["n"] is None
    assert_close(ours["dict"]["s"], np.cumsum(ms, 1, dtype=np.int32))
    assert_close(ours["or"], np.logical_or.accumulate(bits))
    want = [mats[0]]
    for mm in mats[1:]:
        want.append(want[-1] @ mm)
    assert_close(ours["matmul"], np.stack(want))


def test_reverse_with_negative_axis():
    """jax.lax.rev rejects the negative axis jax passes it with reverse=True (a TypeError);
    shardc scans as the docs say (against NumPy)."""
    x = data((3, 6), np.float32)
    f = shardc.jit(lambda v: (shardc.lax.associative_scan(snp.add, v, reverse=True, axis=-1),
                              shardc.lax.associative_scan(snp.add, v, reverse=True, axis=-2)))
    r1, r2 = f(x)
    assert_close(r1, np.cumsum(x[:, ::-1], 1)[:, ::-1])
    assert_close(r2, np.cumsum(x[::-1], 0)[::-1])


def test_eager():
    """Outside jit each op runs at once (as jax's eager associative_scan)."""
    x = data((7, 2), np.float32)
    r = shardc.lax.associative_scan(snp.add, jnp.asarray(x), reverse=True)
    assert isinstance(r, jax.Array)
    assert_close(r, np.cumsum(x[::-1], 0)[::-1])
    a, b = _np_linrec(x[:5], x[2:])
    ra, rb = shardc.lax.associative_scan(_linrec(snp), (x[:5], x[2:]))
    assert_close(ra, a)
    assert_close(rb, b)
    one = x[:1]
    assert shardc.lax.associative_scan(snp.add, one) is one     # as jax: returned as is


def _put(mesh, x, spec):
    return jax.device_put(x, NamedSharding(mesh, spec))


def _sharded(m, x, y, a, b):
    scan = _lax(m).associative_scan
    return (scan(m.add, x), scan(m.maximum, x, axis=1, reverse=True),
            scan(m.add, y, axis=-1), scan(_linrec(m), (a, b)))


def test_sharded_vs_jax(mesh2x4):
    """Scanned axes split over devices and not, an uneven split: values and output
    shardings as jax.jit's."""
    x = _put(mesh2x4, data((16, 8), np.float32), P("y", "x"))
    y = _put(mesh2x4, data((6, 13), np.float32, seed=1), P("x"))
    a = _put(mesh2x4, data((12, 4), np.float32, "unit", 2), P(None, "y"))
    b = _put(mesh2x4, data((12, 4), np.float32, seed=3), P("x", "y"))
    args = (x, y, a, b)
    check_outputs(shardc.jit(lambda *v: _sharded(snp, *v))(*args),
                  jax.jit(lambda *v: _sharded(jnp, *v))(*args), mesh2x4)
    # eagerly, op by op, as jax's eager scan (the concatenates gather the scanned axis)
    z = _put(mesh2x4, data((8, 4), np.float32), P("y", "x"))
    check_outputs(shardc.lax.associative_scan(snp.add, z),
                  jax.lax.associative_scan(jnp.add, z), mesh2x4)


def _loss(m, x, a, b):
    scan = _lax(m).associative_scan
    w = m.arange(1.0, 1.0 + x.size).reshape(x.shape)
    s1 = m.sum(scan(m.add, x) * w)
    s2 = m.sum(scan(m.multiply, x, axis=1, reverse=True) * w)
    ha, hb = scan(_linrec(m), (a, b), axis=-1)
    return s1 + s2 + m.sum(hb * hb) + m.sum(m.sin(ha))


def test_grad_vs_jax(mesh2x4):
    x = _put(mesh2x4, data((7, 4), np.float32, "unit"), P(None, "x"))
    a, b = data((3, 9), np.float32, "unit", 1), data((3, 9), np.float32, seed=2)
    ours = shardc.jit(shardc.grad(lambda *v: _loss(snp, *v), argnums=(0, 1, 2)))(x, a, b)
    ref = jax.jit(jax.grad(lambda *v: _loss(jnp, *v), argnums=(0, 1, 2)))(x, a, b)
    check_outputs(ours, ref, mesh2x4)


def _raises(exc, match, fn, *args, **kw):
    with pytest.raises(exc, match=match) as e:
        fn(*args, **kw)
    assert isinstance(e.value, shardc.errors.ShardcError)
    assert os.path.basename(__file__) in str(e.value), str(e.value)   # the user's line


def test_errors():
    scan = shardc.lax.associative_scan
    x, x4 = np.ones(3, np.float32), np.ones(4, np.float32)

    def add(p, q):
        return jax.tree.map(snp.add, p, q)
    # as jax: fn not callable, axis out of bounds, a rank-0 array, mismatched lengths
    _raises(TypeError, "fn argument should be callable", scan, 3, x)
    _raises(ValueError, "axis 1 is out of bounds for array of dimension 1", scan, add, x,
            axis=1)
    _raises(ValueError, "axis -2 is out of bounds", scan, add, x, axis=-2, reverse=True)
    _raises(ValueError, "axis 0 is out of bounds for array of dimension 0", scan, add,
            np.float32(2))
    _raises(ValueError, r"same size along the scan axis 0; got shapes \[\(3,\), \(4,\)\]",
            scan, add, (x, x4))
    _raises(ValueError, r"axis 1; got shapes \[\(2, 3\), \(3,\)\]", scan, add,
            (np.ones((2, 3)), x), axis=-1)
    # where jax fails by accident (AttributeError, IndexError, or a later op's error)
    _raises(TypeError, r"elems\[1\] is a int", scan, add, (x, 3))
    _raises(TypeError, r"elems\[0\] is a float", scan, add, [1.0, 2.0])
    _raises(ValueError, "elems has no arrays", scan, add, ())
    _raises(TypeError, "fn must return a pytree of the structure of elems", scan,
            lambda p, q: p[0], (x, x))
    _raises(TypeError, r"shape and dtype of its operands.*got float32\[1\] for operands of "
            r"float32\[2\]", scan, lambda p, q: p[:1], np.ones(5, np.float32))
    _raises(TypeError, r"got float32\[2\] for operands of int32\[2\]", scan,
            lambda p, q: (p + q).astype(snp.float32), np.arange(4))
    _raises(TypeError, "fn must return arrays, got a int", scan, lambda p, q: 1, x)
    # inside jit the same
    with pytest.raises(ValueError, match="same size along the scan axis"):
        shardc.jit(lambda u, v: scan(add, (u, v)))(x, x4)
