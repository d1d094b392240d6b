"""shardc.scipy: jax.scipy's namespaces built on shardc's ops."""
from . import interpolate, ndimage, optimize, signal, sparse, spatial, special  # noqa: F401

__all__ = ["interpolate", "ndimage", "optimize", "signal", "sparse", "spatial", "special"]
