"""shardc.scipy.stats.pareto: jax.scipy.stats.pareto's functions."""
from ...api.scipy_stats.shape import (
    pareto_logpdf as logpdf,
    pareto_pdf as pdf,
    pareto_cdf as cdf,
    pareto_logcdf as logcdf,
    pareto_logsf as logsf,
    pareto_sf as sf,
    pareto_ppf as ppf,
)

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "logsf", "sf", "ppf"]
