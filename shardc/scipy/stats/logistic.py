"""shardc.scipy.stats.logistic: jax.scipy.stats.logistic's functions."""
from ...api.scipy_stats.location import (
    logistic_logpdf as logpdf,
    logistic_pdf as pdf,
    logistic_ppf as ppf,
    logistic_sf as sf,
    logistic_isf as isf,
    logistic_cdf as cdf,
)

__all__ = ["logpdf", "pdf", "ppf", "sf", "isf", "cdf"]
