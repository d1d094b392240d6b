"""Complex numbers: the complex primitives (complex, real, imag, conj), the elementwise
ops, reductions and matmul on complex arrays, and their gradients, against jax.jit /
jax.grad / jax.vjp (values, dtypes, weak types, output shardings under four layouts);
and the newer elementwise ops (clz, population_count, nextafter, cbrt, reduce_precision)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import Case, assert_close, compare_cases, place

LAYOUTS = [P(), P("x", None), P(None, "y"), P("x", "y")]


def cdata(shape=(8, 16), seed=0, dtype=np.complex64):
    rng = np.random.default_rng(seed)
    return (rng.uniform(-2, 2, shape) + 1j * rng.uniform(-2, 2, shape)).astype(dtype)


def fdata(shape=(8, 16), seed=0, lo=-2, hi=2):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def lax_of(m):
    return shardc.lax if getattr(m, "_base", m) is snp else jax.lax


UNARY = ["exp", "log", "sqrt", "sin", "cos", "tan", "tanh", "abs", "negative", "square",
         "reciprocal", "sign", "log1p", "expm1", "conj", "conjugate", "real", "imag",
         "angle", "iscomplex", "isreal", "arcsin", "arccos", "arctan", "sinh", "cosh",
         "log2", "log10", "exp2", "isnan", "isfinite", "isinf", "round"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_on_complex(mesh2x4, name):
    cases = [Case(f"{name}-{spec}", lambda m, z: getattr(m, name)(z), [cdata(seed=i)], [spec],
                  numpy_ref=False) for i, spec in enumerate(LAYOUTS)]
    compare_cases(cases, mesh2x4)


@pytest.mark.parametrize("name", ["real", "imag", "conj", "angle", "iscomplex", "isreal"])
def test_complex_functions_of_real_and_int(mesh2x4, name):
    cases = [Case(f"{name}-f32", lambda m, a: getattr(m, name)(a), [fdata()], [P("x", "y")]),
             Case(f"{name}-i32", lambda m, a: getattr(m, name)(a),
                  [np.arange(-8, 8, dtype=np.int32)], [P("x")]),
             Case(f"{name}-scalar", lambda m, a: getattr(m, name)(2.5) + a, [fdata()], [P()],
                  numpy_ref=False)]
    compare_cases(cases, mesh2x4)


BINARY = ["add", "subtract", "multiply", "divide", "power", "equal", "not_equal"]


@pytest.mark.parametrize("name", BINARY)
def test_binary_on_complex(mesh2x4, name):
    cases = []
    for i, spec in enumerate(LAYOUTS):
        z, w = cdata(seed=i), cdata(seed=i + 9)
        cases += [Case(f"{name}-{spec}", lambda m, z, w: getattr(m, name)(z, w), [z, w],
                       [spec, spec], numpy_ref=False),
                  Case(f"{name}-mixed-{spec}", lambda m, z, x: getattr(m, name)(z, x),
                       [z, fdata(seed=i)], [spec, P()], numpy_ref=False),
                  Case(f"{name}-pyc-{spec}", lambda m, z: getattr(m, name)(z, 1.5 - 2j), [z],
                       [spec], numpy_ref=False)]
    compare_cases(cases, mesh2x4)


def test_reductions_and_matmul_on_complex(mesh2x4):
    cases = []
    for i, spec in enumerate(LAYOUTS):
        z, w = cdata(seed=i), cdata((16, 4), seed=i + 3)
        cases += [Case(f"sum-{spec}", lambda m, z: (m.sum(z), m.sum(z, axis=1), m.mean(z, 0)),
                       [z], [spec], numpy_ref=False),
                  Case(f"prod-{spec}", lambda m, z: m.prod(z[:, :3], axis=1), [z], [spec],
                       numpy_ref=False),
                  Case(f"matmul-{spec}", lambda m, z, w: (z @ w, m.einsum("ij,jk->ik", z, w)),
                       [z, w], [spec, P("y", None)], numpy_ref=False),
                  Case(f"vdot-{spec}", lambda m, z: m.vdot(z[0], z[1]), [z], [spec],
                       numpy_ref=False)]
    compare_cases(cases, mesh2x4)


def test_lax_complex_primitives(mesh2x4):
    cases = []
    for i, spec in enumerate(LAYOUTS):
        x, y = fdata(seed=i), fdata(seed=i + 1)
        cases += [Case(f"complex-{spec}", lambda m, x, y: lax_of(m).complex(x, y), [x, y],
                       [spec, spec], numpy_ref=False),
                  Case(f"parts-{spec}", lambda m, x, y: (
                      lax_of(m).real(lax_of(m).complex(x, y)),
                      lax_of(m).imag(lax_of(m).conj(lax_of(m).complex(x, y))),
                      lax_of(m).conj(x)), [x, y], [spec, spec], numpy_ref=False)]
    compare_cases(cases, mesh2x4)
    compare_cases([Case("eager", lambda m, x, y: lax_of(m).complex(x, y) * 2,
                        [fdata(), fdata(seed=1)], [P("x", "y"), P("x", "y")],
                        numpy_ref=False)], mesh2x4, eager=True)


def test_complex_needs_complex_or_float_parts():
    with pytest.raises(shardc.ShardcError, match="complex"):
        shardc.jit(lambda z: shardc.lax.real(z))(jnp.ones(3))
    with pytest.raises(shardc.ShardcError, match="float32 or float64"):
        shardc.jit(lambda z: shardc.lax.complex(z, z))(jnp.ones(3, jnp.int32))


GRADS = {
    "abs2": lambda m, x: m.sum(m.abs(m.exp(1j * x) * (x + 2j)) ** 2),
    "parts": lambda m, x: m.sum(m.real(x * (1 + 2j)) * m.imag((x - 1j) ** 2)),
    "angle": lambda m, x: m.sum(m.angle(x + 1j * x[::-1])),
    "div": lambda m, x: m.sum(m.abs(m.sqrt((x + 3j) / (x * x + 1j)))),
    "trig": lambda m, x: m.sum(m.real(m.sin(x + 1j) * m.cos(x - 0.5j) + m.log(x + 4j))),
    "matmul": lambda m, x: m.abs(m.sum((x + 1j) @ (x.T - 2j))),
    "conj": lambda m, x: m.sum(m.real(m.conj(x + 2j * x) * (x - 1j))),
    "complex": lambda m, x: m.sum(m.abs(lax_of(m).complex(x, x ** 2))),
    "cast": lambda m, x: m.sum(m.real(x.astype(m.complex64) * (3 - 1j))),
}


@pytest.mark.parametrize("name", sorted(GRADS))
def test_gradients_through_complex_as_jax(mesh2x4, name):
    """Real-valued functions of real inputs through complex intermediates: jax.grad."""
    f = GRADS[name]
    x = fdata((8, 8), lo=0.3, hi=2)
    for spec in (P(), P("x", "y")):
        (xi,) = place(mesh2x4, [x], [spec])
        got = shardc.jit(shardc.grad(lambda x: f(snp, x)))(xi)
        want = jax.jit(jax.grad(lambda x: f(jnp, x)))(xi)
        assert_close(got, want, f"grad {name} {spec}")


def test_vjp_of_complex_functions_as_jax():
    """vjp with complex primals and cotangents (jax's convention: no conjugation)."""
    z, ct = cdata((4, 4)), cdata((4, 4), seed=3)
    for f in (lambda m, z: m.exp(z) * z, lambda m, z: m.abs(z).astype(m.complex64) + m.conj(z),
              lambda m, z: z @ m.sin(z), lambda m, z: m.real(z) * m.imag(z) + 0j):
        out, fn = shardc.vjp(lambda z: f(snp, z), z)
        rout, rfn = jax.vjp(lambda z: f(jnp, z), z)
        assert_close(out, rout)
        assert_close(fn(ct)[0], rfn(ct)[0])


def test_holomorphic_grad():
    z = jnp.asarray(cdata((4,)))
    f = lambda m: (lambda z: m.sum(m.sin(z) * z))  # noqa: E731
    got = shardc.grad(f(snp), holomorphic=True)(z)
    assert_close(got, jax.grad(f(jnp), holomorphic=True)(z))
    # a real output of complex inputs needs no holomorphic=True (jax's convention)
    assert_close(shardc.grad(lambda z: snp.abs(snp.sum(z)))(z),
                 jax.grad(lambda z: jnp.abs(jnp.sum(z)))(z))
    with pytest.raises(TypeError, match="holomorphic"):
        shardc.grad(lambda x: snp.sum(x * 1j))(jnp.ones(3))


# ---------------------------------------------------------------- the newer elementwise ops

def test_bit_counting_ops(mesh2x4):
    ints = [np.arange(-64, 64, dtype=np.int32).reshape(8, 16),
            np.arange(0, 128, dtype=np.uint8).reshape(8, 16),
            np.arange(-64, 64, dtype=np.int16).reshape(8, 16)]
    cases = []
    for a in ints:
        for spec in LAYOUTS:
            cases.append(Case(f"bits-{a.dtype}-{spec}", lambda m, a: (
                lax_of(m).clz(a), lax_of(m).population_count(a)), [a], [spec],
                numpy_ref=False))
    compare_cases(cases, mesh2x4)


def test_nextafter_cbrt_reduce_precision(mesh2x4):
    cases = []
    for i, spec in enumerate(LAYOUTS):
        x, y = fdata(seed=i), fdata(seed=i + 5)
        cases += [Case(f"nextafter-{spec}", lambda m, x, y: (
                      lax_of(m).nextafter(x, y), m.nextafter(x, 0.0)), [x, y], [spec, spec]),
                  Case(f"cbrt-{spec}", lambda m, x: (lax_of(m).cbrt(x), m.cbrt(x)), [x],
                       [spec], numpy_ref=False),
                  Case(f"rp-{spec}", lambda m, x: (lax_of(m).reduce_precision(x, 5, 10),
                                                   lax_of(m).reduce_precision(x, 8, 7),
                                                   lax_of(m).reduce_precision(x, 4, 3)),
                       [x], [spec], numpy_ref=False)]
    cases.append(Case("cbrt-int", lambda m, a: m.cbrt(a), [np.arange(-8, 8, dtype=np.int32)],
                      [P("x")]))
    cases.append(Case("nextafter-bf16", lambda m, x: m.nextafter(x, m.inf),
                      [fdata().astype(jnp.bfloat16)], [P("x", "y")], numpy_ref=False))
    compare_cases(cases, mesh2x4)
    compare_cases([Case("eager", lambda m, x: (lax_of(m).cbrt(x), lax_of(m).clz(
        x.astype(m.int32))), [fdata()], [P("x", "y")], numpy_ref=False)], mesh2x4, eager=True)


@pytest.mark.parametrize("name", ["exp2", "log2", "log10", "cbrt"])
def test_exp2_log2_log10_cbrt_functions(mesh2x4, name):
    cases = [Case(f"{name}-{spec}", lambda m, x: getattr(m, name)(x), [fdata(lo=0.1, hi=4)],
                  [spec]) for spec in LAYOUTS]
    cases += [Case(f"{name}-int", lambda m, x: getattr(m, name)(x),
                   [np.arange(1, 17, dtype=np.int32)], [P("x")]),
              Case(f"{name}-weak", lambda m, x: getattr(m, name)(2.0) * x, [fdata()], [P()])]
    compare_cases(cases, mesh2x4)


@pytest.mark.parametrize("name", ["cbrt", "exp2", "log2", "log10", "rp"])
def test_new_op_gradients(name):
    f = {"cbrt": lambda m, x: m.sum(m.cbrt(x) * x),
         "exp2": lambda m, x: m.sum(m.exp2(x)), "log2": lambda m, x: m.sum(m.log2(x)),
         "log10": lambda m, x: m.sum(m.log10(x) ** 2),
         "rp": lambda m, x: m.sum(lax_of(m).reduce_precision(x * x, 5, 10))}[name]
    x = jnp.asarray(fdata((16,), lo=0.2, hi=3))
    assert_close(shardc.jit(shardc.grad(lambda x: f(snp, x)))(x),
                 jax.jit(jax.grad(lambda x: f(jnp, x)))(x), name)


def test_sharded_complex_stays_sharded(mesh2x4):
    """A complex elementwise chain keeps its operand's sharding (pointwise rules)."""
    z = jax.device_put(cdata(), NamedSharding(mesh2x4, P("x", "y")))
    out = shardc.jit(lambda z: snp.abs(snp.exp(z) * snp.conj(z)))(z)
    assert out.sharding.is_equivalent_to(NamedSharding(mesh2x4, P("x", "y")), 2)


# ---------------------------------------------------------------- batching (shardc.vmap)

VMAPPED = {
    "complex": (lambda m, x, y: lax_of(m).complex(x, y), (0, 0)),
    "complex-unbatched": (lambda m, x, y: lax_of(m).complex(x, y[0]), (1, None)),
    "complex-scalar": (lambda m, x, y: lax_of(m).complex(x[0], y[0, 0]), (0, None)),
    "parts": (lambda m, x, y: (m.real(x * 1j + y), m.imag(x - 2j * y),
                               m.conj(x + 1j * y)), (0, 1)),
    "abs": (lambda m, x, y: m.abs(x + 1j * y), (1, 0)),
    "bits": (lambda m, x, y: (lax_of(m).clz(x.astype(m.int32)),
                              lax_of(m).population_count((y * 7).astype(m.uint8))), (0, 0)),
    "nextafter": (lambda m, x, y: lax_of(m).nextafter(x, y[1]), (0, None)),
    "cbrt-rp": (lambda m, x, y: (lax_of(m).cbrt(x), lax_of(m).reduce_precision(y, 5, 2)),
                (1, 0)),
}


@pytest.mark.parametrize("name", sorted(VMAPPED))
def test_batching_rules_as_jax_vmap(name):
    f, in_axes = VMAPPED[name]
    x, y = jnp.asarray(fdata((6, 6))), jnp.asarray(fdata((6, 6), seed=1))
    got = shardc.jit(shardc.vmap(lambda x, y: f(snp, x, y), in_axes=in_axes))(x, y)
    want = jax.jit(jax.vmap(lambda x, y: f(jnp, x, y), in_axes=in_axes))(x, y)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        assert_close(g, w, name)


def test_vmap_of_complex_gradients():
    """Per-example gradients through complex intermediates (vmap of grad)."""
    f = GRADS["abs2"]
    x = jnp.asarray(fdata((4, 8), lo=0.3, hi=2))
    got = shardc.vmap(shardc.grad(lambda x: f(snp, x)))(x)
    assert_close(got, jax.vmap(jax.grad(lambda x: f(jnp, x)))(x))


# ---------------------------------------------------------------- float bits

SPECIAL = np.array([1., 2., 3., -0.0, 0.0, 5e-40, -1e-45, np.inf, -np.nan, np.nan, 1e30, -3.5,
                    0.7, -6.25, 1e-3, -np.inf], np.float32)
EXPS = np.array([1, 200, -150, 3, 0, 100, 10, -2, 4, 5, 60, -300, 7, -7, 126, 2], np.int32)
BITS_FNS = {
    "signbit": lambda m, x, i: (m.signbit(x), m.signbit(i), m.signbit(x.astype(m.float16))),
    "copysign": lambda m, x, i: (m.copysign(3.0, x), m.copysign(x, -1), m.copysign(i, x)),
    "frexp": lambda m, x, i: (m.frexp(x), m.frexp(x.astype(m.bfloat16)), m.frexp(i)),
    "ldexp": lambda m, x, i: (m.ldexp(x, i), m.ldexp(x, 3), m.ldexp(i, i % 5)),
    "spacing": lambda m, x, i: (m.spacing(x), m.spacing(x.astype(m.float16)), m.spacing(i)),
}


@pytest.mark.parametrize("name", sorted(BITS_FNS))
def test_float_bit_functions_bit_exact(mesh2x4, name):
    """signbit (negative NaNs too), frexp, ldexp (exponents past the range), spacing,
    copysign: jax's values bit for bit, dtypes and weak types, in four layouts."""
    f = BITS_FNS[name]
    x, i = SPECIAL.reshape(2, 8), EXPS.reshape(2, 8)
    for spec in LAYOUTS:
        xs, is_ = place(mesh2x4, [x, i], [spec, spec])
        got = shardc.jit(lambda a, b: f(snp, a, b))(xs, is_)
        want = jax.jit(lambda a, b: f(jnp, a, b))(xs, is_)
        exact = _numpy_exact(name, x, i)
        got, want = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            assert g.dtype == w.dtype and g.weak_type == w.weak_type, (name, spec)
            assert g.sharding.is_equivalent_to(w.sharding, g.ndim), (name, spec)
            g, w = np.asarray(g), np.asarray(w)
            if exact is not None and k < len(exact):
                w = exact[k].astype(w.dtype)
            if g.dtype.kind not in "biu":     # (NaNs compare equal; bfloat16 via f64)
                g, w = g.astype(np.float64), w.astype(np.float64)
            np.testing.assert_array_equal(g, w, err_msg=name)


def _numpy_exact(name, x, i):
    """NumPy's frexp and ldexp: exact on subnormals (5e-40, -1e-45), where jax.jit's
    float ops are flushed to zero on CPU (frexp gives (0.5, -149); ldexp returns a
    subnormal x unchanged); frexp again for x as bfloat16 (it shares float32's
    exponents, so it has subnormals too). None for the other functions."""
    if name == "frexp":
        bf16 = x.astype(jnp.bfloat16).astype(np.float32)
        return (*np.frexp(x), *np.frexp(bf16))
    if name == "ldexp":
        return np.ldexp(x, i), np.ldexp(x, 3)
    return None


def test_frexp_ldexp_gradients():
    x = jnp.asarray(np.array([1., 2., 3., 1e30, -3.5, 0.7, -6.25, 1e-3], np.float32))
    e = jnp.asarray(np.array([1, 20, -15, 0, 10, -2, 4, 5], np.int32))
    for f in (lambda m, x: m.sum(m.ldexp(x, e)), lambda m, x: m.sum(m.frexp(x)[0] * x),
              lambda m, x: m.sum(m.copysign(x, -x) ** 2)):
        np.testing.assert_allclose(shardc.grad(lambda x: f(snp, x))(x),
                                   jax.grad(lambda x: f(jnp, x))(x), rtol=1e-5)


def test_lax_exp2_and_bitcast(mesh2x4):
    cases = [Case(f"lax-{spec}", lambda m, x: (lax_of(m).exp2(x),
                                               lax_of(m).bitcast_convert_type(x, m.int32)),
                  [fdata(seed=i)], [spec], numpy_ref=False) for i, spec in enumerate(LAYOUTS)]
    compare_cases(cases, mesh2x4)
    assert [int(t) for t in shardc.lax.FftType] == [int(t) for t in jax.lax.FftType]
    assert [t.name for t in shardc.lax.FftType] == [t.name for t in jax.lax.FftType]


def test_complex_to_bool():
    """lax.convert_element_type reads the real part (as every complex-to-real cast; it
    compared the whole value with 0), while astype(bool) is x != 0, as jax's."""
    x = np.array([1j, 0, 2 + 0j, 0.5 - 1j, 3j], np.complex64)

    def f(lax, m):
        return lambda x: (lax.convert_element_type(x, np.bool_), x.astype(bool),
                          lax.convert_element_type(x, np.int32), m.logical_not(x))
    ours = shardc.jit(f(shardc.lax, snp))(x)
    ref = jax.jit(f(jax.lax, jnp))(x)
    for o, r in zip(ours, ref):
        np.testing.assert_array_equal(np.asarray(o), np.asarray(r))
        assert o.dtype == r.dtype


def test_complex_maximum_minimum_are_lexicographic(mesh2x4):
    """jax orders complex numbers by real part, then imaginary part; shardc lowered
    max / min to stablehlo.maximum / minimum, which gave 2-1j for max(2-1j, 2+0j)."""
    x = np.array([1 + 2j, 1, .5 + 3j, 2 - 1j, np.nan, 1 + 1j, 3, -1j], np.complex64)
    y = np.array([1 + 1j, 1, 1, 2 + 0j, 1, complex(1, np.nan), 3 + 1j, 0], np.complex64)
    for name in ("maximum", "minimum"):
        xs = place(mesh2x4, [x, y], [P(("x", "y"))] * 2)
        got = shardc.jit(getattr(snp, name))(*xs)
        want = jax.jit(getattr(jnp, name))(*xs)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    got = shardc.jit(lambda a: shardc.lax.max(a, 1.5 + 0j))(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(jax.lax.max(x, 1.5 + 0j)))


def _lex_data():
    """Complex values with many ties in the real part (small integers), no NaN (a NaN's
    place in a complex max depends on the order XLA combines elements in)."""
    rng = np.random.default_rng(3)
    return (rng.integers(-2, 3, (8, 16)) + 1j * rng.integers(-2, 3, (8, 16))).astype(
        np.complex64)


def test_complex_reductions_are_lexicographic(mesh2x4):
    """max / min / ptp / cummax / cummin / reduce_window of complex arrays order values
    as jax's max (real part, then imaginary part). They crashed before ("Invalid integer
    data type 'c'"); argmax of a complex array is an error in jax and here."""
    x = _lex_data()

    def f(lax, np_):
        return lambda a: [np_.max(a), np_.min(a, axis=1), np_.ptp(a, axis=0),
                          np_.nanmax(a, axis=1), np_.amin(a, axis=0, keepdims=True),
                          lax.cummax(a, axis=1), lax.cummin(a, axis=0, reverse=True),
                          lax.reduce_window(a, -np.inf + 0j, lax.max, (2, 3), (1, 2),
                                            "VALID"),
                          lax.reduce(a, np.inf + 0j, lax.min, (1,))]
    ours = shardc.jit(f(shardc.lax, snp))(x)
    ref = jax.jit(f(jax.lax, jnp))(x)
    for o, r in zip(ours, ref):
        np.testing.assert_array_equal(np.asarray(o), np.asarray(r))
        assert o.dtype == r.dtype
    # the identity is the least complex number: jax's -inf+0j would beat -inf-1j
    low = np.array([complex(-np.inf, -1), complex(-np.inf, -2)], np.complex64)
    assert shardc.jit(snp.max)(low) == np.max(low)
    with pytest.raises(shardc.ShardcError, match="argmax needs a real"):
        shardc.jit(snp.argmax)(x)


def test_sharded_complex_max_min(mesh2x4):
    """Over a sharded dim, a complex max cannot be shard maxes all-reduced (XLA's
    all-reduce has no complex order; jax.jit fails to compile these): the reduced dims
    are gathered first, and pmax / pmin gather then reduce. NumPy's max is the
    reference (it orders complex numbers as jax does)."""
    x = _lex_data()
    (xs,) = place(mesh2x4, [x], [P("x", "y")])
    got = shardc.jit(lambda a: [snp.max(a, 0), snp.min(a, 1), snp.max(a),
                                snp.ptp(a, axis=1)])(xs)
    want = [x.max(0), x.min(1), x.max(), np.ptp(x, axis=1)]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), w)
    assert got[0].sharding.spec == P("y")       # the kept dim stays sharded
    g = shardc.grad(lambda a: snp.max(a).real)
    grad = np.asarray(shardc.jit(g)(xs))
    hit = (x == x.max())
    np.testing.assert_allclose(grad, hit / hit.sum())

    pm = shardc.jit(shardc.shard_map(
        lambda a: [shardc.lax.pmax(a, "y"), shardc.lax.pmin(a, ("x", "y"))], mesh=mesh2x4,
        in_specs=P("x", "y"), out_specs=[P("x"), P()]))(xs)
    blocks = x.reshape(2, 4, 4, 4)      # [x block, row, y block, col]
    np.testing.assert_array_equal(np.asarray(pm[0]), blocks.max(axis=2).reshape(8, 4))
    np.testing.assert_array_equal(np.asarray(pm[1]), blocks.min(axis=(0, 2)))


def test_python_complex_scalars_are_weak_as_jax():
    """jnp.asarray(1j), jnp.array(2j) and jnp.full((), 1j) are weakly typed (as for a
    Python float); shardc made the first two strong complex64 (with x64: complex128, which
    then promoted a complex64 array to complex128) and eager full((), 1j) a Python
    complex."""
    def f(m):
        return m.asarray(1j), m.array(2j) * 2, m.real(m.asarray(1j + 2)), m.full((), 1j)
    for got, want in ((shardc.jit(lambda: f(snp))(), jax.jit(lambda: f(jnp))()),
                      (f(snp), f(jnp))):
        for g, w in zip(got, want):
            assert isinstance(g, jax.Array), type(g)
            assert g.dtype == w.dtype and g.weak_type == w.weak_type, (g, w)
            assert_close(g, w)
