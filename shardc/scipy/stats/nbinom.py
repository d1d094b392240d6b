"""shardc.scipy.stats.nbinom: jax.scipy.stats.nbinom's functions."""
from ...api.scipy_stats.discrete import (
    nbinom_logpmf as logpmf,
    nbinom_pmf as pmf,
)

__all__ = ["logpmf", "pmf"]
