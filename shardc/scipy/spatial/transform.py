"""shardc.scipy.spatial.transform: jax.scipy.spatial.transform's Rotation and Slerp."""
from ...api.scipy_rotation import Rotation, Slerp

__all__ = ["Rotation", "Slerp"]
