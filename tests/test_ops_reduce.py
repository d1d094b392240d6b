"""Reductions of shardc.numpy vs jax.jit and NumPy: sum mean max min prod argmax argmin
var std any all (axis, keepdims, dtype), cumsum and the array methods, over layouts
and dtypes. Each test compiles its cases as one program (helpers.compare_cases)."""
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

from helpers import LAYOUTS_2D, Case, compare_cases, data

DTYPES = [np.bool_, np.int32, np.uint32, np.float16, "bfloat16", np.float32]
DT_IDS = ["bool", "i32", "u32", "f16", "bf16", "f32"]

REDUCTIONS = ["sum", "mean", "max", "min", "prod", "argmax", "argmin", "var", "std", "any",
              "all"]
# argmax/argmin take one axis (or None)
AXES = [None, 0, 1, -1, (0, 1), (1, 0)]
MULTI_AXIS = {"sum", "mean", "max", "min", "prod", "var", "std", "any", "all"}


def _domain(name):
    return "unit" if name == "prod" else "small" if name in ("any", "all") else "any"


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction(mesh2x4, name):
    fn = lambda m, a, **kw: getattr(m, name)(a, **kw)  # noqa: E731
    make = lambda dt=np.float32: data((8, 16), dt, _domain(name))  # noqa: E731
    cases = []
    # axis x keepdims, on a 2-D mesh layout
    for axis in AXES:
        if not isinstance(axis, tuple) or name in MULTI_AXIS:
            for kd in (False, True):
                cases.append(Case(f"{name}-axis{axis}-kd{kd}",
                                  lambda m, a, axis=axis, kd=kd: fn(m, a, axis=axis, keepdims=kd),
                                  [make()], [P("x", "y")]))
    # every layout, reducing each dim in turn
    for k, (lid, spec, pre) in enumerate(LAYOUTS_2D):
        cases.append(Case(f"{name}-{lid}", lambda m, a, pre=pre, k=k: fn(m, pre(m, a), axis=k % 2),
                          [make()], [spec]))
    # dtypes
    for dt, dt_id in zip(DTYPES, DT_IDS):
        cases.append(Case(f"{name}-{dt_id}", lambda m, a: fn(m, a, axis=1), [make(dt)],
                          [P(("x", "y"), None)]))
        cases.append(Case(f"{name}-{dt_id}-all", lambda m, a: fn(m, a), [make(dt)],
                          [P("y", "x")]))
    # 3-D, two axes sharded, reduce some of them
    a3 = data((4, 8, 16), np.float32, _domain(name))
    for axis in ([0, 2, -2] + ([(0, 2), (1, 2)] if name in MULTI_AXIS else [])):
        cases.append(Case(f"{name}-3d-axis{axis}", lambda m, a, axis=axis: fn(m, a, axis=axis),
                          [a3], [P("x", None, "y")]))
    compare_cases(cases, mesh2x4)


def test_reduction_options(mesh2x4):
    a = data((8, 16), np.float32, "any")
    i = data((8, 16), np.int32, "small")
    h = data((8, 16), np.float16, "any")
    compare_cases([
        Case("sum-dtype-f32", lambda m, a: m.sum(a, axis=0, dtype=m.float32), [i], [P("x", "y")]),
        Case("sum-dtype-i32", lambda m, a: m.sum(a, axis=1, dtype=m.int32), [a], [P("x", "y")]),
        Case("mean-dtype", lambda m, a: m.mean(a, axis=1, dtype=m.float32), [h], [P("x", None)]),
        Case("var-ddof", lambda m, a: m.var(a, axis=0, ddof=1), [a], [P(None, "y")]),
        Case("std-ddof-kd", lambda m, a: m.std(a, axis=1, ddof=1, keepdims=True), [a],
             [P("x", "y")]),
        Case("prod-dtype", lambda m, a: m.prod(a, axis=0, dtype=m.float32), [i], [P("x", None)]),
        Case("argmax-none-kd", lambda m, a: m.argmax(a, keepdims=True), [a], [P("x", "y")]),
        Case("argmin-ties", lambda m, a: m.argmin(m.round(a), axis=0), [a], [P("x", "y")]),
        # XLA's cross-device max (an all-reduce) drops NaNs on CPU, under jax.jit too: no
        # NumPy reference for this one
        Case("max-nan", lambda m, a: (m.max(a, axis=1), m.argmax(a, axis=1)),
             [data((8, 16), np.float32, "special")], [P("x", "y")], numpy_ref=False),
        Case("sum-scalar", lambda m, a: m.sum(a[0, 0]), [a], [P()]),
        Case("mean-of-expr", lambda m, a: m.mean(a * 2 + 1, axis=(0, 1), keepdims=True), [a],
             [P("y", "x")]),
    ], mesh2x4)


METHODS = {
    "sum": lambda m, a: a.sum(), "sum0": lambda m, a: a.sum(axis=0),
    "sum1kd": lambda m, a: a.sum(1, keepdims=True), "mean": lambda m, a: a.mean(axis=-1),
    "max": lambda m, a: a.max(axis=0), "min": lambda m, a: a.min(), "prod": lambda m, a: a.prod(1),
    "argmax": lambda m, a: a.argmax(axis=1), "argmin": lambda m, a: a.argmin(),
    "var": lambda m, a: a.var(0), "std": lambda m, a: a.std(), "any": lambda m, a: (a > 1).any(1),
    "all": lambda m, a: (a > -3).all(),
}


def test_methods(mesh2x4):
    a = data((8, 16), np.float32, "unit")
    compare_cases([Case(n, fn, [a], [P("x", "y")]) for n, fn in METHODS.items()], mesh2x4)


def test_cumsum(mesh2x4):
    fn = lambda m, a, **kw: m.cumsum(a, **kw)  # noqa: E731
    cases = []
    for axis in (None, 0, 1, -1):
        cases.append(Case(f"cumsum-axis{axis}", lambda m, a, axis=axis: fn(m, a, axis=axis),
                          [data((8, 16), np.float32)], [P("x", "y")]))
    for k, (lid, spec, pre) in enumerate(LAYOUTS_2D):
        cases.append(Case(f"cumsum-{lid}", lambda m, a, pre=pre, k=k: fn(m, pre(m, a), axis=k % 2),
                          [data((8, 16), np.float32)], [spec]))
    for dt, dt_id in zip(DTYPES, DT_IDS):
        cases.append(Case(f"cumsum-{dt_id}", lambda m, a: fn(m, a, axis=1),
                          [data((8, 16), dt, "small")], [P("x", "y")]))
    cases.append(Case("cumsum-dtype", lambda m, a: fn(m, a, axis=0, dtype=m.float32),
                      [data((8, 16), np.int32, "small")], [P("x", None)]))
    cases.append(Case("cumsum-method", lambda m, a: a.cumsum(0), [data((8, 16), np.float32)],
                      [P(None, "y")]))
    cases.append(Case("cumsum-3d", lambda m, a: fn(m, a, axis=1),
                      [data((4, 8, 16), np.float32)], [P("x", "y", None)]))
    compare_cases(cases, mesh2x4)


REDUCE_ERRORS = [
    ("sum_axis_oob", lambda m, a: m.sum(a, axis=2)),
    ("mean_axis_oob", lambda m, a: m.mean(a, axis=-3)),
    ("max_repeated_axis", lambda m, a: m.max(a, axis=(0, 0))),
    ("argmax_tuple_axis", lambda m, a: m.argmax(a, axis=(0, 1))),
    ("cumsum_axis_oob", lambda m, a: m.cumsum(a, axis=5)),
    ("max_empty", lambda m, a: m.max(a[:0], axis=0)),
    ("argmin_empty", lambda m, a: m.argmin(a[:, :0], axis=1)),
]


def test_reduction_errors(mesh2x4):
    """What jax rejects, shardc rejects with a ShardcError at the user's line."""
    compare_cases([Case(n, fn, [data((8, 16), np.float32)], [P("x", None)])
                   for n, fn in REDUCE_ERRORS], mesh2x4)


def test_initial_as_jax():
    """`initial` joins in the computation dtype (float32 for float16), as jax's: adding it
    after the cast to float16 gave sum([1000, 89.375], initial=0.3) = 1089, jax 1090. A
    traced initial works; an array initial is jax's error, not a silent broadcast."""
    import jax
    import jax.numpy as jnp
    import shardc
    import shardc.numpy as snp
    h = np.array([1000, 89.375], np.float16)
    for name in ("sum", "prod", "max", "min"):
        for kw in ({"initial": 0.3}, {"initial": 2, "keepdims": True},
                   {"initial": -1.5, "where": h > 100}):
            got, want = getattr(snp, name)(h, **kw), getattr(jnp, name)(h, **kw)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
    x = np.arange(6.0, dtype=np.float32)
    f = shardc.jit(lambda x, i: (snp.sum(x, initial=i), snp.max(x, initial=i)))
    g = jax.jit(lambda x, i: (jnp.sum(x, initial=i), jnp.max(x, initial=i)))
    for a, b in zip(f(x, np.float32(9)), g(x, np.float32(9))):
        np.testing.assert_array_equal(a, b)
    for fn in (snp.sum, snp.max):
        with pytest.raises(shardc.ShardcError, match="must be a scalar"):
            fn(x, initial=np.ones(2), where=x > 1)
