"""Location-scale distributions of jax.scipy.stats: norm, cauchy, expon, laplace, logistic,
uniform, t, gumbel_l and gumbel_r.

Each function promotes its arguments as jax's (promote_args_inexact: one inexact dtype,
weakly typed only if every argument is) and evaluates jax's formula with the same
operations, so values, out-of-support results (-inf, 0, nan) and gradients match."""
from __future__ import annotations

import numpy as np

from .. import numpy as snp
from ...errors import wrap_public
from ..lax_special import lgamma
from ..nn_more import log1mexp
from ..numpy._util import aval
from ..scipy_special import expit, logit, xlog1py, xlogy
from ..scipy_special2 import log_ndtr, ndtr, ndtri
from ._util import promote

__all__ = [f"{d}_{f}" for d, fs in {
    "norm": "logpdf pdf cdf logcdf ppf logsf sf isf",
    "cauchy": "logpdf pdf cdf logcdf sf logsf isf ppf",
    "expon": "logpdf pdf cdf logcdf logsf sf ppf",
    "laplace": "logpdf pdf cdf",
    "logistic": "logpdf pdf ppf sf isf cdf",
    "uniform": "logpdf pdf cdf ppf",
    "t": "logpdf pdf",
    "gumbel_l": "logpdf pdf logcdf cdf ppf sf logsf",
    "gumbel_r": "logpdf pdf logcdf cdf ppf sf logsf"}.items() for f in fs.split()]


def _const(x, v):
    """v rounded to x's dtype (as jax folds its constants' arithmetic in that dtype)."""
    return float(np.asarray(v, aval(x).dtype))


# ---------------------------------------------------------------- norm

def norm_logpdf(x, loc=0, scale=1):
    x, loc, scale = promote("norm.logpdf", x, loc, scale)
    var = snp.square(scale)
    return (snp.log(2 * np.pi * var) + snp.square(x - loc) / var) / -2


def norm_pdf(x, loc=0, scale=1):
    return snp.exp(norm_logpdf(x, loc, scale))


def norm_cdf(x, loc=0, scale=1):
    x, loc, scale = promote("norm.cdf", x, loc, scale)
    return ndtr((x - loc) / scale)


def norm_logcdf(x, loc=0, scale=1):
    x, loc, scale = promote("norm.logcdf", x, loc, scale)
    return log_ndtr((x - loc) / scale)


def norm_ppf(q, loc=0, scale=1):
    # jax converts to the default float (so a bfloat16 scale still gives float32)
    return snp.asarray(ndtri(q) * scale + loc, float)


def norm_logsf(x, loc=0, scale=1):
    x, loc, scale = promote("norm.logsf", x, loc, scale)
    return norm_logcdf(-x, -loc, scale)


def norm_sf(x, loc=0, scale=1):
    x, loc, scale = promote("norm.sf", x, loc, scale)
    return norm_cdf(-x, -loc, scale)


def norm_isf(q, loc=0, scale=1):
    return norm_ppf(1 - snp.asarray(q), loc, scale)


# ---------------------------------------------------------------- cauchy

def cauchy_logpdf(x, loc=0, scale=1):
    x, loc, scale = promote("cauchy.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return -(snp.log(np.pi * scale) + snp.log1p(z * z))


def cauchy_pdf(x, loc=0, scale=1):
    return snp.exp(cauchy_logpdf(x, loc, scale))


def cauchy_cdf(x, loc=0, scale=1):
    x, loc, scale = promote("cauchy.cdf", x, loc, scale)
    inv_pi = _const(x, _const(x, 1.0) / _const(x, np.pi))
    return 0.5 + inv_pi * snp.arctan((x - loc) / scale)


def cauchy_logcdf(x, loc=0, scale=1):
    return snp.log(cauchy_cdf(x, loc, scale))


def cauchy_sf(x, loc=0, scale=1):
    x, loc, scale = promote("cauchy.sf", x, loc, scale)
    return cauchy_cdf(-x, -loc, scale)


def cauchy_logsf(x, loc=0, scale=1):
    x, loc, scale = promote("cauchy.logsf", x, loc, scale)
    return cauchy_logcdf(-x, -loc, scale)


def cauchy_isf(q, loc=0, scale=1):
    q, loc, scale = promote("cauchy.isf", q, loc, scale)
    return snp.tan(np.pi / 2 - np.pi * q) * scale + loc


def cauchy_ppf(q, loc=0, scale=1):
    q, loc, scale = promote("cauchy.ppf", q, loc, scale)
    return snp.tan(np.pi * q - np.pi / 2) * scale + loc


# ---------------------------------------------------------------- expon

def expon_logpdf(x, loc=0, scale=1):
    x, loc, scale = promote("expon.logpdf", x, loc, scale)
    log_probs = -((x - loc) / scale + snp.log(scale))
    return snp.where(x < loc, -np.inf, log_probs)


def expon_pdf(x, loc=0, scale=1):
    return snp.exp(expon_logpdf(x, loc, scale))


def expon_cdf(x, loc=0, scale=1):
    x, loc, scale = promote("expon.cdf", x, loc, scale)
    neg_z = (loc - x) / scale
    return snp.where(x < loc, snp.zeros_like(neg_z), -snp.expm1(neg_z))


def expon_logcdf(x, loc=0, scale=1):
    return snp.log1p(-expon_sf(x, loc, scale))


def expon_logsf(x, loc=0, scale=1):
    x, loc, scale = promote("expon.sf", x, loc, scale)   # (jax's name for it)
    neg_z = (loc - x) / scale
    return snp.where(x < loc, snp.zeros_like(neg_z), neg_z)


def expon_sf(x, loc=0, scale=1):
    return snp.exp(expon_logsf(x, loc, scale))


def expon_ppf(q, loc=0, scale=1):
    q, loc, scale = promote("expon.ppf", q, loc, scale)
    return snp.where(snp.isnan(q) | (q < 0) | (q > 1), np.nan, loc - scale * snp.log1p(-q))


# ---------------------------------------------------------------- laplace

def laplace_logpdf(x, loc=0, scale=1):
    x, loc, scale = promote("laplace.logpdf", x, loc, scale)
    return -(snp.abs(x - loc) / scale + snp.log(2 * scale))


def laplace_pdf(x, loc=0, scale=1):
    return snp.exp(laplace_logpdf(x, loc, scale))


def laplace_cdf(x, loc=0, scale=1):
    x, loc, scale = promote("laplace.cdf", x, loc, scale)
    z = (x - loc) / scale
    return snp.where(z <= 0, 0.5 * snp.exp(z), 1 - 0.5 * snp.exp(-z))


# ---------------------------------------------------------------- logistic

def logistic_logpdf(x, loc=0, scale=1):
    x, loc, scale = promote("logistic.logpdf", x, loc, scale)
    half = (x - loc) / scale / 2
    return -2 * snp.logaddexp(half, -half) - snp.log(scale)


def logistic_pdf(x, loc=0, scale=1):
    return snp.exp(logistic_logpdf(x, loc, scale))


def logistic_ppf(x, loc=0, scale=1):
    x, loc, scale = promote("logistic.ppf", x, loc, scale)
    return logit(x) * scale + loc


def logistic_sf(x, loc=0, scale=1):
    x, loc, scale = promote("logistic.sf", x, loc, scale)
    return expit(-((x - loc) / scale))


def logistic_isf(x, loc=0, scale=1):
    x, loc, scale = promote("logistic.isf", x, loc, scale)
    return -logit(x) * scale + loc


def logistic_cdf(x, loc=0, scale=1):
    x, loc, scale = promote("logistic.cdf", x, loc, scale)
    return expit((x - loc) / scale)


# ---------------------------------------------------------------- uniform

def uniform_logpdf(x, loc=0, scale=1):
    x, loc, scale = promote("uniform.logpdf", x, loc, scale)
    return snp.where((x > loc + scale) | (x < loc), -np.inf, -snp.log(scale))


def uniform_pdf(x, loc=0, scale=1):
    return snp.exp(uniform_logpdf(x, loc, scale))


def uniform_cdf(x, loc=0, scale=1):
    x, loc, scale = promote("uniform.cdf", x, loc, scale)
    zero, one = snp.asarray(0, x.dtype), snp.asarray(1, x.dtype)
    hi = loc + scale
    return snp.select([x < loc, x > hi, (x >= loc) & (x <= hi)],
                      [zero, one, (x - loc) / scale])


def uniform_ppf(q, loc=0, scale=1):
    q, loc, scale = promote("uniform.ppf", q, loc, scale)
    return snp.where(snp.isnan(q) | (q < 0) | (q > 1), np.nan, loc + scale * q)


# ---------------------------------------------------------------- t

def t_logpdf(x, df, loc=0, scale=1):
    x, df, loc, scale = promote("t.logpdf", x, df, loc, scale)
    z = (x - loc) / scale
    half_df = df / 2
    half_df1 = half_df + 0.5
    norm_const = (snp.log(scale * scale * np.pi * df) / 2 + lgamma(half_df)
                  - lgamma(half_df1))
    return -(norm_const + half_df1 * snp.log1p(z * z / df))


def t_pdf(x, df, loc=0, scale=1):
    return snp.exp(t_logpdf(x, df, loc, scale))


# ---------------------------------------------------------------- gumbel_l / gumbel_r

def _gumbel(name, x, loc, scale):
    x, loc, scale = promote(name, x, loc, scale)
    return x, loc, scale, scale > 0


def gumbel_l_logpdf(x, loc=0, scale=1):
    x, loc, scale, ok = _gumbel("gumbel_l.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return snp.where(ok, xlogy(-1, scale) + (z - snp.exp(z)), np.nan)


def gumbel_l_pdf(x, loc=0, scale=1):
    return snp.exp(gumbel_l_logpdf(x, loc, scale))


def gumbel_l_logcdf(x, loc=0, scale=1):
    x, loc, scale, ok = _gumbel("gumbel_l.logcdf", x, loc, scale)
    z = (x - loc) / scale
    return snp.where(ok, snp.log(-snp.expm1(-snp.exp(z))), np.nan)


def gumbel_l_cdf(x, loc=0, scale=1):
    return snp.exp(gumbel_l_logcdf(x, loc, scale))


def gumbel_l_ppf(p, loc=0, scale=1):
    p, loc, scale = promote("gumbel_l.ppf", p, loc, scale)
    ok = (p > 0) & (p < 1)
    return snp.where(ok, loc + scale * snp.log(xlog1py(-1, -p)), np.nan)


def gumbel_l_sf(x, loc=0, scale=1):
    return snp.exp(gumbel_l_logsf(x, loc, scale))


def gumbel_l_logsf(x, loc=0, scale=1):
    x, loc, scale, ok = _gumbel("gumbel_l.logsf", x, loc, scale)
    return snp.where(ok, -snp.exp((x - loc) / scale), np.nan)


def gumbel_r_logpdf(x, loc=0, scale=1):
    x, loc, scale, ok = _gumbel("gumbel_r.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return snp.where(ok, xlogy(-1, scale) + -(z + snp.exp(-z)), np.nan)


def gumbel_r_pdf(x, loc=0, scale=1):
    return snp.exp(gumbel_r_logpdf(x, loc, scale))


def gumbel_r_logcdf(x, loc=0, scale=1):
    x, loc, scale, ok = _gumbel("gumbel_r.logcdf", x, loc, scale)
    return snp.where(ok, -snp.exp(-((x - loc) / scale)), np.nan)


def gumbel_r_cdf(x, loc=0, scale=1):
    return snp.exp(gumbel_r_logcdf(x, loc, scale))


def gumbel_r_ppf(p, loc=0, scale=1):
    p, loc, scale = promote("gumbel_r.ppf", p, loc, scale)
    ok = (p > 0) & (p < 1)
    return snp.where(ok, loc - scale * snp.log(xlogy(-1, p)), np.nan)


def gumbel_r_sf(x, loc=0, scale=1):
    x, loc, scale, ok = _gumbel("gumbel_r.sf", x, loc, scale)
    neg_z = (loc - x) / scale
    return snp.where(ok, 1 - snp.exp(-snp.exp(neg_z)), np.nan)


def gumbel_r_logsf(x, loc=0, scale=1):
    x, loc, scale, ok = _gumbel("gumbel_r.logsf", x, loc, scale)
    return snp.where(ok, log1mexp(snp.exp((loc - x) / scale)), np.nan)


wrap_public(globals())
