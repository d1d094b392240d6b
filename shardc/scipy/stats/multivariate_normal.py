"""shardc.scipy.stats.multivariate_normal: jax.scipy.stats.multivariate_normal's functions."""
from ...api.scipy_stats.multivariate import (
    multivariate_normal_logpdf as logpdf,
    multivariate_normal_pdf as pdf,
)

__all__ = ["logpdf", "pdf"]
