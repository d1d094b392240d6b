"""Distributions of jax.scipy.stats with shape parameters: beta, chi2, gamma, pareto,
gennorm, truncnorm, vonmises and wrapcauchy (jax's formulas, out-of-support and
bad-parameter results included)."""
from __future__ import annotations

import numpy as np

from .. import numpy as snp
from ...errors import wrap_public
from ..lax_ops import clamp
from ..lax_special import bessel_i0e, igamma, lgamma
from ..nn import logsumexp
from ..scipy_special import betaln, gammaln, xlog1py, xlogy
from ..scipy_special2 import log_ndtr, ndtr
from ..scipy_special5 import betainc, gammainc, gammaincc
from ._util import jitted, promote
from .location import norm_logpdf

__all__ = [f"{d}_{f}" for d, fs in {
    "beta": "logpdf pdf cdf logcdf sf logsf",
    "chi2": "logpdf pdf cdf logcdf sf logsf",
    "gamma": "logpdf pdf cdf logcdf sf logsf",
    "pareto": "logpdf pdf cdf logcdf logsf sf ppf",
    "gennorm": "logpdf cdf pdf",
    "truncnorm": "logpdf pdf logsf sf logcdf cdf",
    "vonmises": "logpdf pdf",
    "wrapcauchy": "logpdf pdf"}.items() for f in fs.split()]


def _clamp01(y):
    return clamp(np.asarray(0, y.dtype), y, np.asarray(1, y.dtype))


def _clamp0inf(y):
    return clamp(np.asarray(0, y.dtype), y, np.asarray(np.inf, y.dtype))


# ---------------------------------------------------------------- beta

def beta_logpdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote("beta.logpdf", x, a, b, loc, scale)
    y = (x - loc) / scale
    log_probs = -betaln(a, b) + (xlogy(a - 1, y) + xlog1py(b - 1, -y)) - snp.log(scale)
    out = snp.where((x > loc + scale) | (x < loc), -np.inf, log_probs)
    return snp.where((a <= 0) | (b <= 0) | (scale <= 0), np.nan, out)


def beta_pdf(x, a, b, loc=0, scale=1):
    return snp.exp(beta_logpdf(x, a, b, loc, scale))


def beta_cdf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote("beta.cdf", x, a, b, loc, scale)
    return betainc(a, b, _clamp01((x - loc) / scale))


def beta_logcdf(x, a, b, loc=0, scale=1):
    return snp.log(beta_cdf(x, a, b, loc, scale))


def beta_sf(x, a, b, loc=0, scale=1):
    x, a, b, loc, scale = promote("beta.sf", x, a, b, loc, scale)
    return betainc(b, a, 1 - _clamp01((x - loc) / scale))


def beta_logsf(x, a, b, loc=0, scale=1):
    return snp.log(beta_sf(x, a, b, loc, scale))


# ---------------------------------------------------------------- chi2

def chi2_logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote("chi2.logpdf", x, df, loc, scale)
    y = (x - loc) / scale
    half_df = df / 2
    kernel = (half_df - 1) * snp.log(y) - y / 2
    norm_const = -(lgamma(half_df) + np.log(2.0) * df / 2)
    return snp.where(x < loc, -np.inf, norm_const - snp.log(scale) + kernel)


def chi2_pdf(x, df, loc=0, scale=1):
    return snp.exp(chi2_logpdf(x, df, loc, scale))


def chi2_cdf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote("chi2.cdf", x, df, loc, scale)
    return gammainc(df / 2, _clamp0inf((x - loc) / (scale * 2)))


def chi2_logcdf(x, df, loc=0, scale=1):
    return snp.log(chi2_cdf(x, df, loc, scale))


def chi2_sf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote("chi2.sf", x, df, loc, scale)
    return gammaincc(df / 2, _clamp0inf((x - loc) / (scale * 2)))


def chi2_logsf(x, df, loc=0, scale=1):
    return snp.log(chi2_sf(x, df, loc, scale))


# ---------------------------------------------------------------- gamma

def gamma_logpdf(x, a, loc=0, scale=1):
    x, a, loc, scale = promote("gamma.logpdf", x, a, loc, scale)
    ok = x >= loc
    # y = 1 off the support keeps xlogy's gradient finite there (masked below)
    y = snp.where(ok, (x - loc) / scale, 1)
    log_probs = (xlogy(a - 1, y) - y) - (gammaln(a) + snp.log(scale))
    return snp.where(ok, log_probs, -np.inf)


def gamma_pdf(x, a, loc=0, scale=1):
    return snp.exp(gamma_logpdf(x, a, loc, scale))


def gamma_cdf(x, a, loc=0, scale=1):
    x, a, loc, scale = promote("gamma.cdf", x, a, loc, scale)
    return gammainc(a, _clamp0inf((x - loc) / scale))


def gamma_logcdf(x, a, loc=0, scale=1):
    return snp.log(gamma_cdf(x, a, loc, scale))


def gamma_sf(x, a, loc=0, scale=1):
    x, a, loc, scale = promote("gamma.sf", x, a, loc, scale)
    y = (x - loc) / scale
    return snp.where(y < 0, 1, gammaincc(a, y))


def gamma_logsf(x, a, loc=0, scale=1):
    return snp.log(gamma_sf(x, a, loc, scale))


# ---------------------------------------------------------------- pareto

def _pareto(name, x, b, loc, scale):
    x, b, loc, scale = promote(name, x, b, loc, scale)
    return x, b, (x - loc) / scale, x < loc + scale


def pareto_logpdf(x, b, loc=0, scale=1):
    x, b, loc, scale = promote("pareto.logpdf", x, b, loc, scale)
    z = (x - loc) / scale
    log_probs = -(snp.log(scale / b) + (b + 1) * snp.log(z))
    return snp.where(x < loc + scale, -np.inf, log_probs)


def pareto_pdf(x, b, loc=0, scale=1):
    return snp.exp(pareto_logpdf(x, b, loc, scale))


def pareto_cdf(x, b, loc=0, scale=1):
    x, b, z, below = _pareto("pareto.cdf", x, b, loc, scale)
    return snp.where(below, 0, 1 - z ** -b)


def pareto_logcdf(x, b, loc=0, scale=1):
    x, b, z, below = _pareto("pareto.logcdf", x, b, loc, scale)
    return snp.where(below, -np.inf, snp.log1p(-(z ** -b)))


def pareto_logsf(x, b, loc=0, scale=1):
    x, b, z, below = _pareto("pareto.logsf", x, b, loc, scale)
    return snp.where(below, 0, -(b * snp.log(z)))


def pareto_sf(x, b, loc=0, scale=1):
    return snp.exp(pareto_logsf(x, b, loc, scale))


def pareto_ppf(q, b, loc=0, scale=1):
    q, b, loc, scale = promote("pareto.ppf", q, b, loc, scale)
    val = loc + scale * (1 - q) ** -(1 / b)
    return snp.where(snp.isnan(q) | (q < 0) | (q > 1), np.nan, val)


# ---------------------------------------------------------------- gennorm

def gennorm_logpdf(x, beta):
    x, beta = promote("gennorm.logpdf", x, beta)
    return snp.log(0.5 * beta) - lgamma(1 / beta) - snp.abs(x) ** beta


def gennorm_cdf(x, beta):
    x, beta = promote("gennorm.cdf", x, beta)
    return 0.5 * (1 + snp.sign(x) * igamma(1 / beta, snp.abs(x) ** beta))


def gennorm_pdf(x, beta):
    return snp.exp(gennorm_logpdf(x, beta))


# ---------------------------------------------------------------- truncnorm

def _log_diff(x, y):
    """log(exp(x) - exp(y)) (nan where negative), by a signed logsumexp as jax's."""
    return logsumexp(snp.stack([x, y]), axis=0,
                     b=snp.stack([snp.ones_like(x), -snp.ones_like(y)]))


def _log_gauss_mass(a, b):
    """log(ndtr(b) - ndtr(a)), from the tail nearer to the interval."""
    a, b = snp.broadcast_arrays(snp.asarray(a), snp.asarray(b))
    left, right = b <= 0, a > 0
    central = ~(left | right)
    a_tail = snp.where(right, -b, a)
    b_tail = snp.where(right, -a, b)
    mass_tail = _log_diff(log_ndtr(b_tail), log_ndtr(a_tail))
    mass_central = snp.log1p(-ndtr(a) - ndtr(-b))
    return snp.where(central, mass_central, mass_tail)


def _truncnorm_logpdf(x, a, b, loc, scale):
    x, a, b, loc, scale = promote("truncnorm.logpdf", x, a, b, loc, scale)
    val = norm_logpdf(x, loc, scale) - _log_gauss_mass(a, b)
    z = (x - loc) / scale
    val = snp.where((z < a) | (z > b), -np.inf, val)
    return snp.where(a >= b, np.nan, val)


def _truncnorm_logcdf(x, a, b, loc, scale):
    x, a, b, loc, scale = promote("truncnorm.logcdf", x, a, b, loc, scale)
    x, a, b = snp.broadcast_arrays(x, a, b)
    x = (x - loc) / scale
    mass_ab = _log_gauss_mass(a, b)
    logcdf = _log_gauss_mass(a, x) - mass_ab
    logsf = _log_gauss_mass(x, b) - mass_ab
    # near 1 the cdf is more accurate as 1 - sf
    logcdf = snp.select([x >= b, x <= a, logcdf > -0.1, x > a],
                        [0, -np.inf, snp.log1p(-snp.exp(logsf)), logcdf])
    return snp.where(a >= b, np.nan, logcdf)


def _truncnorm_logsf(x, a, b, loc, scale):
    x, a, b, loc, scale = promote("truncnorm.logsf", x, a, b, loc, scale)
    return truncnorm_logcdf(-x, -b, -a, -loc, scale)


def _truncnorm_sf(x, a, b, loc, scale):
    return snp.exp(truncnorm_logsf(x, a, b, loc, scale))


def _truncnorm_cdf(x, a, b, loc, scale):
    return snp.exp(truncnorm_logcdf(x, a, b, loc, scale))


def truncnorm_logpdf(x, a, b, loc=0, scale=1):
    return jitted(_truncnorm_logpdf, x, a, b, loc, scale)


def truncnorm_pdf(x, a, b, loc=0, scale=1):
    return snp.exp(truncnorm_logpdf(x, a, b, loc, scale))


def truncnorm_logsf(x, a, b, loc=0, scale=1):
    return jitted(_truncnorm_logsf, x, a, b, loc, scale)


def truncnorm_sf(x, a, b, loc=0, scale=1):
    return jitted(_truncnorm_sf, x, a, b, loc, scale)


def truncnorm_logcdf(x, a, b, loc=0, scale=1):
    return jitted(_truncnorm_logcdf, x, a, b, loc, scale)


def truncnorm_cdf(x, a, b, loc=0, scale=1):
    return jitted(_truncnorm_cdf, x, a, b, loc, scale)


# ---------------------------------------------------------------- circular

def vonmises_logpdf(x, kappa):
    x, kappa = promote("vonmises.logpdf", x, kappa)
    val = kappa * (snp.cos(x) - 1) - snp.log(2 * np.pi * bessel_i0e(kappa))
    return snp.where(kappa > 0, val, np.nan)


def vonmises_pdf(x, kappa):
    return snp.exp(vonmises_logpdf(x, kappa))


def wrapcauchy_logpdf(x, c):
    x, c = promote("wrapcauchy.logpdf", x, c)
    val = snp.log(1 - c * c) - snp.log(2 * np.pi) - snp.log(1 + c * c - 2 * c * snp.cos(x))
    inside = snp.where((x >= 0) & (x <= np.pi * 2), val, -np.inf)
    return snp.where((c > 0) & (c < 1), inside, np.nan)


def wrapcauchy_pdf(x, c):
    return snp.exp(wrapcauchy_logpdf(x, c))


wrap_public(globals())
