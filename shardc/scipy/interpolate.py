"""shardc.scipy.interpolate: jax.scipy.interpolate's RegularGridInterpolator."""
from ..api.scipy_interpolate import RegularGridInterpolator

__all__ = ["RegularGridInterpolator"]
