"""shardc.scipy.sparse.linalg: jax.scipy.sparse.linalg's Krylov solvers (cg, gmres,
bicgstab), differentiated implicitly through shardc.lax.custom_linear_solve."""
from ...api.scipy_sparse import bicgstab, cg, gmres

__all__ = ["cg", "gmres", "bicgstab"]
