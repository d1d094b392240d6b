"""shardc.scipy.stats.geom: jax.scipy.stats.geom's functions."""
from ...api.scipy_stats.discrete import (
    geom_logpmf as logpmf,
    geom_pmf as pmf,
)

__all__ = ["logpmf", "pmf"]
