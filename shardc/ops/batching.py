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

import threading

from ..trace import core


class BatchCtx:
    """What a rule may need beyond its operands: the mapped size, the vmap's axis name
    (for collectives over it), the mesh axes the mapped dim is sharded over
    (`spmd_axis_name`), the op being batched (its regions, for ops with bodies) and how
    to batch a region (`batch_region(region, args, batched, force=None) -> (outs,
    out_batched)`, `force[i]`: output i batched even if it need not be) and which
    outputs of a region come out batched (`out_batched(region, batched)`)."""
    __slots__ = ("size", "axis_name", "spmd_axis_name", "op", "batch_region", "out_batched",
                 "resized", "split")

    def __init__(self, size, axis_name=None, spmd_axis_name=None, batch_region=None):
        self.size = size
        self.axis_name = axis_name
        self.spmd_axis_name = spmd_axis_name
        self.op = None
        self.batch_region = batch_region
        self.out_batched = None
        self.resized = None     # resized(n): this context for a mapped dim of n per device
        self.split = False      # the mapped dim is split over a shard_map's devices


class _Axes(threading.local):
    def __init__(self):
        self.stack = []


# the named vmapped axes in scope while a vmap traces its function (per thread, as the
# traces), innermost last: (axis_name, size); collectives over them are batched
AXES = _Axes()


def vmap_axis_size(name):
    """The size of the vmapped axis `name` in scope, None if there is none."""
    for n, size in reversed(AXES.stack):
        if n == name:
            return size
    return None


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


def no_operands(ctx, args, batched, **params):
    """The rule of ops without operands (constants, iota): never batched, as the walk
    calls rules only for ops with a batched operand."""
    raise AssertionError("internal: an op without operands has no batched operand")


def region_rule(prim):
    """The rule of an op with one region whose block arguments are its operands and
    whose results are what the region yields (checkpoint, custom_vjp_call): the region
    re-traced batched."""
    def rule(ctx, args, batched, **params):
        from .region import bind_region
        (r,) = ctx.op.regions
        obs = []

        def body(*xs):
            outs, ob = ctx.batch_region(r, xs, list(batched) + [False] * (len(xs) - len(args)))
            obs[:] = ob
            return outs, None
        outs, _ = bind_region(prim, body, list(args), params, ctx.op.loc, r.name)
        return outs, list(obs)
    return rule
