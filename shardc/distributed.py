"""shardc.distributed: multi-process runs (implemented in shardc.runtime.distributed)."""
from .runtime.distributed import *  # noqa: F401,F403
