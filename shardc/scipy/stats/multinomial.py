"""shardc.scipy.stats.multinomial: jax.scipy.stats.multinomial's functions."""
from ...api.scipy_stats.discrete import (
    multinomial_logpmf as logpmf,
    multinomial_pmf as pmf,
)

__all__ = ["logpmf", "pmf"]
