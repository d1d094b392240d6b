"""shardc.nn: jax.nn's API (implemented in shardc.api.nn)."""
from ..api.nn import *  # noqa: F401,F403
from . import initializers  # noqa: F401,E402
