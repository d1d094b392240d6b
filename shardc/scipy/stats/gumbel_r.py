"""shardc.scipy.stats.gumbel_r: jax.scipy.stats.gumbel_r's functions."""
from ...api.scipy_stats.location import (
    gumbel_r_logpdf as logpdf,
    gumbel_r_pdf as pdf,
    gumbel_r_logcdf as logcdf,
    gumbel_r_cdf as cdf,
    gumbel_r_ppf as ppf,
    gumbel_r_sf as sf,
    gumbel_r_logsf as logsf,
)

__all__ = ["logpdf", "pdf", "logcdf", "cdf", "ppf", "sf", "logsf"]
