"""The small and complex dtypes (float8_e4m3fn/e5m2 and jax's other float8s, int4/uint4,
complex64) everywhere a user meets them: promotion (as jax's lattice, weak Python complex
scalars included), jit and eager values, the IR printer/parser, astype, iinfo/finfo."""
import itertools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.ir import dtypes
from shardc.ir.parse import parse_program
from shardc.ir.program import print_program
from helpers import Case, compare_cases

SMALL = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
         "float8_e4m3b11fnuz", "float8_e3m4", "float8_e4m3", "int4", "uint4"]
NEW = SMALL + ["complex64"]
LATTICE = ["bool", "int4", "uint4", "int8", "uint8", "int32", "uint32", "float8_e4m3fn",
           "float8_e5m2", "bfloat16", "float16", "float32", "complex64"]
WEAK = [True, 1, 1.0, 1j]


def _typed(name):
    return np.dtype(getattr(jnp, name))


def _outcome(fn, *args):
    try:
        return fn(*args)
    except (TypeError, ValueError) as e:
        return "promotion error" if isinstance(e, ValueError) else "TypeError"


@pytest.mark.parametrize("a,b", list(itertools.combinations_with_replacement(LATTICE, 2)))
def test_promotion_of_dtypes_as_jax(a, b):
    """result_type of two dtypes: jax's lattice (no implicit path for float8/int4 but the
    weak scalars); both raise a TypeError where jax does."""
    want = _outcome(jnp.result_type, _typed(a), _typed(b))
    got = _outcome(snp.result_type, _typed(a), _typed(b))
    assert str(got) == str(want), (a, b, got, want)


@pytest.mark.parametrize("a", LATTICE)
def test_promotion_with_weak_scalars_as_jax(a):
    """A Python scalar (bool, int, float, complex) with an array of each dtype: the
    result's dtype and weak type as under jax.jit."""
    for s in WEAK:
        x = jnp.zeros((2,), _typed(a))
        try:
            want = jax.eval_shape(lambda x: x + s, x)
        except (TypeError, ValueError):
            with pytest.raises(shardc.ShardcError):
                shardc.jit(lambda x: x + s).trace(x)
            continue
        ours = shardc.jit(lambda x: x + s)(x)
        assert ours.dtype == want.dtype, (a, s, ours.dtype, want.dtype)
        assert ours.weak_type == want.weak_type, (a, s)


def test_weak_complex_scalar_types():
    """1j is a weak complex: it promotes float32 to complex64 and stays weak with weak
    floats; aval_of accepts it (it used to raise 'does not support complex numbers')."""
    assert snp.result_type(1j) == np.complex64
    assert snp.result_type(np.float32, 1j) == np.complex64
    assert snp.result_type(np.float16, 1j) == np.complex64
    assert snp.result_type(np.int32, 1j) == np.complex64
    out = shardc.jit(lambda x: x * 1j + 1.0)(2.0)
    ref = jax.jit(lambda x: x * 1j + 1.0)(2.0)
    assert out.dtype == ref.dtype and out.weak_type == ref.weak_type and out == ref


def _data(name, shape=(8, 16), seed=0):
    rng = np.random.default_rng(seed)
    dt = _typed(name)
    if name == "complex64":
        return (rng.uniform(-2, 2, shape) + 1j * rng.uniform(-2, 2, shape)).astype(dt)
    if name in ("int4", "uint4"):
        lo = -3 if name == "int4" else 0
        return rng.integers(lo, 4, shape).astype(dt)
    return rng.uniform(-2, 2, shape).astype(dt)


LAYOUTS = [P(), P("x", None), P(None, "y"), P("x", "y")]


@pytest.mark.parametrize("name", NEW)
def test_arithmetic_values_dtypes_and_shardings(mesh2x4, name):
    """+, *, scalar mixes, comparisons, max and conversions under jit in four layouts:
    values, dtypes, weak types and output shardings as jax.jit's (XLA computes the
    small floats by converting, as jax does)."""
    cases = []
    for i, spec in enumerate(LAYOUTS):
        a, b = _data(name, seed=i), _data(name, seed=i + 10)
        cases += [
            Case(f"{name}-arith-{spec}", lambda m, a, b: (a + b, a * b, a - b), [a, b],
                 [spec, spec], numpy_ref=False),
            Case(f"{name}-scalar-{spec}", lambda m, a, b: (a * 2 + 1, -a), [a, b],
                 [spec, P()], numpy_ref=False),
            Case(f"{name}-cmp-{spec}", lambda m, a, b: (a == b, a != b), [a, b],
                 [spec, spec], numpy_ref=False),
            Case(f"{name}-cast-{spec}", lambda m, a, b: (a.astype(m.float32),
                                                         m.astype(a, m.int32)),
                 [a, b], [spec, spec], numpy_ref=False),
        ]
        if name != "complex64":
            cases.append(Case(f"{name}-max-{spec}", lambda m, a, b: (m.maximum(a, b), a < b),
                              [a, b], [spec, spec], numpy_ref=False))
    compare_cases(cases, mesh2x4)


@pytest.mark.parametrize("name", NEW)
def test_eager_ops(mesh2x4, name):
    a, b = _data(name), _data(name, seed=1)
    cases = [Case(f"{name}-eager", lambda m, a, b: (a + b, a * b, a == b), [a, b],
                  [P("x", "y"), P("x", "y")], numpy_ref=False)]
    compare_cases(cases, mesh2x4, eager=True)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "complex64"])
def test_reductions_and_matmul(mesh2x4, name):
    a, b = _data(name), _data(name, (16, 8), seed=3)
    cases = [Case(f"{name}-red-{spec}", lambda m, a, b: (m.sum(a, axis=0), a @ b), [a, b],
                  [spec, P()], numpy_ref=False) for spec in LAYOUTS]
    compare_cases(cases, mesh2x4)


def test_convert_element_type_between_new_dtypes(mesh2x4):
    """astype to and from every new dtype; complex -> real keeps the real part, as jax;
    complex -> bool is x != 0."""
    x = np.random.default_rng(0).uniform(-3, 3, (8, 16)).astype(np.float32)
    z = _data("complex64")
    cases = [Case(f"to-{n}", lambda m, a, n=n: a.astype(getattr(m, n)).astype(m.float32),
                  [x], [P("x", "y")], numpy_ref=False) for n in NEW if n != "complex64"]
    cases += [Case("c2f", lambda m, z: (z.astype(m.float32), z.astype(m.bool_),
                                        z.astype(m.int32), z.astype(m.float8_e4m3fn)),
                   [z], [P("x", None)], numpy_ref=False),
              Case("f2c", lambda m, a: (a.astype(m.complex64), m.asarray(a, m.csingle)),
                   [x], [P(None, "y")], numpy_ref=False)]
    compare_cases(cases, mesh2x4)


def test_iinfo_finfo_and_names():
    for n in SMALL + ["complex64", "complex128", "csingle", "cdouble"]:
        assert np.dtype(getattr(snp, n)) == np.dtype(getattr(jnp, n)), n
    assert snp.iinfo(snp.int4).min == -8 and snp.iinfo(snp.uint4).max == 15
    assert snp.iinfo(jnp.zeros(2, jnp.int4)).max == jnp.iinfo(jnp.int4).max
    assert float(snp.finfo(snp.float8_e4m3fn).max) == 448.0
    assert float(snp.finfo(snp.float8_e5m2).eps) == float(jnp.finfo(jnp.float8_e5m2).eps)
    assert snp.finfo(snp.complex64).dtype == np.float32
    assert snp.iscomplexobj(jnp.zeros(2, jnp.complex64)) and snp.isrealobj(np.zeros(2))


@pytest.mark.parametrize("name", NEW)
def test_ir_round_trip(name):
    """The printer writes the new element types (and complex literals); the parser reads
    them back to the same text."""
    x = jnp.asarray(_data(name, (4,)))
    lit = 1 + 2j if name == "complex64" else 1
    text = print_program(shardc.jit(lambda a: a * lit + a).trace(x).program)
    assert dtypes.short_name(np.dtype(_typed(name))) in text
    assert print_program(parse_program(text)) == text


def test_lowered_types_are_stablehlo_spellings():
    assert dtypes.mlir_name(np.dtype(ml_dtypes.float8_e4m3fn)) == "f8E4M3FN"
    assert dtypes.mlir_name(np.dtype(ml_dtypes.float8_e5m2)) == "f8E5M2"
    assert dtypes.mlir_name(np.dtype(ml_dtypes.int4)) == "i4"
    assert dtypes.mlir_name(np.dtype(ml_dtypes.uint4)) == "ui4"
    assert dtypes.mlir_name(np.dtype(np.complex64)) == "complex<f32>"
    assert dtypes.mlir_name(np.dtype(np.complex128)) == "complex<f64>"


def test_constants_of_new_dtypes(mesh2x4):
    """Non-splat and splat constants (dense literals) of each dtype."""
    cases = []
    for name in NEW:
        c = _data(name, (4, 8), seed=5)
        cases.append(Case(f"{name}-const", lambda m, a, c=c: (a + m.asarray(c), a - 1),
                          [_data(name, (4, 8))], [P("x", None)], numpy_ref=False))
    compare_cases(cases, mesh2x4)


def test_implicit_promotion_of_float8_is_an_error():
    x = jnp.ones(4, jnp.float8_e4m3fn)
    with pytest.raises(shardc.ShardcError, match="float8_e4m3fn"):
        shardc.jit(lambda a, b: a + b)(x, jnp.ones(4, jnp.bfloat16))
    with pytest.raises(shardc.ShardcError, match="int4"):
        shardc.jit(lambda a, b: a + b)(jnp.ones(4, jnp.int4), jnp.ones(4, jnp.int8))
