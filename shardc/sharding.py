"""shardc.sharding: jax.sharding's API (meshes, shardings, the mesh context, reshard).

The classes are jax's own (shardc takes jax's meshes and shardings as they are);
PositionalSharding, which jax dropped, is shardc's layer over NamedSharding.
"""
from jax.sharding import (AbstractDevice, AbstractMesh, AxisType,  # noqa: F401
                          ManualAxisType, Mesh, NamedSharding, PartitionSpec, Sharding,
                          SingleDeviceSharding, make_single_device_sharding)

from .api.explicit import abstract_mesh_now as _trace_mesh
from .api.explicit import auto_axes, explicit_axes, reshard  # noqa: F401
from .runtime import meshes as _meshes
from .runtime.meshes import get_mesh, set_mesh, use_abstract_mesh  # noqa: F401
from .runtime.positional import PositionalSharding  # noqa: F401
from .runtime.autospec import AUTO  # noqa: F401

__all__ = ["AUTO", "AbstractDevice", "AbstractMesh", "AxisType", "ManualAxisType", "Mesh",
           "auto_axes", "explicit_axes",
           "NamedSharding", "PartitionSpec", "PositionalSharding", "Sharding",
           "SingleDeviceSharding", "get_abstract_mesh", "get_mesh",
           "make_single_device_sharding", "reshard", "set_mesh", "use_abstract_mesh"]


def get_abstract_mesh():
    """The abstract mesh here, as jax.sharding.get_abstract_mesh: inside a shardc trace
    the program's mesh with its axis types as they are at this point (auto_axes,
    explicit_axes and shard_map change them); outside, the context's (set_mesh)."""
    mesh = _trace_mesh()
    return _meshes.get_abstract_mesh() if mesh is None or mesh.empty else mesh
