"""shardc.scipy.cluster.vq: jax.scipy.cluster.vq's vq."""
from ...api.scipy_misc import vq

__all__ = ["vq"]
