"""Explicit sharding's API: reshard and the `out_sharding=` of ops (jax.sharding.reshard).

`reshard(x, spec)` gives `x` a new sharding: inside a trace it is a sharding constraint
that also sets the value's type on explicit mesh axes; outside one it moves the arrays.
"""
from __future__ import annotations

import jax
from jax.sharding import NamedSharding, PartitionSpec

from ..errors import api_boundary

_tree = jax.tree_util


def apply_out_sharding(x, out_sharding, what="out_sharding"):
    """`x` resharded to `out_sharding` (a NamedSharding or PartitionSpec; None keeps x):
    what an op's `out_sharding=` does to its result."""
    if out_sharding is None:
        return x
    from .lax import _constraint_leaf
    return _constraint_leaf(x, out_sharding)


@api_boundary
def reshard(xs, out_shardings):
    """Reshard each leaf of `xs` to the matching (prefix) leaf of `out_shardings`."""
    from .jit import _broadcast_prefix
    leaves, tree = _tree.tree_flatten(xs)
    flat = _broadcast_prefix(out_shardings, xs, "reshard")
    out = [x if s is None else apply_out_sharding(x, s, "reshard")
           for x, s in zip(leaves, flat)]
    return _tree.tree_unflatten(tree, out)


__all__ = ["apply_out_sharding", "reshard", "NamedSharding", "PartitionSpec"]
