"""Lowering of the cumulative ops (cumsum, cumprod, cummax, cummin, cumlogsumexp).

Unsplit, each is one reduce_window whose window spans the axis, as jax lowers them:
XLA's CPU and GPU backends rewrite that into a log-depth scan. On an axis split over
devices that rewrite does not happen: the partitioner turns the op into a windowed
reduce over a gathered, padded copy, O(n * n / k) per device (8 x 8192 floats of
cumlogsumexp on 8 CPU devices: ~20 s, jax.jit's too). So a split axis is scanned in
blocks instead: viewed as (k, n / k) with the k dim split as the axis was, each device
scans its block locally, the k block totals are gathered (k values per row, the one
collective), and each block is combined with the total of the blocks before it.
"""
from __future__ import annotations

from functools import partial

from ..ir import dtypes
from ..ir.sharding import Sharding
from ..lower.emit import sharding_attr, tensor_type
from .common import i64_array


def window_scan(ctx, x, aval, axis, reverse, init, combine, sharding, pad=None):
    """reduce_window running `combine(op, a, b, aval)` along `axis` of x (type `aval`),
    the window the whole axis; `pad` (default n - 1) on the side the scan starts from."""
    n = aval.shape[axis]
    pad = n - 1 if pad is None else pad
    s = aval.update(shape=(), weak=False)

    def body(c, a, b):
        return [combine(partial(c.op, sharding=False), a, b, s)]
    region = ctx.region([s, s], body)
    out = aval.update(shape=tuple(d + pad - n + 1 if i == axis else d
                                  for i, d in enumerate(aval.shape)))
    pads = ", ".join(f"[{(0 if reverse else pad) if d == axis else 0}, "
                     f"{(pad if reverse else 0) if d == axis else 0}]" for d in range(aval.ndim))
    props = {"window_dimensions": i64_array([n if d == axis else 1 for d in range(aval.ndim)]),
             "window_strides": i64_array([1] * aval.ndim),
             "base_dilations": i64_array([1] * aval.ndim),
             "window_dilations": i64_array([1] * aval.ndim),
             "padding": f"dense<[{pads}]> : tensor<{aval.ndim}x2xi64>"}
    (r,) = ctx.op("stablehlo.reduce_window", [x, init],
                  [tensor_type(aval), tensor_type(s)], [tensor_type(out)], props, sharding,
                  regions=[region])
    return _pinned(ctx, r, out, sharding[0]) if sharding else r


def _pinned(ctx, r, aval, sharding):
    """r held at `sharding` by a constraint where ops carry no sharding of their own (a
    cond's branches, ops/control.py): left to Shardy, the split axis would reach a
    reduce_window's window and XLA's halo bug (see _whole_axis)."""
    if not ctx.lowering.sources_only:
        return r
    t = tensor_type(aval)
    (r,) = ctx.op("sdy.sharding_constraint", [r], [t], [t], {"sharding": sharding_attr(sharding)},
                  sharding=False)
    return r


def lower_scan(ctx, x, *, axis, reverse, identity, combine, blocks=True):
    """The running `combine` (a monoid with `identity`) of x along `axis`. blocks=False:
    a split axis is scanned whole (as jax.jit does), never in blocks: for a combine that
    is not associative on special values, whose results depend on the order XLA's
    reduce_window rewrite picks (complex multiply with an infinite part: (1+0j) * (inf
    + inf j) is nan + nan j; complex max/min, lexicographic, with a NaN part)."""
    xa = ctx.in_avals[0]
    if xa.size == 0:     # nothing to accumulate (and a window of 0 is invalid)
        return [x]
    init = ctx.constant(identity, xa.update(shape=(), weak=False))
    scan = partial(window_scan, ctx, aval=xa, axis=axis, reverse=reverse, init=init,
                   combine=combine)
    xs, os_ = ctx.in_shardings[0], ctx.out_shardings[0]
    split = [sh for sh in (os_, xs) if sh is not None and sh.dims[axis]]
    if ctx.lowering.oracle or not split:
        return [scan(x, sharding=None)]
    layout = Sharding(split[0].dims)
    k = layout.shards(ctx.mesh, axis)
    if not blocks or xa.shape[axis] % k or any(sh.unreduced for sh in (xs, os_)
                                               if sh is not None):
        return _whole_axis(ctx, x, axis, scan)
    y = _blocked(ctx, x, axis, reverse, init, combine, layout, k)
    if os_ is None or os_ == layout:
        return [y]
    t = tensor_type(xa)
    return ctx.op("sdy.sharding_constraint", [y], [t], [t], {"sharding": sharding_attr(os_)},
                  sharding=False)


def _blocked(ctx, x, axis, reverse, init, combine, layout, k):
    """The scan of x along `axis`, split k ways as in `layout`, block by block."""
    xa = ctx.in_avals[0]
    t = tensor_type(xa)
    if ctx.in_shardings[0] != layout:
        (x,) = ctx.op("sdy.sharding_constraint", [x], [t], [t],
                      {"sharding": sharding_attr(layout)}, sharding=False)
    a, dims, shape = axis, layout.dims, xa.shape
    m = shape[a] // k
    blocks = xa.update(shape=(*shape[:a], k, m, *shape[a + 1:]))
    local = Sharding((*dims[:a], dims[a], (), *dims[a + 1:]))      # k split, m whole
    whole = Sharding((*dims[:a], (), (), *dims[a + 1:]))

    def op(name, args, out_aval, sharding, props=None, regions=None):
        (r,) = ctx.op(name, args, [ctx.lowering.types[v] for v in args],
                      [tensor_type(out_aval)], props, [sharding], regions)
        return _pinned(ctx, r, out_aval, sharding)
    y = op("stablehlo.reshape", [x], blocks, local)
    y = window_scan(ctx, y, blocks, a + 1, reverse, init, combine, [local])
    # each block's total (its last element in scan order), on every device: k per row
    tot = blocks.update(shape=(*shape[:a], k, 1, *shape[a + 1:]))
    start = [0] * blocks.ndim
    start[a + 1] = 0 if reverse else m - 1
    limit = list(tot.shape)
    limit[a + 1] = start[a + 1] + 1
    s = op("stablehlo.slice", [y], tot, local, {
        "start_indices": i64_array(start), "limit_indices": i64_array(limit),
        "strides": i64_array([1] * blocks.ndim)})
    (s,) = ctx.op("sdy.sharding_constraint", [s], [tensor_type(tot)], [tensor_type(tot)],
                  {"sharding": sharding_attr(whole)}, sharding=False)
    # the total of the blocks before block i: totals j < i (j > i reversed) combined, as
    # a (k, k) masked reduce whose row i each device holding block i computes; a
    # reduce_window here became, in XLA, a halo exchange between devices
    pairs = blocks.update(shape=(*shape[:a], k, k, *shape[a + 1:]))
    tj = op("stablehlo.broadcast_in_dim", [s], pairs, local, {"broadcast_dimensions":
            i64_array([*range(a), a + 1, a, *range(a + 2, blocks.ndim)])})
    ipairs = pairs.update(dtype=dtypes.int32, weak=False)
    i, j = (op("stablehlo.iota", [], ipairs, local, {"iota_dimension": f"{d} : i64"})
            for d in (a, a + 1))
    before = op("stablehlo.compare", [j, i], ipairs.update(dtype=dtypes.bool_), local, {
        "comparison_direction": f"#stablehlo<comparison_direction {'GT' if reverse else 'LT'}>",
        "compare_type": "#stablehlo<comparison_type SIGNED>"})
    fill = op("stablehlo.broadcast_in_dim", [init], pairs, local,
              {"broadcast_dimensions": i64_array([])})
    tj = op("stablehlo.select", [before, tj, fill], pairs, local)
    sc = xa.update(shape=(), weak=False)
    region = ctx.region([sc, sc], lambda c, u, v: [
        combine(partial(c.op, sharding=False), u, v, sc)])
    ex = op("stablehlo.reduce", [tj, init], xa.update(shape=(*shape[:a], k, *shape[a + 1:])),
            Sharding((*dims[:a], dims[a], *dims[a + 1:])), {"dimensions": i64_array([a + 1])},
            [region])
    ex = op("stablehlo.broadcast_in_dim", [ex], blocks, local, {"broadcast_dimensions":
            i64_array([d for d in range(blocks.ndim) if d != a + 1])})
    y = _pinned(ctx, combine(partial(ctx.op, sharding=[local]), ex, y, blocks), blocks, local)
    return op("stablehlo.reshape", [y], xa, layout)


def _whole_axis(ctx, x, axis, scan):
    """`scan(x, sharding)` with `axis` whole on every device (an axis split unevenly, or
    a combine whose result depends on its order):
    XLA's partitioner gives two reduce_windows of one operand split along the window dim
    one padded copy, and the second then reads the first's init value as padding (cumsum
    next to cumprod: wrong sums, jax.jit's too)."""
    xs, os_ = ctx.in_shardings[0], ctx.out_shardings[0]
    t = tensor_type(ctx.in_avals[0])

    def whole(sh):
        sh = sh or Sharding.replicated(ctx.in_avals[0].ndim)
        return Sharding(tuple(() if d == axis else a for d, a in enumerate(sh.dims)))
    (x,) = ctx.op("sdy.sharding_constraint", [x], [t], [t],
                  {"sharding": sharding_attr(whole(xs))}, sharding=False)
    y = scan(x, sharding=[whole(os_)])
    if os_ is None:
        return [y]
    return ctx.op("sdy.sharding_constraint", [y], [t], [t], {"sharding": sharding_attr(os_)},
                  sharding=False)
