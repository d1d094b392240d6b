"""Discrete distributions of jax.scipy.stats: bernoulli, binom, betabinom, geom, nbinom,
poisson (with its entropy) and multinomial."""
from __future__ import annotations

import numpy as np

from .. import numpy as snp
from ...errors import ArgumentError, wrap_public
from ...ir import dtypes
from ..numpy._util import aval, check_arraylike, promote_args_numeric, \
    promote_dtypes_inexact
from ..scipy_special import betaln, entr, gammaln, xlog1py, xlogy
from ..scipy_special5 import gammaincc
from ._util import jitted, lax_const, materialize, promote

__all__ = [f"{d}_{f}" for d, fs in {
    "bernoulli": "logpmf pmf cdf ppf",
    "binom": "logpmf pmf",
    "betabinom": "logpmf pmf",
    "geom": "logpmf pmf",
    "nbinom": "logpmf pmf",
    "poisson": "logpmf pmf cdf entropy",
    "multinomial": "logpmf pmf"}.items() for f in fs.split()]


# ---------------------------------------------------------------- bernoulli

def bernoulli_logpmf(k, p, loc=0):
    k, p, loc = promote("bernoulli.logpmf", k, p, loc)
    x = k - loc
    log_probs = xlogy(x, p) + xlog1py(1 - x, -p)
    return snp.where((x < 0) | (x > 1), -np.inf, log_probs)


def bernoulli_pmf(k, p, loc=0):
    return snp.exp(bernoulli_logpmf(k, p, loc))


def _bad_p(p):
    return snp.isnan(p) | (p < 0) | (p > 1)


def bernoulli_cdf(k, p):
    k, p = promote("bernoulli.cdf", k, p)
    zero, one = lax_const(k, 0), lax_const(k, 1)
    return snp.select([snp.isnan(k) | _bad_p(p), k < 0, (k >= 0) & (k < 1), k >= 1],
                      [np.nan, zero, one - p, one])


def bernoulli_ppf(q, p):
    q, p = promote("bernoulli.ppf", q, p)
    zero, one = lax_const(q, 0), lax_const(q, 1)
    return snp.where(snp.isnan(q) | _bad_p(p) | (q < 0) | (q > 1), np.nan,
                     snp.where(q <= one - p, zero, one))


# ---------------------------------------------------------------- binom / betabinom

def binom_logpmf(k, n, p, loc=0):
    k, n, p, loc = promote("binom.logpmf", k, n, p, loc)
    y = k - loc
    comb = gammaln(n + 1) - (gammaln(y + 1) + gammaln(n - y + 1))
    log_linear = xlogy(y, p) + xlog1py(n - y, -p)
    # 0 * log(0) terms: certain outcomes have probability exactly 1
    log_probs = snp.where(((y == 0) & (n == 0)) | (log_linear == 0), 0.0, comb + log_linear)
    return snp.where((k >= loc) & (k < loc + n + 1), log_probs, -np.inf)


def binom_pmf(k, n, p, loc=0):
    return snp.exp(binom_logpmf(k, n, p, loc))


def _betabinom_logpmf(k, n, a, b, loc):
    k, n, a, b, loc = promote("betabinom.logpmf", k, n, a, b, loc)
    y = snp.floor(k) - loc
    comb = -(snp.log1p(n) + betaln(n - y + 1, y + 1))
    log_probs = comb + (betaln(y + a, n - y + b) - betaln(a, b))
    log_probs = snp.where((y == 0) & (n == 0), 0.0, log_probs)
    log_probs = snp.where((y < -loc) | (y > n) | (y + a <= 0), -np.inf, log_probs)
    return snp.where((n < 0) | (a <= 0) | (b <= 0), np.nan, log_probs)


def betabinom_logpmf(k, n, a, b, loc=0):
    return jitted(_betabinom_logpmf, k, n, a, b, loc)


def betabinom_pmf(k, n, a, b, loc=0):
    return snp.exp(betabinom_logpmf(k, n, a, b, loc))


# ---------------------------------------------------------------- geom / nbinom

def geom_logpmf(k, p, loc=0):
    k, p, loc = promote("geom.logpmf", k, p, loc)
    x = k - loc
    return snp.where(x <= 0, -np.inf, xlog1py(x - 1, -p) + snp.log(p))


def geom_pmf(k, p, loc=0):
    return snp.exp(geom_logpmf(k, p, loc))


def nbinom_logpmf(k, n, p, loc=0):
    k, n, p, loc = promote("nbinom.logpmf", k, n, p, loc)
    y = k - loc
    comb = gammaln(y + n) - gammaln(n) - gammaln(y + 1)
    log_linear = xlogy(n, p) + xlogy(y, 1 - p)
    return snp.where(k < loc, -np.inf, comb + log_linear)


def nbinom_pmf(k, n, p, loc=0):
    return snp.exp(nbinom_logpmf(k, n, p, loc))


# ---------------------------------------------------------------- poisson

def poisson_logpmf(k, mu, loc=0):
    k, mu, loc = promote("poisson.logpmf", k, mu, loc)
    x = k - loc
    log_probs = xlogy(x, mu) - gammaln(x + 1) - mu
    return snp.where((x < 0) | (snp.round(k) != k), -np.inf, log_probs)


def poisson_pmf(k, mu, loc=0):
    return snp.exp(poisson_logpmf(k, mu, loc))


def poisson_cdf(k, mu, loc=0):
    k, mu, loc = promote("poisson.logpmf", k, mu, loc)    # (jax's name for it)
    x = k - loc
    return snp.where(x < 0, lax_const(k, 0), gammaincc(snp.floor(1 + x), mu))


def _entropy_sum(mu, max_k, upper):
    """-sum p log p over k < min(max_k, upper): the pmf's mass beyond is negligible."""
    k = snp.arange(max_k, dtype=aval(mu).dtype)[:, None]
    probs = snp.where(k < upper[None, :], poisson_pmf(k, mu, 0), 0.0)
    return snp.sum(entr(probs), axis=0)


def _poisson_entropy(mu, loc):
    check_arraylike("poisson.entropy", mu, loc)
    mu, loc = materialize(*promote_dtypes_inexact(mu, loc))
    out_shape = snp.broadcast_shapes(mu.shape, loc.shape)
    m = snp.ravel(mu)
    small = _entropy_sum(m, 35, snp.ceil(m + 20))
    medium = _entropy_sum(m, 250, snp.ceil(m + 10 * snp.sqrt(m) + 20))
    large = 0.5 * snp.log(2 * np.pi * np.e * m) - 1.0 / (12 * m)
    out = snp.where(m == 0, snp.zeros_like(m),
                    snp.where(m < 10, small, snp.where(m < 100, medium, large)))
    return snp.broadcast_to(snp.reshape(out, mu.shape), out_shape)


def poisson_entropy(mu, loc=0):
    return jitted(_poisson_entropy, mu, loc)


# ---------------------------------------------------------------- multinomial

def multinomial_logpmf(x, n, p):
    (p,) = promote("multinomial.logpmf", p)
    x, n = materialize(*promote_args_numeric("multinomial.logpmf", x, n))
    if not dtypes.is_int(aval(x).dtype):
        raise ArgumentError(f"x and n must be of integer type; got x.dtype={aval(x).dtype}, "
                            f"n.dtype={aval(n).dtype}")
    x, n = snp.astype(x, aval(p).dtype), snp.astype(n, aval(p).dtype)
    logprobs = gammaln(n + 1) + snp.sum(xlogy(x, p) - gammaln(x + 1), axis=-1)
    # (as jax's: the count check sums x over every axis)
    return snp.where(snp.sum(x) == n, logprobs, -np.inf)


def multinomial_pmf(x, n, p):
    return snp.exp(multinomial_logpmf(x, n, p))


wrap_public(globals())
