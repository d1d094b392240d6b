"""The vocabulary of batching rules (shardc.vmap), which each op family registers.

A batching rule is `prim.batch(ctx, args, batched, **params) -> (outs, out_batched)`:
`args` are the op's operands in the current trace; a batched one has the mapped dim
first (shape `(ctx.size, *per-example shape)`), an unbatched one its per-example shape;
`batched` says which, one bool per operand. It returns the results as the op would
(one value, or a list for ops with multiple results) and which of them are batched (one
bool, or a list), each batched result with the mapped dim first. The walk over the
program (shardc.transforms.batch) calls a rule only if some operand is batched.
"""
from __future__ import annotations

from ..trace import core


class BatchCtx:
    """What a rule may need beyond its operands: the mapped size, the vmap's axis name
    (for collectives over it), the mesh axes the mapped dim is sharded over
    (`spmd_axis_name`), the op being batched (its regions, for ops with bodies) and how
    to batch a region (`batch_region(region, args, batched) -> (outs, out_batched)`)."""
    __slots__ = ("size", "axis_name", "spmd_axis_name", "op", "batch_region")

    def __init__(self, size, axis_name=None, spmd_axis_name=None, batch_region=None):
        self.size = size
        self.axis_name = axis_name
        self.spmd_axis_name = spmd_axis_name
        self.op = None
        self.batch_region = batch_region


def aval(x):
    from .lax import aval as _aval
    return _aval(x)


def bcast(ctx, x, batched=False):
    """`x` with the mapped dim first: itself if batched, else broadcast along it."""
    if batched:
        return x
    from . import lax as L
    a = aval(x)
    return L.broadcast_in_dim(x, (ctx.size, *a.shape), tuple(range(1, a.ndim + 1)))


def materialize(ctx, args, batched):
    """Every operand batched (the unbatched broadcast along the mapped dim)."""
    return [bcast(ctx, x, b) for x, b in zip(args, batched)]


def move_dim(x, src, dst):
    """`x` with its dim `src` moved to position `dst` (a transpose; none if equal)."""
    from . import lax as L
    nd = aval(x).ndim
    src, dst = src % nd, dst % nd
    if src == dst:
        return x
    perm = [d for d in range(nd) if d != src]
    perm.insert(dst, src)
    return L.transpose(x, tuple(perm))


def elementwise_rule(prim):
    """The rule of an op applied element by element: rank-0 operands broadcast inline
    (so an unbatched scalar stays as is); other operands get the mapped dim."""
    def rule(ctx, args, batched, **params):
        ranks = [aval(x).ndim - b for x, b in zip(args, batched)]
        rank = max(ranks)
        ins = []
        for x, b, r in zip(args, batched, ranks):
            if b and r < rank:      # a batched per-example scalar: (size,) -> full shape
                from . import lax as L
                shape = _per_example_shape(args, batched, ranks, rank)
                x = L.broadcast_in_dim(x, (ctx.size, *shape), (0,))
            elif not b and r:
                x = bcast(ctx, x)
            ins.append(x)
        outs = prim.bind(*ins, **params)
        if prim.multiple_results:
            return outs, [True] * len(outs)
        return outs, True
    return rule


def _per_example_shape(args, batched, ranks, rank):
    for x, b, r in zip(args, batched, ranks):
        if r == rank:
            s = aval(x).shape
            return s[1:] if b else s
    return ()


def shift_axes(axes, by=1):
    """Per-example dim numbers as dims of the batched value (mapped dim first)."""
    if axes is None:
        return None
    if isinstance(axes, int):
        return axes + by
    return tuple(a + by for a in axes)


def is_tracer(x):
    return core.is_tracer(x)
