"""shardc.scipy: jax.scipy's namespaces built on shardc's ops (special so far)."""
from . import special  # noqa: F401

__all__ = ["special"]
