"""dtype promotion and weak types vs jax: result_type over all pairs (Python scalars
included), the result dtype and weak type of ops on every pair and on weakly typed
arrays (checked by tracing, no compile), a Hypothesis property test, and a compiled
sample for values."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import Case, compare_cases, data, namespaces

# rejection parity calls jax with inputs it deprecates (one_hot of bool) or casts oddly
pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")]

ARRAY_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32,
                np.float16, jnp.bfloat16, np.float32]
SCALARS = [True, 3, 2.5]          # Python scalars: bool, weak int, weak float
KINDS = [np.dtype(d) for d in ARRAY_DTYPES] + SCALARS


def _kind_id(k):
    return k.name if isinstance(k, np.dtype) else f"py{type(k).__name__}"


def _arg(k, shape=(2, 3)):
    """An argument of kind k: an array of that dtype, or the Python scalar itself."""
    if isinstance(k, np.dtype):
        return data(shape, k, "small")
    return k


def types_of(out):
    return [(np.dtype(x.dtype), bool(getattr(x, "weak_type", False)))
            for x in jax.tree_util.tree_leaves(out)]


def jax_types(fn, *args):
    return types_of(jax.eval_shape(fn, *args))


def ours_types(fn, *args):
    """Result (dtype, weak) of shardc.jit(fn), from tracing alone."""
    p = shardc.jit(fn).trace(*args).program
    return [(np.dtype(v.aval.dtype), bool(v.aval.weak)) for v in p.outputs]


def check_types(name, fn_ours, fn_jax, *args):
    try:
        want = jax_types(fn_jax, *args)
    except (TypeError, ValueError):
        with pytest.raises(shardc.ShardcError):
            ours_types(fn_ours, *args)
        return
    got = ours_types(fn_ours, *args)
    kinds = tuple(a.dtype if hasattr(a, "dtype") else _kind_id(a) for a in args)
    assert got == want, f"{name}{kinds}: shardc {got} vs jax {want}"


# ---------------------------------------------------------------- result_type

@pytest.mark.parametrize("a", KINDS, ids=_kind_id)
def test_result_type_pairs(a):
    for b in KINDS:
        want = jnp.result_type(a, b)
        assert snp.result_type(a, b) == want, (a, b)


def test_result_type_many():
    for combo in itertools.combinations(KINDS, 3):
        assert snp.result_type(*combo) == jnp.result_type(*combo), combo


# ---------------------------------------------------------------- ops on pairs

BINARY_OPS = {
    "add": lambda m, x, y: m.add(x, y),
    "subtract": lambda m, x, y: x - y,
    "multiply": lambda m, x, y: m.multiply(x, y),
    "divide": lambda m, x, y: m.divide(x, y),
    "floor_divide": lambda m, x, y: m.floor_divide(x, y),
    "remainder": lambda m, x, y: m.remainder(x, y),
    "power": lambda m, x, y: m.power(x, y),
    "maximum": lambda m, x, y: m.maximum(x, y),
    "arctan2": lambda m, x, y: m.arctan2(x, y),
    "equal": lambda m, x, y: x == y,
    "less": lambda m, x, y: m.less(x, y),
    "logical_and": lambda m, x, y: m.logical_and(x, y),
    "bitwise_or": lambda m, x, y: x | y,
    "where": lambda m, x, y: m.where(True, x, y),
    "concatenate": lambda m, x, y: m.concatenate([m.atleast_1d(x), m.atleast_1d(y)]),
    "matmul": lambda m, x, y: m.matmul(m.ones((3, 2), bool) * x, m.ones((2, 3), bool) * y),
}


@pytest.mark.parametrize("op", sorted(BINARY_OPS))
def test_binary_promotion(op):
    """Result dtype and weak type of op(x, y) over every pair of kinds (no compile)."""
    f = BINARY_OPS[op]
    for a, b in itertools.product(KINDS, KINDS):
        if not isinstance(a, np.dtype) and not isinstance(b, np.dtype) and op in (
                "concatenate",):
            continue
        if op == "matmul" and isinstance(a, np.dtype) != isinstance(b, np.dtype):
            # jax's dot_general refuses a weak int32 operand with an int8 result type
            # ("preferred_element_type must not be narrower"); shardc promotes first
            continue
        check_types(op, lambda x, y: f(snp, x, y), lambda x, y: f(jnp, x, y),
                    _arg(a), _arg(b))


# ---------------------------------------------------------------- weak arrays

def _weak(m, s):
    """A weakly typed array: a Python scalar broadcast (as jnp.broadcast_to keeps it)."""
    return m.broadcast_to(s, (2, 3))


UNARY_OPS = {
    "negative": lambda m, x: -x, "abs": lambda m, x: abs(x), "exp": lambda m, x: m.exp(x),
    "sqrt": lambda m, x: m.sqrt(x), "square": lambda m, x: m.square(x),
    "reciprocal": lambda m, x: m.reciprocal(x), "sign": lambda m, x: m.sign(x),
    "floor": lambda m, x: m.floor(x), "round": lambda m, x: m.round(x),
    "isnan": lambda m, x: m.isnan(x), "isfinite": lambda m, x: m.isfinite(x),
    "isinf": lambda m, x: m.isinf(x), "logical_not": lambda m, x: m.logical_not(x),
    "sum": lambda m, x: m.sum(x), "sum0": lambda m, x: m.sum(x, 0),
    "mean": lambda m, x: m.mean(x, 1), "max": lambda m, x: m.max(x),
    "min": lambda m, x: m.min(x, 0, keepdims=True), "prod": lambda m, x: m.prod(x),
    "argmax": lambda m, x: m.argmax(x), "var": lambda m, x: m.var(x),
    "std": lambda m, x: m.std(x, 0), "any": lambda m, x: m.any(x), "all": lambda m, x: m.all(x),
    "cumsum": lambda m, x: m.cumsum(x), "reshape": lambda m, x: x.reshape(6),
    "T": lambda m, x: x.T, "getitem": lambda m, x: x[1, ::-1], "take": lambda m, x: x[:, [0, 2]],
    "expand": lambda m, x: m.expand_dims(x, 0), "pad": lambda m, x: m.pad(x, 1),
    "astype": lambda m, x: x.astype(m.float16), "clip": lambda m, x: m.clip(x, 0, 1),
    "where": lambda m, x: m.where(x > 1, x, 0), "dot": lambda m, x: m.dot(x, x.T),
    "einsum": lambda m, x: m.einsum("ij,kj->ik", x, x), "zeros_like": lambda m, x: m.zeros_like(x),
    "full_like": lambda m, x: m.full_like(x, 2), "relu": lambda m, x: m.nn.relu(x),
    "gelu": lambda m, x: m.nn.gelu(x), "softmax": lambda m, x: m.nn.softmax(x),
    "log_softmax": lambda m, x: m.nn.log_softmax(x), "logsumexp": lambda m, x: m.nn.logsumexp(x),
    "one_hot": lambda m, x: m.nn.one_hot(x, 4), "silu": lambda m, x: m.nn.silu(x),
    "sigmoid": lambda m, x: m.nn.sigmoid(x),
}


@pytest.mark.parametrize("scalar", SCALARS, ids=_kind_id)
def test_ops_on_weak_arrays(scalar):
    """Which ops keep a weak type (elementwise, shape ops) and which drop it (reductions,
    astype, products): compared with jax for weak bool, int and float arrays."""
    ours_m, ref_m, _ = namespaces()
    dummy = np.zeros(2, np.float32)
    for name, f in sorted(UNARY_OPS.items()):
        if name == "one_hot" and not isinstance(scalar, int) or isinstance(scalar, bool):
            continue     # jax warns (deprecated float input)
        check_types(name, lambda d: f(ours_m, _weak(ours_m, scalar)),
                    lambda d: f(ref_m, _weak(ref_m, scalar)), dummy)


@pytest.mark.parametrize("dtype", ARRAY_DTYPES, ids=lambda d: np.dtype(d).name)
def test_ops_on_each_dtype(dtype):
    """The same ops on strongly typed arrays of every dtype (or the same rejection)."""
    ours_m, ref_m, _ = namespaces()
    a = data((2, 3), dtype, "small")
    for name, f in sorted(UNARY_OPS.items()):
        if name == "one_hot" and np.dtype(dtype) in (np.float16, jnp.bfloat16, np.float32):
            continue
        check_types(name, lambda x: f(ours_m, x), lambda x: f(ref_m, x), a)


# ---------------------------------------------------------------- property test

KIND = st.sampled_from(KINDS)
OPS = st.sampled_from(sorted(BINARY_OPS))


@settings(max_examples=150, deadline=None)
@given(a=KIND, b=KIND, c=KIND, op=OPS, shape_a=st.sampled_from([(), (3,), (2, 3)]),
       weak_a=st.booleans())
def test_promotion_property(a, b, c, op, shape_a, weak_a):
    """For random kinds and shapes, op(op(x, y), z) has jax's dtype and weak type."""
    f = BINARY_OPS[op]
    if op == "matmul":
        shape_a = ()
    x = _arg(a, shape_a) if isinstance(a, np.dtype) else a

    def fn(m):
        def g(x, y, z):
            if weak_a and not isinstance(a, np.dtype):
                x = m.broadcast_to(x, (2, 3))
            return f(m, m.add(f(m, x, y), z) if op not in ("concatenate", "matmul") else
                     f(m, x, y), z)
        return g
    if op in ("concatenate",) and not any(isinstance(k, np.dtype) for k in (a, b)):
        return
    check_types(op, fn(snp), fn(jnp), x, _arg(b, (2, 3) if shape_a == (2, 3) else (3,)),
                _arg(c, (3,)))


# ---------------------------------------------------------------- values

def test_promotion_values(mesh2x4):
    """A compiled sample of mixed-dtype programs: values, dtypes and weak types."""
    pairs = [(np.int32, np.float16), (np.uint8, np.int8), (np.uint32, np.int32),
             (np.bool_, jnp.bfloat16), (np.int16, np.uint16), (np.float16, jnp.bfloat16),
             (np.bool_, np.uint32)]
    cases = []
    for da, db in pairs:
        a, b = data((8, 16), da, "small"), data((8, 16), db, "small", seed=1)
        name = f"{np.dtype(da).name}-{np.dtype(db).name}"
        cases.append(Case(name, lambda m, a, b: (a + b, a * 2, b - 1.5, m.maximum(a, b)),
                          [a, b], [P("x", "y"), P(None, "y")]))
    for s in SCALARS:
        cases.append(Case(f"weak-{_kind_id(s)}",
                          lambda m, a, s=s: (m.broadcast_to(s, (8, 16)) + a,
                                             m.sum(m.broadcast_to(s, (8, 16)), 0) * 2,
                                             a * s),
                          [data((8, 16), np.int8, "small")], [P("x", None)]))
    compare_cases(cases, mesh2x4)


def test_engine_python_bool_argument_is_not_weak():
    f = lambda m: (lambda s: m.broadcast_to(s, (2, 3)))  # noqa: E731
    assert ours_types(f(snp), True) == jax_types(f(jnp), True)


@pytest.mark.parametrize("pad_value", ["strong", "weak"])
def test_pad_weak_type_as_jax(pad_value):
    """lax.pad's result is weak only if the operand and the padding value both are
    (found by the fuzzer: shardc kept the operand's weak type)."""
    import jax
    import jax.numpy as jnp

    def f(m, lax):
        def g(a):
            w = m.where(a > 0, a > 0, 0.5)          # a weak float32
            pv = m.zeros((), w.dtype) if pad_value == "strong" else 0.0
            return lax.pad(w, pv, [(0, 1, 0), (0, 0, 0)]), m.pad(w, 1)
        return g
    x = np.ones((4, 8), np.float32)
    ours = shardc.jit(f(snp, shardc.lax))(x)
    ref = jax.jit(f(jnp, jax.lax))(x)
    assert [o.weak_type for o in ours] == [r.weak_type for r in ref]
