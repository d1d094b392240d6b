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


@pytest.mark.parametrize("loop", ["scan", "fori", "while"])
def test_unchecked_body_adds_no_pvary_to_carries(loop):
    """With check_vma=False a carry is not retyped (a pvary's transpose is a psum: the
    gradient of an invariant init carry came out 8 times too large)."""
    m = _mesh()
    xs = np.arange(1, 9, dtype=np.float32).reshape(8, 1)
    c0 = np.ones((1,), np.float32)

    def make(J, L):
        def body(c, x):
            if loop == "scan":
                return L.scan(lambda c, xi: (c * xi, None), c, x)[0]
            if loop == "fori":
                return L.fori_loop(0, 1, lambda i, c: c * x[i], c)
            return L.while_loop(lambda v: v[1] < 1, lambda v: (v[0] * x[0], v[1] + 1),
                                (c, 0))[0]
        sm = J.shard_map(body, mesh=m, in_specs=(P(), P("x")), out_specs=P("x"),
                         check_vma=False)
        return J.jit(J.grad(lambda c, x: sm(c, x).sum()))
    if loop == "while":     # (no reverse mode through a while: its forward mode)
        want = jax.jit(jax.jacfwd(lambda c: jax.shard_map(
            lambda c, x: jax.lax.while_loop(lambda v: v[1] < 1, lambda v: (
                v[0] * x[0], v[1] + 1), (c, 0))[0], mesh=m, in_specs=(P(), P("x")),
            out_specs=P("x"), check_vma=False)(c, xs).sum()))(c0)
        got = shardc.jit(shardc.jacfwd(lambda c: shardc.shard_map(
            lambda c, x: shardc.lax.while_loop(lambda v: v[1] < 1, lambda v: (
                v[0] * x[0], v[1] + 1), (c, 0))[0], mesh=m, in_specs=(P(), P("x")),
            out_specs=P("x"), check_vma=False)(c, xs).sum()))(c0)
    else:
        want, got = make(jax, jax.lax)(c0, xs), make(shardc, shardc.lax)(c0, xs)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
