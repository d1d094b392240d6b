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
from helpers import Case, compare_cases, sample

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


@pytest.mark.parametrize("name", sample(NEW, 2))
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
    if name != "complex64":    # (e4m3fn has no inf: max/min start from its finite extremes)
        cases += [Case(f"{name}-max-{spec}", lambda m, a: (m.max(a), m.min(a, axis=1),
                                                           m.argmax(a, axis=0)),
                       [a], [spec], numpy_ref=False) for spec in LAYOUTS]
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


X64_SCRIPT = """
import jax, numpy as np
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import shardc, shardc.numpy as snp
x = np.linspace(0.1, 1.0, 8)
z = x + 1j * x[::-1]
for name, f, a in [
        ("c128", lambda m, a: (m.exp(a) * a + 1j, m.abs(a), m.real(a)), z),
        ("weak", lambda m, a: (a * 1j, a.astype(m.float32) * 1j, m.sum(a) + 2j), x),
        ("fft", lambda m, a: (m.fft.fft(a), m.fft.rfft(m.real(a)), m.fft.irfft(a)), z),
        ("fft-int", lambda m, a: (m.fft.fft(a), m.fft.rfft(a)), np.arange(8)),
        ("f64", lambda m, a: (m.cbrt(a), m.nextafter(a, 2.0)), x),
        ("grad", lambda m, a: (shardc.grad if m is snp else jax.grad)(
            lambda t: m.sum(m.abs(m.fft.fft(t * (1 + 2j))) ** 2))(a), x)]:
    ours = shardc.jit(lambda a: f(snp, a))(a)
    ref = jax.jit(lambda a: f(jnp, a))(a)
    for o, r in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(ref)):
        assert o.dtype == r.dtype, (name, o.dtype, r.dtype)
        assert o.weak_type == r.weak_type, name
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=1e-10, atol=1e-10)
assert snp.result_type(np.float64, 1j) == np.complex128
assert snp.result_type(np.float32, 1j) == np.complex64
print("ok")
"""


def test_complex128_with_x64():
    """complex128 where x64 is on (fresh process): values, dtypes and weak types."""
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root, JAX_PLATFORMS="cpu")
    r = subprocess.run([sys.executable, "-c", X64_SCRIPT], capture_output=True, text=True,
                       env=env, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


def test_cli_arg_types():
    from shardc.tools.loader import _dtype, parse_arg
    for text, want in [("c64[4]", np.complex64), ("i4[8]", ml_dtypes.int4),
                       ("f8e4m3fn[2,2]", ml_dtypes.float8_e4m3fn), ("u4[2]", ml_dtypes.uint4),
                       ("f8e5m2[1]", ml_dtypes.float8_e5m2), ("c128[3]", np.complex128)]:
        assert np.dtype(_dtype(parse_arg(text).dtype)) == np.dtype(want), text


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2"])
def test_float8_functions(mesh2x4, name):
    """XLA's CPU computes float8 functions by converting; values and dtypes as jax's."""
    a = np.abs(_data(name).astype(np.float32)).astype(_typed(name))
    cases = [Case(f"{name}-fns-{spec}", lambda m, a: (m.exp(a), m.sqrt(a), m.sin(a),
                                                      m.tanh(a), a / 3, m.mean(a)),
                  [a], [spec], numpy_ref=False) for spec in LAYOUTS]
    compare_cases(cases, mesh2x4)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "int4", "complex64"])
@pytest.mark.parametrize("n", [4, 40])
def test_ir_round_trip_of_constants(name, n):
    """Array constants (listed when small, hex when large) print and parse back."""
    dt = _typed(name)
    c = _data(name, (n,), seed=7)
    text = print_program(shardc.jit(lambda a: a + snp.asarray(c)).trace(
        jnp.zeros(n, dt)).program)
    p = parse_program(text)
    assert print_program(p) == text
    (const,) = [op.params["value"] for op in p.ops if op.prim.name == "constant"]
    assert const.dtype == dt and np.array_equal(const, c)
