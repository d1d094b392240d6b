"""shardc.scipy.sparse: jax.scipy.sparse's namespace (its iterative solvers in .linalg)."""
from . import linalg  # noqa: F401

__all__ = ["linalg"]
