"""shardc.scipy.stats.truncnorm: jax.scipy.stats.truncnorm's functions."""
from ...api.scipy_stats.shape import (
    truncnorm_logpdf as logpdf,
    truncnorm_pdf as pdf,
    truncnorm_logsf as logsf,
    truncnorm_sf as sf,
    truncnorm_logcdf as logcdf,
    truncnorm_cdf as cdf,
)

__all__ = ["logpdf", "pdf", "logsf", "sf", "logcdf", "cdf"]
