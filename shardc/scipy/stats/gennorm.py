"""shardc.scipy.stats.gennorm: jax.scipy.stats.gennorm's functions."""
from ...api.scipy_stats.shape import (
    gennorm_logpdf as logpdf,
    gennorm_cdf as cdf,
    gennorm_pdf as pdf,
)

__all__ = ["logpdf", "cdf", "pdf"]
