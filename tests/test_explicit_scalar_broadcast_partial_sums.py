"""Explicit mode: partial sums (values unreduced over mesh axes) behind an elementwise
op's implicit broadcast of a scalar, against jax (jax.grad on one device where jax's
explicit mode has no rule). Shardy takes a scalar's broadcast for one it may copy per
use and drops its sharding, so XLA reduced the partial sums there and the sum counted
them once per device (4x on a 2x4 mesh); an explicit broadcast_to was right."""
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp

from test_explicit_unreduced_types import A, B, _mesh, _u  # (its inputs and mesh)

W = (np.arange(64, dtype=np.float32).reshape(16, 4) % 7 - 3) / 5


def _r(m, w):
    return m.reshard(w, P(None, None, reduced={"Y"})) if m is shardc else w


def test_vmap_of_a_gradient_with_a_scalar_cotangent_broadcast():
    # the seed's partial sums times a batched scalar, broadcast implicitly: 4x
    f = lambda m, n: lambda w: n.sqrt((_r(m, w) ** 2).sum())
    ws = np.stack([W, W / 2 + 1])
    with shardc.set_mesh(_mesh(shardc)):
        got = shardc.jit(shardc.vmap(shardc.grad(f(shardc, snp))))(ws)
    want = jax.vmap(jax.grad(f(jax, jnp)))(ws)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)


def test_reduced_times_an_implicitly_broadcast_partial_sums_scalar():
    # r * u.sum() was 4x what r * broadcast_to(u.sum(), ...) gives (jax raises
    # NotImplementedError: no rule for broadcast_in_dim of partial sums)
    def f(x, w, r, explicit_broadcast):
        s = _u(shardc, snp, x, w).sum()
        s = snp.broadcast_to(s, r.shape) if explicit_broadcast else s
        return shardc.reshard(shardc.reshard(r, P(reduced={"Y"})) * s, P())
    want = B[:8] * (A @ B).sum()
    with shardc.set_mesh(_mesh(shardc)):
        for explicit_broadcast in (False, True):
            got = shardc.jit(lambda *a: f(*a, explicit_broadcast))(A, B, B[:8])
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
