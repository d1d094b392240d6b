"""PositionalSharding: an array of devices shaped like the array it shards (the seed's
sharding, which jax dropped), as a thin layer over NamedSharding.

`PositionalSharding(devices).reshape(4, 2)` splits dim 0 of an array in 4 and dim 1 in
2, block (i, j) on the device at [i, j]; `.replicate(axis)` merges the device sets along
`axis` (each block then lives on all of them). Each cell holds a set of devices, one
index into the constructor's flat device list per copy (as jax 0.4's DeviceIdSet).

Everywhere shardc takes a sharding it turns one into a NamedSharding (`named`): on the
program's mesh when it can be said there, else on a mesh of its own whose axes are the
prime factors of its shape (so other positional shardings over the same devices can
be said on it too).
"""
from __future__ import annotations

import functools

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ..errors import ArgumentError, ShardcError


class PositionalSharding(jax.sharding.Sharding):
    """jax 0.4's PositionalSharding: `devices` (any shape) and views of it."""

    def __init__(self, devices, *, memory_kind=None):
        super().__init__()
        if not isinstance(devices, np.ndarray):
            devices = np.array(devices, dtype=object)
        if not devices.size:
            raise ArgumentError(f"PositionalSharding.__init__ requires at least one device, "
                                f"got {devices}")
        self._devices = tuple(devices.flat)
        self._memory_kind = memory_kind
        ids = np.empty(devices.size, dtype=object)
        for i in range(devices.size):
            ids[i] = frozenset((i,))
        self._ids = ids.reshape(devices.shape)

    @classmethod
    def _remake(cls, devices, ids, memory_kind):
        out = cls(devices, memory_kind=memory_kind)
        out._ids = ids
        return out

    # ------------------------------------------------------------ views

    @property
    def shape(self):
        return self._ids.shape

    @property
    def ndim(self):
        return self._ids.ndim

    def reshape(self, *shape):
        return self._remake(self._devices, self._ids.reshape(*shape), self._memory_kind)

    def transpose(self, *axes):
        return self._remake(self._devices, self._ids.transpose(*axes), self._memory_kind)

    T = property(transpose)

    def replicate(self, axis=None, keepdims=True):
        """The device sets merged along `axis` (all axes if None)."""
        axes = range(self.ndim) if axis is None else \
            [axis] if isinstance(axis, int) else list(axis)
        axes = sorted({a % self.ndim for a in axes})
        union = np.frompyfunc(lambda p, q: p | q, 2, 1)
        ids = self._ids
        for a in axes:
            ids = union.reduce(ids, axis=a, keepdims=True, initial=frozenset())
        if not keepdims:
            ids = ids.reshape([n for d, n in enumerate(ids.shape) if d not in axes])
        return self._remake(self._devices, ids, self._memory_kind)

    def __repr__(self):
        plat = self._devices[0].platform.upper()
        cells = np.empty(self.shape, dtype=object)
        for idx, s in np.ndenumerate(self._ids):
            cells[idx] = _IdSet(plat, sorted(self._devices[i].id for i in s))
        body = np.array2string(cells, prefix="PositionalSharding(", suffix=")",
                               max_line_width=100)
        mem = "" if self._memory_kind is None else f", memory_kind={self._memory_kind}"
        return f"PositionalSharding({body}{mem}, shape={self.shape})"

    def __hash__(self):
        return hash((self._devices, self._memory_kind,
                     tuple(map(tuple, map(sorted, self._ids.flat))), self.shape))

    def __eq__(self, other):
        return isinstance(other, PositionalSharding) and self._devices == other._devices \
            and self._memory_kind == other._memory_kind and self.shape == other.shape \
            and all(a == b for a, b in zip(self._ids.flat, other._ids.flat))

    # ------------------------------------------------------------ as a NamedSharding

    @functools.cached_property
    def _own(self) -> NamedSharding:
        """This sharding on a mesh of its own: the device array of shape
        (*shape, copies), each dim split into its prime factors, the axes named _p0,
        _p1, ... in order (so views of one device order share their mesh)."""
        copies = len(next(iter(self._ids.flat)))
        if any(len(s) != copies for s in self._ids.flat):
            raise ShardcError(f"{self!r}: every block must live on as many devices; "
                              "replicate whole axes")
        grid = np.empty(self.shape + (copies,), dtype=object)
        for idx, s in np.ndenumerate(self._ids):
            for k, i in enumerate(sorted(s)):
                grid[idx + (k,)] = self._devices[i]
        sizes, names, spec = [], [], []
        for d, n in enumerate(grid.shape):
            fs = _factors(n)
            dim_names = [f"_p{len(names) + j}" for j in range(len(fs))]
            sizes += fs
            names += dim_names
            if d < self.ndim:
                spec.append(tuple(dim_names) if dim_names else None)
        mesh = Mesh(grid.reshape(sizes or (1,)), tuple(names) or ("_p",))
        return NamedSharding(mesh, _trim(spec), memory_kind=self._memory_kind)

    def named(self, mesh=None) -> NamedSharding:
        """This sharding as a NamedSharding, on `mesh` when given (error if it cannot be
        said there)."""
        if mesh is None:
            return self._own
        found = _on_mesh(self, mesh)
        if found is None:
            raise ShardcError(f"{self!r} cannot be expressed on the program's mesh {mesh}: "
                              "its blocks sit on other devices than any PartitionSpec of that "
                              "mesh puts them; use NamedSharding(mesh, spec) instead")
        return found

    def _check_rank(self, ndim):
        if ndim != self.ndim and not self.is_fully_replicated:
            raise ShardcError(f"Sharding {self!r} is only valid for values of rank {self.ndim}"
                              f", but was applied to a value of rank {ndim}")

    # ------------------------------------------------------------ jax's Sharding API

    @property
    def device_set(self):
        return set(self._devices)

    @property
    def _device_assignment(self):
        return self._devices

    @property
    def memory_kind(self):
        return self._memory_kind

    def with_memory_kind(self, kind):
        return self._remake(self._devices, self._ids, kind)

    @property
    def is_fully_replicated(self):
        return self.shape == (1,) * self.ndim

    @property
    def is_fully_addressable(self):
        return self._own.is_fully_addressable

    @property
    def num_devices(self):
        return len(self._devices)

    def check_compatible_aval(self, aval_shape):
        self._check_rank(len(aval_shape))

    def devices_indices_map(self, global_shape):
        self._check_rank(len(global_shape))
        return self._own.devices_indices_map(global_shape)

    def shard_shape(self, global_shape):
        self._check_rank(len(global_shape))
        return self._own.shard_shape(global_shape)

    def _to_xla_hlo_sharding(self, num_dimensions):
        return self._own._to_xla_hlo_sharding(num_dimensions)

    def _to_sdy_sharding(self, num_dimensions):
        return self._own._to_sdy_sharding(num_dimensions)


class _IdSet(tuple):
    def __new__(cls, plat, ids):
        out = super().__new__(cls, ids)
        out.plat = plat
        return out

    def __repr__(self):
        return "{" + self.plat + " " + ", ".join(map(str, self)) + "}"


def _factors(n):
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


def _trim(spec):
    while spec and spec[-1] is None:
        spec.pop()
    return PartitionSpec(*spec)


def _cells(named: NamedSharding, shape):
    """The device ids holding each block of an array of `shape` (one element a block)."""
    out = {}
    for d, idx in named.devices_indices_map(shape).items():
        key = tuple((s.start or 0) for s in idx)
        out.setdefault(key, set()).add(d.id)
    return out


def _on_mesh(ps: PositionalSharding, mesh, limit=20000):
    """A NamedSharding on `mesh` that places blocks as `ps` does, or None (a search over
    which mesh axes split which dim, in which order)."""
    if set(d.id for d in mesh.devices.flat) != set(d.id for d in ps._devices) or \
            len(mesh.devices.flat) != len(ps._devices):
        return None
    want = _cells(ps._own, ps.shape)
    sizes = dict(zip(mesh.axis_names, mesh.axis_sizes))
    names = [a for a in mesh.axis_names if sizes[a] > 1]
    tried = 0

    def choices(n, free):
        """Ordered tuples of distinct free axes whose sizes multiply to n."""
        if n == 1:
            yield ()
            return
        for a in free:
            if n % sizes[a] == 0:
                for rest in choices(n // sizes[a], [b for b in free if b != a]):
                    yield (a,) + rest

    def go(d, free, spec):
        nonlocal tried
        if d == ps.ndim:
            tried += 1
            cand = NamedSharding(mesh, _trim(list(spec)), memory_kind=ps.memory_kind)
            return cand if _cells(cand, ps.shape) == want else None
        for axes in choices(ps.shape[d], free):
            if tried > limit:
                return None
            found = go(d + 1, [a for a in free if a not in axes],
                       spec + [None if not axes else axes if len(axes) > 1 else axes[0]])
            if found is not None:
                return found
        return None
    return go(0, names, [])


