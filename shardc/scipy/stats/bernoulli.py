"""shardc.scipy.stats.bernoulli: jax.scipy.stats.bernoulli's functions."""
from ...api.scipy_stats.discrete import (
    bernoulli_logpmf as logpmf,
    bernoulli_pmf as pmf,
    bernoulli_cdf as cdf,
    bernoulli_ppf as ppf,
)

__all__ = ["logpmf", "pmf", "cdf", "ppf"]
