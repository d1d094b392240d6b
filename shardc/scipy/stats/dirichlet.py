"""shardc.scipy.stats.dirichlet: jax.scipy.stats.dirichlet's functions."""
from ...api.scipy_stats.multivariate import (
    dirichlet_logpdf as logpdf,
    dirichlet_pdf as pdf,
)

__all__ = ["logpdf", "pdf"]
