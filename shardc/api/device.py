"""device_put: place arrays on devices (jax.device_put, accepting PartitionSpecs in set_mesh)."""
from __future__ import annotations

import jax
from jax.sharding import PartitionSpec

from ..errors import ShardcError, api_boundary


@api_boundary
def device_put(x, device=None):
    """Put `x` (array or pytree) on devices; `device` is a Sharding, a device or a spec."""
    if isinstance(device, PartitionSpec):
        from ..runtime.meshes import named_in_context
        device = named_in_context(device, "device_put")
    try:
        return jax.device_put(x, device)
    except ValueError as e:
        raise ShardcError(f"device_put: {str(e).splitlines()[0]}") from None
