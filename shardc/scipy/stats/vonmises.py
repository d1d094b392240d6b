"""shardc.scipy.stats.vonmises: jax.scipy.stats.vonmises's functions."""
from ...api.scipy_stats.shape import (
    vonmises_logpdf as logpdf,
    vonmises_pdf as pdf,
)

__all__ = ["logpdf", "pdf"]
