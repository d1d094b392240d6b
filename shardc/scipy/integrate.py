"""shardc.scipy.integrate: jax.scipy.integrate's trapezoid."""
from ..api.scipy_misc import trapezoid

__all__ = ["trapezoid"]
