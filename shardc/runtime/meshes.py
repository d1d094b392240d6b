"""The device mesh a program runs on: jax Mesh <-> IR MeshShape, sharding conversions."""
from __future__ import annotations

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec, SingleDeviceSharding

from ..errors import ArgumentError, ShardcError, api_boundary
from ..ir.sharding import MeshShape, Sharding, from_spec
from .autospec import is_auto
from .positional import PositionalSharding


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

    def result(self, sh: Sharding, aval):
        """The jax sharding of a compiled program's result `sh` that the user did not pin,
        as jax.jit names it. On a mesh with both Explicit and Auto axes jax leaves such a
        result's Auto axes to XLA, then names XLA's layout by the result's type if the
        two lay the data out alike, else re-reads the layout over the mesh -- which
        cannot see a size-1 axis, so such an axis drops out of the result's type
        (pxla._maybe_get_and_check_out_shardings)."""
        out = self.named(sh)
        types = () if self.mesh is None else set(self.mesh.axis_types)
        Auto, Explicit = jax.sharding.AxisType.Auto, jax.sharding.AxisType.Explicit
        if not (Auto in types and Explicit in types) or not aval.ndim or \
                sh.unreduced or sh.reduced:
            return out
        typed = self.named(aval.ts if aval.ts is not None else Sharding.replicated(aval.ndim))
        from jax._src.op_shardings import are_hlo_shardings_equal
        from jax._src.sharding_impls import parse_flatten_op_sharding
        hlo = out._to_xla_hlo_sharding(aval.ndim)
        if are_hlo_shardings_equal(typed._to_xla_hlo_sharding(aval.ndim), hlo):
            return typed
        try:
            return NamedSharding(self.mesh, parse_flatten_op_sharding(hlo, self.mesh)[0])
        except Exception:  # noqa: BLE001 -- a layout no spec names: keep shardc's (as jax)
            return out

    def sharding_from(self, s, aval, what) -> Sharding:
        """An IR sharding from a NamedSharding, PartitionSpec or Sharding."""
        if isinstance(s, Sharding):
            return s
        if isinstance(s, PositionalSharding):
            s._check_rank(aval.ndim)
            s = s.named(self.mesh)
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
        self.named = False      # whether an op of the trace named a mesh (adopt)

    def adopt(self, mesh) -> MeshInfo:
        if mesh is None or not isinstance(mesh, jax.sharding.Mesh):
            return self.info
        self.named = True
        if self.info.mesh is None:
            self.info = MeshInfo(mesh)
        elif not same_mesh(mesh, self.info.mesh):
            raise ShardcError(f"this sharding's mesh {mesh} differs from the program's mesh "
                              f"{self.info.mesh}; use one mesh per program")
        return self.info


def _mesh_of(s):
    if isinstance(s, NamedSharding):
        return s.mesh
    if is_auto(s):
        return s.mesh
    return None


def equivalent(s, given, ndim) -> bool:
    """Whether an array's sharding places its shards as the in_shardings `given` for it
    does (the same devices and blocks; the meshes' axis names may differ), which jax
    accepts as that sharding."""
    return isinstance(given, NamedSharding) and s.is_equivalent_to(given, ndim)


def mesh_of_args(leaves, given, out_shardings) -> MeshInfo:
    """The one mesh named by the arguments, in/out shardings or `set_mesh`."""
    meshes = []
    for i, x in enumerate(leaves):
        if isinstance(x, (jax.Array, jax.ShapeDtypeStruct)) and \
                isinstance(getattr(x, "sharding", None), NamedSharding) and \
                not equivalent(x.sharding, given[i] if i < len(given) else None, x.ndim):
            meshes.append(x.sharding.mesh)
    named = list(given)
    if out_shardings is not None:
        is_leaf = lambda x: x is None or is_auto(x) or isinstance(  # noqa
            x, (jax.sharding.Sharding, PartitionSpec))
        named += jax.tree_util.tree_leaves(out_shardings, is_leaf=is_leaf)
    meshes += [m for m in map(_mesh_of, named) if m is not None]
    ctx = current_mesh()
    if ctx is not None:
        meshes.append(ctx)
    mesh = None
    for m in meshes:
        if not isinstance(m, jax.sharding.Mesh):
            continue
        if mesh is None:
            mesh = m
        elif not same_mesh(m, mesh):
            raise ShardcError(f"arguments use different meshes ({mesh} and {m}); shardc "
                              "runs a program on one mesh")
    if mesh is None:    # a PositionalSharding's own mesh, if one is all there is
        for s in named:
            if isinstance(s, PositionalSharding):
                mesh = s.named().mesh
                break
    if mesh is not None:
        return MeshInfo(mesh)
    device = None
    for x in leaves:
        if isinstance(x, jax.Array) and isinstance(x.sharding, SingleDeviceSharding) \
                and x.committed:
            device = next(iter(x.devices()))
    return MeshInfo(None, device)


def one_device(leaves, kept):
    """A program on one device reads no arrays committed to different devices: jax
    refuses them ("incompatible devices") rather than move one."""
    seen = {}
    for i in kept:
        x = leaves[i]
        if isinstance(x, jax.Array) and x.committed and len(x.devices()) == 1:
            d = next(iter(x.devices()))
            for j, e in seen.items():
                if e != d:
                    raise ShardcError(
                        f"Received incompatible devices for jitted computation: argument "
                        f"{j} ({leaves[j].dtype}{list(leaves[j].shape)}) is committed to "
                        f"device {e.id} and argument {i} ({x.dtype}{list(x.shape)}) to device "
                        f"{d.id}; jax.device_put them onto one device, or shard them over "
                        "one mesh")
            seen[i] = d


@api_boundary
def make_mesh(axis_shapes, axis_names, axis_types=None, *, devices=None):
    """A jax Mesh of `axis_shapes` devices named `axis_names`, as jax.make_mesh: its
    axes are Explicit (shardings are part of types) unless `axis_types` says otherwise;
    pass `axis_types=(shardc.AxisType.Auto,) * n` for axes sharding propagation decides
    (and for shardc.AUTO's search). A jax Mesh made elsewhere is used as it is."""
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
    if axis_types is None:
        axis_types = (jax.sharding.AxisType.Explicit,) * len(axis_names)
    if isinstance(axis_types, jax.sharding.AxisType):
        axis_types = (axis_types,)
    axis_types = tuple(axis_types)
    if len(axis_types) != len(axis_names) or \
            not all(isinstance(t, jax.sharding.AxisType) for t in axis_types):
        raise ArgumentError(f"make_mesh: axis_types must be one shardc.AxisType (Auto, "
                            f"Explicit or Manual) per axis of {axis_names}, got {axis_types}")
    n = int(np.prod(axis_shapes))
    devs = list(devices) if devices is not None else jax.devices()
    if len(devs) < n:
        raise ArgumentError(
            f"make_mesh: a {'x'.join(map(str, axis_shapes))} mesh needs {n} devices but "
            f"only {len(devs)} are available (on CPU, set XLA_FLAGS="
            f"--xla_force_host_platform_device_count={n} before importing jax)")
    if devices is None:
        return jax.make_mesh(axis_shapes, axis_names, axis_types=axis_types)
    return jax.sharding.Mesh(np.array(devs[:n]).reshape(axis_shapes), axis_names,
                             axis_types=axis_types)


class set_mesh:
    """The mesh bare PartitionSpecs (and shard_map without `mesh=`) name, as jax.set_mesh,
    whose context it is: `shardc.set_mesh(mesh)` as a statement sets it for the rest of
    this thread, `with shardc.set_mesh(mesh):` restores the previous mesh on exit. A mesh
    set by jax.set_mesh is shardc's too. Being in jax's context, the mesh enters the
    cache keys of shardc.jit's dispatch, as it does jax.jit's."""
    __slots__ = ("_jax",)

    def __init__(self, mesh):
        if mesh is not None and not isinstance(mesh, jax.sharding.Mesh):
            raise ArgumentError(f"set_mesh: expected a jax.sharding.Mesh (shardc.make_mesh(...))"
                                f" or None, got {type(mesh).__name__}")
        try:
            self._jax = jax.sharding.set_mesh(mesh)
        except ValueError as e:
            raise ArgumentError(f"set_mesh: {e}") from None

    def __enter__(self):
        return current_mesh()

    def __exit__(self, *exc):
        self._jax.__exit__(*exc)


def current_mesh():
    """The concrete mesh of jax's mesh context (set_mesh), or None."""
    try:
        mesh = jax.sharding.get_mesh()
    except ValueError:      # inside a jax trace: jax keeps no concrete mesh there
        from jax._src import core as jcore
        from jax._src.sharding_impls import get_concrete_mesh
        from ..trace import core
        # but shardc's trace is jax's current one while shardc traces (frontends)
        if jcore.trace_ctx.trace is not core.JAX_BRIDGE["jax_trace"]:
            return None
        mesh = get_concrete_mesh()
    return None if mesh is None or mesh.empty else mesh


def get_abstract_mesh():
    """The abstract mesh of jax's context (set_mesh, use_abstract_mesh); inside a trace
    shardc.sharding.get_abstract_mesh gives the program's instead."""
    return jax.sharding.get_abstract_mesh()


use_abstract_mesh = jax.sharding.use_abstract_mesh
get_mesh = jax.sharding.get_mesh


def as_jax_sharding(s, mesh=None):
    """`s` as a sharding jax takes: a PositionalSharding becomes a NamedSharding (on
    `mesh` if given); others are kept."""
    return s.named(mesh) if isinstance(s, PositionalSharding) else s


def with_memory(sharding, memory):
    """The jax sharding in host memory when `memory` says so (None: the device's)."""
    return sharding if memory is None else sharding.with_memory_kind(memory)


def boundary_kind(memory_kind):
    """A memory kind at a program's boundary (a string, None or a jax.memory.Space):
    None for the device's, else jax's name of it (pinned_host, unpinned_host)."""
    name = getattr(memory_kind, "name", memory_kind)
    return None if name in (None, "device", "Device") else \
        "pinned_host" if name == "Host" else name


def memory_of(x):
    """The memory kind a jax.Array is in: None for the device's, else jax's name."""
    return boundary_kind(getattr(getattr(x, "sharding", None), "memory_kind", None))


def named_in_context(spec, what):
    """A bare PartitionSpec as a NamedSharding on the `set_mesh` mesh."""
    mesh = current_mesh()
    if mesh is None:
        raise ShardcError(f"{what} with a bare PartitionSpec needs a mesh: call "
                          "`shardc.set_mesh(mesh)` (or `with shardc.set_mesh(mesh):`), or "
                          "pass NamedSharding(mesh, spec)")
    return NamedSharding(mesh, spec)


def target_platform() -> str:
    """The platform shardc compiles for: the devices of the program's mesh (or of the
    context's), else of its single device; as jax's lowering names it (cuda, not gpu)."""
    from jax._src.xla_bridge import canonicalize_platform

    from ..trace import core
    b = core.current_builder()
    info = b.meshes.info if b is not None and b.meshes is not None else None
    mesh = info.mesh if info is not None else None
    if mesh is None and isinstance(current_mesh(), jax.sharding.Mesh):
        mesh = current_mesh()
    if mesh is not None:
        dev = mesh.devices.flat[0]
    else:
        dev = info.devices[0] if info is not None else jax.devices()[0]
    return canonicalize_platform(dev.platform)
