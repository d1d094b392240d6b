"""shardc.debug: seeing shardings (shardc.tools.debug), print, log and callback
(shardc.tools.debug_print)."""
from .tools.debug import *  # noqa: F401,F403
from .tools.debug_print import callback, log, print  # noqa: F401,A004
