"""shardc.scipy.fft: jax.scipy.fft's discrete cosine transforms."""
from ..api.scipy_misc import dct, dctn, idct, idctn

__all__ = ["dct", "dctn", "idct", "idctn"]
