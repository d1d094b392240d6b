"""shardc.scipy.optimize: jax.scipy.optimize's minimize (BFGS and the experimental
L-BFGS) and its OptimizeResults."""
from ..api.scipy_optimize import OptimizeResults, minimize

__all__ = ["minimize", "OptimizeResults"]
