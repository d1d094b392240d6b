"""shardc.scipy.stats.laplace: jax.scipy.stats.laplace's functions."""
from ...api.scipy_stats.location import (
    laplace_logpdf as logpdf,
    laplace_pdf as pdf,
    laplace_cdf as cdf,
)

__all__ = ["logpdf", "pdf", "cdf"]
