"""shardc.scipy.stats.expon: jax.scipy.stats.expon's functions."""
from ...api.scipy_stats.location import (
    expon_logpdf as logpdf,
    expon_pdf as pdf,
    expon_cdf as cdf,
    expon_logcdf as logcdf,
    expon_logsf as logsf,
    expon_sf as sf,
    expon_ppf as ppf,
)

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "logsf", "sf", "ppf"]
