"""shardc.scipy.stats.uniform: jax.scipy.stats.uniform's functions."""
from ...api.scipy_stats.location import (
    uniform_logpdf as logpdf,
    uniform_pdf as pdf,
    uniform_cdf as cdf,
    uniform_ppf as ppf,
)

__all__ = ["logpdf", "pdf", "cdf", "ppf"]
