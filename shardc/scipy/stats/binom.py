"""shardc.scipy.stats.binom: jax.scipy.stats.binom's functions."""
from ...api.scipy_stats.discrete import (
    binom_logpmf as logpmf,
    binom_pmf as pmf,
)

__all__ = ["logpmf", "pmf"]
