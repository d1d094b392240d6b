"""shardc.numpy.fft: jax.numpy.fft's API over shardc's tracer (in shardc.api.numpy.fft)."""
from ..api.numpy.fft import *  # noqa: F401,F403
