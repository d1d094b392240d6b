"""shardc.scipy.stats.norm: jax.scipy.stats.norm's functions."""
from ...api.scipy_stats.location import (
    norm_logpdf as logpdf,
    norm_pdf as pdf,
    norm_cdf as cdf,
    norm_logcdf as logcdf,
    norm_ppf as ppf,
    norm_logsf as logsf,
    norm_sf as sf,
    norm_isf as isf,
)

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "ppf", "logsf", "sf", "isf"]
