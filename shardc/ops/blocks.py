"""A shard_map operand's per-device block: its shape, and its type in explicit mode."""
from __future__ import annotations

from math import prod

from ..errors import ShardcError
from ..ir.sharding import Sharding


def local_shape(shape, spec: Sharding, sizes: dict, what=""):
    out = []
    for d, (n, axes) in enumerate(zip(shape, spec.dims)):
        k = prod(sizes[a] for a in axes)
        if n % k:
            raise ShardcError(f"{what}: dimension {d} of size {n} is split over mesh axes "
                              f"{list(axes)} of total size {k}, which does not divide it")
        out.append(n // k)
    return tuple(out)


def local_aval(aval, spec: Sharding, sizes: dict, manual, what=""):
    """A shard_map operand's per-device block: its type keeps the free (non-manual)
    Explicit axes, as jax's _shard_shaped_array (modify_spec_for_auto_manual)."""
    ts = aval.ts
    if ts is not None:
        man = frozenset(manual)
        ts = Sharding([tuple(a for a in d if a not in man) for d in ts.dims], None,
                      [a for a in ts.unreduced if a not in man],
                      [a for a in ts.reduced if a not in man])
        if not aval.ndim and not (ts.unreduced or ts.reduced):
            ts = None
    return aval.update(shape=local_shape(aval.shape, spec, sizes, what), ts=ts)
