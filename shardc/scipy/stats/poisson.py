"""shardc.scipy.stats.poisson: jax.scipy.stats.poisson's functions."""
from ...api.scipy_stats.discrete import (
    poisson_logpmf as logpmf,
    poisson_pmf as pmf,
    poisson_cdf as cdf,
    poisson_entropy as entropy,
)

__all__ = ["logpmf", "pmf", "cdf", "entropy"]
