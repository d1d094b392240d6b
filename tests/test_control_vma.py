"""Inside shard_map: a cond's results vary as its index does (each device takes its own
branch), a while loop's carries as its predicate does (each runs its own number of
steps), and a carry the loop body makes vary is typed varying from the first step. A
psum of such a value must sum it; typed invariant, it scaled device 0's instead."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, PartitionSpec as P

import shardc
import shardc.numpy as snp

X = np.zeros((8, 2), np.float32)


def _mesh():
    return jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))


# (lax, numpy) -> body of a shard_map over x, in P("x"), out P()
BODIES = {
    "cond": lambda L, N: lambda t: L.psum(L.cond(L.axis_index("x") > 3, lambda: N.ones(2),
                                                 lambda: N.ones(2) * 2), "x"),
    "switch": lambda L, N: lambda t: L.psum(L.switch(
        L.axis_index("x") % 3, [lambda: N.ones(2), lambda: N.ones(2) * 2,
                                lambda: N.ones(2) * 3]), "x"),
    "while_pred": lambda L, N: lambda t: L.psum(L.while_loop(
        lambda c: c[1] < L.axis_index("x"), lambda c: (c[0] + 1., c[1] + 1),
        (N.zeros(2), 0))[0], "x"),
    "data_pred": lambda L, N: lambda t: L.psum(L.cond(
        (t + L.axis_index("x")).sum() > 5, lambda: N.ones(2), lambda: N.zeros(2)), "x"),
    "passed_through": lambda L, N: lambda t: L.cond(
        L.axis_index("x") > 3, lambda a: a, lambda a: a, N.ones(2)),
}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_varying_predicate_as_jax(name):
    m = _mesh()
    want = jax.jit(jax.shard_map(BODIES[name](jax.lax, jnp), mesh=m, in_specs=P("x"),
                                 out_specs=P()))(X)
    got = shardc.jit(shardc.shard_map(BODIES[name](shardc.lax, snp), mesh=m,
                                      in_specs=P("x"), out_specs=P()))(X)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_result_of_a_varying_choice_is_not_replicated():
    body = lambda t: shardc.lax.cond(shardc.lax.axis_index("x") > 3,   # noqa: E731
                                     lambda: snp.ones(2), lambda: snp.ones(2) * 2)
    with pytest.raises(Exception, match="varies along"):
        shardc.jit(shardc.shard_map(body, mesh=_mesh(), in_specs=P("x"), out_specs=P()))(X)


def test_carry_made_varying_is_summed_by_psum_in_the_body():
    """c <- psum(c) + i twice: step 1 gives c = i, step 2 psum(i) + i = 28 + i (jax
    rejects the loop: its carry's type changes)."""
    L = shardc.lax
    want = 28 + np.arange(8, dtype=np.float32)

    def w(t):
        return L.while_loop(lambda c: c[1] < 2, lambda c: (
            L.psum(c[0], "x") + L.axis_index("x").astype(np.float32), c[1] + 1),
            (np.float32(0), 0))[0][None]

    def s(t):
        return L.scan(lambda c, _: (L.psum(c, "x") + L.axis_index("x").astype(np.float32),
                                    None), np.float32(0), None, length=2)[0][None]

    def f(t):
        return L.fori_loop(0, 2, lambda _, c: L.psum(c, "x") + L.axis_index("x").astype(
            np.float32), np.float32(0))[None]
    for body in (w, s, f):
        got = shardc.jit(shardc.shard_map(body, mesh=_mesh(), in_specs=P("x"),
                                          out_specs=P("x")))(X)
        np.testing.assert_array_equal(np.asarray(got), want)
