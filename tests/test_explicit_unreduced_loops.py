"""Explicit mode, against jax: a scan's stacked ys keep their partial sums (unreduced)
and reduced axes in their type and result spec, with the leading stacked dim, as
jax's; their values stay partial sums through the loop (held by constraints: XLA
reduced a step's y, then added up whole values, 4x on a 2x4 mesh). Loop constants
and scanned xs of partial sums stay so too (where jax adds them up whole, or
refuses: the values are checked against NumPy there)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp

from test_explicit_unreduced_types import A, B, _r, _run, _u


def _lax(m):
    return jax.lax if m is jax else shardc.lax


AS_JAX = {
    "ys": lambda m, n, x, w: _lax(m).scan(
        lambda c, xi: (c, _u(m, n, xi, w)), 0., x.reshape(2, 4, 16))[1],
    "ys of the carry": lambda m, n, x, w: _lax(m).scan(
        lambda c, _: (c + c, c), _u(m, n, x, w), None, length=3)[1],
    "reduced ys": lambda m, n, x, w: _lax(m).scan(
        lambda c, _: (c, c), _r(m, x), None, length=2)[1],
}


@pytest.mark.parametrize("name", list(AS_JAX))
def test_scan_ys_as_jax(name):
    want_t, want_spec, want_v = _run(jax, jnp, AS_JAX[name])
    got_t, got_spec, got_v = _run(shardc, snp, AS_JAX[name])
    assert got_t == want_t
    assert got_spec == want_spec
    np.testing.assert_allclose(got_v, want_v, rtol=1e-5)


U = A @ B
AS_NUMPY = {   # (jax: 13u and 14u, a constant reduced every trip; map: refused)
    "while, a constant": (lambda m, n, x, w: (lambda u: _lax(m).while_loop(
        lambda s: s[0] < 3, lambda s: (s[0] + 1, s[1] + u), (0, u))[1])(_u(m, n, x, w)),
        4 * U),
    "scan, a constant": (lambda m, n, x, w: (lambda u: _lax(m).scan(
        lambda c, _: (c + u, c + u), u, None, length=2)[1])(_u(m, n, x, w)),
        np.stack([2 * U, 3 * U])),
    "map over partial sums": (lambda m, n, x, w: _lax(m).map(
        lambda xi: xi + xi, _u(m, n, x, w).reshape(2, 4, 4)), 2 * U.reshape(2, 4, 4)),
}


@pytest.mark.parametrize("name", list(AS_NUMPY))
def test_loop_constants_and_xs_of_partial_sums(name):
    f, want = AS_NUMPY[name]
    got_t, got_spec, got_v = _run(shardc, snp, f)
    assert got_spec.unreduced == {"Y"}, got_t
    np.testing.assert_allclose(got_v, want, rtol=1e-5)
