"""shardc.scipy.stats.t: jax.scipy.stats.t's functions."""
from ...api.scipy_stats.location import (
    t_logpdf as logpdf,
    t_pdf as pdf,
)

__all__ = ["logpdf", "pdf"]
