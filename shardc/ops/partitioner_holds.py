"""Forms of ops XLA's SPMD partitioner gets wrong, and the shardings shardc holds their
operands or results at instead (by a constraint, LowerCtx.held): each function names
the sharding, or None where the op keeps its own."""
from __future__ import annotations

from ..ir.sharding import Sharding


def padded_whole(ctx, interior):
    """The sharding a pad with interior padding is computed in, or None for its own.

    XLA's partitioner gives wrong values or mis-sized buffers, jax.jit too, for a pad
    with interior padding whose result is split along that dim when the operand is not
    split the same way: a replicated (4, 8, 4) operand padded by (0, 1, 1) into
    P(None, 'y'), or into P(None, ('x', 'y')), is off by up to the largest element. Such
    dims are padded whole and split after. In a cond branch, whose ops carry no
    shardings, XLA picks them: they are held whole there, the other dims left open."""
    if not any(interior) or ctx.lowering.oracle:
        return None
    operand = ctx.in_shardings[0]
    res = None if ctx.lowering.sources_only else ctx.out_shardings[0]
    if res is None:
        return Sharding(((),) * len(interior), [i == 0 for i in interior])
    bad = [i > 0 and res.dims[d] and (operand is None or operand.dims[d] != res.dims[d])
           for d, i in enumerate(interior)]
    if not any(bad):
        return None
    return Sharding([() if b else a for a, b in zip(res.dims, bad)], None, res.unreduced,
                    res.reduced)


def slice_source(ctx):
    """The sharding a slice's operand is held at before slicing, or None for its own.

    XLA's partitioner mis-sizes a slice whose operand is split along a sliced dim by
    axes the result splits another dim by ([{}, {x, y}] -> [{x}, {}]) when the operand
    has another user resharded the same way: concatenate([v, v[:, :3] * 2], 1) or
    v.at[i].set(v[:5]) (jax.jit's concatenate too) were XLA verifier errors. Such an
    operand is resharded whole first, and the slice is made at the result's sharding
    (in a cond branch too, whose ops are lowered without their shardings)."""
    if ctx.lowering.oracle:
        return None
    operand, res = ctx.in_shardings[0], ctx.out_shardings[0]
    if operand is None or res is None:
        return None
    cut = [n != m for n, m in zip(ctx.in_avals[0].shape, ctx.out_avals[0].shape)]
    moved = {a for d, c in enumerate(cut) if c for a in operand.dims[d] if a not in res.dims[d]}
    if not moved & set(res.axes()):
        return None
    return Sharding(res.dims, None, operand.unreduced, operand.reduced)
