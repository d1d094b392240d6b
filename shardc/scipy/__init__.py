"""shardc.scipy: jax.scipy's API (special functions so far)."""
from . import special  # noqa: F401
