"""shardc.numpy functions built from other ops (linspace tril triu roll tile repeat take
logaddexp isclose allclose linalg.norm) vs jax.jit (values, dtypes, output shardings)
and NumPy, under shardings; their gradients vs jax.grad."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import compare, compare_eager, sample

RNG = np.random.default_rng(7)
A = RNG.standard_normal((8, 16)).astype(np.float32)
I = RNG.integers(-5, 5, (8, 16)).astype(np.int32)
LAYOUTS = [P(), P("x"), P(None, "y"), P("x", "y")]

CASES = {
    "linspace": lambda m, a: a + m.linspace(0.0, 1.0, 16),
    "linspace_open": lambda m, a: a + m.linspace(-2, 3, 16, endpoint=False),
    "linspace_int": lambda m, a: m.linspace(0, 10, 7, dtype=m.int32),
    "linspace_arrays": lambda m, a: m.linspace(a[0], a[1], 5, axis=1),
    "linspace_one": lambda m, a: m.linspace(2.0, 3.0, 1),
    "tril": lambda m, a: m.tril(a),
    "triu_k": lambda m, a: m.triu(a, 2),
    "tril_3d": lambda m, a: m.tril(a.reshape(2, 4, 16), -1),
    "roll": lambda m, a: m.roll(a, 3, axis=1),
    "roll_neg": lambda m, a: m.roll(a, -2, axis=0),
    "roll_flat": lambda m, a: m.roll(a, 5),
    "roll_multi": lambda m, a: m.roll(a, (1, 4), axis=(0, 1)),
    "tile": lambda m, a: m.tile(a, (2, 1)),
    "tile_up": lambda m, a: m.tile(a[0], (3, 2)),
    "repeat": lambda m, a: m.repeat(a, 2, axis=0),
    "repeat_flat": lambda m, a: m.repeat(a[:2], 3),
    "repeat_counts": lambda m, a: m.repeat(a, np.array([1, 0, 2, 1, 1, 3, 0, 1]), axis=0),
    "take": lambda m, a: m.take(a, np.array([3, -1, 0]), axis=1),
    "take_flat": lambda m, a: m.take(a, np.array([[0, 5], [127, 9]])),
    "take_clip": lambda m, a: m.take(a, np.array([-3, 2, 40]), axis=1, mode="clip"),
    "take_wrap": lambda m, a: m.take(a, np.array([-17, 2, 40]), axis=1, mode="wrap"),
    "take_scalar": lambda m, a: m.take(a, 2, axis=0),
    "logaddexp": lambda m, a: m.logaddexp(a, a[::-1] * 3),
    "logaddexp_tie": lambda m, a: m.logaddexp(a, a),
    "isclose": lambda m, a: m.isclose(a, a + 1e-6),
    "isclose_far": lambda m, a: m.isclose(a, a * 1.1, rtol=0.05),
    "allclose": lambda m, a: m.allclose(a, a + 1e-9),
    "norm": lambda m, a: m.linalg.norm(a),
    "norm_rows": lambda m, a: m.linalg.norm(a, axis=1),
    "norm_1": lambda m, a: m.linalg.norm(a, ord=1, axis=0, keepdims=True),
    "norm_inf": lambda m, a: m.linalg.norm(a, ord=np.inf, axis=-1),
    "norm_p3": lambda m, a: m.linalg.norm(a, ord=3, axis=1),
    "norm_0": lambda m, a: m.linalg.norm(a, ord=0, axis=1),
    "norm_fro": lambda m, a: m.linalg.norm(a, ord="fro"),
    "norm_mat1": lambda m, a: m.linalg.norm(a, ord=1),
    "norm_matinf": lambda m, a: m.linalg.norm(a.reshape(2, 4, 16), ord=-np.inf, axis=(2, 1)),
}


@pytest.mark.parametrize("spec", LAYOUTS, ids=str)
@pytest.mark.parametrize("name", sample(sorted(CASES), 2))
def test_composite_vs_jax(mesh2x4, name, spec):
    compare(CASES[name], [A], [spec], mesh2x4)


@pytest.mark.parametrize("name", ["tril", "roll_multi", "repeat_counts", "take_wrap",
                                  "isclose", "norm_rows"])
def test_composite_int_and_eager(mesh2x4, name):
    if not name.startswith(("isclose", "norm")):
        compare(CASES[name], [I], [P("x")], mesh2x4)
    compare_eager(CASES[name], [A], [P(None, "y")], mesh2x4)


def test_take_fill_mode(mesh2x4):
    # out-of-bound indices: NaN for floats, the minimum for ints (NumPy would raise)
    for a in (A, I):
        compare(lambda m, x: m.take(x, np.array([-9, 1, 16, 40]), axis=1), [a], [P("x")],
                mesh2x4, numpy_ref=False)
    compare(lambda m, x, i: m.take(x, i, axis=0), [A, np.array([7, -8, 8, 3], np.int32)],
            [P(None, "y"), P()], mesh2x4, numpy_ref=False)


EDGES = {
    "take_scalar_oob": lambda m, a: m.take(a, 20, axis=1),
    "take_empty": lambda m, a: m.take(a, np.array([], np.int32), axis=0),
    "take_fill_oob": lambda m, a: m.take(a, np.array([0, 17, -20]), axis=1),
    "tril": lambda m, a: m.tril(a),
    "isclose_atol": lambda m, a: m.isclose(a, a + 1, atol=1),
    "roll_np": lambda m, a: m.roll(a, np.array([1, 2]), axis=np.array([0, 1])),
    "tile_np": lambda m, a: m.tile(a, np.array([1, 2])),
    "repeat_len1": lambda m, a: m.repeat(a, np.array([2]), axis=1),
}


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.bool_], ids=str)
@pytest.mark.parametrize("name", sorted(EDGES))
def test_composite_edges(mesh2x4, name, dtype):
    if name == "isclose_atol" and dtype == np.bool_:
        pytest.skip("jax: no bool + 1")
    compare(EDGES[name], [(A * 3).astype(dtype)], [P("x")], mesh2x4, numpy_ref=False)


def test_linspace_step_and_logaddexp_infinities(mesh2x4):
    for num, endpoint in [(1, True), (0, True), (1, False), (5, False)]:
        compare(lambda m: m.linspace(0.0, 10.0, num, endpoint=endpoint, retstep=True), [],
                mesh=mesh2x4, numpy_ref=False)
    x = np.array([np.inf, 1.0, -np.inf, 2.0], np.float32)
    y = np.array([1.0, np.inf, 0.5, -np.inf], np.float32)
    # with an infinite argument the gradient is the limit: 1 for the larger, 0 for the
    # other (jax's custom rule gives exp(x) for a finite x beside +inf)
    gx, gy = shardc.jit(shardc.grad(lambda a, b: snp.sum(snp.logaddexp(a, b)),
                                    argnums=(0, 1)))(x, y)
    np.testing.assert_array_equal(np.asarray(gx), [1, 0, 0, 1])
    np.testing.assert_array_equal(np.asarray(gy), [0, 1, 1, 0])


def test_isclose_infinities_and_nans(mesh2x4):
    a = np.array([np.inf, -np.inf, np.nan, 1.0, np.inf, np.nan], np.float32)
    b = np.array([np.inf, np.inf, np.nan, 1.0 + 1e-7, 1.0, 1.0], np.float32)
    compare(lambda m, x, y: m.isclose(x, y), [a, b], mesh=mesh2x4)
    compare(lambda m, x, y: m.isclose(x, y, equal_nan=True), [a, b], mesh=mesh2x4)
    compare(lambda m, x, y: m.logaddexp(x, y), [a, b], mesh=mesh2x4)


GRADS = {
    "roll": lambda m, a: m.roll(a, 3, axis=1),
    "tile": lambda m, a: m.tile(a, (2, 1)),
    "repeat": lambda m, a: m.repeat(a, np.array([1, 0, 2, 1, 1, 3, 0, 1]), axis=0),
    "take": lambda m, a: m.take(a, np.array([3, -1, 3]), axis=1),
    "tril": lambda m, a: m.tril(a),
    "logaddexp": lambda m, a: m.logaddexp(a, a[::-1] * 3),
    "logaddexp_tie": lambda m, a: m.logaddexp(a, a),
    "norm": lambda m, a: m.linalg.norm(a, axis=1),
    "norm_p3": lambda m, a: m.linalg.norm(a, ord=3, axis=0),
    "linspace": lambda m, a: m.linspace(a[0], a[1], 4),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_composite_grads(mesh2x4, name):
    f = GRADS[name]
    x = jax.device_put(A, jax.sharding.NamedSharding(mesh2x4, P("x", "y")))
    w = RNG.standard_normal(np.shape(f(np, A))).astype(np.float32)
    ours = shardc.jit(shardc.grad(lambda a: snp.sum(f(snp, a) * w)))(x)
    ref = jax.jit(jax.grad(lambda a: jnp.sum(f(jnp, a) * w)))(x)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(ref), rtol=2e-5, atol=2e-5)


def test_composite_errors(mesh2x4):
    f = shardc.jit(lambda a: snp.tril(a[0]))
    with pytest.raises(shardc.ShardcError, match="at least 2-D"):
        f(A)
    with pytest.raises(shardc.ShardcError, match="must be scalars or 1D"):
        shardc.jit(lambda a, s: snp.roll(a, s))(A, np.ones((2, 2), np.int32))
    # a traced float shift is truncated to int32, as jnp.roll does
    np.testing.assert_array_equal(shardc.jit(lambda a, s: snp.roll(a, s, 1))(A, 2.7),
                                  jax.jit(lambda a, s: jnp.roll(a, s, 1))(A, 2.7))
    with pytest.raises(shardc.ShardcError, match="Invalid order"):   # (ord=2 is an SVD now)
        shardc.jit(lambda a: snp.linalg.norm(a, ord=3))(A)
    with pytest.raises(shardc.ShardcError, match="nothing to take"):
        shardc.jit(lambda a: snp.take(a[:, :0], np.array([1]), axis=1))(A)
    assert snp.finfo(snp.bfloat16).eps == jnp.finfo(jnp.bfloat16).eps
    assert snp.iinfo(snp.uint8).max == jnp.iinfo(jnp.uint8).max
    with pytest.raises(shardc.ShardcError, match="repeats for an axis"):
        shardc.jit(lambda a: snp.repeat(a, np.array([1, 2]), axis=0))(A)


def test_roll_traced_shift(mesh2x4):
    """A shift computed in the program: a dynamic slice of the axis doubled (jnp.roll's),
    scalar or one per axis, negative and past the axis length."""
    from helpers import Case, compare_cases
    s = lambda m, a: m.argmax(a[0]) - 7     # noqa: E731
    # (a gradient is sharded like its primal, by shardc's design; jax leaves it open)
    cases = [Case(f"{k}-{spec}", fn, [A], [spec], numpy_ref=k != "grad",
                  check_sharding=k != "grad") for k, fn in {
        "axis1": lambda m, a: m.roll(a, s(m, a), axis=1),
        "flat": lambda m, a: m.roll(a, 3 * s(m, a) - 40),
        "both": lambda m, a: m.roll(a, s(m, a), axis=(0, 1)),
        "per_axis": lambda m, a: m.roll(a, m.stack([s(m, a), 2 - s(m, a)]), axis=(1, 0)),
        "grad": lambda m, a: (shardc.grad if m.nn is shardc.nn else jax.grad)(
            lambda b: (m.roll(b, s(m, a), 1) * m.arange(16.0)).sum())(a),
    }.items() for spec in (P("x", "y"), P(None, "y"))]
    compare_cases(cases, mesh2x4)
