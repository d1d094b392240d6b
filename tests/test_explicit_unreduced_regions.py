"""Explicit mode, against jax: partial sums (unreduced) inside regions. A cond's
branches keep them (XLA re-decides the shardings of a branch's ops and reduced them:
8u for jax's 2u on a 2x4 mesh), and a loop carry of partial sums that a gradient or
tangent rule computes (untyped) stays so round the loop (reduced, then summed again
each trip: 4^length too large). Where jax adds up whole values, the values are checked
against NumPy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp

from test_explicit_unreduced_types import A, B, _mesh, _run, _u

U = A @ B
C = np.cos(np.arange(32, dtype=np.float32).reshape(8, 4))


def _lax(m):
    return jax.lax if m is jax else shardc.lax


def _cond(m, x, a, t, f):
    return _lax(m).cond(x.sum() > 0, t, f, a)     # (x > 0: the first branch)


BRANCHES = {
    "cond": lambda m, n, x, w: _cond(m, x, _u(m, n, x, w), lambda a: a + a, lambda a: a),
    "switch": lambda m, n, x, w: _lax(m).switch(
        2, [lambda a: a, lambda a: a + a, lambda a: a + a + a], _u(m, n, x, w)),
    "cond in a scan": lambda m, n, x, w: _lax(m).scan(
        lambda c, _: (_cond(m, x, c, lambda a: a + a, lambda a: a),) * 2,
        _u(m, n, x, w), None, length=2)[1],
}


@pytest.mark.parametrize("name", list(BRANCHES))
def test_branches_as_jax(name):
    want_t, want_spec, want_v = _run(jax, jnp, BRANCHES[name])
    got_t, got_spec, got_v = _run(shardc, snp, BRANCHES[name])
    assert (got_t, got_spec) == (want_t, want_spec)
    np.testing.assert_allclose(got_v, want_v, rtol=1e-5)


AS_NUMPY = {   # (jax: 8u and 12u; 4x the ys)
    "cond, two results": (lambda m, n, x, w: n.stack(_cond(
        m, x, _u(m, n, x, w), lambda a: (a + a, a + a + a), lambda a: (a, a))),
        np.stack([2 * U, 3 * U])),
    "scan, ys summed from the carry": (lambda m, n, x, w: _lax(m).scan(
        lambda c, _: (c, c.sum(0)), _u(m, n, x, w), None, length=2)[1],
        np.stack([U.sum(0)] * 2)),
}


@pytest.mark.parametrize("name", list(AS_NUMPY))
def test_regions_of_partial_sums_as_numpy(name):
    f, want = AS_NUMPY[name]
    got_t, got_spec, got_v = _run(shardc, snp, f)
    assert got_spec.unreduced == {"Y"}, got_t
    np.testing.assert_allclose(got_v, want, rtol=1e-5)


def _scan(m, u):
    return _lax(m).scan(lambda c, _: (c + c, c), u, None, length=2, unroll=2)[0]


def _fori(m, u):
    return _lax(m).fori_loop(0, 2, lambda i, c: c + c, u)


@pytest.mark.parametrize("loop", [_scan, _fori])
def test_grad_of_a_carry_of_partial_sums(loop):
    def run(m, n):
        def loss(x, w):
            return (m.reshard(loop(m, _u(m, n, x, w)), P()) * C).sum()
        with m.set_mesh(_mesh(m)):
            return [np.asarray(g) for g in m.jit(m.grad(loss, argnums=(0, 1)))(A, B)]
    for got, want, ref in zip(run(shardc, snp), run(jax, jnp), (C @ B.T, A.T @ C)):
        np.testing.assert_allclose(got, want, rtol=1e-5)
        np.testing.assert_allclose(got, 4 * ref, rtol=1e-4)


def _partial(m, x, w):
    """Partial sums over Y from a shard_map (differentiable both ways)."""
    return m.shard_map(lambda a, b: a @ b, in_specs=(P(None, "Y"), P("Y", None)),
                       out_specs=P(None, None, unreduced={"Y"}))(
        m.reshard(x, P(None, "Y")), m.reshard(w, P("Y", None)))


@pytest.mark.parametrize("loop", ["scan", "while"])
def test_jvp_of_a_carry_of_partial_sums(loop):
    def run(m):
        def f(x):
            u = _partial(m, x, B)
            if loop == "scan":
                u = _lax(m).scan(lambda c, _: (c + c, None), u, None, length=2)[0]
            else:
                u = _lax(m).while_loop(lambda s: s[0] < 2, lambda s: (s[0] + 1, s[1] + s[1]),
                                       (0, u))[1]
            return m.reshard(u, P())
        with m.set_mesh(_mesh(m)):
            return np.asarray(m.jit(lambda x: m.jvp(f, (x,), (x,))[1])(A))
    want = run(jax)
    np.testing.assert_allclose(run(shardc), want, rtol=1e-5)
    np.testing.assert_allclose(want, 4 * U, rtol=1e-4)
