"""shardc.scipy.linalg: jax.scipy.linalg's functions, built on shardc's own ops."""
from ..api import scipy_linalg as _p1, scipy_linalg2 as _p2, scipy_linalg3 as _p3
from ..api import scipy_linalg4 as _p4, scipy_linalg5 as _p5

_PARTS = (_p1, _p2, _p3, _p4, _p5)
__all__ = [n for p in _PARTS for n in p.__all__]
globals().update({n: getattr(p, n) for p in _PARTS for n in p.__all__})
