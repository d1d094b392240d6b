"""shardc.numpy: jax.numpy's API over shardc's tracer (implemented in shardc.api.numpy)."""
from ..api.numpy import *  # noqa: F401,F403
from . import linalg  # noqa: F401
from . import fft  # noqa: F401,E402
