"""Cumulative ops along a split axis: each device scans its block, then combines it
with the running total of the blocks before. XLA's partitioner gave two reduce_windows
of one operand split along the window dim a single padded copy, so the second read the
first's init value as padding: cumsum next to cumprod summed wrong, and shardc's
gradients (whose forward pass keeps cumprod next to cumlogsumexp) came out inf, with no
error. jax.jit has the forward bug itself."""
import re
from functools import partial

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.lax as slax

A = np.arange(1, 17, dtype=np.float32).reshape(8, 2) / 8

PAIRS = {
    "cumsum_cumprod": lambda L, m: (L.cumprod(m, axis=0), L.cumsum(m, axis=0)),
    "cummax_cummin": lambda L, m: (L.cummax(m, axis=0), L.cummin(m, axis=0),
                                   L.cumsum(m, axis=0)),
    "lse_prod_reverse": lambda L, m: (L.cumlogsumexp(m, axis=0, reverse=True),
                                      L.cumprod(m, axis=0, reverse=True)),
}


@pytest.mark.parametrize("spec", [P("x", None), P("x", "y"), P(None, "y")])
@pytest.mark.parametrize("name", sorted(PAIRS))
def test_cumulative_pairs_on_a_split_axis(name, spec):
    mesh = shardc.make_mesh((4, 2), ("x", "y"), axis_types=(shardc.AxisType.Auto,) * 2)
    m = jax.device_put(A, NamedSharding(mesh, spec))
    f = PAIRS[name]
    for got, want in zip(shardc.jit(lambda m: f(slax, m))(m), f(jax.lax, A)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)


def test_gradient_of_cumprod_and_cumlogsumexp_on_a_split_axis():
    mesh = shardc.make_mesh((8,), ("x",), axis_types=(shardc.AxisType.Auto,))
    m = jax.device_put(A, NamedSharding(mesh, P("x", None)))

    def g(grad, lax):
        return grad(lambda m: lax.cumprod(m, axis=0).sum() + lax.cumlogsumexp(m, axis=0).sum())
    got = shardc.jit(g(shardc.grad, slax))(m)
    np.testing.assert_allclose(np.asarray(got), np.asarray(g(jax.grad, jax.lax)(A)), rtol=1e-5)
    assert got.sharding.is_equivalent_to(m.sharding, 2)


# ---------------------------------------------------------------- a split axis in blocks

OPS = ("cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp")


def _windows(text):
    """The window_dimensions of each reduce_window in a lowered module."""
    return [[int(w) for w in m.split(", ")]
            for m in re.findall(r"window_dimensions = array<i64: ([\d, ]+)>", text)]


@pytest.mark.parametrize("spec,out_spec", [(P(None, ("x", "y")), None),
                                           (P("y", "x"), P(None, "y"))])
def test_cumulative_ops_on_a_split_axis_scan_in_blocks(spec, out_spec):
    """Each op forward and reverse along dim 1 split over the devices: right values, the
    result sharded as asked, and no reduce_window whose window spans the whole dim. Such
    a window over a split dim became, in XLA's partitioner, a windowed reduce over a
    gathered padded copy, O(n * n / k) per device where the unsplit scan is log-depth:
    cumlogsumexp of 8 x 8192 floats took ~20 s on 8 CPU devices, jax.jit's too."""
    mesh = shardc.make_mesh((4, 2), ("x", "y"), axis_types=(shardc.AxisType.Auto,) * 2)
    rng = np.random.RandomState(0)
    f32 = (rng.randn(4, 64) * 2).astype(np.float32)
    f32[1, 5], f32[2, 40], f32[3, 9] = -np.inf, np.inf, np.nan    # logaddexp's edge cases
    i32 = rng.randint(-3, 4, (4, 64)).astype(np.int32)
    c64 = (rng.randn(4, 64) + 1j * rng.randint(-1, 2, (4, 64))).astype(np.complex64)

    def f(lax, x, i, c):
        out = [getattr(lax, op)(x, axis=1, reverse=r) for op in OPS for r in (False, True)]
        return out + [lax.cumsum(i, 1), lax.cumprod(i, 1, True), lax.cummax(c, 1),
                      lax.cummin(c, 1, True)]
    out_sh = None if out_spec is None else NamedSharding(mesh, out_spec)
    g = shardc.jit(partial(f, slax), out_shardings=out_sh)
    args = [jax.device_put(a, NamedSharding(mesh, spec)) for a in (f32, i32, c64)]
    windows = _windows(g.lower(*args).as_text())
    # all but the complex cummax and cummin (scanned whole: see the test below)
    assert len(windows) == 14 and sum(max(w) == 64 for w in windows) == 2, windows
    for got, want in zip(g(*args), f(jax.lax, f32, i32, c64)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
        assert got.sharding.is_equivalent_to(out_sh or args[0].sharding, 2)


@pytest.mark.parametrize("op,reverse", [("cumprod", False), ("cumprod", True),
                                        ("cummax", True), ("cummin", True),
                                        ("cummax", False), ("cummin", False)])
def test_complex_products_and_extrema_on_a_split_axis_keep_jaxs_order(op, reverse):
    """Complex multiply is not associative on infinities ((1+0j) * (inf+inf j) is nan+nan
    j, while (1+1j) * inf is inf+inf j) and the lexicographic complex max/min is not on
    NaN parts: combining a block with the total before it gave nan where jax.jit gives
    inf+inf j, and nan where jax gives 5. These scan the axis whole, as jax.jit does."""
    mesh = shardc.make_mesh((8,), ("x",), axis_types=(shardc.AxisType.Auto,))
    inf, nan = np.inf, np.nan
    for a in ([1 + 1j, inf, 2 + 1j, -inf * 1j, 3, 1j, -1, 5, 4 + 4j, 4 + 5j, 4 + 3j, 0, 0,
               1, 2, 3],
              [2, 1, 1, 1, 1 + 1j, inf, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
              [1 + 1j, nan, 2 + 1j, nan * 1j, 3, 1j, -1, 5, 4 + 4j, 4 + 5j, 4 + 3j, 0, 0,
               1, 2, 3]):
        c = np.array(a, np.complex64)
        got = shardc.jit(lambda c: getattr(slax, op)(c, axis=0, reverse=reverse))(
            jax.device_put(c, NamedSharding(mesh, P("x"))))
        want = jax.jit(lambda c: getattr(jax.lax, op)(c, axis=0, reverse=reverse))(c)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


# ---------------------------------------------------------------- inside a cond's branches

def _np_cum(ufunc, a, axis=0, reverse=False):
    a = np.flip(a, axis) if reverse else a
    out = ufunc.accumulate(a, axis=axis)
    return np.flip(out, axis) if reverse else out


BRANCHES = {   # (body, NumPy's values of it, operand, mesh shape, spec)
    "cumprod_cumsum": (lambda L, v: L.cumprod(v, axis=0) + L.cumsum(v, axis=0),
                       lambda v: _np_cum(np.multiply, v) + _np_cum(np.add, v),
                       A, (8, 1), P("x", None)),
    "lse_max_sum_reverse": (
        lambda L, v: (L.cumlogsumexp(v, axis=1, reverse=True) + L.cummax(v, axis=1)
                      - L.cumsum(v, axis=1, reverse=True)),
        lambda v: (_np_cum(np.logaddexp, v, 1, True) + _np_cum(np.maximum, v, 1)
                   - _np_cum(np.add, v, 1, True)),
        A.reshape(2, 8), (2, 4), P("x", "y")),
    # complex cumprod scans the axis whole (see above), beside a blocked cumsum
    "complex_cumprod_cumsum": (lambda L, v: L.cumprod(v, axis=0) + L.cumsum(v, axis=0),
                               lambda v: _np_cum(np.multiply, v) + _np_cum(np.add, v),
                               (A + 0.5j * A[::-1]).astype(np.complex64), (8, 1),
                               P("x", None)),
}


@pytest.mark.parametrize("name", sorted(BRANCHES))
def test_cumulative_pairs_inside_a_cond_branch(name):
    """A cond's branches are lowered without per-op shardings (ops/control.py), so the
    scans there went whole to XLA on the split axis: its partitioner padded one copy of
    the operand for both reduce_windows, and cumsum beside cumprod added cumprod's
    padding ones (row i of an 8-row cumsum off by 7 - i, no error). jax.jit gives the
    same wrong values, so NumPy is the reference."""
    body, want, a, shape, spec = BRANCHES[name]
    mesh = shardc.make_mesh(shape, ("x", "y"), axis_types=(shardc.AxisType.Auto,) * 2)
    m = jax.device_put(a, NamedSharding(mesh, spec))
    got = shardc.jit(lambda a: slax.cond(a.real.sum() > 0, lambda v: body(slax, v),
                                         lambda v: v, a))(m)
    np.testing.assert_allclose(np.asarray(got), want(a), rtol=1e-5)
    assert got.sharding.is_equivalent_to(m.sharding, a.ndim)


def test_cumulative_pair_in_a_cond_in_a_loop_and_its_gradient():
    """A cond nested in a fori_loop body, and the gradient, whose backward cond reads
    the forward one's residuals from outside its branches."""
    mesh = shardc.make_mesh((8,), ("x",), axis_types=(shardc.AxisType.Auto,))
    m = jax.device_put(A, NamedSharding(mesh, P("x", None)))

    def f(lax):
        def step(i, v):
            return lax.cond(v[0, 0] > 0, lambda v: lax.cumprod(v, axis=0) / 8
                            + lax.cumsum(v, axis=0), lambda v: v, v)
        return lambda a: lax.fori_loop(0, 2, step, a).sum()
    want = A
    for _ in range(2):
        want = _np_cum(np.multiply, want) / 8 + _np_cum(np.add, want)
    np.testing.assert_allclose(float(shardc.jit(f(slax))(m)), want.sum(), rtol=1e-5)
    got = shardc.jit(shardc.grad(f(slax)))(m)
    np.testing.assert_allclose(np.asarray(got), np.asarray(jax.grad(f(jax.lax))(A)),
                               rtol=1e-5)
