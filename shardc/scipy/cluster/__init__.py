"""shardc.scipy.cluster: as jax.scipy.cluster (vector quantization)."""
from . import vq

__all__ = ["vq"]
