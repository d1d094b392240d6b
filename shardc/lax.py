"""shardc.lax: jax.lax's API (implemented in shardc.api.lax)."""
from .api.lax import *  # noqa: F401,F403
