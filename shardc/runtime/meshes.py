"""The device mesh a program runs on: jax Mesh <-> IR MeshShape, sharding conversions."""
from __future__ import annotations

import threading

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

from . import backend as runtime
from ..errors import ArgumentError, ShardcError, api_boundary
from ..ir.sharding import MeshShape, Sharding, from_spec

class _MeshStack(threading.local):
    def __init__(self):
        self.stack = []
        self.saved = []     # runtime.mesh_context's value before each enter


_context = _MeshStack()     # set_mesh contexts of this thread


def same_mesh(a, b) -> bool:
    """One mesh: the same axis names and sizes over the same devices in the same order."""
    return a is b or (a.axis_names == b.axis_names and a.axis_sizes == b.axis_sizes and
                      tuple(d.id for d in a.devices.flat) == tuple(d.id for d in b.devices.flat))


class MeshInfo:
    """A jax Mesh (or a single device when there is none) and its IR view."""

    def __init__(self, mesh=None, device=None):
        self.mesh = mesh
        if mesh is not None:
            self.shape = MeshShape.of(mesh)
            self.devices = tuple(mesh.devices.flat)
        else:
            self.shape = MeshShape(())
            self.devices = (device or jax.local_devices()[0],)  # this process's own
        self._named: dict = {}

    @property
    def size(self):
        return len(self.devices)

    def named(self, sh: Sharding):
        """The jax sharding for an IR sharding."""
        out = self._named.get(sh)
        if out is None:
            if self.mesh is None:
                out = SingleDeviceSharding(self.devices[0])
            else:
                # on a mesh with Explicit axes jax spells a value's spec at full rank
                out = NamedSharding(self.mesh, sh.to_spec(full=bool(self.shape.explicit)))
            self._named[sh] = out
        return out

    def sharding_from(self, s, aval, what) -> Sharding:
        """An IR sharding from a NamedSharding, PartitionSpec or Sharding."""
        if isinstance(s, Sharding):
            return s
        if isinstance(s, NamedSharding):
            if self.mesh is not None and not same_mesh(s.mesh, self.mesh):
                raise ShardcError(f"{what}: its mesh {s.mesh} differs from the program's "
                                  f"mesh {self.mesh}; use one mesh for all arguments")
            spec = s.spec
        elif isinstance(s, PartitionSpec):
            if self.mesh is None:
                raise ShardcError(f"{what}: a bare PartitionSpec needs a mesh; pass a "
                                  "NamedSharding(mesh, spec) or use `with shardc.set_mesh(mesh):`")
            spec = s
        elif isinstance(s, (SingleDeviceSharding,)):
            return Sharding.replicated(aval.ndim)
        else:
            raise ShardcError(f"{what}: expected a NamedSharding or PartitionSpec, got "
                              f"{type(s).__name__}")
        return from_spec(spec, aval.ndim, self.shape, what).closed()

    def check_divisible(self, sh: Sharding, aval, what):
        for d, (n, axes) in enumerate(zip(aval.shape, sh.dims)):
            k = sh.shards(self.shape, d)
            if n % k:
                raise ShardcError(
                    f"{what}: sharding {sh} splits dimension {d} (size {n}) into {k} parts, "
                    f"which does not divide it; choose mesh axes whose sizes divide {n} or "
                    "pad the array")


class MeshSlot:
    """The mesh of a program being traced; a constraint may name it first."""

    def __init__(self, info: MeshInfo):
        self.info = info

    def adopt(self, mesh) -> MeshInfo:
        if mesh is None or not isinstance(mesh, jax.sharding.Mesh):
            return self.info
        if self.info.mesh is None:
            self.info = MeshInfo(mesh)
        elif not same_mesh(mesh, self.info.mesh):
            raise ShardcError(f"this sharding's mesh {mesh} differs from the program's mesh "
                              f"{self.info.mesh}; use one mesh per program")
        return self.info


def _mesh_of(s):
    if isinstance(s, NamedSharding):
        return s.mesh
    return None


def mesh_of_args(leaves, given, out_shardings) -> MeshInfo:
    """The one mesh named by the arguments, in/out shardings or `set_mesh`."""
    meshes = []
    for x in leaves:
        if isinstance(x, (jax.Array, jax.ShapeDtypeStruct)) and \
                isinstance(getattr(x, "sharding", None), NamedSharding):
            meshes.append(x.sharding.mesh)
    meshes += [m for m in map(_mesh_of, given) if m is not None]
    if out_shardings is not None:
        is_leaf = lambda x: x is None or isinstance(x, (NamedSharding, PartitionSpec))  # noqa
        meshes += [m for m in map(_mesh_of, jax.tree_util.tree_leaves(
            out_shardings, is_leaf=is_leaf)) if m is not None]
    if _context.stack:
        meshes.append(_context.stack[-1])
    mesh = None
    for m in meshes:
        if not isinstance(m, jax.sharding.Mesh):
            continue
        if mesh is None:
            mesh = m
        elif not same_mesh(m, mesh):
            raise ShardcError(f"arguments use different meshes ({mesh} and {m}); shardc "
                              "runs a program on one mesh")
    if mesh is not None:
        return MeshInfo(mesh)
    device = None
    for x in leaves:
        if isinstance(x, jax.Array) and isinstance(x.sharding, SingleDeviceSharding) \
                and x.committed:
            device = next(iter(x.devices()))
    return MeshInfo(None, device)


@api_boundary
def make_mesh(axis_shapes, axis_names, devices=None):
    """A jax Mesh with *Auto* axes (jax.make_mesh defaults to Explicit)."""
    if isinstance(axis_names, str):
        axis_names = (axis_names,)
    if isinstance(axis_shapes, int):
        axis_shapes = (axis_shapes,)
    axis_shapes, axis_names = tuple(axis_shapes), tuple(axis_names)
    if len(axis_shapes) != len(axis_names):
        raise ArgumentError(f"make_mesh: {len(axis_shapes)} sizes {axis_shapes} but "
                            f"{len(axis_names)} names {axis_names}; give one name per axis")
    for s in axis_shapes:
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool) or s < 1:
            raise ArgumentError(f"make_mesh: axis sizes must be positive ints, got "
                                f"{axis_shapes}")
    for a in axis_names:
        if not isinstance(a, str) or not a:
            raise ArgumentError(f"make_mesh: axis names must be non-empty strings, got "
                                f"{axis_names}")
    dup = sorted({a for a in axis_names if axis_names.count(a) > 1})
    if dup:
        raise ArgumentError(f"make_mesh: axis name(s) {dup} appear more than once in "
                            f"{axis_names}; each axis needs its own name")
    n = int(np.prod(axis_shapes))
    devs = list(devices) if devices is not None else jax.devices()
    if len(devs) < n:
        raise ArgumentError(
            f"make_mesh: a {'x'.join(map(str, axis_shapes))} mesh needs {n} devices but "
            f"only {len(devs)} are available (on CPU, set XLA_FLAGS="
            f"--xla_force_host_platform_device_count={n} before importing jax)")
    auto = (jax.sharding.AxisType.Auto,) * len(axis_names)
    if devices is None:
        return jax.make_mesh(axis_shapes, axis_names, axis_types=auto)
    return jax.sharding.Mesh(np.array(devs[:n]).reshape(axis_shapes), axis_names,
                             axis_types=auto)


class set_mesh:
    """`with shardc.set_mesh(mesh):` lets bare PartitionSpecs name that mesh."""

    def __init__(self, mesh):
        self.mesh = mesh

    def __enter__(self):
        _context.stack.append(self.mesh)
        _context.saved.append(runtime.mesh_context.swap_local(self.mesh))
        return self.mesh

    def __exit__(self, *exc):
        _context.stack.pop()
        runtime.mesh_context.set_local(_context.saved.pop())


def current_mesh():
    st = _context.stack
    return st[-1] if st else None


def named_in_context(spec, what):
    """A bare PartitionSpec as a NamedSharding on the `set_mesh` mesh."""
    mesh = current_mesh()
    if mesh is None:
        raise ShardcError(f"{what} with a bare PartitionSpec needs `with shardc.set_mesh(mesh):`"
                          "; or pass NamedSharding(mesh, spec)")
    return NamedSharding(mesh, spec)
