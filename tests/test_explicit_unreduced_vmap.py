"""Explicit mode, against jax: vmap of a dot (jnp.dot, einsum, matmul) whose
out_sharding leaves partial sums (P(..., unreduced={'Y'})) keeps them, the batch dim
inserted in the spec (over spmd_axis_name where given), as jax's; shardc typed the
batched result whole."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.errors import ShardcError

from test_explicit_unreduced_types import A, B, _mesh, _run

U = P(None, None, unreduced={"Y"})
DOTS = {
    "dot": lambda n, a, b: n.dot(a, b, out_sharding=U),
    "einsum": lambda n, a, b: n.einsum("ij,jk->ik", a, b, out_sharding=U),
    "matmul": lambda n, a, b: n.matmul(a, b, out_sharding=U),
}


def _case(dot, axis=0, spmd=None):
    def f(m, n, x, w):
        xs = m.reshard(n.stack([x, x * 2], axis),
                       P(*[spmd if d == axis else None for d in range(2)], "Y"))
        return m.vmap(lambda a, b: dot(n, a, b), in_axes=(axis, None), out_axes=axis,
                      spmd_axis_name=spmd)(xs, m.reshard(w, P("Y", None)))
    return f


CASES = {**{k: _case(d) for k, d in DOTS.items()},
         "matmul, mapped dim 1": _case(DOTS["matmul"], axis=1),
         "matmul, spmd_axis_name": _case(DOTS["matmul"], spmd="X")}


@pytest.mark.parametrize("name", list(CASES))
def test_vmap_of_a_dot_left_partial_as_jax(name):
    want_t, want_spec, want_v = _run(jax, jnp, CASES[name])
    got_t, got_spec, got_v = _run(shardc, snp, CASES[name])
    assert got_t == want_t
    assert got_spec == want_spec
    np.testing.assert_allclose(got_v, want_v, rtol=1e-5)


def test_spmd_axis_name_an_unreduced_axis_of_the_constraint_is_an_error():
    """(shardc raised PartitionSpec's ValueError: partitions cannot overlap with
    unreduced axes)"""
    def f(x, w):
        xs = shardc.reshard(snp.stack([x] * 4), P(None, None, "Y"))
        return shardc.vmap(lambda a, b: DOTS["matmul"](snp, a, b), in_axes=(0, None),
                           spmd_axis_name="Y")(xs, shardc.reshard(w, P("Y", None)))
    with shardc.set_mesh(_mesh(shardc)):
        with pytest.raises(ShardcError, match="spmd_axis_name .*already used"):
            shardc.jit(f)(A, B)
