"""shardc.image: jax.image's API (implemented in shardc.api.image)."""
from .api.image import ResizeMethod, resize, scale_and_translate  # noqa: F401
