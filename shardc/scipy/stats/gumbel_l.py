"""shardc.scipy.stats.gumbel_l: jax.scipy.stats.gumbel_l's functions."""
from ...api.scipy_stats.location import (
    gumbel_l_logpdf as logpdf,
    gumbel_l_pdf as pdf,
    gumbel_l_logcdf as logcdf,
    gumbel_l_cdf as cdf,
    gumbel_l_ppf as ppf,
    gumbel_l_sf as sf,
    gumbel_l_logsf as logsf,
)

__all__ = ["logpdf", "pdf", "logcdf", "cdf", "ppf", "sf", "logsf"]
