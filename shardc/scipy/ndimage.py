"""shardc.scipy.ndimage: jax.scipy.ndimage's map_coordinates, built on shardc's ops."""
from ..api.scipy_ndimage import map_coordinates

__all__ = ["map_coordinates"]
