"""shardc.scipy.stats.chi2: jax.scipy.stats.chi2's functions."""
from ...api.scipy_stats.shape import (
    chi2_logpdf as logpdf,
    chi2_pdf as pdf,
    chi2_cdf as cdf,
    chi2_logcdf as logcdf,
    chi2_sf as sf,
    chi2_logsf as logsf,
)

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]
