"""shardc.scipy.special: jax.scipy.special's functions, built on shardc's own ops."""
from ..api import scipy_special as _p1, scipy_special2 as _p2, scipy_special3 as _p3
from ..api import scipy_special4 as _p4, scipy_special5 as _p5, scipy_fresnel as _p6

_PARTS = (_p1, _p2, _p3, _p4, _p5, _p6)
__all__ = [n for p in _PARTS for n in p.__all__]
globals().update({n: getattr(p, n) for p in _PARTS for n in p.__all__})
