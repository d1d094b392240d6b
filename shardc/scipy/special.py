"""shardc.scipy.special: jax.scipy.special's functions, built on shardc's own ops."""
from ..api.scipy_special import *  # noqa: F401,F403
from ..api.scipy_special import __all__ as _part1
from ..api.scipy_special2 import *  # noqa: F401,F403
from ..api.scipy_special2 import __all__ as _part2
from ..api.scipy_special3 import *  # noqa: F401,F403
from ..api.scipy_special3 import __all__ as _part3

__all__ = list(_part1) + list(_part2) + list(_part3)
