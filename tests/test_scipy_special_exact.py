"""shardc.scipy.special is jax.scipy.special, bit for bit (eagerly and under jit, with
the operands as arguments), including gradients of the chlo-lowered functions."""
import jax
import jax.numpy as jnp
import jax.scipy.special as js
import numpy as np
import pytest

import shardc
import shardc.scipy.special as ss

X = jnp.array([-2.5, -1., -0.5, 0., 0.3, 1., 2.5, 7.])
P = jnp.array([0.01, 0.2, 0.5, 0.7, 0.99, 0.3, 0.1, 0.9])
N = jnp.arange(1, 9)

CASES = [
    ("gammaln", lambda m, x, p, n: m.gammaln(x)),
    ("gammaln_int", lambda m, x, p, n: m.gammaln(n)),
    ("digamma", lambda m, x, p, n: m.digamma(x)),
    ("erf", lambda m, x, p, n: m.erf(x)),
    ("erfc", lambda m, x, p, n: m.erfc(x)),
    ("erfinv", lambda m, x, p, n: m.erfinv(p)),
    ("expit", lambda m, x, p, n: m.expit(x)),
    ("logit", lambda m, x, p, n: m.logit(p)),
    ("i1e", lambda m, x, p, n: m.i1e(x)),
    ("polygamma", lambda m, x, p, n: m.polygamma(n, p)),
    ("zeta", lambda m, x, p, n: m.zeta(x + 3., p)),
    ("xlogy", lambda m, x, p, n: m.xlogy(x, p)),
    ("xlog1py", lambda m, x, p, n: m.xlog1py(x, p)),
    ("entr", lambda m, x, p, n: m.entr(x)),
    ("rel_entr", lambda m, x, p, n: m.rel_entr(p, x)),
    ("kl_div", lambda m, x, p, n: m.kl_div(p, x)),
    ("gammasgn", lambda m, x, p, n: m.gammasgn(x)),
    ("gamma", lambda m, x, p, n: m.gamma(x)),
    ("factorial", lambda m, x, p, n: m.factorial(x)),
    ("multigammaln", lambda m, x, p, n: m.multigammaln(x + 5., 3)),
    ("ndtr", lambda m, x, p, n: m.ndtr(x)),
    ("softmax", lambda m, x, p, n: m.softmax(x)),
    ("log_softmax", lambda m, x, p, n: m.log_softmax(x)),
    ("logsumexp", lambda m, x, p, n: m.logsumexp(x)),
    ("gammainc", lambda m, x, p, n: m.gammainc(p * 5, x + 3.)),
    ("gammaincc", lambda m, x, p, n: m.gammaincc(p * 5, x + 3.)),
    ("bf16", lambda m, x, p, n: m.gammaln(x.astype(jnp.bfloat16))),
]


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    assert np.array_equal(a, b, equal_nan=True), (a, b)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_matches_jax(case):
    _, fn = case
    same(fn(ss, X, P, N), fn(js, X, P, N))
    same(shardc.jit(lambda x, p, n: fn(ss, x, p, n))(X, P, N),
         jax.jit(lambda x, p, n: fn(js, x, p, n))(X, P, N))


@pytest.mark.parametrize("name", ["erfinv", "gammaln", "digamma"])
def test_gradients(name):
    x = P if name == "erfinv" else X[4:]
    a = shardc.grad(lambda v: shardc.numpy.sum(getattr(ss, name)(v)))(x)
    b = jax.grad(lambda v: jnp.sum(getattr(js, name)(v)))(x)
    np.testing.assert_allclose(a, b, rtol=2e-6)


def test_sharded_operand_keeps_its_sharding(mesh2x4):
    from jax.sharding import NamedSharding, PartitionSpec as Ps
    x = jax.device_put(jnp.linspace(0.1, 0.9, 64).reshape(8, 8),
                       NamedSharding(mesh2x4, Ps("x", "y")))
    for name in ("erfinv", "gammaln", "digamma", "i1e"):
        got = shardc.jit(getattr(ss, name))(x)
        want = jax.jit(getattr(js, name))(x)
        same(got, want)
        assert got.sharding.spec == want.sharding.spec


def test_polygamma_needs_integer_order():
    with pytest.raises(ValueError, match="must be of integer type"):
        ss.polygamma(1.5, P)
