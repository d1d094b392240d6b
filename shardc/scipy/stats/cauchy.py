"""shardc.scipy.stats.cauchy: jax.scipy.stats.cauchy's functions."""
from ...api.scipy_stats.location import (
    cauchy_logpdf as logpdf,
    cauchy_pdf as pdf,
    cauchy_cdf as cdf,
    cauchy_logcdf as logcdf,
    cauchy_sf as sf,
    cauchy_logsf as logsf,
    cauchy_isf as isf,
    cauchy_ppf as ppf,
)

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "isf", "ppf"]
