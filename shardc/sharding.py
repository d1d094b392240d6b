"""shardc.sharding: jax.sharding's API (meshes, shardings, the mesh context, reshard).

The classes are jax's own (shardc takes jax's meshes and shardings as they are);
PositionalSharding, which jax dropped, is shardc's layer over NamedSharding.
"""
from jax.sharding import (AbstractDevice, AbstractMesh, AxisType,  # noqa: F401
                          ManualAxisType, Mesh, NamedSharding, PartitionSpec, Sharding,
                          SingleDeviceSharding, make_single_device_sharding)

from .api.explicit import auto_axes, explicit_axes, reshard  # noqa: F401
from .runtime.meshes import (get_abstract_mesh, set_mesh, use_abstract_mesh,  # noqa: F401
                             get_mesh)
from .runtime.positional import PositionalSharding  # noqa: F401

__all__ = ["AbstractDevice", "AbstractMesh", "AxisType", "ManualAxisType", "Mesh",
           "auto_axes", "explicit_axes",
           "NamedSharding", "PartitionSpec", "PositionalSharding", "Sharding",
           "SingleDeviceSharding", "get_abstract_mesh", "get_mesh",
           "make_single_device_sharding", "reshard", "set_mesh", "use_abstract_mesh"]
