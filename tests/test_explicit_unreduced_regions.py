"""Explicit mode, against jax: partial sums (unreduced) inside regions. A cond's
branches keep them (XLA re-decides the shardings of a branch's ops and reduced them:
8u for jax's 2u on a 2x4 mesh). Where jax adds up whole values, the values are checked
against NumPy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp

from test_explicit_unreduced_types import A, B, _run, _u

U = A @ B


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


AS_NUMPY = {   # (jax: 8u and 12u)
    "cond, two results": (lambda m, n, x, w: n.stack(_cond(
        m, x, _u(m, n, x, w), lambda a: (a + a, a + a + a), lambda a: (a, a))),
        np.stack([2 * U, 3 * U])),
}


@pytest.mark.parametrize("name", list(AS_NUMPY))
def test_regions_of_partial_sums_as_numpy(name):
    f, want = AS_NUMPY[name]
    got_t, got_spec, got_v = _run(shardc, snp, f)
    assert got_spec.unreduced == {"Y"}, got_t
    np.testing.assert_allclose(got_v, want, rtol=1e-5)

