"""Forms of ops XLA's SPMD partitioner gets wrong, and the shardings shardc holds their
operands or results at instead (by a constraint, LowerCtx.held): each function names
the sharding, or None where the op keeps its own."""
from __future__ import annotations

from math import prod
from typing import NamedTuple

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


class ConvPlan(NamedTuple):
    """How a convolution is computed: its lhs and kernel held at `lhs` and `rhs`, the
    result made at `out`; with `manual` axes, per device in a manual computation (a
    local convolution of `groups` (feature, batch) groups, then summed over `summed`),
    else by XLA's partitioner at those shardings."""
    lhs: Sharding
    rhs: Sharding
    out: Sharding
    manual: tuple = ()
    groups: tuple = (1, 1)
    summed: tuple = ()


def conv_plan(ctx, dimension_numbers, feature_groups, batch_groups):
    """A convolution's ConvPlan, or None where XLA's own partitioning is kept (all
    replicated, or shardings XLA chooses: the oracle lowering).

    XLA's partitioner gives wrong values, jax.jit too, for convolutions it reshards
    itself, whose kernel is split while a spatial dim is (a halo exchange), or of batch
    groups summed over a split that leaves devices replicated: a (2, 4, 8, 8) lhs split
    along its features by 'y' and a 3x3 kernel along its outputs by 'y', into a result
    split along its features, is off by 156; the kernel gradient of a depthwise
    convolution whose batch is split by 'x' of a (4, 2) mesh by 8760. So shardc splits
    a convolution itself, per device: the batch as the result's, the kernel's outputs
    as the result's features (a grouped one's lhs features with them, by whole groups;
    batch groups' lhs batch likewise), input features by a split the lhs and kernel
    share (then summed). Only a result split along a spatial dim (and not along its
    features) is left to XLA's halo exchange, the kernel whole, which it gets right."""
    if ctx.lowering.oracle:
        return None
    lhs, rhs, out = ctx.in_shardings[0], ctx.in_shardings[1], ctx.out_shardings[0]
    if lhs is None or rhs is None or out is None:
        return None
    mesh = ctx.mesh
    (lb, lf, *ls), (ro, ri, *_), (ob, of, *os_) = dimension_numbers
    spatial = [out.dims[d] for d in os_]
    windowed = (feature_groups == batch_groups == 1 and any(spatial) and not out.dims[of]
                and not out.unreduced and all(
                    ctx.out_avals[0].shape[d] % out.shards(mesh, d) == 0 for d in os_))
    if not windowed:
        spatial = [()] * len(os_)
    batch = out.dims[ob] if batch_groups == 1 else ()
    feats = () if windowed else out.dims[of]
    groups = feature_groups if feature_groups > 1 else batch_groups
    if groups > 1 and groups % out.shards(mesh, of):
        feats = ()          # a device's outputs would be part of a group
    shared = lhs.dims[lf] if lhs.dims[lf] == rhs.dims[ri] else ()
    used = set(batch) | set(feats) | {a for s in spatial for a in s}
    inner = shared if feature_groups == 1 and not windowed and not used & set(shared) else ()
    want_l, want_r, want_o = [()] * len(lhs.dims), [()] * len(rhs.dims), [()] * len(out.dims)
    want_l[lb] = feats if batch_groups > 1 else batch
    want_l[lf] = feats if feature_groups > 1 else inner
    want_r[ro], want_r[ri] = feats, inner
    want_o[ob], want_o[of] = batch, feats
    for ld, od, s in zip(ls, os_, spatial):
        want_l[ld] = want_o[od] = s
    held_l = Sharding(want_l, None, lhs.unreduced, lhs.reduced)
    held_r = Sharding(want_r, None, rhs.unreduced, rhs.reduced)
    axes = set(batch) | set(feats) | set(inner)
    k = prod(mesh.axis_size(a) for a in feats)
    # (batch groups computed whole, still per device: XLA splits a replicated one whose
    # result is resharded after, and gets that wrong too)
    manual = tuple(a for a in mesh.names if a in axes or batch_groups > 1)
    partial = out.unreduced or out.reduced or lhs.unreduced or lhs.reduced or \
        rhs.unreduced or rhs.reduced
    if windowed or not manual or partial or any(a not in mesh.names for a in axes) or not all(
                n % held.shards(mesh, d) == 0 for held, aval in
                ((held_l, ctx.in_avals[0]), (held_r, ctx.in_avals[1]))
                for d, n in enumerate(aval.shape)):
        if batch_groups > 1:    # XLA sums batch groups over the wrong devices
            held_l = Sharding([()] * len(want_l), None, lhs.unreduced, lhs.reduced)
            held_r = Sharding([()] * len(want_r), None, rhs.unreduced, rhs.reduced)
            want_o = [()] * len(want_o)
        held_o = Sharding(want_o, None, out.unreduced, out.reduced)
        if (held_l, held_r, held_o) == (lhs.closed(), rhs.closed(), out.closed()):
            return None
        return ConvPlan(held_l, held_r, held_o)
    local = (feature_groups // k if feature_groups > 1 else 1,
             batch_groups // k if batch_groups > 1 else 1)
    return ConvPlan(held_l, held_r, Sharding(want_o), manual, local,
                    tuple(a for a in manual if a in inner))
