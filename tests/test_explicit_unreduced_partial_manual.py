"""Explicit mode: partial sums (unreduced axes) in a shard_map manual over some mesh
axes only (axis_names={'X'}, Y left free). Shardy cannot place unreduced axes beside
manual ones: XLA aborted the process (a check failure; jax's programs too). Unreduced
in_specs or out_specs there are refused as jax refuses them (NotImplementedError), and
partial sums made in the body are an error naming the user's line."""
import jax
import jax.numpy as jnp
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp

from test_explicit_unreduced_types import A, B, _mesh, _u

UY = P(None, None, unreduced={"Y"})


def _sm(m):
    return jax.shard_map if m is jax else shardc.shard_map


SPECS = {
    "in_specs": lambda m, n, x, w: _sm(m)(
        lambda u: u + u, in_specs=P("X", None, unreduced={"Y"}),
        out_specs=P("X", None, unreduced={"Y"}), axis_names={"X"})(_u(m, n, x, w)),
    "out_specs": lambda m, n, x, w: _sm(m)(
        lambda a, b: a @ b, in_specs=(P(), P()), out_specs=UY, axis_names={"X"})(x, w),
}


@pytest.mark.parametrize("name", list(SPECS))
def test_unreduced_specs_refused_as_jax(name):
    for m, n in ((jax, jnp), (shardc, snp)):
        with m.set_mesh(_mesh(m)):
            with pytest.raises(NotImplementedError, match="full manual mode"):
                m.jit(lambda x, w: SPECS[name](m, n, x, w))(A, B)


def test_partial_sums_made_in_the_body_name_the_line():
    def body(a, b):
        u = snp.matmul(a, b, out_sharding=UY)      # (the line named)
        return shardc.reshard(u + u, P())

    def f(x, w):
        return shardc.shard_map(body, in_specs=(P(), P()), out_specs=P(), axis_names={"X"})(
            shardc.reshard(x, P(None, "Y")), shardc.reshard(w, P("Y", None)))
    with shardc.set_mesh(_mesh(shardc)):
        with pytest.raises(NotImplementedError,
                           match=r"partial_manual.py:42: partial sums .* manual over \['X'\]"):
            shardc.jit(f)(A, B)
