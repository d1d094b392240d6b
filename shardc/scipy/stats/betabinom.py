"""shardc.scipy.stats.betabinom: jax.scipy.stats.betabinom's functions."""
from ...api.scipy_stats.discrete import (
    betabinom_logpmf as logpmf,
    betabinom_pmf as pmf,
)

__all__ = ["logpmf", "pmf"]
