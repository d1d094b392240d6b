"""shardc.experimental: jax.experimental's names that shardc has."""
from ..api.callbacks import io_callback  # noqa: F401

__all__ = ["io_callback"]
