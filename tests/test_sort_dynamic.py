"""dynamic_slice / dynamic_update_slice (index clamping, negative starts, traced starts)
and the cumulative ops (cumsum, cumprod, cummax, cummin, cumlogsumexp and the numpy
names) vs jax.jit under several layouts, and their gradients vs jax.grad."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import LAYOUTS_2D, Case, compare_cases, data, sample


def lx(m):
    return shardc.lax if m._base is snp else lax


DYN = {
    "ds_static": lambda m, a, i: lx(m).dynamic_slice(a, (2, 5), (3, 4)),
    "ds_clamped": lambda m, a, i: lx(m).dynamic_slice(a, (6, 14), (4, 4)),
    "ds_negative": lambda m, a, i: lx(m).dynamic_slice(a, (-3, -20), (2, 8)),
    "ds_traced": lambda m, a, i: lx(m).dynamic_slice(a, (i[0], i[1]), (3, 16)),
    "ds_rows": lambda m, a, i: lx(m).dynamic_slice(a, (i[2], 0), (2, 16)),
    "ds_in_dim": lambda m, a, i: lx(m).dynamic_slice_in_dim(a, i[1], 5, axis=1),
    "index_in_dim": lambda m, a, i: lx(m).dynamic_index_in_dim(a, i[0], 0, keepdims=False),
    "dus_static": lambda m, a, i: lx(m).dynamic_update_slice(a, a[:2, :3] * 2, (1, 4)),
    "dus_traced": lambda m, a, i: lx(m).dynamic_update_slice(a, -a[:3], (i[0], 0)),
    "dus_clamped": lambda m, a, i: lx(m).dynamic_update_slice(a, a[:2, :2] + 1, (9, i[1])),
    "dus_in_dim": lambda m, a, i: lx(m).dynamic_update_slice_in_dim(a, a[:, :3], i[2], 1),
    "dus_index": lambda m, a, i: lx(m).dynamic_update_index_in_dim(a, a[0] * 3, i[0], 0),
}


@pytest.mark.parametrize("name", sorted(DYN))
def test_dynamic_slices(mesh2x4, name):
    fn = DYN[name]
    idx = np.array([5, -3, 7], np.int32)
    cases = [Case(f"{name}-{lid}", lambda m, a, i, pre=pre: fn(m, pre(m, a), i),
                  [data((8, 16), np.float32), idx], [spec, None], numpy_ref=False)
             for lid, spec, pre in LAYOUTS_2D]
    compare_cases(cases, mesh2x4)


def test_dynamic_slice_dtypes_and_index_dtypes(mesh2x4):
    cases = []
    for dt in (np.int32, np.uint32, np.bool_, np.float16, "bfloat16"):
        cases.append(Case(f"ds-{dt}", lambda m, a: lx(m).dynamic_slice(a, (1, 3), (4, 4)),
                          [data((8, 16), dt)], [P("x", "y")], numpy_ref=False))
    for it in (np.int32, np.uint32, np.int16):
        cases.append(Case(f"idx-{it}", lambda m, a, i: lx(m).dynamic_slice(a, (i, i), (2, 2)),
                          [data((8, 16), np.float32), np.array(3, it)], [P("x"), None],
                          numpy_ref=False))
    compare_cases(cases, mesh2x4)


def test_dynamic_slice_in_a_fori_loop(mesh2x4):
    def f(m, a):
        def body(i, acc):
            return acc + lx(m).dynamic_slice_in_dim(a, i * 2, 2, axis=0)
        return lx(m).fori_loop(0, 4, body, m.zeros((2, 16), a.dtype))
    compare_cases([Case("loop", f, [data((8, 16), np.float32)], [P(None, "y")],
                        numpy_ref=False)], mesh2x4)


CUM = {
    "cumsum": lambda m, a: lx(m).cumsum(a, axis=1),
    "cumsum_rev": lambda m, a: lx(m).cumsum(a, axis=0, reverse=True),
    "cumprod": lambda m, a: lx(m).cumprod(a, axis=1),
    "cumprod_rev": lambda m, a: lx(m).cumprod(a, axis=0, reverse=True),
    "cummax": lambda m, a: lx(m).cummax(a, axis=1),
    "cummax_rev": lambda m, a: lx(m).cummax(a, axis=1, reverse=True),
    "cummin": lambda m, a: lx(m).cummin(a, axis=0),
    "cumlogsumexp": lambda m, a: lx(m).cumlogsumexp(a, axis=1),
    "cumlogsumexp_rev": lambda m, a: lx(m).cumlogsumexp(a, axis=0, reverse=True),
}


@pytest.mark.parametrize("name", sorted(CUM))
def test_cumulative_ops(mesh2x4, name):
    fn = CUM[name]
    cases = [Case(f"{name}-{lid}", lambda m, a, pre=pre: fn(m, pre(m, a)),
                  [data((8, 16), np.float32, "unit")], [spec], numpy_ref=False)
             for lid, spec, pre in LAYOUTS_2D]
    if "logsumexp" not in name:
        cases += [Case(f"{name}-{dt}", fn, [data((8, 16), dt, "small")], [P("x", "y")],
                       numpy_ref=False) for dt in (np.int32, np.uint32, np.float16)]
    compare_cases(cases, mesh2x4)


def test_cumlogsumexp_special_values():
    a = np.array([[-np.inf, -np.inf, 1.0, np.inf, 2.0, np.nan, 3.0]], np.float32)
    for rev in (False, True):
        got = shardc.jit(lambda a: shardc.lax.cumlogsumexp(a, 1, rev))(a)
        np.testing.assert_array_equal(got, jax.jit(lambda a: lax.cumlogsumexp(a, 1, rev))(a))


NP_CUM = {
    "cumprod": lambda m, a: m.cumprod(a, axis=1),
    "cumprod_flat": lambda m, a: m.cumprod(a),
    "cumprod_bool": lambda m, a: m.cumprod(a > 0, axis=0),
    "cumprod_dtype": lambda m, a: m.cumprod(a, axis=1, dtype=np.float32),
    "nancumsum": lambda m, a: m.nancumsum(a, axis=1),
    "nancumprod": lambda m, a: m.nancumprod(a),
    "cumulative_sum": lambda m, a: m.cumulative_sum(a, axis=0, include_initial=True),
    "cumulative_prod": lambda m, a: m.cumulative_prod(a[0]),
}


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_numpy_cumulative_names(mesh2x4, dtype):
    a = data((8, 16), dtype, "small")
    if dtype == np.float32:
        a[1, 3] = a[4, 0] = np.nan
    cases = [Case(f"{n}", fn, [a], [P("x", "y")],
                  numpy_ref=not n.startswith("cumulative") and "dtype" not in n)
             for n, fn in NP_CUM.items()]
    compare_cases(cases, mesh2x4)
    compare_cases(cases[:4], mesh2x4, eager=True)


GRADS = {
    "dynamic_slice": lambda L, n, a, i: n.sum(n.sin(L.dynamic_slice(a, (i, 3), (3, 5)))),
    "dynamic_update_slice": lambda L, n, a, i: n.sum(n.sin(
        L.dynamic_update_slice(a, a[:2, :4] ** 2, (i, 14)))),
    "cumsum": lambda L, n, a, i: n.sum(n.sin(L.cumsum(a, 1, reverse=True))),
    "cumprod": lambda L, n, a, i: n.sum(n.sin(L.cumprod(a, 1))),
    "cumprod_rev": lambda L, n, a, i: n.sum(n.sin(L.cumprod(a, 0, reverse=True))),
    "cummax": lambda L, n, a, i: n.sum(n.sin(L.cummax(a, 1)) * n.arange(16.0)),
    "cummin_rev": lambda L, n, a, i: n.sum(n.sin(L.cummin(a, 0, reverse=True))),
    "cumlogsumexp": lambda L, n, a, i: n.sum(n.sin(L.cumlogsumexp(a * 30, 1))),
    "cumlogsumexp_rev": lambda L, n, a, i: n.sum(
        L.cumlogsumexp(a, 0, reverse=True) * n.arange(16.0)),
}


@pytest.mark.parametrize("name", sample(sorted(GRADS), 2))
def test_gradients_match_jax(mesh2x4, name):
    fn = GRADS[name]
    x = data((8, 16), np.float32, "unit", 7)
    if "cumprod" in name:
        x[2, 5] = x[3, 0] = x[3, 9] = x[6, 15] = 0.0    # exact where some factors are zero
    want = jax.grad(lambda a: fn(lax, jnp, a, 5))(x)
    placed = jax.device_put(x, NamedSharding(mesh2x4, P("x", "y")))
    for arg in (x, placed):
        got = shardc.jit(shardc.grad(lambda a, i: fn(shardc.lax, snp, a, i)))(arg, 5)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    got = shardc.grad(lambda a: fn(shardc.lax, snp, a, 5))(x)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)


def test_factor_rules_of_dynamic_slices():
    from shardc.ir.program import Aval
    from shardc.ops.dynamic import dynamic_slice_p, dynamic_update_slice_p
    a = Aval((8, 16), np.dtype(np.float32))
    s = Aval((), np.dtype(np.int32))
    r = dynamic_slice_p.sharding_rule([a, s, s], [Aval((3, 16), a.dtype)],
                                      slice_sizes=(3, 16))
    # a sliced dim is whole in operand and result, and never propagates
    assert str(r) == ("([i, j], [], []) -> ([i, j]) {i=8, j=16} need_replication={i} "
                      "blocked={i}")
    r = dynamic_update_slice_p.sharding_rule([a, Aval((3, 16), a.dtype), s, s], [a])
    # the operand and result keep the updated dim sharded; the update is whole there
    assert str(r) == ("([i, k], [j, k], [], []) -> ([i, k]) {i=8, j=3, k=16} "
                      "need_replication={j}")


ERRORS = {
    "count": lambda m, a: lx(m).dynamic_slice(a, (1,), (2, 2)),
    "too_big": lambda m, a: lx(m).dynamic_slice(a, (0, 0), (9, 2)),
    "float_index": lambda m, a: lx(m).dynamic_slice(a, (a[0, 0], 0), (2, 2)),
    "update_dtype": lambda m, a: lx(m).dynamic_update_slice(a, a.astype(np.int32), (0, 0)),
    "update_big": lambda m, a: lx(m).dynamic_update_slice(a[:2], a, (0, 0)),
    "cum_scalar": lambda m, a: lx(m).cumprod(a[0, 0]),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_name_the_users_line(name):
    fn = ERRORS[name]
    a = data((4, 6), np.float32)

    class NS:
        def __init__(self, base):
            self._base = base

        def __getattr__(self, k):
            return getattr(self._base, k)
    with pytest.raises(Exception):
        jax.jit(lambda a: fn(NS(jnp), a))(a)
    with pytest.raises(shardc.ShardcError) as e:
        shardc.jit(lambda a: fn(NS(snp), a))(a)
    assert e.value.loc is not None and e.value.loc.file.endswith("test_sort_dynamic.py"), \
        str(e.value)


def test_dynamic_slice_out_of_range_start_with_a_sharded_result(mesh2x4):
    """XLA's partitioner does not clamp an out-of-range start when it splits a
    dynamic_slice's result along a sliced dim (jax gives wrong values with such a
    constraint); shardc clamps those starts itself."""
    g = data((8, 16), np.float32)
    gp = jax.device_put(g, NamedSharding(mesh2x4, P("x", "y")))
    f = shardc.jit(lambda g, i, j: shardc.lax.with_sharding_constraint(
        shardc.lax.dynamic_slice(g, (i, j), (2, 4)), NamedSharding(mesh2x4, P("x", "y"))))
    for i, j in [(5, 14), (7, 3), (0, 0), (-1, 20)]:
        np.testing.assert_array_equal(f(gp, i, j), lax.dynamic_slice(g, (i, j), (2, 4)))


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("reverse", [False, True])
def test_cummax_ties_split_as_jax(name, reverse):
    """jax differentiates cummax/cummin as its associative scan of max/min: a tie at a
    combine splits the cotangent in halves, in the scan tree's pattern."""
    x = data((5, 9), np.float32, "small", 11)       # many ties
    w = np.arange(45, dtype=np.float32).reshape(5, 9)

    def f(L, n):
        return lambda a: n.sum(getattr(L, name)(a, 1, reverse=reverse) * w)
    want = jax.grad(f(lax, jnp))(x)
    np.testing.assert_allclose(shardc.jit(shardc.grad(f(shardc.lax, snp)))(x), want,
                               rtol=1e-6)
    np.testing.assert_allclose(shardc.grad(f(shardc.lax, snp))(x), want, rtol=1e-6)
