"""A loop carry that starts as a Python scalar (weak-typed) and a body returning another
dtype: jax promotes the init to the pair's result type and traces the body again
(scan, while_loop, fori_loop with concrete or traced bounds). Values, dtypes and weak
types against jax.jit; a shape change is still the carry-type error."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp
from helpers import check_outputs
from shardc.errors import ShardcTypeError

XS = np.arange(5, dtype=np.float32) * 0.5
H = np.arange(5, dtype=np.float16)

CASES = {
    "scan_int_init_f32_body": lambda M, m, n: M.lax.scan(lambda c, v: (c + v, c), 0, XS),
    "scan_weak_f32_init_f16_body": lambda M, m, n: M.lax.scan(lambda c, v: (c + v, None),
                                                              0.0, H)[0],
    "scan_pytree": lambda M, m, n: M.lax.scan(
        lambda c, v: ((c[0] + v, c[1] + 1, c[2] * 2), None), (0, 0, 1.0), XS)[0],
    "fori_concrete": lambda M, m, n: M.lax.fori_loop(0, 5, lambda i, a: a + m.asarray(XS)[i], 0),
    "fori_traced": lambda M, m, n: M.lax.fori_loop(0, n, lambda i, a: a + m.asarray(XS)[i], 0),
    "while": lambda M, m, n: M.lax.while_loop(
        lambda c: c < 3, lambda c: c + 0.5 * m.ones((), np.float32), 0),
    "while_bool_int": lambda M, m, n: M.lax.while_loop(
        lambda c: c[1] < 3, lambda c: (c[0] + m.int8(1), c[1] + 1), (0, 0)),
    "nested": lambda M, m, n: M.lax.scan(
        lambda c, v: (M.lax.fori_loop(0, 2, lambda i, a: a + v, c), None), 0, XS)[0],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_weak_carry_is_promoted_as_jax(name):
    n = np.int32(4)
    want = jax.jit(lambda n: CASES[name](jax, jnp, n))(n)
    got = shardc.jit(lambda n: CASES[name](shardc, snp, n))(n)
    check_outputs(got, want)


def test_grad_through_a_promoted_carry():
    def loss(M, m):
        return lambda w: M.lax.scan(lambda c, v: (c + m.sin(v * w), None), 0, XS)[0]
    check_outputs(shardc.jit(shardc.grad(loss(shardc, snp)))(np.float32(1.5)),
                  jax.jit(jax.grad(loss(jax, jnp)))(np.float32(1.5)))


def test_a_shape_change_is_still_an_error():
    with pytest.raises(ShardcTypeError, match="input carry has type f32\\[\\] but the output "
                       "carry has type f32\\[3\\]"):
        shardc.jit(lambda: shardc.lax.scan(lambda c, v: (c + snp.ones(3) * v, None), 0, XS))()
    with pytest.raises(TypeError):
        jax.jit(lambda: jax.lax.scan(lambda c, v: (c + jnp.ones(3) * v, None), 0, XS))()
