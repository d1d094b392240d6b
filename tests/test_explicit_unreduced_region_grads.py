"""Explicit mode, against jax.jit and NumPy: gradients of partial sums (unreduced) through
cond, switch and scan. Inside a transposed branch or loop body, the adds that sum
several cotangents of one value were untyped and kept no unreduced axes: XLA reduced
them, and the branch or body then yielded the whole value as partial sums (false branch
a + a: 4x jax's gradient on a 2x4 mesh, a scan's c + c + c: 9x after two steps, a cond
in a scan in a cond: 16x). They are typed partial sums now, as a gradient rule's own
ops are, where the ops they are re-traced on are partial sums too (a scan's carry with
no cotangent starts from zeros: a whole value, not held)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp

from test_explicit_unreduced_types import A, B, _mesh, _u

C = np.cos(np.arange(32, dtype=np.float32).reshape(8, 4))


def _lax(m):
    return jax.lax if m is jax else shardc.lax


def _cond(m, x, taken, t, f, a):
    """lax.cond taking branch t (taken=True) or f, on a predicate read from x."""
    return _lax(m).cond(x.sum() > 0 if taken else x.sum() < 0, t, f, a)


def _twice(a):
    return a + a


def _thrice(a):
    return a + a + a


def _same(a):
    return a


# body(m, x, u) of partial sums u, and the factor k of its gradient: k * d(u)
CASES = {
    "cond, false branch a + a": (lambda m, x, u: _cond(m, x, False, _same, _twice, u), 2),
    "cond, false branch a + a + a": (lambda m, x, u: _cond(m, x, False, _same, _thrice, u), 3),
    "cond, sums in either branch, either taken": (
        lambda m, x, u: _cond(m, x, True, _thrice, _twice, u)
        + _cond(m, x, False, _twice, _thrice, u) + _cond(m, x, False, _same, _twice, u), 8),
    "cond, true branch a + a + a, and false": (
        lambda m, x, u: _cond(m, x, True, _thrice, _same, u)
        + _cond(m, x, False, _same, _twice, u), 5),
    "switch": (lambda m, x, u: _lax(m).switch((x.sum() > 0).astype(np.int32),
                                             [_same, _thrice, _same], u), 3),
    "scan": (lambda m, x, u: _lax(m).scan(lambda c, _: (_thrice(c), c), u, None,
                                          length=2)[0], 9),
    "scan, reverse": (lambda m, x, u: _lax(m).scan(lambda c, _: (_thrice(c), None), u,
                                                   None, length=2, reverse=True)[0], 9),
    "scan, unroll=2": (lambda m, x, u: _lax(m).scan(lambda c, _: (_thrice(c), None), u,
                                                    None, length=3, unroll=2)[0], 27),
    "fori_loop": (lambda m, x, u: _lax(m).fori_loop(0, 2, lambda i, c: _thrice(c), u), 9),
    # (the first scan's carry has no cotangent: zeros, to which its body adds partial sums)
    "scans, ys of a sum": (lambda m, x, u: _lax(m).scan(
        lambda c, _: (c, _twice(c)), u, None, length=3)[1].sum(0)
        + _lax(m).scan(lambda c, _: (_thrice(c), None), u, None, length=2)[0], 15),
    "cond in a scan": (lambda m, x, u: _lax(m).scan(
        lambda c, _: (_cond(m, x, False, _same, _thrice, c), None), u, None, length=2)[0], 9),
    "cond in a scan in a cond": (lambda m, x, u: _cond(m, x, True, lambda a: _lax(m).scan(
        lambda c, _: (_cond(m, x, True, _twice, _same, c), None), a, None, length=2)[0],
        _same, u), 4),
    "checkpointed scan": (lambda m, x, u: m.checkpoint(lambda v: _lax(m).scan(
        lambda c, _: (_thrice(c), None), v, None, length=2)[0])(u), 9),
}


def _grads(m, n, body):
    def loss(x, w):
        return (m.reshard(body(m, x, _u(m, n, x, w)), P()) * C).sum()
    with m.set_mesh(_mesh(m)):
        return [np.asarray(g) for g in m.jit(m.grad(loss, argnums=(0, 1)))(A, B)]


@pytest.mark.parametrize("name", list(CASES))
def test_grad_of_partial_sums_through_regions_as_jax(name):
    body, k = CASES[name]
    got, want = _grads(shardc, snp, body), _grads(jax, jnp, body)
    for g, w, ref in zip(got, want, (C @ B.T, A.T @ C)):
        np.testing.assert_allclose(g, w, rtol=1e-5)
        np.testing.assert_allclose(g, k * ref, rtol=1e-4)
