"""sort (multi-operand, stable, jax's order of NaNs and -0.0), top_k, approx_max_k/min_k,
argsort, lexsort, take_along_axis, partition: vs jax.jit on 8 devices under several
layouts (values, dtypes, weak types, output shardings), vs NumPy, gradients vs jax.grad,
their factor rules, and errors at the user's line."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import LAYOUTS_2D, Case, compare_cases, data


def lx(m):
    """The lax module matching a test namespace (shardc's or jax's)."""
    return shardc.lax if m._base is snp else lax


def special(shape, seed=0):
    """floats with NaNs (both signs), infinities, -0.0 and 0.0, and ties."""
    a = data(shape, np.float32, "small", seed)
    flat = a.reshape(-1)
    flat[::7] = np.nan
    flat[3::11] = -np.nan
    flat[1::9], flat[2::13] = -0.0, 0.0
    flat[4::17], flat[5::19] = np.inf, -np.inf
    return a


LAX_SORT = {
    "sort_last": lambda m, a: lx(m).sort(a),
    "sort_dim0": lambda m, a: lx(m).sort(a, dimension=0),
    "sort_unstable": lambda m, a: lx(m).sort(a, dimension=1, is_stable=False),
    "top_k": lambda m, a: lx(m).top_k(a, 3),
    "top_k_axis0": lambda m, a: lx(m).top_k(a, 2, axis=0),
    "top_k_all": lambda m, a: lx(m).top_k(a, a.shape[-1]),
}


@pytest.mark.parametrize("name", sorted(LAX_SORT))
def test_lax_sort_layouts(mesh2x4, name):
    fn = LAX_SORT[name]
    cases = [Case(f"{name}-{lid}", lambda m, a, pre=pre: fn(m, pre(m, a)),
                  [data((8, 16), np.float32)], [spec], numpy_ref=False)
             for lid, spec, pre in LAYOUTS_2D]
    compare_cases(cases, mesh2x4)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint32, np.bool_, np.float16,
                                   "bfloat16"])
def test_sort_dtypes_and_special_values(mesh2x4, dtype):
    a = special((8, 16)) if dtype == np.float32 else data((8, 16), dtype)
    cases = [Case("sort", lambda m, a: lx(m).sort(a), [a], [P("x", "y")], numpy_ref=False),
             Case("argsort", lambda m, a: m.argsort(a, axis=0, stable=True), [a], [P(None, "y")]),
             Case("argsort_desc", lambda m, a: m.argsort(a, descending=True), [a], [P("x")],
                  numpy_ref=False),
             Case("np_sort", lambda m, a: m.sort(a, axis=None), [a], [P("x", "y")])]
    if dtype != np.bool_:
        cases.append(Case("top_k", lambda m, a: lx(m).top_k(a, 4), [a], [P("x", "y")],
                          numpy_ref=False))
    compare_cases(cases, mesh2x4)


def test_sort_special_floats_are_jaxs_total_order():
    a = np.array([[np.nan, 1.0, -0.0, 0.0, -np.inf, -np.nan, np.inf, -1.0]], np.float32)
    ours = shardc.jit(lambda a: shardc.lax.sort_key_val(a, snp.arange(8)[None]))(a)
    ref = jax.jit(lambda a: lax.sort_key_val(a, jnp.arange(8)[None]))(a)
    np.testing.assert_array_equal(ours[1], ref[1])    # -0.0 == 0.0, stable; NaNs last
    np.testing.assert_array_equal(ours[1], [[4, 7, 2, 3, 1, 6, 0, 5]])


def test_multi_operand_sort_and_lexsort(mesh2x4):
    k1 = data((8, 16), np.int32, "small", 1)
    k2 = data((8, 16), np.float32, "small", 2)
    v = data((8, 16), np.float32, "any", 3)
    cases = [
        Case("two_keys", lambda m, a, b, c: lx(m).sort((a, b, c), num_keys=2), [k1, k2, v],
             [P("x"), P("x", "y"), None], numpy_ref=False),
        Case("one_key", lambda m, a, b, c: lx(m).sort((b, a, c), dimension=0, num_keys=1),
             [k1, k2, v], [P(None, "y"), None, P("x")], numpy_ref=False),
        Case("sort_key_val", lambda m, a, b: lx(m).sort_key_val(a, b), [k1, v],
             [P("x", "y"), P("y")], numpy_ref=False),
        Case("lexsort", lambda m, a, b: m.lexsort((a, b)), [k2, k1], [P("x"), P("x")]),
        Case("lexsort0", lambda m, a, b: m.lexsort([a, b], axis=0), [k2, k1],
             [P(None, "y"), None]),
    ]
    compare_cases(cases, mesh2x4)


def test_approx_max_k(mesh2x4):
    a = data((8, 16), np.float32)
    cases = [
        Case("max", lambda m, a: lx(m).approx_max_k(a, 3), [a], [P("x", "y")],
             numpy_ref=False),
        # the reduced dim's sharding passes on to the result (as sort then slice)
        Case("min0", lambda m, a: lx(m).approx_min_k(a, 2, reduction_dimension=0), [a],
             [P("x", "y")], numpy_ref=False),
        Case("min0_y", lambda m, a: lx(m).approx_min_k(a, 2, reduction_dimension=0), [a],
             [P(None, "y")], numpy_ref=False),
        Case("max_rep", lambda m, a: lx(m).approx_max_k(a, 5), [a], [None], numpy_ref=False),
    ]
    compare_cases(cases, mesh2x4)


TAKE = {
    "argsort": lambda m, a, i: m.take_along_axis(a, m.argsort(a, axis=1), axis=1),
    "fill": lambda m, a, i: m.take_along_axis(a, i, axis=1),
    "clip": lambda m, a, i: m.take_along_axis(a, i, axis=1, mode="clip"),
    "bcast": lambda m, a, i: m.take_along_axis(a, i[:1], axis=1),
    "axis0": lambda m, a, i: m.take_along_axis(a, i[:, :8].T[:3], axis=0),
    "none": lambda m, a, i: m.take_along_axis(a, i[0], axis=None, mode="clip"),
    "fill_value": lambda m, a, i: m.take_along_axis(a, i, axis=-1, fill_value=-7.0),
}


@pytest.mark.parametrize("name", sorted(TAKE))
def test_take_along_axis(mesh2x4, name):
    idx = data((8, 5), np.int32, "any", 4) * 4    # out of range both ways too
    fn = TAKE[name]
    cases = [Case(f"{name}-{lid}", lambda m, a, i, pre=pre: fn(m, pre(m, a), i),
                  [data((8, 16), np.float32), idx], [spec, P("x")], numpy_ref=False)
             for lid, spec, pre in LAYOUTS_2D[:5]]
    compare_cases(cases, mesh2x4)


def test_take_along_axis_keeps_batch_sharding():
    """jax's take_along_axis is a gather with batching dims: a dim-0-sharded operand
    and indices give a dim-0-sharded result with no all-gather."""
    mesh = shardc.make_mesh((8,), ("x",), axis_types=(shardc.AxisType.Auto,))
    a = jax.device_put(data((8, 16), np.float32), NamedSharding(mesh, P("x")))
    i = jax.device_put(data((8, 4), np.int32, "gt-1"), NamedSharding(mesh, P("x")))
    f = shardc.jit(lambda a, i: snp.take_along_axis(a, i, axis=1, mode="clip"))
    out = f(a, i)
    assert out.sharding.spec == P("x")
    assert "all-gather" not in f.lower(a, i).compile().as_text()


def test_partition(mesh2x4):
    cases = [Case(f"{n}-{dt.__name__}", fn, [data((8, 16), dt)], [P("x", "y")],
                  numpy_ref=False)
             for dt in (np.float32, np.int32, np.uint32)
             for n, fn in (("partition", lambda m, a: m.partition(a, 5)),
                           ("partition0", lambda m, a: m.partition(a, -2, axis=0)),
                           ("argpartition", lambda m, a: m.argpartition(a, 3)))]
    compare_cases(cases, mesh2x4)


GRADS = {
    "sort": lambda L, n, a: n.sum(n.sin(L.sort(a, dimension=0)) * n.arange(16.0)),
    "sort_multi": lambda L, n, a: n.sum(L.sort((a, a * 2), num_keys=1)[1] ** 2),
    "top_k": lambda L, n, a: n.sum(n.cos(L.top_k(a, 3)[0]) * n.arange(3.0)),
    "approx_min_k": lambda L, n, a: n.sum(
        L.approx_min_k(a, 2, reduction_dimension=0)[0] ** 3),
    "take_along": lambda L, n, a: n.sum(n.take_along_axis(
        a, n.argsort(a, axis=1)[:, :5], axis=1, mode="clip") ** 2 * n.arange(5.0)),
    "take_along_oob": lambda L, n, a: n.sum(n.take_along_axis(
        a, (n.arange(40) % 19 - 9).reshape(8, 5), axis=1) * n.arange(5.0)),
    "argsort_sort": lambda L, n, a: n.sum(n.sort(a, axis=None)[:7] ** 2),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients_match_jax(mesh2x4, name):
    fn = GRADS[name]
    x = data((8, 16), np.float32, "any", 5)
    want = jax.grad(lambda a: fn(lax, jnp, a))(x)
    placed = jax.device_put(x, NamedSharding(mesh2x4, P("x", "y")))
    for arg in (x, placed):
        got = shardc.jit(shardc.grad(lambda a: fn(shardc.lax, snp, a)))(arg)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    got = shardc.grad(lambda a: fn(shardc.lax, snp, a))(x)      # eagerly
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_factor_rules_keep_the_sorted_dim_whole():
    from shardc.ir.program import Aval
    from shardc.ops.sort import sort_p, top_k_p
    a = Aval((8, 16), np.dtype(np.float32))
    i = Aval((8, 16), np.dtype(np.int32))
    r = sort_p.sharding_rule([a, i], [a, i], dimension=1, is_stable=True, num_keys=1)
    assert str(r) == "([i, j], [i, j]) -> ([i, j], [i, j]) {i=8, j=16} need_replication={j}"
    # Shardy adds no sort-dim factor when every other dim has size 1
    one = Aval((1, 16), np.dtype(np.float32))
    r = sort_p.sharding_rule([one], [one], dimension=1, is_stable=True, num_keys=1)
    assert "need_replication" not in str(r)
    v, k = Aval((8, 3), np.dtype(np.float32)), Aval((8, 3), np.dtype(np.int32))
    r = top_k_p.sharding_rule([a], [v, k], k=3)
    assert str(r).startswith("([i, j]) -> ([i, k], [i, l])")


def test_sharded_sort_dim_is_gathered_and_other_dims_stay():
    mesh = shardc.make_mesh((8,), ("x",), axis_types=(shardc.AxisType.Auto,))
    a = jax.device_put(data((8, 16), np.float32), NamedSharding(mesh, P("x")))
    out = shardc.jit(lambda a: shardc.lax.sort(a, dimension=1))(a)
    assert out.sharding.spec == P("x")
    np.testing.assert_array_equal(out, np.sort(np.asarray(a), axis=1))


ERRORS = {
    "num_keys": lambda m, a: lx(m).sort((a, a), num_keys=3),
    "shapes": lambda m, a: lx(m).sort((a, a[:3])),
    "top_k_too_many": lambda m, a: lx(m).top_k(a, 99),
    "top_k_scalar": lambda m, a: lx(m).top_k(a[0, 0], 1),
    "take_float_idx": lambda m, a: m.take_along_axis(a, a, axis=1),
    "take_rank": lambda m, a: m.take_along_axis(a, m.argsort(a)[0], axis=1),
    "partition_kth": lambda m, a: m.partition(a, 99),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_name_the_users_line(name):
    fn = ERRORS[name]
    a = data((4, 6), np.float32)
    with pytest.raises(Exception):
        jax.jit(lambda a: fn(NSJ, a))(a)
    with pytest.raises(shardc.ShardcError) as e:
        shardc.jit(lambda a: fn(NSS, a))(a)
    assert e.value.loc is not None and e.value.loc.file.endswith("test_sort.py"), str(e.value)


class _NS:
    def __init__(self, base):
        self._base = base

    def __getattr__(self, name):
        return getattr(self._base, name)


NSJ, NSS = _NS(jnp), _NS(snp)


def test_array_methods_and_eager(mesh2x4):
    a = data((8, 16), np.float32)
    fn = {
        "methods": lambda m, a: (a.sort(axis=0), a.argsort(), a.cumprod(axis=1),
                                 m.sort(a[0]).searchsorted(a[1]), (a > 0).nonzero(size=9)),
        "lax": lambda m, a: (lx(m).sort(a), lx(m).top_k(a, 2), lx(m).cummax(a, 1),
                             lx(m).dynamic_slice(a, (3, -2), (2, 4))),
    }
    cases = [Case(n, f, [a], [P("x", "y")], numpy_ref=False) for n, f in fn.items()]
    compare_cases(cases, mesh2x4)
    compare_cases(cases, mesh2x4, eager=True)


def test_numpy_functions_on_traced_arrays_dispatch_here():
    """np.sort / np.argsort / np.take_along_axis on a traced array reach shardc.numpy
    through __array_function__."""
    a = data((8, 16), np.float32)
    got = shardc.jit(lambda a: (np.sort(a, axis=0), np.take_along_axis(
        a, np.argsort(a, axis=1), axis=1), np.cumprod(a, axis=1)))(a)
    want = (np.sort(a, axis=0), np.sort(a, axis=1), np.cumprod(a, axis=1))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5)


def test_weak_types_as_jax():
    """A weakly typed operand gives weak results, top_k's int32 indices too (as jax's)."""
    def f(L):
        def g(x):
            w = L.broadcast(2.0, (4, 6)) * x
            return (L.top_k(w, 2), L.sort(w), L.cumprod(w, 1), L.cumlogsumexp(w, 0),
                    L.dynamic_slice(w, (1, x.astype(int)), (2, 2)), L.approx_max_k(w, 2),
                    L.dynamic_update_slice(w, w[:1], (x.astype(int), 0)))
        return g
    ours = shardc.jit(f(shardc.lax))(2.0)
    ref = jax.jit(f(lax))(2.0)
    from helpers import check_outputs
    check_outputs(ours, ref)
