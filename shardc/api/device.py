"""device_put: place arrays on devices (jax.device_put, accepting PartitionSpecs in set_mesh)."""
from __future__ import annotations

import jax
from jax.sharding import PartitionSpec

from ..errors import ShardcError, api_boundary


@api_boundary
def device_put(x, device=None):
    """Put `x` (array or pytree) on devices; `device` is a Sharding, a device or a spec."""
    from ..runtime.meshes import as_jax_sharding, named_in_context

    def one(s):
        if isinstance(s, PartitionSpec):
            return named_in_context(s, "device_put")
        return as_jax_sharding(s)
    device = jax.tree_util.tree_map(one, device, is_leaf=lambda s: isinstance(
        s, (PartitionSpec, jax.sharding.Sharding)))
    try:
        return jax.device_put(x, device)
    except ValueError as e:
        raise ShardcError(f"device_put: {str(e).splitlines()[0]}") from None
