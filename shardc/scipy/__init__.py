"""shardc.scipy: jax.scipy's namespaces built on shardc's ops."""
from . import cluster, fft, integrate, interpolate, linalg, ndimage  # noqa: F401
from . import optimize, signal, sparse, spatial, special, stats  # noqa: F401

__all__ = ["cluster", "fft", "integrate", "interpolate", "linalg", "ndimage", "optimize",
           "signal", "sparse", "spatial", "special", "stats"]
