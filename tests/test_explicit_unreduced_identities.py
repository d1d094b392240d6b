"""Explicit mode, against jax: ops that only pass partial sums (unreduced) through --
x.copy(), stop_gradient, optimization_barrier, checkpoint_name, a pad with zeros
(jnp.pad's padding value is a constant array, not a literal) -- keep them, as jax's,
rather than being ShardingTypeErrors; a pad with a nonzero value still is (jax pads
with it on every device, and the reduction multiplies it). A loop carrying partial
sums keeps them across iterations: XLA reduced the carry each trip (fori_loop of
a + a three times over 4 devices: 64x the value)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.errors import ShardingTypeError

from test_explicit_unreduced_types import A, B, _mesh, _u  # (its inputs and mesh)


def _lax(m):
    return jax.lax if m is jax else shardc.lax


def _name(m):
    from jax.ad_checkpoint import checkpoint_name
    return checkpoint_name if m is jax else shardc.ad_checkpoint.checkpoint_name


CASES = {
    "copy": lambda m, n, u: u.copy(),
    "stop_gradient": lambda m, n, u: _lax(m).stop_gradient(u),
    "optimization_barrier": lambda m, n, u: _lax(m).optimization_barrier((u, n.ones(3)))[0],
    "checkpoint_name": lambda m, n, u: _name(m)(u, "u"),
    "jnp.pad": lambda m, n, u: n.pad(u, ((1, 0), (0, 2))),
    "lax.pad, a traced zero": lambda m, n, u: _lax(m).pad(u, n.float32(0),
                                                          [(1, 1, 0), (0, 0, 0)]),
    "fori_loop": lambda m, n, u: _lax(m).fori_loop(0, 3, lambda i, a: a + a, u),
    "scan": lambda m, n, u: _lax(m).scan(lambda a, _: (a + a, None), u, None, length=3)[0],
    "while_loop": lambda m, n, u: _lax(m).while_loop(
        lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] + s[1]), (0, u))[1],
}


def _run(m, n, f):
    seen = []

    def g(x, w):
        out = f(m, n, _u(m, n, x, w))
        seen.append(str(m.typeof(out)))
        return m.reshard(out, P())
    with m.set_mesh(_mesh(m)):
        return seen, np.asarray(m.jit(g)(A, B))


@pytest.mark.parametrize("name", list(CASES))
def test_partial_sums_pass_through_as_jax(name):
    want_t, want = _run(jax, jnp, CASES[name])
    got_t, got = _run(shardc, snp, CASES[name])
    assert got_t == want_t
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_pad_of_partial_sums_with_a_nonzero_value_is_a_type_error():
    with shardc.set_mesh(_mesh(shardc)):
        with pytest.raises(ShardingTypeError, match="test_explicit_unreduced_identities"):
            shardc.jit(lambda x, w: snp.pad(_u(shardc, snp, x, w), 1, constant_values=3.))(A, B)


def _r(m, x):
    return m.reshard(x, P(None, None, reduced={"Y"}))


@pytest.mark.parametrize("how", ["grad", "jvp"])
def test_differentiating_at_partial_sums(how):
    """grad/jvp wrap each primal in a copy and tie its gradient's sharding to it (a
    sharding group): neither refuses partial sums (values as jax's, once reduced)."""
    C = np.arange(32, dtype=np.float32).reshape(8, 4) / 7

    def run(m, n):
        def g(x, w, c):
            u = _u(m, n, x, w)
            if how == "grad":
                out = m.grad(lambda a: (a * _r(m, c)).sum())(u)
            else:
                out = m.jvp(lambda a: a + a, (u,), (u,))[1]
            return m.reshard(out, P())
        with m.set_mesh(_mesh(m)):
            return np.asarray(m.jit(g)(A, B, C))
    np.testing.assert_allclose(run(shardc, snp), run(jax, jnp), rtol=1e-5)
