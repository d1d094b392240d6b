"""shardc.scipy.stats: jax.scipy.stats (0.10.2) built on shardc's ops: one module per
distribution (norm.logpdf, poisson.entropy, ...), gaussian_kde, mode, rankdata and sem."""
from . import (bernoulli, beta, betabinom, binom, cauchy, chi2, dirichlet, expon, gamma,
               gennorm, geom, gumbel_l, gumbel_r, laplace, logistic, multinomial,
               multivariate_normal, nbinom, norm, pareto, poisson, t, truncnorm, uniform,
               vonmises, wrapcauchy)
from ...api.scipy_stats.core import mode, rankdata, sem
from ...api.scipy_stats.kde import gaussian_kde

__all__ = ["bernoulli", "beta", "betabinom", "binom", "cauchy", "chi2", "dirichlet",
           "expon", "gamma", "gennorm", "geom", "gumbel_l", "gumbel_r", "laplace", "logistic",
           "multinomial", "multivariate_normal", "nbinom", "norm", "pareto", "poisson", "t",
           "truncnorm", "uniform", "vonmises", "wrapcauchy", "gaussian_kde", "mode",
           "rankdata", "sem"]
