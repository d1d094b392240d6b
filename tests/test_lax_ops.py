"""shardc.lax's functions (shardc/api/lax_ops.py) vs jax.lax under jax.jit: values, dtypes,
weak types and output shardings under three layouts; jax.lax's errors (no promotion);
gradients vs jax.grad."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax as jlax
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.lax as slax
from helpers import Case, compare_cases, data, namespaces

LAYOUTS = [("rep", P()), ("d0", P("x", None)), ("2d", P("x", "y"))]
A = data((8, 16), np.float32) * 2
POS = data((8, 16), np.float32, "pos")
UNIT = data((8, 16), np.float32, "unit")
INTS = data((8, 16), np.int32, "any", seed=3)
BOOLS = data((8, 16), np.bool_)


class LaxNS:
    """`m.lax` for the test bodies: shardc.lax or jax.lax."""


def _cases(table, lid, spec):
    return [Case(f"{n}-{lid}", (lambda m, *xs, fn=fn: fn(_lax(m), *xs)), xs,
                 [spec] * len(xs), numpy_ref=False) for n, (fn, xs) in table.items()]


def _lax(m):
    return slax if m.__dict__.get("nn") is shardc.nn else jlax


ELEMENTWISE = {
    **{n: (lambda L, x, n=n: getattr(L, n)(x), [A]) for n in (
        "neg", "abs", "sign", "floor", "ceil", "exp", "expm1", "sin", "cos", "tan", "tanh",
        "logistic", "atan", "sinh", "cosh", "asinh", "erf", "erfc", "is_finite", "square",
        "reciprocal")},
    **{n: (lambda L, x, n=n: getattr(L, n)(x), [POS]) for n in ("log", "log1p", "sqrt",
                                                                "rsqrt")},
    **{n: (lambda L, x, n=n: getattr(L, n)(x), [UNIT]) for n in ("asin", "acos", "atanh")},
    "acosh": (lambda L, x: L.acosh(x + 1.5), [POS]),
    **{n: (lambda L, x, y, n=n: getattr(L, n)(x, y), [A, A[::-1].copy()]) for n in (
        "add", "sub", "mul", "div", "rem", "max", "min", "atan2", "eq", "ne", "lt", "le",
        "gt", "ge")},
    "pow": (lambda L, x, y: L.pow(x, y), [POS, A]),
    "pow_int": (lambda L, x, y: L.pow(x, y), [POS, INTS]),
    "integer_pow": (lambda L, x: L.integer_pow(x, 3), [A]),
    **{n: (lambda L, x, y, n=n: getattr(L, n)(x, y), [INTS, INTS[::-1] % 5]) for n in (
        "bitwise_and", "bitwise_or", "bitwise_xor", "shift_left", "shift_right_logical",
        "shift_right_arithmetic", "rem", "div")},
    "bitwise_not": (lambda L, x: L.bitwise_not(x), [INTS]),
    "bool_ops": (lambda L, x, y: (L.bitwise_and(x, y), L.bitwise_not(x)), [BOOLS,
                                                                           BOOLS[::-1].copy()]),
    "round": (lambda L, x: (L.round(x * 2), L.round(x * 2, L.RoundingMethod.TO_NEAREST_EVEN)),
              [A]),
    "py_scalar": (lambda L, x: (L.add(x, 2.0), L.mul(3.0, x), L.max(x, 0.0)), [A]),
    "rank0": (lambda L, x: L.add(x, x[0, 0]), [A]),
    "int_scalar": (lambda L, x: L.add(x, 2), [INTS]),
    "scalars_only": (lambda L, x: (L.sin(1.0), L.add(2, 3)), [A]),
    "select_n": (lambda L, x: (L.select_n(x > 0, x, -x), L.select_n(
        (x > 0).astype(np.int32) + (x > 1).astype(np.int32), x, 2 * x, 3 * x)), [A]),
    "clamp": (lambda L, x: (L.clamp(-1.0, x, 1.0), L.clamp(x - 1, x * 2, x + 1)), [A]),
    "convert": (lambda L, x: (L.convert_element_type(x, np.int32),
                              L.convert_element_type(x, jax.numpy.bfloat16)), [A]),
}

SHAPES = {
    "broadcast": (lambda L, x: L.broadcast(x, (2, 3)), [A]),
    "broadcast_in_dim": (lambda L, x: L.broadcast_in_dim(x[0], (4, 16), (1,)), [A]),
    "broadcast_to_rank": (lambda L, x: L.broadcast_to_rank(x, 4), [A]),
    "broadcast_like": (lambda L, x: L.broadcast_like(x[0], x), [A]),
    "reshape": (lambda L, x: (L.reshape(x, (16, 8)), L.reshape(x, (128,), (1, 0))), [A]),
    "expand_dims": (lambda L, x: L.expand_dims(x, (0, 3)), [A]),
    "squeeze": (lambda L, x: L.squeeze(x[:1], (0,)), [A]),
    "collapse": (lambda L, x: (L.collapse(x, 0), L.collapse(x.reshape(2, 4, 16), 1, 3)), [A]),
    "rev": (lambda L, x: L.rev(x, (0, 1)), [A]),
    "slice_in_dim": (lambda L, x: (L.slice_in_dim(x, 2, 6, axis=1),
                                   L.slice_in_dim(x, 0, 8, 2, 0)), [A]),
    "index_in_dim": (lambda L, x: (L.index_in_dim(x, 3, 1), L.index_in_dim(x, -1, 0, False)),
                     [A]),
    "split": (lambda L, x: L.split(x, (4, 8, 4), 1), [A]),
    "tile": (lambda L, x: L.tile(x, (2, 1)), [A]),
    "unstack": (lambda L, x: L.unstack(x[:3], 0), [A]),
    "full": (lambda L, x: (L.full((3, 4), 2.0), L.full((2,), 1, np.int8),
                           L.full_like(x, 3), L.full_like(x, 1.5, np.float16, (2, 2))), [A]),
    "empty": (lambda L, x: L.empty((2, 3), np.float32).shape, [A]),
    "iota": (lambda L, x: (L.iota(np.int32, 5), L.broadcasted_iota(np.float32, (3, 4), 1)),
             [A]),
    "dtype": (lambda L, x: L.full((), 0, L.dtype(x)), [A]),
}

REDUCE = {
    **{n: (lambda L, x, n=n: getattr(L, n)(x, (1,)), [A]) for n in (
        "reduce_sum", "reduce_max", "reduce_min", "reduce_prod")},
    **{n: (lambda L, x, n=n: getattr(L, n)(x > 0, (0, 1)), [A]) for n in (
        "reduce_and", "reduce_or")},
    # (no reduce_and of sharded ints: XLA's CPU all-reduce has no AND on s32, in jax too)
    "reduce_int": (lambda L, x: (L.reduce_max(x, (0,)), L.reduce_min(x, (1,))), [INTS]),
    "argmax": (lambda L, x: (L.argmax(x, 1, np.int32), L.argmin(x, 0, np.int32)), [A]),
    "reduce_add": (lambda L, x: L.reduce(x, 0.0, L.add, (0,)), [A]),
    "reduce_mul": (lambda L, x: L.reduce(x, np.float32(1), L.mul, (1,)), [A]),
    "reduce_max": (lambda L, x: L.reduce(x, -np.inf, L.max, (0, 1)), [A]),
    "reduce_min_int": (lambda L, x: L.reduce(x, np.iinfo(np.int32).max, L.min, (1,)), [INTS]),
    "reduce_or": (lambda L, x: L.reduce(x > 0, False, L.bitwise_or, (1,)), [A]),
    "dot": (lambda L, x: (L.dot(x, x.T), L.dot(x[0], x[0]), L.dot(x, x[0].reshape(16)[:16])),
            [A]),
    "dot_dims": (lambda L, x: L.dot(x, x, dimension_numbers=(((1,), (1,)), ((), ()))), [A]),
    "batch_matmul": (lambda L, x: L.batch_matmul(x.reshape(2, 4, 16),
                                                 x.reshape(2, 16, 4)), [A]),
}


def _gdn(L, *a):
    return L.GatherDimensionNumbers(*a)


GATHER = {
    "gather_rows": (lambda L, x, i: L.gather(
        x, i[:, None], _gdn(L, (1,), (0,), (0,)), (1, 16)), [A, np.array([0, 7, 3, 9, -1],
                                                                         np.int32)]),
    "gather_clip": (lambda L, x, i: L.gather(
        x, i[:, None], _gdn(L, (1,), (0,), (0,)), (1, 16), mode="clip"),
        [A, np.array([0, 7, 3, 9, -1], np.int32)]),
    "gather_windows": (lambda L, x, i: L.gather(
        x, i[:, None], _gdn(L, (1, 2), (), (1,)), (8, 4), mode="fill", fill_value=-1.0),
        [A, np.array([0, 12, 13, 5], np.int32)]),
    "gather_2d": (lambda L, x, i: L.gather(
        x, i, _gdn(L, (), (0, 1), (0, 1)), (1, 1),
        mode=L.GatherScatterMode.PROMISE_IN_BOUNDS if hasattr(L, "GatherScatterMode")
        else "promise_in_bounds"), [A, np.array([[0, 1], [7, 15], [3, 3]], np.int32)]),
    "index_take": (lambda L, x, i: L.index_take(x, (i % 8, i % 16), (0, 1)),
                   [A, np.array([0, 7, 3, 9, 22], np.int32)]),
}


SCATTER = {
    "scatter": (lambda L, x, i: L.scatter(
        x, i[:, None], -x[:5], L.ScatterDimensionNumbers((1,), (0,), (0,))),
        [A, np.array([0, 7, 3, 12, 5], np.int32)]),
    "scatter_int": (lambda L, x, i: L.scatter(
        (x * 1e6).astype(np.int32), i[:, None], (x[:5] * -3e6).astype(np.int32),
        L.ScatterDimensionNumbers((1,), (0,), (0,))), [A, np.array([0, 7, 3, 1, 5], np.int32)]),
    "scatter_bool": (lambda L, x, i: L.scatter(
        x > 0, i[:, None], x[:5] < 0, L.ScatterDimensionNumbers((1,), (0,), (0,))),
        [A, np.array([0, 7, 3, 1, 5], np.int32)]),
    "scatter_sub": (lambda L, x, i: L.scatter_sub(
        x, i[:, None], x[:5] * 2, L.ScatterDimensionNumbers((1,), (0,), (0,))),
        [A, np.array([0, 7, 3, 3, 5], np.int32)]),
    "scatter_add": (lambda L, x, i: L.scatter_add(
        x, i[:, None], x[:5] * 2, L.ScatterDimensionNumbers((1,), (0,), (0,))),
        [A, np.array([0, 7, 3, 3, 5], np.int32)]),
    "scatter_add_oob": (lambda L, x, i: L.scatter_add(
        x, i[:, None], x[:5] * 2, L.ScatterDimensionNumbers((1,), (0,), (0,))),
        [A, np.array([0, -1, 3, 8, 22], np.int32)]),
    "scatter_add_clip": (lambda L, x, i: L.scatter_add(
        x, i[:, None], x[:5] * 2, L.ScatterDimensionNumbers((1,), (0,), (0,)), mode="clip"),
        [A, np.array([0, 7, 3, 3, 9], np.int32)]),
}


@pytest.mark.parametrize("lid,spec", LAYOUTS)
def test_scatter_add(mesh2x4, lid, spec):
    """Against jax.jit on the unsharded operand: jax.jit(lax.scatter_add) of an operand
    sharded along the scattered dim (P('x', None)) adds some updates twice (a jax bug)."""
    for n, (fn, (x, i)) in SCATTER.items():
        xs = jax.device_put(x, NamedSharding(mesh2x4, spec))
        got = shardc.jit(lambda x, i: fn(slax, x, i))(xs, i)
        want = jax.jit(lambda x, i: fn(jlax, x, i))(x, i)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, err_msg=n)
        assert got.dtype == want.dtype


@pytest.mark.parametrize("lid,spec", LAYOUTS)
@pytest.mark.parametrize("table", ["elementwise", "shapes", "reduce", "gather"])
def test_lax(mesh2x4, table, lid, spec):
    t = {"elementwise": ELEMENTWISE, "shapes": SHAPES, "reduce": REDUCE,
         "gather": GATHER}[table]
    cases = _cases(t, lid, spec)
    if table == "gather":       # the indices replicated
        for c in cases:
            c.specs = [spec, P()]
    compare_cases(cases, mesh2x4)


def test_eager(mesh2x4):
    t = {n: ELEMENTWISE[n] for n in ("add", "asinh", "select_n", "clamp", "py_scalar")}
    t.update({n: REDUCE[n] for n in ("reduce_add", "argmax", "dot")})
    compare_cases(_cases(t, "eager", P("x", "y")), mesh2x4, eager=True)


ERRORS = {
    "add_int_float": (lambda L, x: L.add(x, 2), [A]),
    "add_dtypes": (lambda L, x: L.add(x, x.astype(np.float16)), [A]),
    "add_shapes": (lambda L, x: L.add(x, x[0]), [A]),
    "exp_int": (lambda L, x: L.exp(x), [INTS]),
    "asinh_int": (lambda L, x: L.asinh(x), [INTS]),
    "squeeze_non1": (lambda L, x: L.squeeze(x, (0,)), [A]),
    "split_sizes": (lambda L, x: L.split(x, (3, 3), 0), [A]),
    "dot_shapes": (lambda L, x: L.dot(x, x), [A]),
}


def test_errors(mesh2x4):
    compare_cases(_cases(ERRORS, "err", P("x", "y")), mesh2x4)


@pytest.mark.parametrize("lid,spec", LAYOUTS)
def test_reduce_xor(mesh2x4, lid, spec):
    """Against jax on the unsharded input: XLA's CPU all-reduce has no XOR, so jax.jit
    cannot compile a sharded reduce_xor (shardc's is a sum of bits, which it can)."""
    def f(L):
        return lambda x: (L.reduce_xor((x * 1e6).astype(np.int32), (1,)),
                          L.reduce_xor((x * 100).astype(np.uint8), (0,)),
                          L.reduce_xor(x > 0, (0, 1)))
    got = shardc.jit(f(slax))(jax.device_put(A, NamedSharding(mesh2x4, spec)))
    want = jax.jit(f(jlax))(A)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_pshuffle(mesh8):
    from jax.sharding import NamedSharding
    x = jax.device_put(np.arange(16, dtype=np.float32), NamedSharding(mesh8, P("x")))
    perm = [3, 0, 1, 2, 7, 6, 5, 4]

    def f(L):
        return lambda x: L.pshuffle(x, "x", perm)
    got = shardc.jit(shardc.shard_map(f(slax), mesh=mesh8, in_specs=P("x"),
                                      out_specs=P("x")))(x)
    want = jax.jit(jax.shard_map(f(jlax), mesh=mesh8, in_specs=P("x"), out_specs=P("x")))(x)
    np.testing.assert_array_equal(got, want)


def test_integer_reduce_and_or():
    """reduce_and of integers starts from all bits set: shardc's init was 1, so
    reduce_and([5, 7, 4]) gave 0 (jax: 4), silently. Unsharded, as XLA's CPU all-reduce
    has no AND / OR on integers (jax.jit cannot compile them sharded either)."""
    x = np.array([[3, 1, 2], [5, 7, 4], [-1, -3, -5]], np.int32)

    def f(L):
        return lambda x: (L.reduce_and(x, (1,)), L.reduce_or(x, (0,)),
                          L.reduce_and(x.astype(np.uint8), (1,)),
                          L.reduce_and(x.astype(np.int8), (0, 1)),
                          L.reduce(x, np.int32(-1), L.bitwise_and, (1,)))
    got, want = shardc.jit(f(slax))(x), jax.jit(f(jlax))(x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_reduce_with_any_computation(mesh2x4):
    """A reducer that is no monoid shardc has (jax's reduce_p): a variadic max-with-index
    against jax.jit, and a logaddexp, which XLA:CPU cannot run as a reduction (jax.jit
    fails), against NumPy and logsumexp's gradient. jax leaves a reduction whose init is
    not the identity undefined; shardc applies the init once."""
    import jax.numpy as jnp
    from helpers import check_outputs
    xs = np.linspace(-2, 3, 32, dtype=np.float32).reshape(4, 8)
    x = jax.device_put(xs, NamedSharding(mesh2x4, P("x")))

    def f(L):
        def pick(a, b):
            (va, ia), (vb, ib) = a, b
            take = (va > vb) | ((va == vb) & (ia < ib))
            return L.select(take, va, vb), L.select(take, ia, ib)

        def g(x):
            idx = L.broadcasted_iota(np.int32, x.shape, 1)
            return L.reduce((x, idx), (np.float32(-np.inf), np.int32(0)), pick, (1,))
        return g
    check_outputs(shardc.jit(f(slax))(x), jax.jit(f(jlax))(x))
    lse = shardc.jit(lambda x: slax.reduce(x, np.float32(-np.inf), jnp.logaddexp, (0, 1)))(x)
    np.testing.assert_allclose(lse, np.logaddexp.reduce(xs.ravel()), rtol=1e-6)
    g = shardc.jit(shardc.grad(lambda x: slax.reduce(x * x, np.float32(-np.inf),
                                                     jnp.logaddexp, (1,)).sum()))(x)
    ref = jax.grad(lambda x: jax.nn.logsumexp(x * x, axis=1).sum())(xs)
    np.testing.assert_allclose(g, ref, rtol=1e-5, atol=1e-6)
    assert float(slax.reduce(np.ones(4, np.float32), 1.0, slax.add, (0,))) == 5.0


GRADS = {
    "asinh": lambda L, x: L.asinh(x * 3),
    "acosh": lambda L, x: L.acosh(x * x + 1.5),
    "atanh": lambda L, x: L.atanh(x / 3),
    "clamp": lambda L, x: L.clamp(-1.0, x, 1.0),
    "select_n": lambda L, x: L.select_n(x > 0, x * 2, L.sin(x)),
    "reduce": lambda L, x: L.reduce(x * x, 0.0, L.add, (1,)),
    "reduce_max": lambda L, x: L.reduce(x, -np.inf, L.max, (0,)),
    "dot": lambda L, x: L.dot(x, x.T),
    "batch_matmul": lambda L, x: L.batch_matmul(x.reshape(2, 4, 16), x.reshape(2, 16, 4)),
    "gather": lambda L, x: L.gather(x, np.array([[0], [7], [3], [3]], np.int32),
                                    L.GatherDimensionNumbers((1,), (0,), (0,)), (1, 16),
                                    mode="clip"),
    "scatter_add": lambda L, x: L.scatter_add(x, np.array([[0], [3], [3]], np.int32),
                                              x[:3] * x[:3],
                                              L.ScatterDimensionNumbers((1,), (0,), (0,))),
    "slices": lambda L, x: L.collapse(L.slice_in_dim(x, 1, 5, axis=1), 0) * 2,
    "pow": lambda L, x: L.pow(x * x + 1, x),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_grad(mesh2x4, name):
    fn = GRADS[name]
    x = data((8, 16), np.float32, "any", 5)
    xs = jax.device_put(x, NamedSharding(mesh2x4, P("x", "y")))
    ours_m, ref_m, _ = namespaces(mesh2x4)

    def loss(L):
        return lambda a: sum((o * o).sum() for o in jax.tree_util.tree_leaves(fn(L, a)))
    got = shardc.jit(shardc.grad(loss(slax)))(xs)
    want = jax.jit(jax.grad(loss(jlax)))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-4, atol=2e-4)


def test_reduce_takes_jax_lax_monoids():
    """jax.lax's own add/max passed as reduce's computation are the monoids they name."""
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for comp, init in ((jlax.add, 0.0), (jlax.max, -np.inf)):
        got = shardc.jit(lambda v: slax.reduce(v, np.float32(init), comp, (0,)))(x)
        want = jax.jit(lambda v: jlax.reduce(v, np.float32(init), comp, (0,)))(x)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("fn", ["max", "min"])
@pytest.mark.parametrize("pad", ["VALID", ((0, 0), (1, 2), (0, 1))])
def test_window_extreme_grad_with_window_dilation(fn, pad):
    """max/min windows with window dilation (jax has no gradient for it): the gradient
    goes to the element each dilated window picks (it ignored the dilation). Reference:
    jax.grad of the same windows written as strided slices of the padded operand."""
    import itertools
    import jax.numpy as jnp
    x = data((2, 9, 10), np.float32, "any", 6)
    win, strides, dil = (1, 2, 3), (1, 1, 2), (1, 2, 2)
    pads = ((0, 0),) * 3 if pad == "VALID" else pad
    init = -np.inf if fn == "max" else np.inf

    def ref(x):
        xp = jnp.pad(x, pads, constant_values=init)
        outs = [(xp.shape[d] - (win[d] - 1) * dil[d] - 1) // strides[d] + 1 for d in range(3)]
        vals = [xp[tuple(slice(k[d] * dil[d], k[d] * dil[d] + (outs[d] - 1) * strides[d] + 1,
                               strides[d]) for d in range(3))]
                for k in itertools.product(*map(range, win))]
        return (getattr(jnp, fn)(jnp.stack(vals), axis=0) ** 2).sum()
    got = shardc.jit(shardc.grad(lambda x: (slax.reduce_window(
        x, init, getattr(slax, fn), win, strides, pad, window_dilation=dil) ** 2).sum()))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(jax.grad(ref)(x)), rtol=1e-5,
                               atol=1e-5)


def test_clamp_gradient_is_jaxs_at_bounds_and_nan():
    """jax's clamp rule: x's tangent strictly inside (min, max), min's below it, max's
    above; 0 at a tie and at NaN (max-then-min's rule gave 1/2 at a bound)."""
    x = jnp.array([-1., 1., 0., 2., np.nan, -3.], jnp.float32)
    for fn in (lambda m, x: m.clamp(-1., x, 1.), lambda m, x: m.clamp(np.float32(-1), x, 1.)):
        got = shardc.jit(shardc.grad(lambda x: fn(shardc.lax, x).sum()))(x)
        want = jax.grad(lambda x: fn(jax.lax, x).sum())(x)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    lo = jnp.full(6, -1., jnp.float32)
    got = shardc.jit(shardc.grad(lambda lo: shardc.lax.clamp(lo, x, 1.).sum()))(lo)
    want = jax.grad(lambda lo: jax.lax.clamp(lo, x, 1.).sum())(lo)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    jax_grad = jax.grad(lambda x: jax.lax.clamp(-1., x, 1.).sum())   # translated
    np.testing.assert_array_equal(np.asarray(shardc.jit(jax_grad)(x)), np.asarray(jax_grad(x)))


def test_clamp_is_xlas_on_complex_and_nan_bounds():
    """clamp is stablehlo.clamp, as jax's: max-then-min ordered complex numbers
    lexicographically (clamp(0, 1+2j, 1+1j) gave 1+1j; jax 1+2j) and NaN bounds apart."""
    r = np.array([np.nan, 0.5, 2., -1, 1.0, 0.0], np.float32)
    for x, lo, hi in [(r, np.float32(lo), np.float32(hi))
                      for lo, hi in [(0., 1.), (np.nan, 1.), (0., np.nan), (1., 0.)]]:
        got = shardc.jit(lambda a: slax.clamp(lo, a, hi))(x)
        want = jax.jit(lambda a: jlax.clamp(lo, a, hi))(x)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    lo = np.array([0, 1, 2, 0, 1, 5], np.float32)
    hi = np.array([1, 1, 3, 0, 0.5, 6], np.float32)
    f = lambda L: lambda a, l, h: (L.clamp(l, a, h) ** 2).sum()     # noqa: E731
    got = shardc.jit(shardc.grad(f(slax), argnums=(0, 1, 2)))(r, lo, hi)
    want = jax.grad(f(jlax), argnums=(0, 1, 2))(r, lo, hi)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


COMPLEX_CLAMP = """
import jax, numpy as np, shardc
z = np.array([1 + 1j, 1 + 2j, 1.5 + 0j, 0.5 + 9j, -1 - 1j], np.complex64)
f = lambda L: lambda a: L.clamp(np.complex64(0j), a, np.complex64(1 + 1j))
got, want = shardc.jit(f(shardc.lax))(z), jax.jit(f(jax.lax))(z)
np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
assert got[1] == 1 + 2j
print("ok")
"""


def test_clamp_on_complex_is_xlas():
    """Complex clamp under XLA:CPU's default flags (the suite's flags turn off the
    fusion emitters, where XLA has no complex clamp, for jax.jit too)."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root, JAX_PLATFORMS="cpu", XLA_FLAGS="")
    r = subprocess.run([sys.executable, "-c", COMPLEX_CLAMP], capture_output=True,
                       text=True, env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


def test_pow_gradient_at_zero_to_float_zero_is_jaxs():
    """d/dx x**y = y * x**(y-1): NaN at 0**0.0 for a float y, as jax's rule; 0 for an
    integer y (shardc gave 0 for both)."""
    x = np.array([0., 0., 2.], np.float32)
    for y in (np.array([0., 2., 0.], np.float32), np.array([0, 2, 0], np.int32)):
        got = shardc.jit(shardc.grad(lambda u: slax.pow(u, y).sum()))(x)
        want = jax.grad(lambda u: jlax.pow(u, y).sum())(x)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        t = np.ones(3, np.float32)
        got = shardc.jvp(lambda u: slax.pow(u, y), (x,), (t,))[1]
        want = jax.jvp(lambda u: jlax.pow(u, y), (x,), (t,))[1]
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.uint16, np.int8, np.uint64,
                                   np.int64])
def test_mulhi_eagerly_under_vmap_and_sharded(dtype, mesh2x4):
    """The high half of each product against Python's exact products (jax.jit cannot
    lower lax.mulhi on sharded operands: "Unable to convert MHLO to StableHLO", jax
    0.10.2): run op by op, vmapped and sharded; below 64 bits the wide product is in the
    op's lowering only (so it runs in 32-bit mode), 64-bit types in x64 mode."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(5)
    x, y = (rng.integers(info.min, info.max, (8, 16), dtype=dtype, endpoint=True)
            for _ in range(2))
    want = np.array([(int(a) * int(b)) >> info.bits for a, b in zip(x.flat, y.flat)],
                    dtype=object).reshape(x.shape).astype(dtype)
    with jax.enable_x64(info.bits == 64):
        np.testing.assert_array_equal(slax.mulhi(x, y), want)
        np.testing.assert_array_equal(shardc.vmap(slax.mulhi)(x, y), want)
        xs = jax.device_put(x, NamedSharding(mesh2x4, P("x", "y")))
        got = shardc.jit(slax.mulhi)(xs, y)
        np.testing.assert_array_equal(got, want)
        assert got.sharding.spec == P("x", "y")


REDUCE_WINDOW_INIT = {
    # padding and dilation holes take no part in a window (XLA's semantics): the init is
    # folded in once per window; shardc padded with the init and folded it per pad
    "same_add": lambda L, x: L.reduce_window(x, 5.0, L.add, (1, 2), (1, 1), "SAME"),
    "explicit_pads_mul": lambda L, x: L.reduce_window(x, 2.0, L.mul, (2, 3), (1, 2),
                                                      ((1, 1), (2, 0))),
    "base_dilation": lambda L, x: L.reduce_window(x, 5.0, L.add, (1, 2), (1, 1), "VALID",
                                                  base_dilation=(1, 2)),
    "custom_fn": lambda L, x: L.reduce_window(x, 1.0, lambda a, b: a * 0.5 + b, (2, 2),
                                              (1, 1), "SAME"),
    "pair": lambda L, x: L.reduce_window((x, -x), (3.0, 0.0),
                                         lambda a, b: (a[0] + b[0], L.max(a[1], b[1])),
                                         (2, 2), (1, 1), ((0, 1), (1, 1)))[0],
    # windows larger than the padded operand: an empty result, as XLA's
    "too_big_add": lambda L, x: L.reduce_window(x, 0.0, L.add, (5, 1), (1, 1), "VALID"),
    "too_big_max": lambda L, x: L.reduce_window(x, -jnp.inf, L.max, (5, 1), (1, 1), "VALID"),
    "too_big_init": lambda L, x: L.reduce_window(x, 1.0, L.add, (5, 1), (1, 1), "VALID"),
}


@pytest.mark.parametrize("name", sorted(REDUCE_WINDOW_INIT))
def test_reduce_window_init_and_padding_as_xla(name):
    x = np.arange(18, dtype=np.float32).reshape(3, 6) / 4
    f = REDUCE_WINDOW_INIT[name]
    got = shardc.jit(lambda a: f(slax, a))(x)
    want = jax.jit(lambda a: f(jlax, a))(x)
    assert got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
