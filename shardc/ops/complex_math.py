"""Lowerings of elementwise ops on complex numbers that StableHLO's own ops get wrong
or do not define (as jax lowers them)."""
from __future__ import annotations

from ..ir import dtypes
from ..lower.emit import tensor_type
from .common import broadcast_to


def lex_pick(op, direction, x, y, t, rt, bt):
    """`x` or `y`, whichever is greater (direction GT) or less (LT) in the lexicographic
    order of complex numbers, real part first, as jax's lax.max / min (stablehlo.maximum
    on complex does not order so); NaN as the comparisons make it. `op(name, operands,
    operand types, result types, props)` emits one op (a lowering's or a region's)."""
    def cmp(d, a, b):
        return op("stablehlo.compare", [a, b], [rt, rt], [bt],
                  {"comparison_direction": f"#stablehlo<comparison_direction {d}>",
                   "compare_type": "#stablehlo<comparison_type FLOAT>"})[0]
    (rx,), (ry,) = (op("stablehlo.real", [v], [t], [rt]) for v in (x, y))
    (ix,), (iy,) = (op("stablehlo.imag", [v], [t], [rt]) for v in (x, y))
    (pick_x,) = op("stablehlo.select", [cmp("EQ", rx, ry), cmp(direction, ix, iy),
                                        cmp(direction, rx, ry)], [bt, bt, bt], [bt])
    return op("stablehlo.select", [pick_x, x, y], [bt, t, t], [t])


def complex_sin_cos(is_sin, ctx, x):
    """Complex sin/cos as jax lowers them: from sin, cos and expm1 of the parts, since
    XLA expands stablehlo.sine/cosine of a complex with exp(b) - exp(-b), which cancels
    for a small imaginary part b and gives inf - inf (NaN) for a large one.
    sin(a+bi) = sin a cosh b + i cos a sinh b; cos(a+bi) = cos a cosh b - i sin a sinh b;
    2 sinh b = expm1(b) - expm1(-b), 2 cosh b = expm1(b) + expm1(-b) + 2."""
    out = ctx.out_avals[0]
    t = tensor_type(out)
    ra = out.update(dtype=dtypes.real_dtype(out.dtype))
    rt, bt = tensor_type(ra), tensor_type(ra.update(dtype=dtypes.bool_))
    zero, two = (broadcast_to(ctx, ctx.constant(v, ra.update(shape=(), weak=False)),
                              ra.update(shape=(), weak=False), ra, ()) for v in (0.0, 2.0))

    def op(name, *xs):
        return ctx.op(name, list(xs), [rt] * len(xs), [rt])[0]
    (a,), (b,) = (ctx.op(n, [x], [t], [rt]) for n in ("stablehlo.real", "stablehlo.imag"))
    sn, cs = op("stablehlo.sine", a), op("stablehlo.cosine", a)
    e1, e2 = op("stablehlo.exponential_minus_one", b), op(
        "stablehlo.exponential_minus_one", op("stablehlo.negate", b))
    snh = op("stablehlo.divide", op("stablehlo.subtract", e1, e2), two)
    csh = op("stablehlo.divide", op("stablehlo.add", op("stablehlo.add", e1, e2), two), two)
    if is_sin:
        re, im = op("stablehlo.multiply", sn, csh), op("stablehlo.multiply", cs, snh)
    else:
        re = op("stablehlo.multiply", cs, csh)
        im = op("stablehlo.multiply", op("stablehlo.negate", sn), snh)
    # a zero real part: the part sin(a) scales is exactly 0 (inf * 0 would be NaN)
    (a_zero,) = ctx.op("stablehlo.compare", [a, zero], [rt, rt], [bt],
                       {"comparison_direction": "#stablehlo<comparison_direction EQ>",
                        "compare_type": "#stablehlo<comparison_type FLOAT>"})
    pair = [zero, im] if is_sin else [re, zero]
    (zz,) = ctx.op("stablehlo.complex", pair, [rt, rt], [t])
    (w,) = ctx.op("stablehlo.complex", [re, im], [rt, rt], [t])
    return ctx.op("stablehlo.select", [a_zero, zz, w], [bt, t, t], [t])
