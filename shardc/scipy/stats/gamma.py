"""shardc.scipy.stats.gamma: jax.scipy.stats.gamma's functions."""
from ...api.scipy_stats.shape import (
    gamma_logpdf as logpdf,
    gamma_pdf as pdf,
    gamma_cdf as cdf,
    gamma_logcdf as logcdf,
    gamma_sf as sf,
    gamma_logsf as logsf,
)

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]
