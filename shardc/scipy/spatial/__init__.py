"""shardc.scipy.spatial: jax.scipy.spatial's namespace (Rotation and Slerp in .transform)."""
from . import transform  # noqa: F401

__all__ = ["transform"]
