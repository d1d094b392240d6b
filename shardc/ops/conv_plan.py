"""How a sharded convolution is computed (its ConvPlan). XLA's SPMD partitioner gives
wrong values, jax.jit too, for many sharded convolutions, so shardc splits most of them
itself, per device (lowered by ops/conv_per_device)."""
from __future__ import annotations

from math import prod
from typing import NamedTuple

from ..ir.sharding import Sharding


class Halo(NamedTuple):
    """A spatial dim (its index among them) split by `axes` in a convolution's lhs and
    its kernel or result alike, computed per device: each device's lhs block extended
    by `lo` rows of the device before and `hi` of the one after (a negative `hi` drops
    rows), convolved with padding `pad`; `summed` where the kernel is split (the
    devices' results then add up)."""
    spatial: int
    axes: tuple
    lo: int
    hi: int
    pad: tuple
    summed: bool


class ConvPlan(NamedTuple):
    """How a convolution is computed: its lhs and kernel held at `lhs` and `rhs`, the
    result made at `out`; with `manual` axes, per device in a manual computation (a
    local convolution of `groups` (feature, batch) groups over lhs blocks extended by
    `halos`, then summed over `summed`), else by XLA's partitioner at those shardings."""
    lhs: Sharding
    rhs: Sharding
    out: Sharding
    manual: tuple = ()
    groups: tuple = (1, 1)
    summed: tuple = ()
    halos: tuple = ()


def halo(size, taps, windows, n, stride, pad_lo, lhs_dil, rhs_dil, summed):
    """How a spatial dim of an lhs of `size` rows, convolved with `taps` kernel taps into
    `windows` windows, is computed over `n` devices holding even blocks of the lhs and
    of the kernel (`summed`) or of the result: (lo, hi, (pad_lo, pad_hi)) as Halo's,
    or None where the blocks do not line up.

    In lhs-dilated coordinates (an lhs row every `lhs_dil`), device k reads from
    k * block * lhs_dil - pad_lo on: from the start of its block less `lo` = pad_lo //
    lhs_dil rows, after pad_lo % lhs_dil zeros (holes of the dilation, or the padding
    on device 0); its last read fixes `hi`, past the last row it needs as zeros (the
    high padding, less than a dilation: holes)."""
    if size % n or (taps if summed else windows) % n or pad_lo < 0:
        return None
    block = size // n
    taps, windows = (taps // n, windows) if summed else (taps, windows // n)
    if (taps * rhs_dil if summed else windows * stride) != block * lhs_dil:
        return None
    lo, skip = divmod(pad_lo, lhs_dil)
    last = (windows - 1) * stride + (taps - 1) * rhs_dil - skip
    hi = last // lhs_dil - lo - block + 1
    if lo > block or not -block < hi <= block:
        return None
    return lo, hi, (skip, last - (lo + block + hi - 1) * lhs_dil)


def _halos(ctx, dimension_numbers, window, lhs, rhs, out):
    """The spatial dims split alike in the lhs and the kernel (a kernel gradient of a
    spatially split convolution), or in the result (the lhs held alike) with the kernel
    whole, whose blocks line up (halo): one exchange with its neighbours gives each
    device the lhs rows it reads."""
    strides, padding, lhs_dilation, rhs_dilation = window
    (_, _, *ls), (_, _, *rs), (_, _, *os_) = dimension_numbers
    shapes = (ctx.in_avals[0].shape, ctx.in_avals[1].shape, ctx.out_avals[0].shape)
    found = []
    for i, (ld, rd, od) in enumerate(zip(ls, rs, os_)):
        summed = bool(lhs.dims[ld]) and rhs.dims[rd] == lhs.dims[ld]
        axes = lhs.dims[ld] if summed else out.dims[od]
        if not axes or not summed and rhs.dims[rd]:
            continue
        n = lhs.shards(ctx.mesh, ld) if summed else out.shards(ctx.mesh, od)
        h = halo(shapes[0][ld], shapes[1][rd], shapes[2][od], n, strides[i], padding[i][0],
                 lhs_dilation[i], rhs_dilation[i], summed)
        if h is not None:
            found.append(Halo(i, axes, *h, summed))
    return found


def conv_plan(ctx, dimension_numbers, window, feature_groups, batch_groups):
    """A convolution's ConvPlan, or None where XLA's own partitioning is kept (inside a
    shard_map manual over every axis, or shardings XLA chooses: the oracle lowering).
    `window`: its strides, padding, lhs and rhs dilations.

    XLA's partitioner gives wrong values, jax.jit too, for convolutions it reshards
    itself, whose kernel is split while a spatial dim is, or of batch groups summed
    over a split that leaves devices replicated, and even for one computed replicated
    and split after (it splits the convolution instead): a (2, 4, 8, 8) lhs split
    along its features by 'y' and a 3x3 kernel along its outputs by 'y', into a result
    split along its features, is off by 156; the kernel gradient of a depthwise
    convolution whose batch is split by 'x' of a (4, 2) mesh by 8760, of an lhs split
    along H 2x. So shardc computes a convolution itself, per device, in a manual
    computation over every free mesh axis: the batch split as the result's, the
    kernel's outputs as the result's features (a grouped one's lhs features with them,
    by whole groups; batch groups' lhs batch likewise), input features by a split the
    lhs and kernel share (then summed), spatial dims by exchanging halos (_halos); a
    split that does not divide evenly is dropped. A result split along a spatial dim
    whose blocks do not line up (and not along its features, no padding negative, no
    lhs dilation: see conv_per_device.for_xla) is left to XLA's halo exchange, the
    kernel whole; partial sums (explicit mode) to XLA at the same forms."""
    if ctx.lowering.oracle:
        return None
    lhs, rhs, out = ctx.in_shardings[0], ctx.in_shardings[1], ctx.out_shardings[0]
    if lhs is None or rhs is None or out is None:
        return None
    mesh = ctx.mesh
    free = tuple(a for a in mesh.names if a not in ctx.lowering.manual)
    if not free:
        return None
    (la, ra), oa = (a.shape for a in ctx.in_avals), ctx.out_avals[0].shape
    (lb, lf, *ls), (ro, ri, *rs), (ob, of, *os_) = dimension_numbers

    def even(axes, *dims):
        k = prod(mesh.axis_size(a) for a in axes) if set(axes) <= set(mesh.names) else 0
        return all(k and shape[d] % k == 0 for shape, d in dims)
    batch = out.dims[ob] if batch_groups == 1 and even(out.dims[ob], (la, lb), (oa, ob)) else ()
    groups = feature_groups if feature_groups > 1 else batch_groups
    feats = out.dims[of] if even(out.dims[of], (ra, ro), (oa, of), *[((groups,), 0)] * (
        groups > 1)) else ()
    used = set(batch) | set(feats)
    halos = []
    for h in _halos(ctx, dimension_numbers, window, lhs, rhs, out):
        if not used & set(h.axes) and set(h.axes) <= set(free):
            halos.append(h)
            used |= set(h.axes)
    spatial = [out.dims[d] for d in os_]
    windowed = (feature_groups == batch_groups == 1 and not out.dims[of] and
                not out.unreduced and any(spatial) and
                any(s and i not in {h.spatial for h in halos} for i, s in enumerate(spatial))
                and all(not out.dims[d] or even(out.dims[d], (oa, d), (la, ld))
                        for ld, d in zip(ls, os_))
                and min(min(p) for p in window[1]) >= 0 and set(window[2]) == {1})
    if windowed:        # left to XLA, all spatial dims
        feats, halos = (), []
        used = set(batch) | {a for s in spatial for a in s}
    else:
        spatial = [()] * len(os_)
    shared = lhs.dims[lf] if lhs.dims[lf] == rhs.dims[ri] else ()
    inner = shared if feature_groups == 1 and not windowed and not used & set(shared) and \
        even(shared, (la, lf), (ra, ri)) else ()

    def held(halos):
        want_l, want_r, want_o = [()] * len(lhs.dims), [()] * len(rhs.dims), [()] * len(out.dims)
        want_l[lb] = feats if batch_groups > 1 else batch
        want_l[lf] = feats if feature_groups > 1 else inner
        want_r[ro], want_r[ri] = feats, inner
        want_o[ob], want_o[of] = batch, feats
        for ld, od, s in zip(ls, os_, spatial):
            want_l[ld] = want_o[od] = s
        for h in halos:
            want_l[ls[h.spatial]] = h.axes
            if h.summed:
                want_r[rs[h.spatial]] = h.axes
            else:
                want_o[os_[h.spatial]] = h.axes
        return (Sharding(want_l, None, lhs.unreduced, lhs.reduced),
                Sharding(want_r, None, rhs.unreduced, rhs.reduced), want_o)
    held_l, held_r, want_o = held(halos)
    axes = used | set(inner)
    partial = out.unreduced or out.reduced or lhs.unreduced or lhs.reduced or \
        rhs.unreduced or rhs.reduced
    if windowed or partial or not axes <= set(free):
        held_l, held_r, want_o = held(())
        if batch_groups > 1:    # XLA sums batch groups over the wrong devices
            held_l = Sharding([()] * len(held_l.dims), None, lhs.unreduced, lhs.reduced)
            held_r = Sharding([()] * len(held_r.dims), None, rhs.unreduced, rhs.reduced)
            want_o = [()] * len(want_o)
        held_o = Sharding(want_o, None, out.unreduced, out.reduced)
        if (held_l, held_r, held_o) == (lhs.closed(), rhs.closed(), out.closed()):
            return None
        return ConvPlan(held_l, held_r, held_o)
    k = prod(mesh.axis_size(a) for a in feats)
    local = (feature_groups // k if feature_groups > 1 else 1,
             batch_groups // k if batch_groups > 1 else 1)
    summed = set(inner) | {a for h in halos if h.summed for a in h.axes}
    return ConvPlan(held_l, held_r, Sharding(want_o), free, local,
                    tuple(a for a in free if a in summed), tuple(halos))
