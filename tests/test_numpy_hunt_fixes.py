"""jax.numpy behaviours a bug hunt found shardc missing: correlate conjugates v (complex
inputs), logaddexp (softplus, mish) keeps low precisions' digits as jax's log1p form
does, and a complex remainder or floor division is jax's TypeError under jit too (XLA:CPU
aborted the process on it)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp

A = np.array([1 + 2j, 3 - 1j, 1j, 2], np.complex64)
V = np.array([1 - 1j, 2 + 3j], np.complex64)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("args", ["complex", "real_a", "long_v"])
def test_correlate_conjugates_v(mode, args):
    a, v = {"complex": (A, V), "real_a": (A.real, V), "long_v": (V, A)}[args]
    want = np.correlate(a, v, mode)
    np.testing.assert_allclose(np.asarray(jnp.correlate(a, v, mode)), want, rtol=1e-6)
    jitted = shardc.jit(lambda a, v: snp.correlate(a, v, mode))
    for got in (snp.correlate(a, v, mode), jitted(a, v)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("name", ["softplus", "mish", "logaddexp"])
def test_logaddexp_precision_as_jax(name, dtype):
    x = jnp.asarray([-3.0, -1.0, 2.0, 0.0, -20.0, 30.0, -np.inf], dtype)
    fns = {"softplus": (jax.nn.softplus, shardc.nn.softplus), "mish": (jax.nn.mish,
           shardc.nn.mish), "logaddexp": (lambda x: jnp.logaddexp(x, x[::-1]),
                                         lambda x: snp.logaddexp(x, x[::-1]))}
    j, s = fns[name]
    want = np.asarray(jax.jit(j)(x)).astype(np.float32)
    for got in (s(x), shardc.jit(s)(x)):
        np.testing.assert_array_equal(np.asarray(got).astype(np.float32), want)


def test_logaddexp_gradient_unchanged():
    x = np.array([-3.0, 1.0, 2.0, 0.5], np.float32)
    y = np.array([0.0, 1.0, -1.0, -np.inf], np.float32)
    got = shardc.grad(lambda a, b: snp.logaddexp(a, b).sum(), (0, 1))(x, y)
    want = jax.grad(lambda a, b: jnp.logaddexp(a, b).sum(), (0, 1))(x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


@pytest.mark.parametrize("op", ["mod", "floordiv", "fmod"])
def test_complex_remainder_and_floor_division_are_errors(op):
    f = {"mod": lambda x: x % 1j, "floordiv": lambda x: x // 1j,
         "fmod": lambda x: snp.fmod(x, 1j)}[op]
    with pytest.raises(TypeError, match="complex"):
        shardc.jit(f)(np.arange(4, dtype=np.float32))


SCALAR_TYPES = ["float32", "int32", "uint8", "float16", "bfloat16", "complex64", "int8",
                "bool_", "complex_", "float64", "int64"]


@pytest.mark.parametrize("name", SCALAR_TYPES)
def test_scalar_types_cast_inside_jit_and_are_dtypes(name):
    """snp.float32(x) casts a traced value as jnp.float32(x) does (NumPy's type needed a
    concrete one), eagerly gives an array, and the name still works as a dtype."""
    x = np.array([1.5, -2.5, 3.7], np.float32)
    s, j = getattr(snp, name), getattr(jnp, name)
    for got, want in ((shardc.jit(lambda v: s(v))(x), jax.jit(lambda v: j(v))(x)),
                      (s(x), j(x))):
        assert isinstance(got, jax.Array)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert np.dtype(s) == np.dtype(j)
    assert snp.zeros(2, s).dtype == jnp.zeros(2, j).dtype
    assert snp.issubdtype(s, snp.number) == jnp.issubdtype(j, jnp.number)


X = np.arange(32, dtype=np.float32).reshape(4, 8)


@pytest.mark.parametrize("idx", [10, -5, (slice(None), 8), (10, 2), (-9, -20)])
def test_static_out_of_bounds_integers_are_clamped_as_jax(idx):
    want = jax.jit(lambda x: x[idx])(X)
    np.testing.assert_array_equal(np.asarray(shardc.jit(lambda x: x[idx])(X)), np.asarray(want))


@pytest.mark.parametrize("index_dtype", ["uint8", "uint32", "int8"])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reductions_with_unsigned_index_dtypes(op, index_dtype):
    x = np.array([[1, 3, 3, 0], [5, 5, 2, 2]], np.float32)
    want = getattr(jax.lax, op)(x, 1, np.dtype(index_dtype))
    for got in (getattr(shardc.lax, op)(x, 1, np.dtype(index_dtype)),
                shardc.jit(lambda x: getattr(shardc.lax, op)(x, 1, np.dtype(index_dtype)))(x)):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("args", [(-1,), (3, -2)])
def test_eye_of_negative_size_is_jaxs_error(args):
    for f in (jnp.eye, snp.eye):
        with pytest.raises(ValueError, match="negative dimensions are not allowed"):
            f(*args)


@pytest.mark.parametrize("name", ["logsumexp", "softmax", "log_softmax"])
def test_reductions_over_an_empty_axis(name):
    x = np.zeros((0, 3), np.float32)
    j = {"logsumexp": lambda x: jax.nn.logsumexp(x, axis=0),
         "softmax": lambda x: jax.nn.softmax(x, axis=0),
         "log_softmax": lambda x: jax.nn.log_softmax(x, axis=0)}[name]
    s = {"logsumexp": lambda x: shardc.nn.logsumexp(x, axis=0),
         "softmax": lambda x: shardc.nn.softmax(x, axis=0),
         "log_softmax": lambda x: shardc.nn.log_softmax(x, axis=0)}[name]
    want = np.asarray(jax.jit(j)(x))
    for got in (s(x), shardc.jit(s)(x)):
        assert np.asarray(got).shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), want)


def test_complex_logaddexp_keeps_its_general_form():
    a = np.array([1 + 2j, -1 + 0.5j, 3 - 1j], np.complex64)
    b = np.array([0.5 - 1j, 2 + 3j, -2 + 0.25j], np.complex64)
    want = np.asarray(jnp.logaddexp(a, b))
    for got in (snp.logaddexp(a, b), shardc.jit(snp.logaddexp)(a, b)):
        np.testing.assert_allclose(np.asarray(got), want, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("expr", ["rint(2)", "rint(True)", "floor(2)", "ceil(True)", "trunc(2)",
                                  "positive(2.5)", "flip(2)", "squeeze(2.5)", "transpose(True)",
                                  "nan_to_num(2)", "clip(2)", "round(2)", "abs(True)"])
def test_eager_scalar_results_are_arrays(expr):
    # ops on a Python scalar that fold away (an identity, a cast of a literal) still
    # give an array outside jit, as jnp's do; snp.rint(2) was an IR literal
    want = eval("jnp." + expr)
    got = eval("snp." + expr)
    assert isinstance(got, jax.Array), type(got)
    assert (got.dtype, got.shape, got.weak_type) == (want.dtype, want.shape, want.weak_type)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(got + 1), np.asarray(want + 1))


def test_python_valued_functions_stay_python():
    assert snp.ndim(2) == 0 and type(snp.ndim(2)) is int
    assert snp.isscalar(2.0) is True and snp.size(np.ones(3)) == 3


@pytest.mark.parametrize("case", ["gather_rows", "gather_cols", "concat_empty", "slice"])
def test_empty_results_are_readable(case):
    # an empty result was left sharded like its operand; XLA then hands every device the
    # whole (empty) array, which no jax.Array of that sharding can hold
    from shardc import NamedSharding, PartitionSpec as P
    mesh = shardc.make_mesh((2, 4), ("x", "y"), axis_types=(shardc.AxisType.Auto,) * 2)
    x = shardc.device_put(np.arange(128, dtype=np.float32).reshape(8, 16),
                          NamedSharding(mesh, P("x", "y")))
    e = shardc.device_put(np.zeros((0, 16), np.float32), NamedSharding(mesh, P(None, "y")))
    fn = {"gather_rows": lambda a, e: a[np.array([], np.int32)],
          "gather_cols": lambda a, e: a[:, np.array([], np.int32)],
          "concat_empty": lambda a, e: snp.concatenate([e, e]),
          "slice": lambda a, e: a[5:2]}[case]
    got = shardc.jit(fn)(x, e)
    want = fn(np.asarray(x), np.asarray(e))
    assert got.shape == want.shape
    assert np.asarray(got).shape == want.shape


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_frexp_exact_on_subnormals(dtype, mode):
    # integer arithmetic on the bits: XLA's CPU flushes subnormals in float ops, which
    # gave (x, 0) eagerly and (0.5, -149) under jit (jax.jit's values too)
    fi = np.finfo(dtype)
    v = np.array([fi.smallest_subnormal, fi.smallest_subnormal * 3, fi.tiny / 3, -fi.tiny / 7,
                  fi.tiny, 1.0, -3.5, 0.0, -0.0, np.inf, -np.inf, np.nan, fi.max], dtype)
    f = snp.frexp if mode == "eager" else shardc.jit(snp.frexp)
    m, e = f(v)
    wm, we = np.frexp(v)
    np.testing.assert_array_equal(np.asarray(m), wm)
    np.testing.assert_array_equal(np.asarray(e), we)
    assert m.dtype == np.dtype(dtype) and e.dtype == np.int32


def test_frexp_gradient_as_jax():
    x = np.array([0.3, 5.0, -2.5, 1e-3], np.float32)
    got = shardc.jit(shardc.grad(lambda x: snp.frexp(x)[0].sum()))(x)
    want = jax.grad(lambda x: jnp.frexp(x)[0].sum())(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("method", ["linear", "inverted_cdf", "nearest", "midpoint"])
@pytest.mark.parametrize("q", [0.5, "vector"])
@pytest.mark.parametrize("shape", [(0, 8), (4, 0, 3)])
def test_quantile_with_empty_result(method, q, shape):
    # reducing the last axis of an array with another axis of size 0: an empty result
    # (the gather of the quantile's elements failed in XLA)
    a = np.zeros(shape, np.float32)
    q = np.array([0.2, 0.7], np.float32) if q == "vector" else q
    got = shardc.jit(lambda a: snp.quantile(a, q, axis=-1, method=method))(a)
    assert got.shape == np.quantile(a, q, axis=-1, method=method).shape
    assert shardc.jit(lambda a: snp.median(a, axis=-1))(a).shape == shape[:-1]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_ldexp_exact_on_subnormals(dtype, mode):
    # subnormal inputs and results on the bits, as NumPy's (XLA's CPU flushes them)
    fi = np.finfo(dtype)
    xs = np.array([1.0, -1.5, fi.tiny, fi.smallest_subnormal, -fi.smallest_subnormal * 5,
                   fi.tiny / 3, 0.7, -0.0, np.inf, np.nan, fi.max], dtype)
    es = np.array([0, 1, -5, -20, -25, -140, -149, -150, 100, 128, -300, -126], np.int32)
    x, e = np.meshgrid(xs, es, indexing="ij")
    f = snp.ldexp if mode == "eager" else shardc.jit(snp.ldexp)
    with np.errstate(over="ignore"):
        want = np.ldexp(x, e)
    got = np.asarray(f(x, e))
    np.testing.assert_array_equal(got, want)
    assert (np.signbit(got) == np.signbit(want)).all()
