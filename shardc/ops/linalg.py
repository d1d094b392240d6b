"""dot_general: batched matrix products; contracting dims are reduction factors."""
from __future__ import annotations

import numpy as np

from ..trace.core import Primitive
from ..ir.primitive import PropKind, Trait
from ..errors import ShardcError
from ..ir.program import Aval
from ..lower.emit import tensor_type
from ..ir.rules import REDUCTION, RuleBuilder


def _free(ndim, *dim_lists):
    used = {d for ds in dim_lists for d in ds}
    return [d for d in range(ndim) if d not in used]


def _dot_shape(a, b, *, contracting, batch, preferred_element_type=None, precision=None):
    (ac, bc), (ab, bb) = contracting, batch
    if a.dtype != b.dtype:
        raise ShardcError(f"dot_general needs operands of one dtype, got {a} and {b}")
    if len(ac) != len(bc) or len(ab) != len(bb):
        raise ShardcError("dot_general: contracting and batch dims must pair up")
    for x, y in zip(ac + ab, bc + bb):
        if not (0 <= x < a.ndim and 0 <= y < b.ndim) or a.shape[x] != b.shape[y]:
            raise ShardcError(
                f"matmul shape mismatch: {a} and {b} cannot be contracted/batched on "
                f"dims {x} and {y} (sizes "
                f"{a.shape[x] if 0 <= x < a.ndim else '?'} vs "
                f"{b.shape[y] if 0 <= y < b.ndim else '?'})")
    if precision is not None and precision[0] == "preset" and \
            precision[1].startswith("ANY_F8") and "float8" not in a.dtype.name:
        raise ShardcError(f"The dot algorithm '{precision[1]}' requires both inputs to have "
                          f"float8 dtypes. Got {a.dtype} and {b.dtype} instead.")
    shape = [a.shape[d] for d in ab] + [a.shape[d] for d in _free(a.ndim, ac, ab)] + \
        [b.shape[d] for d in _free(b.ndim, bc, bb)]
    return Aval(shape, preferred_element_type or a.dtype, a.weak and b.weak)


def _dot_rule(ins, outs, *, contracting, batch, preferred_element_type=None,
              precision=None):
    a, b = ins
    (ac, bc), (ab, bb) = contracting, batch
    r = RuleBuilder(ins, outs)
    o = 0
    for x, y in zip(ab, bb):
        r.factor([x, y], [o], a.shape[x])
        o += 1
    for x in _free(a.ndim, ac, ab):
        r.factor([x, None], [o], a.shape[x])
        o += 1
    for y in _free(b.ndim, bc, bb):
        r.factor([None, y], [o], b.shape[y])
        o += 1
    for x, y in zip(ac, bc):
        r.factor([x, y], [None], a.shape[x], REDUCTION)
    return r.build()


def _dims(xs):
    return "[" + ", ".join(map(str, xs)) + "]"


# jax's DotAlgorithmPreset: (input types taken as they are, else the first; the
# accumulation's types, likewise, or None for the result's own; the algorithm attribute
# (lhs, rhs, accumulation, primitive operations), None for the operands' float8 types)
_F32, _BF16 = ("float32",), ("bfloat16", "float32")
_F8_OUT = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
           "float8_e5m2fnuz", "float8_e4m3fnuz", "float8_e4m3b11fnuz")
PRESETS = {
    "ANY_F8_ANY_F8_F32": (None, _F8_OUT, None),
    "ANY_F8_ANY_F8_F32_FAST_ACCUM": (None, _F8_OUT, None),
    "ANY_F8_ANY_F8_ANY": (None, None, None),
    "ANY_F8_ANY_F8_ANY_FAST_ACCUM": (None, None, None),
    "F16_F16_F16": (("float16",), ("float16",), ("f16", "f16", "f16", 1)),
    "F16_F16_F32": (("float16",), _F32, ("f16", "f16", "f32", 1)),
    "BF16_BF16_BF16": (_BF16, ("bfloat16",), ("bf16", "bf16", "bf16", 1)),
    "BF16_BF16_F32": (_BF16, _F32, ("bf16", "bf16", "f32", 1)),
    "BF16_BF16_F32_X3": (_F32, _F32, ("bf16", "bf16", "f32", 3)),
    "BF16_BF16_F32_X6": (_F32, _F32, ("bf16", "bf16", "f32", 6)),
    "BF16_BF16_F32_X9": (_F32, _F32, ("bf16", "bf16", "f32", 9)),
    "TF32_TF32_F32": (_F32, _F32, ("tf32", "tf32", "f32", 1)),
    "TF32_TF32_F32_X3": (_F32, _F32, ("tf32", "tf32", "f32", 3)),
    "F32_F32_F32": (_F32, _F32, ("f32", "f32", "f32", 1)),
    "F64_F64_F64": (("float64",), ("float64",), ("f64", "f64", "f64", 1)),
}


def _algorithm(precision, in_dtype, out_dtype):
    """A dot algorithm's (lhs type, rhs type, accumulation type, attribute), as jax's
    lowering picks them: a preset converts an operand it does not take as it is, and
    accumulates in the result's type if it may (else its own); a DotAlgorithm converts
    both to its types."""
    from ..ir import dtypes
    name = np.dtype(in_dtype).name
    if precision[0] == "algorithm":
        lt, rt, acc, lc, rc, n, imprecise = precision[1:]
        m = [dtypes.mlir_name(np.dtype(t)) for t in (lt, rt, acc)]
        return lt, rt, acc, (*m, lc, rc, n, imprecise)
    preset = precision[1]
    takes, accs, attr = PRESETS[preset]
    t = name if takes is None or name in takes else takes[0]
    if preset in ("F16_F16_F32", "BF16_BF16_F32") and t == takes[0]:
        accs = accs + (t,)          # a half-precision result may accumulate as such
    out = np.dtype(out_dtype).name
    acc = out if accs is None or out in accs else accs[0]
    if attr is None:                # the float8 presets: the operands' own types
        m = dtypes.mlir_name(np.dtype(in_dtype))
        attr = (m, m, "f32", 1, 1, 1, preset.endswith("FAST_ACCUM"))
    else:
        attr = (*attr[:3], 1, 1, attr[3], False)
    return t, t, acc, attr


def _algorithm_text(attr):
    lt, rt, acc, lc, rc, n, imprecise = attr
    return (f"#stablehlo.dot_algorithm<lhs_precision_type = {lt}, rhs_precision_type = {rt}, "
            f"accumulation_type = {acc}, lhs_component_count = {lc}, rhs_component_count = "
            f"{rc}, num_primitive_operations = {n}, allow_imprecise_accumulation = "
            f"{str(imprecise).lower()}>")


def _lower_dot(ctx, a, b, *, contracting, batch, preferred_element_type=None,
               precision=None):
    (ac, bc), (ab, bb) = contracting, batch
    parts = []
    if ab:
        parts += [f"lhs_batching_dimensions = {_dims(ab)}",
                  f"rhs_batching_dimensions = {_dims(bb)}"]
    if ac:
        parts += [f"lhs_contracting_dimensions = {_dims(ac)}",
                  f"rhs_contracting_dimensions = {_dims(bc)}"]
    algorithm = precision is not None and precision[0] in ("preset", "algorithm")
    props = {"dot_dimension_numbers": "#stablehlo.dot<" + ", ".join(parts) + ">",
             "precision_config": "[" + ", ".join(
                 f"#stablehlo<precision {p}>" for p in (
                     ("DEFAULT",) * 2 if algorithm or precision is None else precision))
             + "]"}
    ins, out = list(ctx.in_avals), ctx.out_avals[0]
    if not algorithm:
        return ctx.op("stablehlo.dot_general", [a, b], [tensor_type(x) for x in ins],
                      [tensor_type(out)], props)
    # an algorithm: the operands converted to its types, the dot in its accumulation
    # type, converted to the result's (as jax's lowering)
    lt, rt, acc, attr = _algorithm(precision, ins[0].dtype, out.dtype)
    props["algorithm"] = _algorithm_text(attr)
    args = []
    for v, x, t, sh in zip((a, b), ins, (lt, rt), ctx.in_shardings):
        if np.dtype(t) != x.dtype:
            new = Aval(x.shape, np.dtype(t), False)
            (v,) = ctx.op("stablehlo.convert", [v], [tensor_type(x)], [tensor_type(new)],
                          sharding=[sh])
            x = new
        args.append((v, x))
    acc_aval = Aval(out.shape, np.dtype(acc), False)
    res = ctx.op("stablehlo.dot_general", [v for v, _ in args],
                 [tensor_type(x) for _, x in args], [tensor_type(acc_aval)], props)
    if acc_aval.dtype == out.dtype:
        return res
    return ctx.op("stablehlo.convert", res, [tensor_type(acc_aval)], [tensor_type(out)])


dot_general_p = Primitive("dot_general", shape_rule=_dot_shape, sharding_rule=_dot_rule,
                          lower=_lower_dot, prop_kind=PropKind.NONE,
                          traits=Trait.CONTRACTION)


# ---------------------------------------------------------------- gradients
# JAX's transposes of dot_general: each cotangent is one dot_general and a transpose.

def _ranges_like(*xs):
    start = 0
    for x in xs:
        yield tuple(range(start, start + len(x)))
        start += len(x)


def _transpose_lhs(g, y, x_aval, y_aval, contracting, batch, swap_ans=False, extra=None):
    from .shape import transpose_p
    (x_contract, y_contract), (x_batch, y_batch) = contracting, batch
    x_kept = _free(x_aval.ndim, x_contract, x_batch)
    y_kept = _free(y_aval.ndim, y_contract, y_batch)
    if swap_ans:
        ans_batch, ans_y, _ = _ranges_like(x_batch, y_kept, x_kept)
    else:
        ans_batch, _, ans_y = _ranges_like(x_batch, x_kept, y_kept)
    order = sorted(range(len(y_contract)), key=lambda i: y_contract[i])
    x_contract_sorted_by_y = [x_contract[i] for i in order]
    out = dot_general_p.bind(g, y, contracting=(tuple(ans_y), tuple(y_kept)),
                             batch=(tuple(ans_batch), tuple(y_batch)), **(extra or {}))
    perm_src = list(x_batch) + list(x_kept) + x_contract_sorted_by_y
    perm = tuple(sorted(range(len(perm_src)), key=lambda i: perm_src[i]))
    if perm == tuple(range(len(perm))):
        return out
    return transpose_p.bind(out, permutation=perm)


def _dot_vjp(ctx, cts, x, y, *, contracting, batch, preferred_element_type=None,
             precision=None):
    from .lax import convert_element_type
    g = cts[0]
    xa, ya = ctx.in_avals
    if preferred_element_type is not None and g.dtype != xa.dtype:
        # as jax's transpose: the cotangent's dots run in its dtype (a bf16 matmul's
        # f32 cotangent is not rounded to bf16 first), each result rounded after
        x, y = (convert_element_type(v, g.dtype) for v in (x, y))
    (xc, yc), (xb, yb) = contracting, batch
    extra = {} if precision is None else {"precision": precision}     # as jax's: unswapped
    dx = _transpose_lhs(g, y, xa, ya, contracting, batch, extra=extra)
    dy = _transpose_lhs(g, x, ya, xa, (yc, xc), (yb, xb), swap_ans=True, extra=extra)
    return [d if d.dtype == a.dtype else convert_element_type(d, a.dtype)
            for d, a in ((dx, xa), (dy, ya))]


dot_general_p.vjp = _dot_vjp


def _dot_batch(ctx, args, batched, *, contracting, batch, **extra):
    """vmap: both operands mapped -> one more batch dim (it leads the result); one mapped
    -> a free dim of it, moved to the front of the result."""
    from .batching import move_dim, shift_axes
    a, b = args
    (ac, bc), (ab, bb) = contracting, batch
    ba, bb_ = batched
    if ba and bb_:
        out = dot_general_p.bind(a, b, contracting=(shift_axes(ac), shift_axes(bc)),
                                 batch=((0, *shift_axes(ab)), (0, *shift_axes(bb))),
                                 **extra)
        return out, True
    if ba:
        out = dot_general_p.bind(a, b, contracting=(shift_axes(ac), bc),
                                 batch=(shift_axes(ab), bb),
                                 **extra)
        return move_dim(out, len(ab), 0), True
    out = dot_general_p.bind(a, b, contracting=(ac, shift_axes(bc)),
                             batch=(ab, shift_axes(bb)), **extra)
    from .lax import aval
    lhs_free = aval(a).ndim - len(ac) - len(ab)
    return move_dim(out, len(ab) + lhs_free, 0), True


dot_general_p.batch = _dot_batch
