"""Shardings as IR data: mesh axes per tensor dim, their text form, and PartitionSpec conversion.

A `Sharding` lists, for each dimension of a tensor, the mesh axes it is split over
(major to minor). An axis is its name, or a `SubAxis` (a slice of an axis, as Shardy's
`"x":(pre)size`) when only part of an axis fits a dimension. Axes on no dimension
replicate the tensor. Text form (Shardy's, without quotes): `[{data}, {}]`,
`[{data, model}]`, `[{x:(1)2}, {?}]` where `?` marks a dim propagation may still shard.
"""
from __future__ import annotations

import functools
import re
from typing import NamedTuple

from ..errors import ShardcError


class SubAxis(NamedTuple):
    """Part of mesh axis `name`: the sub-axis of `size` after stepping over `pre`."""
    name: str
    pre: int
    size: int

    def __str__(self):
        return f"{self.name}:({self.pre}){self.size}"


def axis_name(a) -> str:
    return a if type(a) is str else a.name


class MeshShape:
    """The IR's view of a mesh: axis names and sizes, no devices, and which axes are
    Explicit (jax's AxisType.Explicit: shardings on them are part of values' types).
    Text form: `<data=2, model=4>`, `<X=2 explicit, Y=4>`."""
    __slots__ = ("axes", "sizes", "names", "size", "explicit")

    def __init__(self, axes, explicit=()):
        self.axes = tuple((str(n), int(s)) for n, s in axes)   # ((name, size), ...)
        self.sizes = dict(self.axes)
        self.names = tuple(n for n, _ in self.axes)
        self.explicit = frozenset(explicit)
        self.size = 1
        for _, s in self.axes:
            self.size *= s

    def __eq__(self, other):
        return isinstance(other, MeshShape) and self.axes == other.axes and \
            self.explicit == other.explicit

    def __hash__(self):
        return hash(self.axes)

    def __repr__(self):
        return f"MeshShape({self})"

    def axis_size(self, a) -> int:
        return self.sizes[a] if type(a) is str else a.size

    def __str__(self):
        return "<" + ", ".join(f"{n}={s}" + (" explicit" if n in self.explicit else "")
                               for n, s in self.axes) + ">"

    @staticmethod
    def of(mesh) -> "MeshShape":
        """From a jax Mesh (or AbstractMesh), with its Explicit axes."""
        types = getattr(mesh, "axis_types", None) or ()
        explicit = [n for n, t in zip(mesh.axis_names, types) if _is_explicit(t)]
        return MeshShape(tuple(zip(mesh.axis_names, mesh.axis_sizes)), explicit)


def _is_explicit(t) -> bool:
    return getattr(t, "name", str(t)) == "Explicit"


class Sharding:
    """How one tensor is split: per dim, a tuple of mesh axes (major first); immutable."""
    __slots__ = ("dims", "open", "unreduced", "reduced", "_hash")

    def __init__(self, dims, open=None, unreduced=(), reduced=()):
        self.dims = tuple(tuple(d) for d in dims)
        self.open = tuple(open) if open is not None and any(open) else None
        # mesh axes over which the value is a partial sum (jax's P(unreduced=...)):
        # each device group holds a summand, the value is their sum
        self.unreduced = tuple(sorted(unreduced)) if unreduced else ()
        # axes over which a replicated value's cotangent is a partial sum (jax's
        # P(reduced=...)): replicated here; gradients leave it unreduced
        self.reduced = tuple(sorted(reduced)) if reduced else ()
        self._hash = hash((self.dims, self.open, self.unreduced, self.reduced))

    @staticmethod
    def replicated(rank: int) -> "Sharding":
        return _replicated(rank)

    @property
    def rank(self):
        return len(self.dims)

    def is_replicated(self):
        return not any(self.dims)

    def axes(self):
        return [a for d in self.dims for a in d]

    def closed(self) -> "Sharding":
        return self if self.open is None else Sharding(self.dims, None, self.unreduced,
                                                        self.reduced)

    def shards(self, mesh: MeshShape, dim: int) -> int:
        n = 1
        for a in self.dims[dim]:
            n *= mesh.axis_size(a)
        return n

    def __eq__(self, other):
        return (isinstance(other, Sharding) and self._hash == other._hash
                and self.dims == other.dims and self.open == other.open
                and self.unreduced == other.unreduced and self.reduced == other.reduced)

    def __hash__(self):
        return self._hash

    def __repr__(self):
        return f"Sharding({self})"

    def __str__(self):
        parts = []
        for i, d in enumerate(self.dims):
            items = [str(a) for a in d]
            if self.open and self.open[i]:
                items.append("?")
            parts.append("{" + ", ".join(items) + "}")
        return "[" + ", ".join(parts) + "]" + unreduced_text(self.unreduced, self.reduced)

    def to_spec(self, full=False):
        """As a PartitionSpec (sub-axes dropped from the first one on, as Shardy exports);
        trailing unsharded dims are left out unless `full` (jax's explicit-mode spelling)."""
        from jax.sharding import PartitionSpec
        out = []
        for d in self.dims:
            whole = []
            for a in d:
                if type(a) is not str:
                    break
                whole.append(a)
            out.append(None if not whole else whole[0] if len(whole) == 1 else tuple(whole))
        while out and out[-1] is None and not full:
            out.pop()
        if self.unreduced or self.reduced:
            return PartitionSpec(*out, unreduced=frozenset(self.unreduced),
                                 reduced=frozenset(self.reduced))
        return PartitionSpec(*out)


def unreduced_text(unreduced, reduced=()) -> str:
    """jax's suffix for partial sums and reduced axes: f32[8]{U:X}, [{}]{U:X,Y, R:Z}."""
    parts = ([f"U:{','.join(unreduced)}"] if unreduced else []) + \
        ([f"R:{','.join(reduced)}"] if reduced else [])
    return "{" + ", ".join(parts) + "}" if parts else ""


def parse_unreduced(text):
    """(text before the suffix, unreduced axes, reduced axes) of a type or sharding."""
    if not text.endswith("}") or ("{U:" not in text and "{R:" not in text):
        return text, (), ()
    i = max(text.rfind("{U:"), text.rfind("{R:"))
    head, body = text[:i], text[i + 1:-1]
    got = {"U": (), "R": ()}
    for part in body.split(", "):
        k, _, axes = part.partition(":")
        got[k.strip()] = tuple(a.strip() for a in axes.split(",") if a.strip())
    return head, got["U"], got["R"]


@functools.lru_cache(maxsize=64)
def _replicated(rank):
    return Sharding(((),) * rank)


_DIM_RE = re.compile(r"\{([^{}]*)\}")
_SUB_RE = re.compile(r"^(\w+):\((\d+)\)(\d+)$")


def parse_sharding(text: str) -> Sharding:
    """Inverse of str(Sharding)."""
    text = text.strip()
    text, unreduced, reduced = parse_unreduced(text)
    if not (text.startswith("[") and text.endswith("]")):
        raise ValueError(f"bad sharding {text!r}")
    dims, opens = [], []
    for body in _DIM_RE.findall(text[1:-1]):
        axes, is_open = [], False
        for item in (s.strip() for s in body.split(",")):
            if not item:
                continue
            if item == "?":
                is_open = True
            elif (m := _SUB_RE.match(item)):
                axes.append(SubAxis(m.group(1), int(m.group(2)), int(m.group(3))))
            elif re.fullmatch(r"\w+", item):
                axes.append(item)
            else:
                raise ValueError(f"bad mesh axis {item!r} in sharding {text!r}")
        dims.append(tuple(axes))
        opens.append(is_open)
    return Sharding(dims, opens, unreduced, reduced)


def from_spec(spec, rank: int, mesh: MeshShape, what: str = "sharding") -> Sharding:
    """A PartitionSpec for a rank-`rank` value, checked against the mesh."""
    from jax.sharding import PartitionSpec
    entries = tuple(getattr(spec, "partitions", spec)) if spec is not None else ()
    if len(entries) > rank:
        raise ShardcError(
            f"{what}: PartitionSpec {spec} has {len(entries)} entries but the value has "
            f"rank {rank}; give at most one entry per dimension")
    dims, opens, seen = [], [], set()
    for e in entries:
        if e is PartitionSpec.UNCONSTRAINED:
            dims.append(())
            opens.append(True)
            continue
        axes = () if e is None else (e,) if isinstance(e, str) else tuple(e)
        for a in axes:
            if a not in mesh.sizes:
                raise ShardcError(
                    f"{what}: unknown mesh axis {a!r} in {spec}; the mesh has axes "
                    f"{list(mesh.names)}")
            if a in seen:
                raise ShardcError(
                    f"{what}: mesh axis {a!r} is used twice in {spec}; each axis may "
                    "shard at most one dimension")
            seen.add(a)
        dims.append(axes)
        opens.append(False)
    dims += [()] * (rank - len(dims))
    opens += [False] * (rank - len(opens))
    unreduced = tuple(getattr(spec, "unreduced", None) or ())
    reduced = tuple(getattr(spec, "reduced", None) or ())
    for a in unreduced + reduced:
        if a not in mesh.sizes or a in seen:
            raise ShardcError(
                f"{what}: unreduced axis {a!r} in {spec} must be a mesh axis that no "
                f"dimension uses; the mesh has axes {list(mesh.names)}")
    return Sharding(dims, opens, unreduced, reduced)
