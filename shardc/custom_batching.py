"""shardc.custom_batching: jax.custom_batching's API (custom_vmap, sequential_vmap)."""
from .api.custom_batching import custom_vmap, sequential_vmap  # noqa: F401

__all__ = ["custom_vmap", "sequential_vmap"]
