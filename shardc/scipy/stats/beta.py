"""shardc.scipy.stats.beta: jax.scipy.stats.beta's functions."""
from ...api.scipy_stats.shape import (
    beta_logpdf as logpdf,
    beta_pdf as pdf,
    beta_cdf as cdf,
    beta_logcdf as logcdf,
    beta_sf as sf,
    beta_logsf as logsf,
)

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]
