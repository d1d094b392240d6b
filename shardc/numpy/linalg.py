"""shardc.numpy.linalg (implemented in shardc.api.numpy.linalg)."""
from ..api.numpy.linalg import *  # noqa: F401,F403
