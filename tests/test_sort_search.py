"""searchsorted, digitize, bincount, nonzero/argwhere/flatnonzero, unique, isin and the
set operations (size= under jit, as jax), quantile/percentile/median (and nan*),
histogram: vs jax.jit under layouts, eagerly vs jax, and the errors of a missing size."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import Case, compare_cases, compare_eager, data, sample


def _sorted_and_queries():
    s = np.sort(data((12,), np.float32, "any", 1))
    v = np.concatenate([s[:3], data((9,), np.float32, "any", 2), [np.nan, -np.inf, -0.0, 0.0]])
    return s, v.astype(np.float32).reshape(4, 4)


@pytest.mark.parametrize("method", ["scan", "scan_unrolled", "sort", "compare_all"])
def test_searchsorted(mesh2x4, method):
    s, v = _sorted_and_queries()
    si = np.arange(0, 24, 3).astype(np.int32)
    vi = data((4, 8), np.int32, "any", 3) * 5
    # (output shardings as jax's: "sort" co-sorts the flat queries with a, so its
    # result is replicated; "compare_all" compares with a's dim leading, as jax's: they
    # kept the queries' sharding)
    cases = [Case(f"{side}-{k}", lambda m, a, q, side=side: m.searchsorted(
                  a, q, side=side, method=method), [a, q], [P("x"), spec], numpy_ref=False)
             for side in ("left", "right")
             for k, (a, q, spec) in enumerate([(s, v, P("x", "y")), (si, vi, P(None, "y")),
                                               (s, v[0, 0], None), (s, v, P("x"))])]
    cases.append(Case("sorter", lambda m, a, q: m.searchsorted(
        a, q, sorter=m.argsort(a), method=method), [s[::-1].copy(), v], [None, P("x")],
        numpy_ref=False))
    compare_cases(cases, mesh2x4)
    compare_cases(cases[-3:], mesh2x4, eager=True)


def test_digitize(mesh2x4):
    s, v = _sorted_and_queries()
    cases = [Case("inc", lambda m, x, b: m.digitize(x, b), [v, s], [P("x"), None]),
             Case("dec_right", lambda m, x, b: m.digitize(x, b[::-1], right=True), [v, s],
                  [P("x", "y"), P("x")]),
             Case("int", lambda m, x, b: m.digitize(x, b),
                  [data((8, 4), np.int32), np.array([-3, 0, 2], np.int32)], [P("x"), None])]
    compare_cases(cases, mesh2x4)


SIZED = {
    "bincount": lambda m, x, y: m.bincount(m.ravel(x), length=7),
    "bincount_w": lambda m, x, y: m.bincount(x[0], weights=y[0], minlength=3, length=9),
    "nonzero": lambda m, x, y: m.nonzero(x > 2, size=12),
    "nonzero_fill": lambda m, x, y: m.nonzero(x, size=40, fill_value=-1),
    "flatnonzero": lambda m, x, y: m.flatnonzero(x - 1, size=5, fill_value=99),
    "argwhere": lambda m, x, y: m.argwhere(x > 3, size=6),
    "unique": lambda m, x, y: m.unique(x, size=9),
    "unique_fill": lambda m, x, y: m.unique(y, size=12, fill_value=-1.0),
    "unique_all": lambda m, x, y: m.unique(x, True, True, True, size=4),
    "unique_nan": lambda m, x, y: tuple(m.unique_all(y, size=6)),
    "isin": lambda m, x, y: m.isin(x, m.array([1, 3, 4])),
    "isin_inv": lambda m, x, y: m.isin(y, y[0], invert=True),
    "union1d": lambda m, x, y: m.union1d(x[0], x[1], size=10),
    "intersect1d": lambda m, x, y: m.intersect1d(x[0], x[1], size=4),
    "intersect1d_idx": lambda m, x, y: m.intersect1d(x[0], x[2], return_indices=True,
                                                     size=5, fill_value=0),
    "setdiff1d": lambda m, x, y: m.setdiff1d(x[0], x[1], size=5),
    "setdiff1d_fill": lambda m, x, y: m.setdiff1d(x, x[1], size=6, fill_value=-9),
    "setxor1d": lambda m, x, y: m.setxor1d(x[0], x[1], size=6),
    "setxor1d_u": lambda m, x, y: m.setxor1d(m.arange(5), m.array([3, 7]),
                                             assume_unique=True, size=4),
}


# one sharded layout in `make test`, the other and the replicated one too in `make
# test-slow`
LAYOUTS = [pytest.param([P("x"), P("x", "y")], id="x"),
           pytest.param([P(None, "y"), P("y")], id="y", marks=pytest.mark.slow),
           pytest.param([None, None], id="replicated", marks=pytest.mark.slow)]


@pytest.mark.parametrize("specs", LAYOUTS)
@pytest.mark.parametrize("name", sample(sorted(SIZED), 2))
def test_sized_results(mesh2x4, name, specs):
    x = data((8, 8), np.int32, "exp", 4)
    x = x + data((8, 8), np.int32, "exp", 5)
    y = data((8, 8), np.float32, "small", 6)
    y[1, 2] = y[3, 3] = np.nan
    cases = [Case(name, SIZED[name], [x, y], specs, numpy_ref=False)]
    compare_cases(cases, mesh2x4)
    if specs[0] == P("x"):
        compare_cases(cases, mesh2x4, eager=True)


EAGER = {
    "nonzero": lambda m, x: m.nonzero(x > 2),
    "argwhere": lambda m, x: m.argwhere(x),
    "unique": lambda m, x: m.unique(x, return_index=True, return_inverse=True,
                                    return_counts=True),
    "bincount": lambda m, x: m.bincount(m.ravel(x)),
    "union1d": lambda m, x: m.union1d(x[0], x[1]),
    "intersect1d": lambda m, x: m.intersect1d(x[0], x[1], return_indices=True),
    "setdiff1d": lambda m, x: m.setdiff1d(x[0], x[1]),
    "setxor1d": lambda m, x: m.setxor1d(x[0], x[1]),
}


@pytest.mark.parametrize("name", sorted(EAGER))
def test_value_dependent_sizes_eagerly(name):
    x = data((6, 8), np.int32, "exp", 7)
    compare_eager(EAGER[name], [x], numpy_ref=False)


@pytest.mark.parametrize("name", ["nonzero", "unique", "bincount", "setdiff1d"])
def test_value_dependent_sizes_need_size_under_jit(name):
    x = data((6, 8), np.int32, "exp", 7)
    with pytest.raises(Exception):
        jax.jit(lambda x: EAGER[name](jnp, x))(x)
    with pytest.raises(shardc.ShardcError, match="size") as e:
        shardc.jit(lambda x: EAGER[name](snp, x))(x)
    assert e.value.loc.file.endswith("test_sort_search.py"), str(e.value)


QUANT = {
    "quantile": lambda m, a: m.quantile(a, 0.3, axis=1),
    "quantile_vec": lambda m, a: m.quantile(a, m.array([0.0, 0.25, 0.5, 1.0]), axis=0),
    "quantile_all": lambda m, a: m.quantile(a, 0.9),
    "quantile_keep": lambda m, a: m.quantile(a, m.array([0.1, 0.6]), axis=1, keepdims=True),
    "lower": lambda m, a: m.quantile(a, 0.37, axis=1, method="lower"),
    "higher": lambda m, a: m.quantile(a, 0.37, axis=0, method="higher"),
    "nearest": lambda m, a: m.quantile(a, m.array([0.2, 0.5]), axis=1, method="nearest"),
    "midpoint": lambda m, a: m.quantile(a, 0.41, axis=0, method="midpoint"),
    "median": lambda m, a: m.median(a, axis=1),
    "median_all": lambda m, a: m.median(a),
    "nanmedian": lambda m, a: m.nanmedian(a, axis=0, keepdims=True),
    "nanquantile": lambda m, a: m.nanquantile(a, m.array([0.1, 0.9]), axis=1),
    "percentile": lambda m, a: m.percentile(a, 25.0, axis=1),
    "nanpercentile": lambda m, a: m.nanpercentile(a, 75.0, axis=0, method="lower"),
}


@pytest.mark.parametrize("name", sorted(QUANT))
def test_quantiles(mesh2x4, name):
    a = data((8, 16), np.float32, "any", 8)
    an = a.copy()
    an[1, ::3] = np.nan
    an[:, 5] = np.nan
    fn = QUANT[name]
    # (numpy's 'nearest' rounds half to even, jax's takes the lower)
    ref = not name.startswith("nan") and name != "nearest"
    cases = [Case(f"{name}-{lid}", fn, [arr], [spec], numpy_ref=ref)
             for lid, spec in (("rep", None), ("d0", P("x")), ("2d", P("x", "y")))
             for arr in ([an] if name.startswith("nan") else [a])]
    cases.append(Case(f"{name}-int", fn, [data((8, 16), np.int32)], [P("x", "y")],
                      numpy_ref=False))
    compare_cases(cases, mesh2x4)


def test_inverted_cdf_with_weights(mesh2x4):
    """method='inverted_cdf' (the one jax's weights= go with): weights of a's shape or of
    the reduced axes', NaN data, negative weights (NaN results), percentile forms, and
    its gradient (to the element chosen)."""
    a = data((8, 16), np.float32, "any", 12)
    w = data((8, 16), np.float32, "pos", 13)
    w16 = data((16,), np.float32, "pos", 14)
    an, wn = a.copy(), w.copy()
    an[1, ::3] = np.nan
    an[3] = np.nan
    wn[5, 2] = -1.0
    q = np.array([0.0, 0.3, 0.5, 1.0], np.float32)
    cases = [
        Case("plain", lambda m, a: m.quantile(a, 0.3, axis=1, method="inverted_cdf"), [a],
             [P("x", "y")]),
        Case("weights", lambda m, a, w, q: m.quantile(a, q, axis=0, method="inverted_cdf",
                                                      weights=w),
             [a, w, q], [P("x"), P("y"), None]),
        Case("axis_weights", lambda m, a, w: m.quantile(a, 0.7, axis=1, method="inverted_cdf",
                                                        weights=w, keepdims=True), [a, w16],
             [P("x", "y"), None]),
        Case("all", lambda m, a, w: m.percentile(a, 35.0, method="inverted_cdf", weights=w),
             [a, w], [P("x"), P("x")]),
        Case("nan", lambda m, a, w, q: (
            m.quantile(a, q, axis=1, method="inverted_cdf", weights=w),
            m.nanquantile(a, q, axis=1, method="inverted_cdf", weights=w),
            m.nanpercentile(a, 60.0, axis=0, method="inverted_cdf")), [an, wn, q],
            [P("x"), P(None, "y"), None], numpy_ref=False),
    ]
    compare_cases(cases, mesh2x4)

    def loss(m, grad):
        return grad(lambda a: m.quantile(a, 0.6, axis=1, method="inverted_cdf",
                                         weights=w).sum())
    np.testing.assert_allclose(shardc.jit(loss(snp, shardc.grad))(a),
                               jax.jit(loss(jnp, jax.grad))(a))
    with pytest.raises(NotImplementedError, match="Only method 'inverted_cdf' supports"):
        shardc.jit(lambda a: snp.quantile(a, 0.5, weights=a))(a)


def test_histogram(mesh2x4):
    a = data((8, 16), np.float32, "any", 9)
    cases = [
        Case("default", lambda m, a: m.histogram(a), [a], [P("x", "y")], numpy_ref=False),
        Case("range", lambda m, a: m.histogram(a, bins=5, range=(-1, 1), density=True), [a],
             [P("x")], numpy_ref=False),
        Case("edges", lambda m, a, b: m.histogram(a, bins=b, weights=a * 2), [a,
             np.array([-2, -1, 0, 0.5, 3.0], np.float32)], [P("x", "y"), None],
             numpy_ref=False),
        Case("bin_edges", lambda m, a: m.histogram_bin_edges(a, 7), [data((8, 16), np.int32)],
             [P("x")], numpy_ref=False),
    ]
    compare_cases(cases, mesh2x4)


def test_histogramdd_and_2d(mesh2x4):
    pts = data((32, 3), np.float32, "any", 10)
    w = data((32,), np.float32, "pos", 11)
    cases = [
        Case("dd", lambda m, s: m.histogramdd(s, bins=4), [pts], [P("x")], numpy_ref=False),
        Case("dd_w", lambda m, s, w: m.histogramdd(s, bins=[3, 4, 2], weights=w,
                                                     density=True,
                                                     range=[(-1, 1), None, (0, 2)]),
             [pts, w], [P("x"), P("x")], numpy_ref=False),
        Case("2d", lambda m, s: m.histogram2d(s[:, 0], s[:, 1], bins=5), [pts], [None],
             numpy_ref=False),
        Case("2d_edges", lambda m, s: m.histogram2d(s[:, 0], s[:, 2], bins=m.array(
            [-2.0, -0.5, 0.0, 1.0, 2.0])), [pts], [P("x")], numpy_ref=False),
    ]
    compare_cases(cases, mesh2x4)
