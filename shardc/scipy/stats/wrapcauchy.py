"""shardc.scipy.stats.wrapcauchy: jax.scipy.stats.wrapcauchy's functions."""
from ...api.scipy_stats.shape import (
    wrapcauchy_logpdf as logpdf,
    wrapcauchy_pdf as pdf,
)

__all__ = ["logpdf", "pdf"]
