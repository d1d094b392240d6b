"""shardc.report: what XLA compiled, each collective tied to a source line (implemented in
shardc.tools.report)."""
from .tools.report import *  # noqa: F401,F403
