"""shardc.random: jax.random's API (implemented in shardc.api.random)."""
from .api.random import *  # noqa: F401,F403
