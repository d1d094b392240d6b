"""conv_general_dilated: N-d convolution with strides, padding, dilations, feature and batch
groups, as jax.lax's primitive (stablehlo.convolution).

Params: window_strides, padding ((lo, hi) per spatial dim, resolved by the frontend),
lhs_dilation, rhs_dilation, dimension_numbers ((lhs_spec, rhs_spec, out_spec): each the
dims of (batch|out-feature, feature|in-feature, spatial...) as jax's ConvDimensionNumbers),
feature_group_count, batch_group_count, precision (None or a pair of names),
preferred_element_type. Factor rule: Shardy's (spatial dims split into a window-count
factor, a permutation that carries halos, and a window-size reduction factor)."""
from __future__ import annotations

from ..errors import ShardcError
from ..ir.primitive import PropKind, Trait
from ..ir.program import Aval
from ..ir.rules import PERMUTATION, REDUCTION, RuleBuilder
from ..lower.emit import tensor_type
from ..trace.core import Primitive
from . import lax as L
from .common import i64_array
from .conv_per_device import for_xla, grown_aval, per_device, trimmed
from .conv_plan import conv_plan


def dilate_dim(d, r):
    return 0 if d == 0 else 1 + r * (d - 1)


def _stride_dim(d, window, stride):
    return max(0, (d - window) // stride + 1) if d >= window else 0


def _shape(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
           dimension_numbers, feature_group_count=1, batch_group_count=1, precision=None,
           preferred_element_type=None):
    name = "conv_general_dilated"
    lspec, rspec, ospec = dimension_numbers
    if lhs.ndim != rhs.ndim:
        raise ShardcError(f"{name} lhs and rhs must have the same number of dimensions, but "
                          f"got {lhs.shape} and {rhs.shape}.")
    if lhs.dtype != rhs.dtype:
        raise ShardcError(f"{name} needs lhs and rhs of one dtype, got {lhs} and {rhs}")
    fgc, bgc = feature_group_count, batch_group_count
    if fgc < 1 or bgc < 1:
        raise ShardcError(f"{name} feature_group_count and batch_group_count must be "
                          f"positive integers, got {fgc} and {bgc}.")
    lf = lhs.shape[lspec[1]]
    if lf % fgc:
        raise ShardcError(f"{name} feature_group_count must divide lhs feature dimension "
                          f"size, but {fgc} does not divide {lf}.")
    if lf // fgc != rhs.shape[rspec[1]]:
        raise ShardcError(f"{name} lhs feature dimension size divided by feature_group_count "
                          "must equal the rhs input feature dimension size, but "
                          f"{lf} // {fgc} != {rhs.shape[rspec[1]]}.")
    ro = rhs.shape[rspec[0]]
    if ro % fgc or ro % bgc:
        raise ShardcError(f"{name} rhs output feature dimension size must be a multiple of "
                          f"feature_group_count and batch_group_count, but {ro} is not a "
                          f"multiple of {fgc if ro % fgc else bgc}.")
    lb = lhs.shape[lspec[0]]
    if bgc > 1 and lb % bgc:
        raise ShardcError(f"{name} batch_group_count must divide lhs batch dimension size, "
                          f"but {bgc} does not divide {lb}.")
    if bgc > 1 and fgc > 1:
        raise ShardcError("At most one of batch_group_count and feature_group_count may be "
                          f"> 1, got batch_group_count={bgc} and feature_group_count={fgc}")
    ns = lhs.ndim - 2
    for what, v in (("window_strides", window_strides), ("padding", padding),
                    ("lhs_dilation", lhs_dilation), ("rhs_dilation", rhs_dilation)):
        if len(v) != ns:
            raise ShardcError(f"{name}: {what} needs one entry per spatial dim ({ns}), got "
                              f"{len(v)}")
    if any(s <= 0 for s in window_strides) or any(d <= 0 for d in lhs_dilation + rhs_dilation):
        raise ShardcError(f"{name}: strides and dilations must be positive, got "
                          f"{window_strides}, {lhs_dilation}, {rhs_dilation}")
    out_t = [lb // bgc, ro]
    for i in range(ns):
        li = dilate_dim(lhs.shape[lspec[2 + i]], lhs_dilation[i])
        ki = dilate_dim(rhs.shape[rspec[2 + i]], rhs_dilation[i])
        lo, hi = padding[i]
        padded = li + lo + hi
        if padded < 0:
            raise ShardcError("Negative padding is larger than the size of the corresponding "
                              f"dimension: got padding={padding}")
        out_t.append(_stride_dim(padded, ki, window_strides[i]))
    shape = [0] * lhs.ndim
    for d, n in zip(ospec, out_t):
        shape[d] = n
    return Aval(tuple(shape), preferred_element_type or lhs.dtype, False)


def _rule(ins, outs, *, window_strides, padding, lhs_dilation, rhs_dilation,
          dimension_numbers, feature_group_count=1, batch_group_count=1, precision=None,
          preferred_element_type=None):
    """Shardy's ConvolutionOp rule (op_sharding_rule_registry.cc), non-conservative."""
    lhs, rhs = ins
    out = outs[0]
    lspec, rspec, ospec = dimension_numbers
    b = RuleBuilder(ins, outs)
    if batch_group_count > 1:
        b.factor([lspec[0], rspec[0]], [ospec[1]], batch_group_count)
    b.factor([lspec[0], None], [ospec[0]], out.shape[ospec[0]])
    for ld, rd, od in zip(lspec[2:], rspec[2:], ospec[2:]):
        windows, size = out.shape[od], rhs.shape[rd]
        left = [lhs.shape[ld]]

        def add(n, contracting, ld=ld, rd=rd, od=od, left=left):
            n = min(left[0], n)
            if n > 1:
                b.factor([ld, rd if contracting else None], [None if contracting else od], n,
                         REDUCTION if contracting else PERMUTATION)
                left[0] //= n
        if windows >= size:
            add(windows, False)
            add(size, True)
        else:
            add(size, True)
            add(windows, False)
    if feature_group_count > 1:
        b.factor([lspec[1], rspec[0]], [ospec[1]], feature_group_count)
    b.factor([lspec[1], rspec[1]], [None], rhs.shape[rspec[1]], REDUCTION)
    b.factor([None, rspec[0]], [ospec[1]],
             out.shape[ospec[1]] // (batch_group_count * feature_group_count))
    return b.build()


def _dn_text(dimension_numbers):
    lspec, rspec, ospec = dimension_numbers

    def one(spec, a, b):
        labels = [""] * len(spec)
        labels[spec[0]], labels[spec[1]] = a, b
        for i, d in enumerate(spec[2:]):
            labels[d] = str(i)
        return "[" + ", ".join(labels) + "]"
    return (f"#stablehlo.conv<{one(lspec, 'b', 'f')}x{one(rspec, 'o', 'i')}->"
            f"{one(ospec, 'b', 'f')}>")


def _props(window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
           feature_group_count, batch_group_count, precision):
    ns = len(window_strides)
    prec = precision or ("DEFAULT", "DEFAULT")
    pads = ", ".join(f"[{lo}, {hi}]" for lo, hi in padding)
    return {
        "batch_group_count": f"{batch_group_count} : i64",
        "dimension_numbers": _dn_text(dimension_numbers),
        "feature_group_count": f"{feature_group_count} : i64",
        "lhs_dilation": i64_array(lhs_dilation),
        "padding": f"dense<[{pads}]> : tensor<{ns}x2xi64>" if ns else
                   "dense<> : tensor<0x2xi64>",
        "precision_config": "[" + ", ".join(f"#stablehlo<precision {p}>" for p in prec) + "]",
        "rhs_dilation": i64_array(rhs_dilation),
        "window_reversal": "array<i1" + (": " + ", ".join(["false"] * ns) if ns else "") + ">",
        "window_strides": i64_array(window_strides),
    }


def _lower(ctx, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
           dimension_numbers, feature_group_count=1, batch_group_count=1, precision=None,
           preferred_element_type=None):
    spatial = dimension_numbers[0][2:]
    if _nothing_read(ctx.in_avals[0].shape, spatial, padding, lhs_dilation) or \
            0 in ctx.out_avals[0].shape:
        sh = ctx.out_shardings[0]
        return [ctx.constant(0, ctx.out_avals[0], sh if sh is not None and not sh.unreduced
                             else None)]
    types = [tensor_type(a) for a in ctx.in_avals]
    plan = conv_plan(ctx, dimension_numbers, (window_strides, padding, lhs_dilation,
                                              rhs_dilation),
                     feature_group_count, batch_group_count)

    def emit(lhs, rhs, groups, sharding, out_sharding=None):
        lhs, la, pads, dil, grown = for_xla(ctx, lhs, ctx.in_avals[0], ctx.in_avals[1],
                                            padding, sharding)
        oa = grown_aval(ctx.out_avals[0], grown)
        (r,) = ctx.op("stablehlo.convolution", [lhs, rhs], [tensor_type(la), types[1]],
                      [tensor_type(oa)], _props(window_strides, pads, dil, rhs_dilation,
                                                dimension_numbers, *groups, precision),
                      sharding=out_sharding if out_sharding is not None or not grown else
                      False)
        return [trimmed(ctx, r, ctx.out_avals[0], grown, out_sharding)]
    groups = (feature_group_count, batch_group_count)
    if plan is None:
        return emit(lhs, rhs, groups, False)
    lhs = ctx.held(lhs, ctx.in_avals[0], plan.lhs, always=plan.lhs != ctx.in_shardings[0])
    rhs = ctx.held(rhs, ctx.in_avals[1], plan.rhs, always=plan.rhs != ctx.in_shardings[1])
    if plan.manual:
        pads = list(padding)
        for h in plan.halos:        # each device's lhs block carries its own padding
            pads[h.spatial] = h.pad
        r = per_device(ctx, lhs, rhs, plan, pads, spatial, lambda pads, dil: _props(
            window_strides, pads, dil, rhs_dilation, dimension_numbers, *plan.groups,
            precision))
    else:       # (spatial dims split only where no padding is negative: see conv_plan)
        (r,) = emit(lhs, rhs, groups, [plan.lhs], [plan.out])
    return [ctx.held(r, ctx.out_avals[0], ctx.out_shardings[0], always=True)]


def _nothing_read(shape, spatial, padding, lhs_dilation):
    """Whether a negative padding crops every lhs row off a spatial dim (the result is
    zeros: XLA would be handed an lhs of no rows)."""
    for d, (lo, hi), dil in zip(spatial, padding, lhs_dilation):
        extent = (shape[d] - 1) * dil + 1 if shape[d] else 0
        first, stop = max(0, -lo), extent - max(0, -hi)
        if -(-first // dil) * dil >= stop:
            return True
    return False


conv_general_dilated_p = Primitive("conv_general_dilated", shape_rule=_shape,
                                   sharding_rule=_rule, lower=_lower,
                                   prop_kind=PropKind.NONE, traits=Trait.CONTRACTION)


# ---------------------------------------------------------------- helpers

def conv(lhs, rhs, **params):
    return conv_general_dilated_p.bind(lhs, rhs, **params)


def reshape_axis_into(src, dst, x):
    """jax's _reshape_axis_into: dim `src` merged (major) into dim `dst` (numbered with
    `src` removed)."""
    shape = L.aval(x).shape
    perm = [i for i in range(len(shape)) if i != src]
    perm.insert(dst, src)
    new = [n for i, n in enumerate(shape) if i != src]
    new[dst] *= shape[src]
    return L.reshape(L.transpose(x, tuple(perm)), tuple(new))


def reshape_axis_out_of(src, size1, x):
    shape = list(L.aval(x).shape)
    shape[src:src + 1] = [size1, shape[src] // size1]
    return L.reshape(x, tuple(shape))


def _spec_t(spec):
    return (spec[1], spec[0]) + tuple(spec[2:])


# ---------------------------------------------------------------- gradients
# jax's _conv_general_dilated_transpose_lhs / _rhs: each cotangent is a convolution.

def _vjp_lhs_padding(in_shape, window, strides, out_shape, padding, lhs_dil, rhs_dil):
    ld = [dilate_dim(d, r) for d, r in zip(in_shape, lhs_dil)]
    rd = [dilate_dim(d, r) for d, r in zip(window, rhs_dil)]
    od = [dilate_dim(d, r) for d, r in zip(out_shape, strides)]
    before = [r - lo - 1 for r, (lo, _) in zip(rd, padding)]
    after = [a + r - 1 - o - b for a, r, o, b in zip(ld, rd, od, before)]
    return tuple(zip(before, after))


def _vjp_rhs_padding(in_shape, window, strides, out_shape, padding, lhs_dil, rhs_dil):
    if not in_shape:
        return ()
    ld = [dilate_dim(d, r) for d, r in zip(in_shape, lhs_dil)]
    rd = [dilate_dim(d, r) for d, r in zip(window, rhs_dil)]
    od = [dilate_dim(d, r) for d, r in zip(out_shape, strides)]
    los = [lo for lo, _ in padding]
    his = [(o - a) + (r - lo - 1) for o, a, r, lo in zip(od, ld, rd, los)]
    return tuple(zip(los, his))


def _transpose_lhs(g, rhs, lhs_aval, rhs_aval, *, window_strides, padding, lhs_dilation,
                   rhs_dilation, dimension_numbers, feature_group_count, batch_group_count,
                   precision, preferred_element_type):
    lspec, rspec, ospec = dimension_numbers
    g_shape = L.aval(g).shape
    fgc = feature_group_count
    if fgc > 1:
        rhs = reshape_axis_out_of(rspec[0], fgc, rhs)
        rhs = reshape_axis_into(rspec[0], rspec[1], rhs)
    elif batch_group_count > 1:
        rhs = reshape_axis_out_of(rspec[0], batch_group_count, rhs)
        rhs = reshape_axis_into(rspec[0], rspec[1], rhs)
        fgc = batch_group_count
    pads = _vjp_lhs_padding([lhs_aval.shape[d] for d in lspec[2:]],
                            [rhs_aval.shape[d] for d in rspec[2:]], window_strides,
                            [g_shape[d] for d in ospec[2:]], padding, lhs_dilation,
                            rhs_dilation)
    rev = L.rev(rhs, tuple(rspec[2:])) if len(rspec) > 2 else rhs
    rev = L.convert_element_type(rev, L.aval(g).dtype)
    out = conv(g, rev, window_strides=tuple(lhs_dilation), padding=pads,
               lhs_dilation=tuple(window_strides), rhs_dilation=tuple(rhs_dilation),
               dimension_numbers=(tuple(ospec), _spec_t(rspec), tuple(lspec)),
               feature_group_count=fgc, batch_group_count=1, precision=precision,
               preferred_element_type=preferred_element_type)
    out = L.convert_element_type(out, lhs_aval.dtype)
    if batch_group_count > 1:
        out = reshape_axis_out_of(lspec[1], batch_group_count, out)
        out = reshape_axis_into(lspec[1], lspec[0], out)
    return out


def _transpose_rhs(g, lhs, lhs_aval, rhs_aval, *, window_strides, padding, lhs_dilation,
                   rhs_dilation, dimension_numbers, feature_group_count, batch_group_count,
                   precision, preferred_element_type):
    lspec, rspec, ospec = dimension_numbers
    g_shape = L.aval(g).shape
    fgc, bgc = feature_group_count, batch_group_count
    if bgc > 1:
        fgc, bgc = bgc, 1
    elif fgc > 1:
        fgc, bgc = 1, fgc
    pads = _vjp_rhs_padding([lhs_aval.shape[d] for d in lspec[2:]],
                            [rhs_aval.shape[d] for d in rspec[2:]], window_strides,
                            [g_shape[d] for d in ospec[2:]], padding, lhs_dilation,
                            rhs_dilation)
    lhs = L.convert_element_type(lhs, L.aval(g).dtype)
    out = conv(lhs, g, window_strides=tuple(rhs_dilation), padding=pads,
               lhs_dilation=tuple(lhs_dilation), rhs_dilation=tuple(window_strides),
               dimension_numbers=(_spec_t(lspec), _spec_t(ospec), _spec_t(rspec)),
               feature_group_count=fgc, batch_group_count=bgc, precision=precision,
               preferred_element_type=preferred_element_type)
    return L.convert_element_type(out, rhs_aval.dtype)


def _vjp(ctx, cts, lhs, rhs, **params):
    (g,) = cts
    la, ra = ctx.in_avals
    full = dict(feature_group_count=1, batch_group_count=1, precision=None,
                preferred_element_type=None)
    full.update(params)
    active = ctx.active or [True, True]
    if 0 in L.aval(g).shape:
        return [None, None]
    dl = _transpose_lhs(g, rhs, la, ra, **full) if active[0] else None
    dr = _transpose_rhs(g, lhs, la, ra, **full) if active[1] else None
    return [dl, dr]


conv_general_dilated_p.vjp = _vjp


# ---------------------------------------------------------------- batching (jax's rule)

def _batch(ctx, args, batched, **params):
    lhs, rhs = args
    lb, rb = batched
    p = dict(feature_group_count=1, batch_group_count=1)
    p.update(params)
    lspec, rspec, ospec = p["dimension_numbers"]
    fgc, bgc = p["feature_group_count"], p["batch_group_count"]
    n = ctx.size
    if lb and rb:
        if bgc > 1:
            new_lhs = reshape_axis_into(0, lspec[0], lhs)
            p["batch_group_count"] = bgc * n
        else:
            new_lhs = reshape_axis_into(0, lspec[1], lhs)
            p["feature_group_count"] = fgc * n
        new_rhs = reshape_axis_into(0, rspec[0], rhs)
        out = conv(new_lhs, new_rhs, **p)
        return _front(reshape_axis_out_of(ospec[1], n, out), ospec[1]), True
    if lb:
        if bgc == 1:
            new_lhs = reshape_axis_into(0, lspec[0], lhs)
            out = conv(new_lhs, rhs, **p)
            return _front(reshape_axis_out_of(ospec[0], n, out), ospec[0]), True
        new_lhs = reshape_axis_out_of(lspec[0] + 1, bgc, lhs)
        new_lhs = reshape_axis_into(0, lspec[0] + 1, new_lhs)
        new_lhs = reshape_axis_into(lspec[0], lspec[0], new_lhs)
        out = conv(new_lhs, rhs, **p)
        return _front(reshape_axis_out_of(ospec[0], n, out), ospec[0]), True
    if fgc == 1 and bgc == 1:
        new_rhs = reshape_axis_into(0, rspec[0], rhs)
        out = conv(lhs, new_rhs, **p)
        return _front(reshape_axis_out_of(ospec[1], n, out), ospec[1]), True
    groups = fgc if fgc > 1 else bgc
    new_rhs = reshape_axis_out_of(rspec[0] + 1, groups, rhs)
    new_rhs = reshape_axis_into(0, rspec[0] + 1, new_rhs)
    new_rhs = reshape_axis_into(rspec[0], rspec[0], new_rhs)
    out = conv(lhs, new_rhs, **p)
    out = reshape_axis_out_of(ospec[1], groups, out)
    out = reshape_axis_out_of(ospec[1] + 1, n, out)
    out = reshape_axis_into(ospec[1], ospec[1] + 1, out)
    return _front(out, ospec[1]), True


def _front(x, d):
    from .batching import move_dim
    return move_dim(x, d, 0)


conv_general_dilated_p.batch = _batch
