"""shardc.scipy.special: jax.scipy.special's API (implemented in shardc.api.scipy_special)."""
from ..api.scipy_special import *  # noqa: F401,F403
