"""shardc.sharding: jax.sharding's API (meshes, shardings, the mesh context, reshard).

The classes are jax's own (shardc takes jax's meshes and shardings as they are);
PositionalSharding, which jax dropped, is shardc's layer over NamedSharding.
"""
from jax.sharding import (AbstractDevice, AbstractMesh, AxisType,  # noqa: F401
                          ManualAxisType, Mesh, NamedSharding, PartitionSpec, Sharding,
                          SingleDeviceSharding, make_single_device_sharding)

from .api import explicit as _explicit
from .api.explicit import reshard  # noqa: F401
from .runtime.meshes import (get_abstract_mesh, set_mesh, use_abstract_mesh,  # noqa: F401
                             get_mesh)
from .runtime.positional import PositionalSharding  # noqa: F401

__all__ = ["AbstractDevice", "AbstractMesh", "AxisType", "ManualAxisType", "Mesh",
           "NamedSharding", "PartitionSpec", "PositionalSharding", "Sharding",
           "SingleDeviceSharding", "get_abstract_mesh", "get_mesh",
           "make_single_device_sharding", "reshard", "set_mesh", "use_abstract_mesh"]

# jax.sharding.auto_axes / explicit_axes: shardc's once shardc.api.explicit has them
for _name in ("auto_axes", "explicit_axes"):
    if hasattr(_explicit, _name):
        globals()[_name] = getattr(_explicit, _name)
        __all__.append(_name)
del _name
