"""shardc.debug: seeing shardings (implemented in shardc.tools.debug)."""
from .tools.debug import *  # noqa: F401,F403
