"""A convolution computed per device in an sdy.manual_computation, as a ConvPlan
(ops/conv_plan.conv_plan) lays it out: each device convolves its blocks, its lhs
block first extended by its neighbours' rows along spatial dims split in the lhs and
kernel alike (a halo), then the partial sums are added up."""
from __future__ import annotations

from ..lower.emit import sharding_per_value, tensor_type
from .blocks import local_shape
from .common import i64_array
from .device_groups import shifted, summed


def per_device(ctx, lhs, rhs, plan, pads, lhs_spatial, props):
    """The convolution as a manual computation over plan.manual: each device's lhs block
    extended by plan.halos, convolved with padding `pads` (`props(pads, lhs dilation)`:
    the local convolution's attributes, of plan.groups groups); `lhs_spatial` the lhs's
    spatial dims."""
    sizes = {a: ctx.mesh.axis_size(a) for a in ctx.mesh.names}
    avals = [a.update(shape=local_shape(a.shape, s, sizes))
             for a, s in zip((*ctx.in_avals, ctx.out_avals[0]), (plan.lhs, plan.rhs, plan.out))]
    low = ctx.lowering
    args = [low.fresh() for _ in range(2)]
    for n, a in zip(args, avals):
        low.types[n] = tensor_type(a)
    saved, indent = ctx.lines, ctx.indent
    ctx.lines, ctx.indent = [], indent + "    "
    try:
        x, xa = args[0], avals[0]
        for h in plan.halos:
            x, xa = _extended(ctx, x, xa, lhs_spatial[h.spatial], h)
        x, xa, pads, dilation = for_xla(ctx, x, xa, avals[1], pads, False)
        (r,) = ctx.op("stablehlo.convolution", [x, args[1]], [tensor_type(xa),
                      tensor_type(avals[1])], [tensor_type(avals[2])], props(pads, dilation),
                      sharding=False)
        if plan.summed:
            r = summed(ctx, r, avals[2], plan.summed)
        inner = ctx.lines
    finally:
        ctx.lines, ctx.indent = saved, indent
    t = tensor_type(avals[2])
    head = ", ".join(f"{n}: {tensor_type(a)}" for n, a in zip(args, avals))
    body = (f"{{\n{indent}  ^bb0({head}):\n" + "\n".join(inner) +
            f'\n{indent}    "sdy.return"({r}) : ({t}) -> ()\n{indent}}}')
    props = {"in_shardings": sharding_per_value([plan.lhs, plan.rhs]),
             "manual_axes": "#sdy<manual_axes{" + ", ".join(f'"{a}"' for a in plan.manual) +
             "}>", "out_shardings": sharding_per_value([plan.out])}
    (r,) = ctx.op("sdy.manual_computation", [lhs, rhs], [tensor_type(a) for a in ctx.in_avals],
                  [tensor_type(ctx.out_avals[0])], props, sharding=False, regions=[body])
    return r


def for_xla(ctx, x, aval, rhs_aval, pads, sharding):
    """(x, its aval, padding, lhs dilation) of a convolution's lhs as XLA:CPU computes it
    right (its other attributes the IR op's; `rhs_aval` its kernel's, `sharding` the
    slice's and pad's: a spatial dim is whole here):
    - rows a negative padding drops are sliced off first, the rest of it (less than a
      dilation) becomes zeros: XLA convolves garbage or wrong values for some
      convolutions with a negative padding (jax on one device too: (-1, 1) on a dim);
    - an lhs dilation equal to the kernel's size, with the stride one less and no
      padding, is made by a pad: XLA's ConvOperandSwapper takes such a dim for a
      "group" dim, keeps its window as the kernel's size though the operand it
      becomes the kernel of has another, and aborts the process (jax too)."""
    p = ctx.ir_op.params
    (_, _, *spatial), (_, _, *taps) = p["dimension_numbers"][:2]
    pads, dilation = [tuple(q) for q in pads], list(p["lhs_dilation"])
    for i, (d, (lo, hi)) in enumerate(zip(spatial, pads)):
        drop_lo = -(lo // dilation[i]) if lo < 0 else 0
        drop_hi = -(hi // dilation[i]) if hi < 0 else 0
        if drop_lo or drop_hi:
            x, aval = _slice(ctx, x, aval, d, drop_lo, aval.shape[d] - drop_hi, sharding)
            pads[i] = lo, hi = (lo + drop_lo * dilation[i], hi + drop_hi * dilation[i])
        k = rhs_aval.shape[taps[i]]
        if dilation[i] == k > 1 and p["window_strides"][i] == k - 1 and (lo, hi) == (0, 0) \
                and p["rhs_dilation"][i] == 1 and aval.shape[d] != k:
            x, aval = _dilated(ctx, x, aval, d, k, sharding)
            dilation[i] = 1
    return x, aval, pads, tuple(dilation)


def _dilated(ctx, x, aval, d, k, sharding):
    """`x` with k - 1 zeros between its rows along dim `d` (interior padding)."""
    arr = i64_array
    shape = list(aval.shape)
    shape[d] = (shape[d] - 1) * k + 1
    out = aval.update(shape=tuple(shape))
    interior = [0] * len(shape)
    interior[d] = k - 1
    zero = ctx.constant(0, aval.update(shape=()))
    (r,) = ctx.op("stablehlo.pad", [x, zero], [tensor_type(aval), tensor_type(
        aval.update(shape=()))], [tensor_type(out)], {
        "edge_padding_high": arr([0] * len(shape)), "edge_padding_low": arr([0] * len(shape)),
        "interior_padding": arr(interior)}, sharding=sharding)
    return r, out


def _slice(ctx, x, aval, d, start, stop, sharding=False):
    shape = list(aval.shape)
    shape[d] = stop - start
    out = aval.update(shape=tuple(shape))
    starts, limits = [0] * len(shape), list(aval.shape)
    starts[d], limits[d] = start, stop
    (r,) = ctx.op("stablehlo.slice", [x], [tensor_type(aval)], [tensor_type(out)],
                  {"start_indices": i64_array(starts), "limit_indices": i64_array(limits),
                   "strides": i64_array([1] * len(shape))}, sharding=sharding)
    return r, out


def _extended(ctx, x, aval, d, halo):
    """Block `x` along dim `d` with `halo.lo` rows of the device before it (zeros on the
    first: the convolution's low padding) and `halo.hi` of the one after (zeros on the
    last, its high padding)."""
    block = aval.shape[d]
    parts = []
    if halo.lo:
        lo, la = _slice(ctx, x, aval, d, block - halo.lo, block)
        parts.append((shifted(ctx, lo, la, halo.axes, 1), la))
    parts.append(_slice(ctx, x, aval, d, 0, block + halo.hi) if halo.hi < 0 else (x, aval))
    if halo.hi > 0:
        hi, ha = _slice(ctx, x, aval, d, 0, halo.hi)
        parts.append((shifted(ctx, hi, ha, halo.axes, -1), ha))
    if len(parts) == 1:
        return parts[0]
    shape = list(aval.shape)
    shape[d] = sum(a.shape[d] for _, a in parts)
    out = aval.update(shape=tuple(shape))
    (r,) = ctx.op("stablehlo.concatenate", [p for p, _ in parts],
                  [tensor_type(a) for _, a in parts], [tensor_type(out)],
                  {"dimension": f"{d} : i64"}, sharding=False)
    return r, out
