"""while_loop's predicate sees the carries with the loop's one sharding (Shardy's while
edge ties operand, both regions' block arguments, the body's yield and the result): a
sharding the body decides reaches the predicate's block arguments too, and the program
still computes jax's values with jax's result shardings."""
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc import lax


def _mine(a, w):
    return lax.while_loop(lambda c: (c[0] < 4) & (c[1].sum() > -1e9),
                          lambda c: (c[0] + 1, snp.tanh(c[1] @ w) + 1.0), (0, a))


def _jax(a, w):
    return jax.lax.while_loop(lambda c: (c[0] < 4) & (c[1].sum() > -1e9),
                              lambda c: (c[0] + 1, jnp.tanh(c[1] @ w) + 1.0), (0, a))


def test_predicate_block_arguments_take_the_bodys_sharding(mesh2x4):
    a = jax.device_put(np.full((8, 16), 0.1, np.float32), NamedSharding(mesh2x4, P("x")))
    w = jax.device_put(np.full((16, 16), 0.05, np.float32),
                       NamedSharding(mesh2x4, P(None, "y")))
    p = shardc.jit(_mine).trace(a, w).propagate().program
    (op,) = [op for op in p.ops if op.prim.name == "while"]
    cond, body = op.regions
    assert str(body.inputs[1].sharding) == "[{x}, {y}]"
    assert cond.inputs[1].sharding == body.inputs[1].sharding == op.outputs[1].sharding
    got = shardc.jit(_mine)(a, w)
    want = jax.jit(_jax)(a, w)
    assert int(got[0]) == int(want[0])
    np.testing.assert_allclose(np.asarray(got[1]), np.asarray(want[1]), rtol=1e-5)
    assert got[1].sharding.is_equivalent_to(want[1].sharding, 2), \
        (got[1].sharding, want[1].sharding)
