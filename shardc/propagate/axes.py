"""Axis references as the propagation engine sees them: (name, pre, size) triples.

A full mesh axis "x" of size 4 is ("x", 1, 4); the sub-axis `x:(2)2` is ("x", 2, 2).
These are Shardy's AxisRefAttr relations (prefix, containment, overlap, merging),
kept as plain tuples because propagation calls them in its innermost loops.
"""
from __future__ import annotations

from ..ir.sharding import MeshShape, Sharding, SubAxis


def to_ref(a, mesh: MeshShape):
    return (a, 1, mesh.sizes[a]) if type(a) is str else (a.name, a.pre, a.size)


def from_ref(r, mesh: MeshShape):
    return r[0] if r[1] == 1 and r[2] == mesh.sizes[r[0]] else SubAxis(*r)


def dims_of(sh: Sharding | None, rank: int, mesh: MeshShape):
    if sh is None:
        return [[] for _ in range(rank)]
    return [[to_ref(a, mesh) for a in d] for d in sh.dims]


def sharding_of(dims, mesh: MeshShape) -> Sharding:
    return Sharding([[from_ref(r, mesh) for r in d] for d in dims])


def contains(a, b) -> bool:
    """Does `a` cover all of `b`?"""
    return a[0] == b[0] and a[1] <= b[1] and b[1] * b[2] <= a[1] * a[2]


def prefix_of(a, b) -> bool:
    """Is `a` the major part of `b` (or equal to it)?"""
    return a[0] == b[0] and a[1] == b[1] and a[2] <= b[2]


def overlaps(a, b) -> bool:
    """Do `a` and `b` share devices? A size-1 ref is a whole mesh axis of size 1 (no
    sub-axis has size 1): as Shardy's, a whole axis overlaps every ref to it."""
    return a[0] == b[0] and (a[1] < b[1] * b[2] and b[1] < a[1] * a[2]
                             or a[2] == 1 or b[2] == 1)


def prefix_without_overlap(a, others):
    """The major part of `a` that overlaps none of `others`, or None."""
    for o in others:
        if a[0] == o[0] and overlaps(a, o):
            if a[1] >= o[1]:
                return None
            a = (a[0], a[1], o[1] // a[1])
    return a


def add_or_merge(axes: list, a):
    """Append `a`, merging it into the last axis when they are consecutive sub-axes."""
    if axes:
        last = axes[-1]
        if last[0] == a[0] and last[1] * last[2] == a[1]:
            axes[-1] = (a[0], last[1], last[2] * a[2])
            return
    axes.append(a)


NOT_PREFIX, STRICT_PREFIX, EQUAL = 0, 1, 2


def list_prefix_status(first, second) -> int:
    """Shardy's isAxisListPrefixOf(first, second)."""
    if not first:
        return EQUAL if not second else STRICT_PREFIX
    if len(first) > len(second):
        return NOT_PREFIX
    n = len(first)
    for i in range(n - 1):
        if first[i] != second[i]:
            return NOT_PREFIX
    if len(first) == len(second) and first[-1] == second[-1]:
        return EQUAL
    if prefix_of(first[n - 1], second[n - 1]):
        return STRICT_PREFIX
    return NOT_PREFIX


def is_strict_prefix(first, second) -> bool:
    return list_prefix_status(first, second) == STRICT_PREFIX


def total_size(axes) -> int:
    n = 1
    for a in axes:
        n *= a[2]
    return n


def refs_text(refs) -> str:
    """Axis refs as explain prints them: `{data, model:(2)2}`."""
    return "{" + ", ".join(r[0] if r[1] == 1 else f"{r[0]}:({r[1]}){r[2]}"
                           for r in refs) + "}"
