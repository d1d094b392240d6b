"""shardc.nn.initializers: jax.nn.initializers' API (implemented in shardc.api.nn_init)."""
from ..api.nn_init import *  # noqa: F401,F403
