"""Dot algorithms (jax.lax.DotAlgorithmPreset, its name, jax.lax.DotAlgorithm) against
jax.jit, bit for bit: the operands converted to the algorithm's types, the accumulation
type, the result's; through shardc.numpy, shardc.lax and jax code traced by shardc, on
sharded operands, gradients; the presets XLA:CPU cannot compute are jax's error."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.lax import DotAlgorithm, DotAlgorithmPreset as D
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import check_outputs, place, sample

CPU = [D.F32_F32_F32, D.BF16_BF16_F32, "BF16_BF16_F32", D.BF16_BF16_F32_X3,
       D.BF16_BF16_F32_X6, D.F16_F16_F16, D.DEFAULT]
DTYPES = [np.float32, jnp.bfloat16, np.float16]
CASES = [(p, dt, pref) for p in CPU for dt in DTYPES for pref in (None, np.float32)]
rng = np.random.default_rng(0)
A, B = rng.normal(size=(8, 16)).astype(np.float32), rng.normal(size=(16, 4)).astype(np.float32)


def _dots(p, pref):
    dn = (((1,), (0,)), ((), ()))
    return {
        "numpy": lambda a, b: snp.dot(a, b, precision=p, preferred_element_type=pref),
        "lax": lambda a, b: shardc.lax.dot_general(a, b, dn, precision=p,
                                                   preferred_element_type=pref),
        "jax code": lambda a, b: jnp.dot(a, b, precision=p, preferred_element_type=pref),
    }


@pytest.mark.parametrize("p,dtype,pref", sample(CASES, 3, unpack=True), ids=str)
def test_presets_as_jax(p, dtype, pref, mesh2x4):
    a, b = place(mesh2x4, [A.astype(dtype), B.astype(dtype)], [P("x"), P(None, "y")])
    ref = jax.jit(lambda a, b: jnp.dot(a, b, precision=p, preferred_element_type=pref))(a, b)
    for what, f in _dots(p, pref).items():
        check_outputs(shardc.jit(f)(a, b), ref, mesh2x4, what=f"jax ({what})")
        # bit for bit: the same conversions and accumulation type as jax's lowering
        np.testing.assert_array_equal(np.asarray(shardc.jit(f)(a, b), np.float64),
                                      np.asarray(ref, np.float64))


def test_lowering_carries_the_algorithm():
    text = shardc.jit(lambda a, b: snp.dot(a.astype(jnp.float16), b.astype(jnp.float16),
                                           precision=D.BF16_BF16_F32)).lower(A, B).as_text()
    assert "(tensor<8x16xf16>) -> tensor<8x16xbf16>" in text    # f16 is not a type it takes
    assert ("algorithm = <lhs_precision_type = bf16, rhs_precision_type = bf16, "
            "accumulation_type = f32") in text
    assert "-> tensor<8x4xf32>" in text and "(tensor<8x4xf32>) -> tensor<8x4xf16>" in text
    ir = shardc.jit(lambda a, b: snp.dot(a, b, precision="F32_F32_F32")).trace(A, B).ir
    assert "precision=('preset', 'F32_F32_F32')" in ir


def test_gradients_and_the_default_config(mesh2x4):
    a, b = place(mesh2x4, [A, B], [P("x"), P()])

    def loss(m, grad):
        return grad(lambda a, b: (m.dot(a, b, precision=D.BF16_BF16_F32) ** 2).sum(), (0, 1))
    ref = jax.jit(loss(jnp, jax.grad))(a, b)
    got = shardc.jit(loss(snp, shardc.grad))(a, b)
    for o, r in zip(got, ref):
        np.testing.assert_array_equal(o, r)
    with jax.default_matmul_precision("BF16_BF16_F32"):
        check_outputs(shardc.jit(lambda a, b: snp.dot(a, b))(a, b),
                      jax.jit(lambda a, b: jnp.dot(a, b))(a, b), mesh2x4)


@pytest.mark.parametrize("p", [D.TF32_TF32_F32, D.BF16_BF16_F32_X9, D.F16_F16_F32,
                               DotAlgorithm(jnp.float32, jnp.float32, jnp.float32)], ids=str)
def test_what_xla_cpu_cannot_compute_is_an_error_as_jax(p):
    with pytest.raises(ValueError, match="is not supported by dot_general on CPU"):
        jax.jit(lambda a, b: jnp.dot(a, b, precision=p))(A, B)
    with pytest.raises(ValueError, match="is not supported by dot_general on CPU"):
        shardc.jit(lambda a, b: snp.dot(a, b, precision=p))(A, B)


def test_a_convolution_lowers_an_algorithm_as_the_default_precision():
    x = rng.normal(size=(1, 2, 6, 6)).astype(np.float32)
    k = rng.normal(size=(3, 2, 3, 3)).astype(np.float32)
    f = lambda lax: lambda x, k: lax.conv(x, k, (1, 1), "SAME",  # noqa: E731
                                          precision=D.F32_F32_F32)
    check_outputs(shardc.jit(f(shardc.lax))(x, k), jax.jit(f(jax.lax))(x, k))


def test_for_a_gpu_the_lowering_carries_what_cpu_cannot_run(monkeypatch):
    """Lowered for a GPU (not compiled here): TF32 and a DotAlgorithm reach StableHLO;
    the float8 presets need float8 operands (jax's error, at the user's line)."""
    monkeypatch.setattr("shardc.runtime.meshes.target_platform", lambda: "cuda")
    text = shardc.jit(lambda a, b: snp.dot(a, b, precision=D.TF32_TF32_F32)).lower(
        A, B).as_text()
    assert "algorithm = <lhs_precision_type = tf32, rhs_precision_type = tf32" in text
    alg = DotAlgorithm(jnp.bfloat16, jnp.bfloat16, jnp.float32, num_primitive_operations=3)
    text = shardc.jit(lambda a, b: snp.dot(a, b, precision=alg)).lower(A, B).as_text()
    assert "(tensor<8x16xf32>) -> tensor<8x16xbf16>" in text     # always its types
    assert "num_primitive_operations = 3" in text
    f8 = jnp.float8_e4m3fn
    text = shardc.jit(lambda a, b: snp.dot(a.astype(f8), b.astype(f8),
                                           precision="ANY_F8_ANY_F8_F32_FAST_ACCUM",
                                           preferred_element_type=jnp.float32)).lower(
        A, B).as_text()
    assert "lhs_precision_type = f8E4M3FN" in text and \
        "allow_imprecise_accumulation = true" in text
    with pytest.raises(shardc.ShardcError, match=r"test_dot_algorithms.py:\d+: The dot "
                       r"algorithm 'ANY_F8_ANY_F8_F32' requires both inputs to have float8"):
        shardc.jit(lambda a, b: snp.dot(a, b, precision="ANY_F8_ANY_F8_F32")).trace(A, B)
