"""lax.scaled_dot against jax.jit's, bit for bit: dimension numbers, block sizes, operand
and scale dtypes, missing scales, sharded operands (values and output shardings), jax
code under shardc.jit, vmap, a gradient (jax's has none) and jax's errors."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from tests.helpers import check_outputs, place

F8, E8M0, BF16 = jnp.float8_e4m3fn, jnp.float8_e8m0fnu, jnp.bfloat16


def _data(shape, dtype, seed, scale=False):
    rng = np.random.default_rng(seed)
    if scale:       # powers of two, as E8M0 holds
        return (2.0 ** rng.integers(-3, 4, size=shape)).astype(np.float32).astype(dtype)
    return (rng.normal(size=shape) * 2).astype(np.float32).astype(dtype)


# (lhs, rhs, lhs_scale, rhs_scale shapes or None, dimension numbers or None)
CASES = {
    "2d": ((8, 64), (64, 16), (8, 8), (8, 16), None),
    "3d": ((2, 8, 64), (2, 64, 4), (2, 8, 2), (2, 2, 4), None),
    "explicit": ((64, 2, 8), (2, 4, 64), (16, 2, 8), (2, 4, 16),
                 (((0,), (2,)), ((1,), (0,)))),
    "two_contracting": ((8, 4, 32), (4, 32, 8), (8, 2, 16), (2, 16, 8),
                        (((1, 2), (0, 1)), ((), ()))),
    "no_scales": ((8, 64), (64, 16), None, None, None),
    "lhs_only": ((8, 64), (64, 16), (8, 32), None, None),
}


def _args(case, dtype, scale_dtype):
    ls, rs, lss, rss, _ = CASES[case]
    return (_data(ls, dtype, 0), _data(rs, dtype, 1),
            None if lss is None else _data(lss, scale_dtype, 2, scale=True),
            None if rss is None else _data(rss, scale_dtype, 3, scale=True))


def _fn(lax, dn, pet):
    return lambda a, b, sa, sb: lax.scaled_dot(a, b, lhs_scale=sa, rhs_scale=sb,
                                               dimension_numbers=dn,
                                               preferred_element_type=pet)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("dtype,scale_dtype,pet", [(F8, E8M0, None), (F8, E8M0, jnp.float32),
                                                   (jnp.float8_e5m2, E8M0, BF16),
                                                   (jnp.float32, jnp.float32, jnp.float32),
                                                   (BF16, BF16, None)], ids=str)
def test_bit_for_bit_with_jax(case, dtype, scale_dtype, pet):
    args = _args(case, dtype, scale_dtype)
    dn = CASES[case][4]
    want = jax.jit(_fn(jax.lax, dn, pet))(*args)
    got = shardc.jit(_fn(shardc.lax, dn, pet))(*args)
    assert got.dtype == want.dtype == (pet or BF16)
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
    # jax's own function under shardc.jit (its primitive, translated)
    np.testing.assert_array_equal(np.asarray(shardc.jit(_fn(jax.lax, dn, pet))(*args),
                                             np.float32), np.asarray(want, np.float32))


@pytest.mark.parametrize("specs", [(P("x"), P(None, "y"), P("x"), P(None, "y")),
                                   (P(None, "y"), P("y"), P(None, "y"), P("y")),
                                   (P("x", "y"), P("y"), P("x"), P(None, "y"))], ids=str)
def test_sharded_operands(mesh2x4, specs):
    args = place(mesh2x4, _args("2d", F8, E8M0), specs)
    check_outputs(shardc.jit(_fn(shardc.lax, None, jnp.float32))(*args),
                  jax.jit(_fn(jax.lax, None, jnp.float32))(*args), mesh2x4)


def test_vmap_is_jaxs():
    a, b, sa, sb = _args("2d", F8, E8M0)
    stack = [np.stack([x, x * 2]).astype(x.dtype) if x.dtype != E8M0 else np.stack([x, x])
             for x in (a, b, sa, sb)]
    want = jax.jit(jax.vmap(_fn(jax.lax, None, jnp.float32)))(*stack)
    got = shardc.jit(shardc.vmap(_fn(shardc.lax, None, jnp.float32)))(*stack)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_gradient():
    """jax's scaled_dot has no gradient; shardc's is the decomposition's, checked
    against jax.grad of it written in jnp."""
    a, b = _data((8, 64), jnp.float32, 0), _data((64, 16), jnp.float32, 1)
    sa, sb = _data((8, 2), jnp.float32, 2, scale=True), _data((2, 16), jnp.float32, 3, True)

    def dense(a, b):
        la = (a.astype(BF16) * jnp.repeat(sa, 32, axis=1).astype(BF16))
        rb = (b.astype(BF16) * jnp.repeat(sb, 32, axis=0).astype(BF16))
        return jnp.sum(jnp.sin(jax.lax.dot(la, rb, preferred_element_type=jnp.float32)))
    want = jax.grad(dense, argnums=(0, 1))(a, b)
    got = shardc.jit(shardc.grad(lambda a, b: snp.sum(snp.sin(shardc.lax.scaled_dot(
        a, b, lhs_scale=sa, rhs_scale=sb, preferred_element_type=jnp.float32))),
        argnums=(0, 1)))(a, b)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("shapes,dn,match", [
    (((8,), (8,), None, None), None, "does not support 0-rank and 1-rank"),
    (((8, 64), (64, 16), (8, 2, 1), (2, 16)), None, "must have the same rank"),
    (((8, 64), (32, 16), None, None), None, "LHS contracting dim 1 of size 64 does not "
                                            "match RHS contracting dim 0 of size 32"),
    (((8, 64), (64, 16), (8, 3), (2, 16)), None, "must be divisible by its scale's dim"),
    (((8, 64), (64, 16), (8, 64), (2, 16)), None, r"\(1\) must be at least 2"),
    (((8, 64), (64, 16), (4, 2), (2, 16)), None, "LHS dim 0 of size 8 does not match"),
    (((2, 8, 64), (3, 64, 4), None, None), None, "same batch dimension size"),
    (((8, 64), (64, 16), None, None), (((1,), (0,)), ((0,), ())), "same number of batch"),
])
def test_errors_are_jaxs(shapes, dn, match):
    args = [None if s is None else np.ones(s, np.float32) for s in shapes]
    with pytest.raises(TypeError, match=match):
        jax.jit(_fn(jax.lax, dn, None))(*args)
    with pytest.raises(shardc.ShardcError, match=match):
        shardc.jit(_fn(shardc.lax, dn, None))(*args)
