"""shardc.scipy.signal: jax.scipy.signal's functions, built on shardc's own ops."""
from ..api import scipy_signal as _p1, scipy_spectral as _p2

_PARTS = (_p1, _p2)
__all__ = [n for p in _PARTS for n in p.__all__]
globals().update({n: getattr(p, n) for p in _PARTS for n in p.__all__})
