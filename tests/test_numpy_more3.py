"""Sorting complex arrays, i0, kaiser, bitwise_count, put_along_axis and interp(period=)
against jax.jit (values, dtypes, shardings) and NumPy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import compare

RNG = np.random.default_rng(11)
# small integer parts, so real-part ties are common and the imaginary part decides
C = (RNG.integers(-3, 3, (8, 16)) + 1j * RNG.integers(-3, 3, (8, 16))).astype(np.complex64)
C[0, :3] = [np.nan + 1j, 1 + np.nan * 1j, -0.0 + 0j]


@pytest.mark.parametrize("name", ["sort_last", "sort_first", "argsort", "argsort_desc",
                                  "sort_complex", "sort_complex_ints", "unique_size"])
def test_sorting_complex(mesh2x4, name):
    fn = {
        "sort_last": lambda m, c: m.sort(c),
        "sort_first": lambda m, c: m.sort(c, axis=0),
        "argsort": lambda m, c: m.argsort(c, axis=1),
        "argsort_desc": lambda m, c: m.argsort(c, axis=0, descending=True),
        "sort_complex": lambda m, c: m.sort_complex(c),
        "sort_complex_ints": lambda m, c: m.sort_complex(c[1:].real.astype(np.int32)),
        "unique_size": lambda m, c: m.unique(c[1:], size=20, fill_value=0),
    }[name]
    compare(fn, [C], [P(None, "y")], mesh2x4, numpy_ref=name not in (
        "sort_last", "sort_first", "argsort", "argsort_desc", "unique_size"))


def test_sort_complex_numpy_order():
    """Without NaNs, NumPy's order (real part, then imaginary)."""
    c = C[1:]
    np.testing.assert_array_equal(np.asarray(shardc.jit(snp.sort_complex)(c)),
                                  np.sort_complex(c))
    np.testing.assert_array_equal(np.asarray(snp.sort(c, axis=0)), np.sort(c, axis=0))


X = np.linspace(-6, 6, 48).astype(np.float32).reshape(8, 6)


@pytest.mark.parametrize("name", ["i0", "i0_int", "kaiser", "kaiser_1", "kaiser_0"])
def test_bessel_and_window(mesh2x4, name):
    fn = {"i0": lambda m, x: m.i0(x),
          "i0_int": lambda m, x: m.i0(x.astype(np.int32)),
          "kaiser": lambda m, x: m.kaiser(12, 3.5) * x[0, 0],
          "kaiser_1": lambda m, x: m.kaiser(1, 2.0) + x[0, 0],
          "kaiser_0": lambda m, x: m.kaiser(0, 2.0)}[name]
    compare(fn, [X], [P("x")], mesh2x4)


def test_i0_gradient():
    # jax's rule: 0 at x = 0, where |x| has a kink; elsewhere i0's derivative (i1)
    x = np.array([-3.0, -0.5, 0.0, 0.25, 4.0], np.float32)
    ours = shardc.jit(shardc.vmap(shardc.grad(snp.i0)))(x)
    ref = jax.vmap(jax.grad(jnp.i0))(x)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(ref), rtol=1e-5, atol=1e-6)
    assert float(ours[2]) == 0.0
    with pytest.raises(shardc.ShardcError, match="i0"):
        snp.i0(np.array([1 + 1j], np.complex64))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.uint32, np.int64, bool],
                         ids=lambda d: np.dtype(d).name)
def test_bitwise_count(mesh8, dtype):
    info = np.iinfo(np.int32 if dtype is bool else dtype)
    a = RNG.integers(max(info.min, -2**31), min(info.max, 2**31 - 1), (8, 8), endpoint=True)
    a = (a % 2).astype(bool) if dtype is bool else a.astype(dtype)
    a.flat[:2] = [0, info.max if dtype is not bool else True]
    # (int64 is int32 without x64, as in jax: NumPy's count differs there)
    compare(lambda m, a: m.bitwise_count(a), [a], [P("x")], mesh8,
            numpy_ref=dtype is not np.int64)


A = RNG.standard_normal((8, 16)).astype(np.float32)
IDX = RNG.integers(-8, 8, (3, 16)).astype(np.int32)


@pytest.mark.parametrize("name", ["argmax_put", "rows", "cols_broadcast", "flat", "dups",
                                  "clip", "negative_axis"])
def test_put_along_axis(mesh2x4, name):
    fn = {
        "argmax_put": lambda m, a: m.put_along_axis(
            a, m.argmax(a, axis=1, keepdims=True), 99.0, axis=1, inplace=False),
        "rows": lambda m, a: m.put_along_axis(a, IDX, a[:3] * 2, axis=0, inplace=False),
        "cols_broadcast": lambda m, a: m.put_along_axis(
            a, m.argsort(a, axis=1)[:, :4], -1.0, axis=1, inplace=False),
        "flat": lambda m, a: m.put_along_axis(a, np.array([3, 0, 127, -1]), 7.0, axis=None,
                                              inplace=False),
        # repeated traced indices: one write wins (the last, as jax.jit on CPU)
        "dups": lambda m, a: m.put_along_axis(a, (m.abs(a[:3]) * 2).astype(np.int32) % 3,
                                              a[3:6], axis=0, inplace=False),
        "clip": lambda m, a: m.put_along_axis(a, IDX * 3, 5.0, axis=0, inplace=False,
                                              mode="clip"),
        "negative_axis": lambda m, a: m.put_along_axis(a, IDX.T[:8, :2] % 16, 0.0, axis=-1,
                                                       inplace=False),
    }[name]
    compare(fn, [A], [P("x", "y")], mesh2x4, numpy_ref=False)


def test_put_along_axis_errors():
    a = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match="inplace=False"):
        snp.put_along_axis(a, np.zeros((3, 1), np.int32), 1.0, axis=1)
    with pytest.raises(ValueError, match="same ndim"):
        snp.put_along_axis(a, np.zeros((3,), np.int32), 1.0, axis=1, inplace=False)
    with pytest.raises(ValueError, match="broadcastable"):
        snp.put_along_axis(a, np.zeros((3, 1), np.int32), np.ones(5), axis=1, inplace=False)


@pytest.mark.parametrize("period", [360, 2 * np.pi, -5.0])
def test_interp_period(mesh8, period):
    xp = np.array([190, -190, 350, -350, 10, 0.5], np.float32) % 400 - 200
    fp = np.array([5, 10, 3, 4, -1, 2], np.float32)
    x = np.linspace(-400, 400, 64).astype(np.float32)
    out = compare(lambda m, x: m.interp(x, xp, fp, period=period), [x], [P("x")], mesh8,
                  numpy_ref=False)
    np.testing.assert_allclose(np.asarray(out[0]), np.interp(x, xp, fp, period=period),
                               rtol=1e-4, atol=1e-4)      # (NumPy computes in float64)
    compare(lambda m, x: m.interp(x, xp, fp + 1j * fp, period=period), [x], [P("x")], mesh8,
            numpy_ref=False)
    with pytest.raises(ValueError, match="period must be a scalar"):
        snp.interp(x, xp, fp, period=np.array([1.0, 2.0]))


ROWS = RNG.integers(0, 2, (8, 3)).astype(np.float32)
ROWS[2, 1] = np.nan
ROWS[5] = ROWS[2]                   # a repeated row with a NaN (one row with equal_nan)
CROWS = (RNG.integers(0, 2, (8, 2)) + 1j * RNG.integers(0, 2, (8, 2))).astype(np.complex64)


@pytest.mark.parametrize("name", ["rows_all", "cols_all", "rows_nan_distinct", "last_axis",
                                  "rank3", "complex_rows", "rows_ints"])
def test_unique_along_axis(mesh2x4, name):
    """The unique slices along an axis, under jit with size= (values, first indices,
    inverse, counts as jax's)."""
    fn = {
        "rows_all": lambda m, r, c: m.unique(r, True, True, True, axis=0, size=8,
                                             fill_value=-1),
        "cols_all": lambda m, r, c: m.unique(r, True, True, True, axis=1, size=3),
        "rows_nan_distinct": lambda m, r, c: m.unique(r, axis=0, equal_nan=False, size=8,
                                                      return_counts=True),
        "last_axis": lambda m, r, c: m.unique(r.T, axis=-1, size=6, fill_value=0,
                                              return_inverse=True),
        "rank3": lambda m, r, c: m.unique(r.reshape(4, 2, 3), axis=2, size=3),
        "complex_rows": lambda m, r, c: m.unique(c, axis=0, size=8, return_counts=True),
        "rows_ints": lambda m, r, c: m.unique(m.nan_to_num(r).astype(np.int32), axis=0,
                                              size=8, return_index=True),
    }[name]
    compare(fn, [ROWS, CROWS], [P("x"), None], mesh2x4, numpy_ref=False)


def test_unique_along_axis_concrete_and_empty():
    for a, axis in [(ROWS, 0), (ROWS, 1), (np.zeros((4, 0), np.float32), 0),
                    (np.zeros((0, 3), np.float32), 0)]:
        ours = snp.unique(a, True, True, True, axis=axis)
        ref = jnp.unique(a, True, True, True, axis=axis)
        for o, r in zip(ours, ref):
            np.testing.assert_array_equal(np.asarray(o), np.asarray(r))
            assert np.asarray(o).dtype == np.asarray(r).dtype
    np.testing.assert_array_equal(np.asarray(snp.unique(np.nan_to_num(ROWS), axis=0)),
                                  np.unique(np.nan_to_num(ROWS), axis=0))


V3 = np.array([1, 2, 3], np.int32)
DIRECTIVES = {
    "axis": lambda m, x: m.r_["-1", x, x],
    "ndmin": lambda m, x: m.r_["0,2", [1, 2, 3], x],
    "trans1d_0": lambda m, x: m.r_["0,2,0", [1, 2, 3], x],
    "trans1d_cols": lambda m, x: m.r_["1,2,0", x, x],
    "trans1d_3d": lambda m, x: m.r_["0,3,1", x, x],
    "trans1d_neg": lambda m, x: m.r_["0,3,-2", x],
    "row_matrix": lambda m, x: m.r_["r", 1:4, x],
    "col_matrix": lambda m, x: m.r_["c", x, x],
    "c_axis": lambda m, x: m.c_["0", x, x],
    "extra_ignored": lambda m, x: m.r_["1,2,0,9", x],      # (jax's; NumPy's differs)
}


@pytest.mark.parametrize("name", sorted(DIRECTIVES))
def test_r_c_string_directives(name):
    compare(DIRECTIVES[name], [V3], numpy_ref=name != "extra_ignored")


def test_r_c_directive_errors():
    with pytest.raises(ValueError, match="could not understand directive 'x'"):
        snp.r_["x", V3]
    with pytest.raises(ValueError, match="placed at the beginning"):
        snp.r_[V3, "0"]
