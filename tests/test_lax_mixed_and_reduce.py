"""lax.dot_general / ragged_dot on operands of two dtypes convert both to the result's
dtype, as jax's lowering does on CPU and GPU (shardc converted one operand to the
other's: int8 x uint8 wrapped, int32 x float16 overflowed); lax.reduce counts a
non-identity init value once over odd sizes (shardc padded each odd level with it).
Values and dtypes against jax.jit and NumPy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import shardc

A8 = np.arange(-32, 32, dtype=np.int8).reshape(8, 8)
U8 = np.arange(0, 256, 4, dtype=np.uint8).reshape(8, 8)
U16 = (np.arange(64).reshape(8, 8) * 1000).astype(np.uint16)
I32 = (np.arange(64).reshape(8, 8) * 3010 - 90000).astype(np.int32)
F16 = np.linspace(-1, 1, 64).reshape(8, 8).astype(np.float16)
BF16 = np.asarray(jnp.asarray(np.linspace(1, 2, 64).reshape(8, 8), jnp.bfloat16))
DN = (((1,), (0,)), ((), ()))


@pytest.mark.parametrize("a,b,pref", [(A8, U8, jnp.int32), (U16, A8, jnp.int32),
                                      (I32, F16, jnp.float32), (F16, BF16, jnp.float32),
                                      (A8, U8, None)], ids=["i8xu8", "u16xi8", "i32xf16",
                                                            "f16xbf16", "i8xu8-nopref"])
def test_mixed_dtype_dot_general_as_jax(a, b, pref):
    want = jax.jit(lambda x, y: lax.dot_general(x, y, DN, preferred_element_type=pref))(a, b)
    for f in (lambda x, y: lax.dot_general(x, y, DN, preferred_element_type=pref),
              lambda x, y: shardc.lax.dot_general(x, y, DN, preferred_element_type=pref)):
        got = shardc.jit(f)(a, b)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                                   rtol=1e-5)
    if pref is not None:
        exact = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(np.asarray(want, np.float64), exact, rtol=1e-2)


def test_mixed_dtype_ragged_dot_as_jax():
    rng = np.random.default_rng(0)
    lhs = (rng.normal(size=(10, 4)) * 10).astype(np.int8)
    rhs = (rng.normal(size=(3, 4, 5)) * 40 + 128).astype(np.uint8)
    gs = np.array([3, 0, 7], np.int32)
    f = lambda x, y, g: lax.ragged_dot(x, y, g, preferred_element_type=jnp.int32)  # noqa: E731
    np.testing.assert_array_equal(np.asarray(shardc.jit(f)(lhs, rhs, gs)),
                                  np.asarray(jax.jit(f)(lhs, rhs, gs)))


# (not n = 1: XLA turns a reduce over one element into that element, dropping even a
# non-identity init, which StableHLO leaves implementation-defined; shardc counts it)
@pytest.mark.parametrize("n", [2, 3, 5, 6, 7, 11])
def test_reduce_counts_a_non_identity_init_once(n):
    x = np.arange(n * 4, dtype=np.float32).reshape(n, 4) / 7 + 1
    cases = [lambda m, a: m.lax.reduce(a, 1.0, m.lax.add, (0,)),
             lambda m, a: m.lax.reduce(a, 2.0, m.lax.mul, (0,)),
             lambda m, a: m.lax.reduce((a, a), (1.0, 0.0), lambda u, v: (
                 u[0] + v[0], m.numpy.maximum(u[1], v[1])), (0,))]
    for f in cases:
        want = jax.jit(lambda a: f(jax, a))(x)
        for frontend in (jax, shardc):     # jax code under shardc.jit, and shardc's own
            got = shardc.jit(lambda a: f(frontend, a))(x)
            for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
                np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(shardc.jit(lambda a: cases[0](shardc, a))(x)),
                               1 + x.sum(0), rtol=1e-5)
