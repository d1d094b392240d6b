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
        x, xa, pads, dilation, grown = for_xla(ctx, x, xa, avals[1], pads, False)
        (r,) = ctx.op("stablehlo.convolution", [x, args[1]], [tensor_type(xa),
                      tensor_type(avals[1])], [tensor_type(grown_aval(avals[2], grown))],
                      props(pads, dilation), sharding=False)
        r = trimmed(ctx, r, avals[2], grown, False)
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
    """(x, its aval, padding, lhs dilation, grown) of a convolution's lhs as XLA:CPU
    computes it right (its other attributes the IR op's; `rhs_aval` its kernel's,
    `sharding` the slice's: a spatial dim is whole here; `grown`: (result dim, windows)
    the result has more, to be sliced off by `trimmed`):
    - rows a negative padding drops are sliced off first, the rest of it (less than a
      dilation) becomes zeros: XLA convolves garbage or wrong values for some
      convolutions with a negative padding (jax on one device too: (-1, 1) on a dim);
    - a dim with an lhs dilation equal to the kernel's size, the stride one less and no
      padding gets a window more (high padding): XLA's ConvOperandSwapper takes such a
      dim for a "group" dim, keeps its window as the kernel's size though the operand
      it becomes the kernel of has another, and aborts the process (jax too); an
      interior pad instead XLA folds back into the convolution."""
    p = ctx.ir_op.params
    (_, _, *spatial), (_, _, *taps), (_, _, *outs) = p["dimension_numbers"]
    pads, dilation, grown = [tuple(q) for q in pads], p["lhs_dilation"], []
    for i, (d, (lo, hi)) in enumerate(zip(spatial, pads)):
        drop_lo = -(lo // dilation[i]) if lo < 0 else 0
        drop_hi = -(hi // dilation[i]) if hi < 0 else 0
        if drop_lo or drop_hi:
            x, aval = _slice(ctx, x, aval, d, drop_lo, aval.shape[d] - drop_hi, sharding)
            pads[i] = lo, hi = (lo + drop_lo * dilation[i], hi + drop_hi * dilation[i])
        k, stride = rhs_aval.shape[taps[i]], p["window_strides"][i]
        if dilation[i] == k > 1 and stride == k - 1 and (lo, hi) == (0, 0) and \
                p["rhs_dilation"][i] == 1:
            pads[i] = (0, stride)
            grown.append((outs[i], 1))
    return x, aval, pads, dilation, grown


def grown_aval(aval, grown):
    shape = list(aval.shape)
    for d, n in grown:
        shape[d] += n
    return aval.update(shape=tuple(shape))


def trimmed(ctx, r, aval, grown, sharding):
    """A convolution's result `r` (of `aval` grown by `grown`) less its added windows."""
    big = grown_aval(aval, grown)
    for d, n in grown:
        r, big = _slice(ctx, r, big, d, 0, big.shape[d] - n, sharding)
    return r


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
