"""Elementwise ops: one shape in and out, every dim a pass-through factor.

Operands share one shape and dtype, except rank-0 scalars (inline literals), which
broadcast. Each op: primitive + shape rule + pointwise sharding rule + lowering.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..ir import dtypes
from ..trace.core import Primitive
from ..ir.primitive import PropKind, Trait
from ..errors import ShardcError
from ..ir.program import Aval, Lit
from ..lower.emit import tensor_type
from ..ir.rules import no_rule
from ..ir.rules import pointwise as _pointwise
from ..ir.sharding import Sharding
from .common import check_dtype, expand_scalars, same_shapes
from .complex_math import complex_sin_cos, lex_pick


def pointwise(in_avals, out_avals, **params):
    """Shardy's pointwise rule; none for a zero-element result, which XLA replaces by a
    constant before it propagates shardings."""
    if out_avals[0].size == 0:
        return None
    return _pointwise(in_avals, out_avals, **params)


def _shape(name, kind, *avals, out_dtype=None, **params):
    """One shape and dtype in; the result is weak iff every operand is (as jax, even
    for a fixed result dtype: comparing two weak values gives a weak bool)."""
    shape = same_shapes(name, avals)
    for a in avals:
        check_dtype(name, a, kind)
    dtype = out_dtype if out_dtype is not None else avals[0].dtype
    weak = all(a.weak for a in avals)
    return Aval(shape, dtype, weak)


def _lower(hlo, ctx, *xs, **params):
    out = ctx.out_avals[0]
    xs = expand_scalars(ctx, xs, out.shape)
    in_types = [tensor_type(a.update(shape=out.shape)) for a in ctx.in_avals]
    return ctx.op(hlo, xs, in_types, [tensor_type(out)])


def elementwise(name, hlo, kind, nargs, out_dtype=None, sharding_rule=pointwise,
                lower=None):
    shape_rule = partial(_shape, name, kind, out_dtype=out_dtype)
    prim = Primitive(name, shape_rule=lambda *a, **p: shape_rule(*a[:nargs], **p),
                     sharding_rule=sharding_rule, lower=lower or partial(_lower, hlo),
                     prop_kind=PropKind.ELEMENTWISE, nargs=nargs)   # (the rule takes *a)
    return prim


def _lower_sign(ctx, x):
    """stablehlo.sign has no unsigned form: x == 0 ? 0 : 1 (as jax)."""
    a = ctx.out_avals[0]
    if not dtypes.is_int(a.dtype) or dtypes.is_signed(a.dtype):
        return _lower("stablehlo.sign", ctx, x)
    from .common import broadcast_to
    scalar = a.update(shape=(), weak=False)
    zero, one = (broadcast_to(ctx, ctx.constant(v, scalar), scalar, a, ()) for v in (0, 1))
    t = tensor_type(a)
    props = {"comparison_direction": "#stablehlo<comparison_direction EQ>",
             "compare_type": "#stablehlo<comparison_type UNSIGNED>"}
    (is_zero,) = ctx.op("stablehlo.compare", [x, zero], [t, t],
                        [tensor_type(a.update(dtype=dtypes.bool_))], props)
    return ctx.op("stablehlo.select", [is_zero, zero, one],
                  [tensor_type(a.update(dtype=dtypes.bool_)), t, t], [t])


# unary
neg_p = elementwise("neg", "stablehlo.negate", "numeric", 1)
abs_p = elementwise("abs", "stablehlo.abs", "numeric", 1)
abs_p.shape_rule = lambda x: (check_dtype("abs", x, "numeric"),     # |complex| is real
                              x.update(dtype=dtypes.real_dtype(x.dtype)))[1]
sign_p = elementwise("sign", "stablehlo.sign", "numeric", 1, lower=_lower_sign)
floor_p = elementwise("floor", "stablehlo.floor", "float", 1)
ceil_p = elementwise("ceil", "stablehlo.ceil", "float", 1)
round_p = elementwise("round", "stablehlo.round_nearest_even", "float", 1)
round_afz_p = elementwise("round_afz", "stablehlo.round_nearest_afz", "float", 1)
exp_p = elementwise("exp", "stablehlo.exponential", "inexact", 1)
log_p = elementwise("log", "stablehlo.log", "inexact", 1)
log1p_p = elementwise("log1p", "stablehlo.log_plus_one", "inexact", 1)
expm1_p = elementwise("expm1", "stablehlo.exponential_minus_one", "inexact", 1)
sqrt_p = elementwise("sqrt", "stablehlo.sqrt", "inexact", 1)
rsqrt_p = elementwise("rsqrt", "stablehlo.rsqrt", "inexact", 1)


def _lower_sin_cos(is_sin, ctx, x):
    if dtypes.is_complex(ctx.out_avals[0].dtype):
        return complex_sin_cos(is_sin, ctx, x)
    return _lower("stablehlo.sine" if is_sin else "stablehlo.cosine", ctx, x)


sin_p = elementwise("sin", "stablehlo.sine", "inexact", 1,
                    lower=partial(_lower_sin_cos, True))
cos_p = elementwise("cos", "stablehlo.cosine", "inexact", 1,
                    lower=partial(_lower_sin_cos, False))
tan_p = elementwise("tan", "stablehlo.tan", "inexact", 1)
tanh_p = elementwise("tanh", "stablehlo.tanh", "inexact", 1)
logistic_p = elementwise("logistic", "stablehlo.logistic", "inexact", 1)
asin_p = elementwise("asin", "chlo.asin", "inexact", 1)
acos_p = elementwise("acos", "chlo.acos", "inexact", 1)
atan_p = elementwise("atan", "chlo.atan", "inexact", 1)
sinh_p = elementwise("sinh", "chlo.sinh", "inexact", 1)
cosh_p = elementwise("cosh", "chlo.cosh", "inexact", 1)
# shardc.numpy binds these for complex numbers only (its real ones are composites): chlo's,
# as jax lowers them
asinh_p = elementwise("asinh", "chlo.asinh", "inexact", 1)
acosh_p = elementwise("acosh", "chlo.acosh", "inexact", 1)
atanh_p = elementwise("atanh", "chlo.atanh", "inexact", 1)
# XLA has no sharding rule for erf (JAX emits chlo.erf, which Shardy does not know), so
# it passes no sharding between operand and result, as under jax.jit.
erf_p = elementwise("erf", "chlo.erf", "float", 1, sharding_rule=no_rule)
erfc_p = elementwise("erfc", "chlo.erfc", "float", 1)
not_p = elementwise("not", "stablehlo.not", "bool_int", 1)
is_finite_p = elementwise("is_finite", "stablehlo.is_finite", "float", 1,
                          out_dtype=dtypes.bool_)

# binary
add_p = elementwise("add", "stablehlo.add", "numeric", 2)
sub_p = elementwise("sub", "stablehlo.subtract", "numeric", 2)
# explicit mode: sums and differences of partial sums stay partial sums, as do products
# with values reduced over their axes (trace/ur_rules.py)
add_p.type_partial = sub_p.type_partial = neg_p.type_partial = "sum"
mul_p = elementwise("mul", "stablehlo.multiply", "numeric", 2)
mul_p.type_partial = "scale"
div_p = elementwise("div", "stablehlo.divide", "numeric", 2)
div_p.traits |= Trait.RECIPROCAL
div_p.linear_in = (0,)     # a gradient rule's quotient of partial sums is one (ur_rules.py)
rem_p = elementwise("rem", "stablehlo.remainder", "numeric", 2)
def _pow_shape(x, y):
    """x ** y: float x; y of x's dtype or an integer (then converted, as lax.pow)."""
    check_dtype("pow", x, "inexact")
    if y.dtype != x.dtype:
        check_dtype("pow", y, "int")
        y = y.update(dtype=x.dtype)
    return _shape("pow", "inexact", x, y)


def _lower_pow(ctx, x, y):
    xa, ya = ctx.in_avals
    if ya.dtype != xa.dtype:
        yc = ya.update(dtype=xa.dtype)
        (y,) = ctx.op("stablehlo.convert", [y], [tensor_type(ya)], [tensor_type(yc)],
                      sharding=[ctx.in_shardings[1] or Sharding.replicated(ya.ndim)])
        ctx.in_avals = [xa, yc]
    return _lower("stablehlo.power", ctx, x, y)


pow_p = Primitive("pow", shape_rule=_pow_shape, sharding_rule=pointwise, lower=_lower_pow,
                  prop_kind=PropKind.ELEMENTWISE)


def _lower_minmax(hlo, direction, ctx, x, y):
    out = ctx.out_avals[0]
    if not dtypes.is_complex(out.dtype):
        return _lower(hlo, ctx, x, y)
    x, y = expand_scalars(ctx, (x, y), out.shape)
    return lex_pick(ctx.op, direction, x, y, tensor_type(out),
                    tensor_type(out.update(dtype=dtypes.real_dtype(out.dtype))),
                    tensor_type(out.update(dtype=dtypes.bool_)))


max_p = elementwise("max", "stablehlo.maximum", "any", 2,
                    lower=partial(_lower_minmax, "stablehlo.maximum", "GT"))
min_p = elementwise("min", "stablehlo.minimum", "any", 2,
                    lower=partial(_lower_minmax, "stablehlo.minimum", "LT"))
atan2_p = elementwise("atan2", "stablehlo.atan2", "float", 2)
and_p = elementwise("and", "stablehlo.and", "bool_int", 2)
or_p = elementwise("or", "stablehlo.or", "bool_int", 2)
xor_p = elementwise("xor", "stablehlo.xor", "bool_int", 2)
shift_right_logical_p = elementwise("shift_right_logical", "stablehlo.shift_right_logical",
                                    "int", 2)
shift_right_arithmetic_p = elementwise("shift_right_arithmetic",
                                       "stablehlo.shift_right_arithmetic", "int", 2)
shift_left_p = elementwise("shift_left", "stablehlo.shift_left", "int", 2)

# XLA's fusion will not duplicate these into several readers (HloInstruction::IsExpensive)
for _p in (exp_p, log_p, log1p_p, expm1_p, sqrt_p, rsqrt_p, sin_p, cos_p, tan_p, tanh_p,
           logistic_p, asin_p, acos_p, atan_p, sinh_p, cosh_p, asinh_p, acosh_p, atanh_p,
           erf_p, erfc_p, div_p, rem_p, pow_p, atan2_p):
    _p.traits |= Trait.EXPENSIVE


# comparisons
def _compare_type(dtype):
    if dtypes.is_inexact(dtype):
        return "FLOAT"
    return "SIGNED" if dtypes.is_signed(dtype) else "UNSIGNED"


def _lower_compare(direction, total, ctx, a, b):
    out = ctx.out_avals[0]
    a, b = expand_scalars(ctx, (a, b), out.shape)
    t_in = tensor_type(ctx.in_avals[0].update(shape=out.shape))
    kind = _compare_type(ctx.in_avals[0].dtype)
    if total and kind == "FLOAT":
        kind = "TOTALORDER"
    props = {"comparison_direction": f"#stablehlo<comparison_direction {direction}>",
             "compare_type": f"#stablehlo<comparison_type {kind}>"}
    return ctx.op("stablehlo.compare", [a, b], [t_in, t_in], [tensor_type(out)], props)


def comparison(name, direction, total=False):
    """`total`: floats compare in IEEE's total order (-0 < +0, NaNs ordered by sign and
    payload), as jax's eq_to/lt_to/le_to, which its sort comparators use."""
    shape_rule = partial(_shape, name, "any", out_dtype=dtypes.bool_)
    return Primitive(name, shape_rule=lambda a, b: shape_rule(a, b), sharding_rule=pointwise,
                     lower=partial(_lower_compare, direction, total),
                     prop_kind=PropKind.ELEMENTWISE)


eq_p = comparison("eq", "EQ")
ne_p = comparison("ne", "NE")
lt_p = comparison("lt", "LT")
le_p = comparison("le", "LE")
gt_p = comparison("gt", "GT")
ge_p = comparison("ge", "GE")
eq_to_p = comparison("eq_to", "EQ", total=True)
lt_to_p = comparison("lt_to", "LT", total=True)
le_to_p = comparison("le_to", "LE", total=True)


# select(pred, on_true, on_false)
def _select_shape(pred, t, f):
    if pred.dtype != dtypes.bool_:
        raise ShardcError(f"select needs a boolean predicate, got {pred}")
    shape = same_shapes("select", (t, f))
    if pred.ndim and not t.ndim and not f.ndim:
        shape = pred.shape      # scalar branches broadcast inline (vmap's unbatched ones)
    if pred.ndim and pred.shape != shape:
        raise ShardcError(f"select: predicate shape {pred.shape} does not match {shape}")
    return Aval(shape, t.dtype, t.weak and f.weak)


def _lower_select(ctx, p, t, f):
    out = ctx.out_avals[0]
    p, t, f = expand_scalars(ctx, (p, t, f), out.shape)
    types = [tensor_type(a.update(shape=out.shape)) for a in ctx.in_avals]
    return ctx.op("stablehlo.select", [p, t, f], types, [tensor_type(out)])


select_p = Primitive("select", shape_rule=_select_shape, sharding_rule=pointwise,
                     lower=_lower_select, prop_kind=PropKind.ELEMENTWISE)
select_p.type_partial = ("layout", (1, 2))     # picks from partial sums: partial sums
# clamp(min, x, max): its own op, lowered to stablehlo.clamp as jax's, whose order on
# complex numbers and NaN bounds max-then-min does not reproduce
clamp_p = elementwise("clamp", "stablehlo.clamp", "any", 3)


# constant folding of integer index arithmetic (jnp's `select(i < 0, i + n, i)` on a
# constant start), as XLA's canonicalizer folds it before Shardy propagates
def _int_fold(fn):
    def fold(op, consts, defs):
        avals = [v.aval for v in op.inputs] + [op.outputs[0].aval]
        if any(c is None for c in consts) or any(
                a.shape != () or not (dtypes.is_int(a.dtype) or a.dtype == dtypes.bool_)
                for a in avals):
            return None
        out = op.outputs[0].aval
        # one-element arrays: integers wrap as XLA's, without NumPy's scalar warnings
        val = fn(*[np.asarray([c], a.dtype) for c, a in zip(consts, avals)], **op.params)
        return [Lit(np.asarray(val).astype(out.dtype)[0].item(), out)]
    return fold


for _p, _fn in ((add_p, np.add), (sub_p, np.subtract), (mul_p, np.multiply),
                (neg_p, np.negative), (max_p, np.maximum), (min_p, np.minimum),
                (eq_p, np.equal), (ne_p, np.not_equal), (lt_p, np.less),
                (le_p, np.less_equal), (gt_p, np.greater), (ge_p, np.greater_equal),
                (and_p, np.bitwise_and), (or_p, np.bitwise_or), (not_p, np.invert),
                (select_p, lambda p, t, f: np.where(p, t, f)),
                (clamp_p, lambda lo, x, hi: np.minimum(np.maximum(x, lo), hi))):
    _p.fold = _int_fold(_fn)


# convert_element_type
def _convert_shape(x, *, new_dtype, weak_type=False):
    if new_dtype not in dtypes.SUPPORTED:
        raise ShardcError(f"unsupported dtype {new_dtype}")
    return Aval(x.shape, new_dtype, weak_type)


def _lower_convert(ctx, x, *, new_dtype, weak_type=False):
    src, out = ctx.in_avals[0], ctx.out_avals[0]
    if dtypes.is_complex(src.dtype) and not dtypes.is_complex(new_dtype):
        part = src.update(dtype=dtypes.real_dtype(src.dtype))    # the real part, as jax
        (x,) = ctx.op("stablehlo.real", [x], [tensor_type(src)], [tensor_type(part)])
        if part.dtype == new_dtype:
            return [x]
        src = part
    if new_dtype == dtypes.bool_ and src.dtype != dtypes.bool_:
        # x != 0, as JAX does: a plain convert would truncate 0.5 to False
        zero = ctx.constant(0, src.update(shape=(), weak=False))
        if src.ndim:
            from .common import broadcast_to
            zero = broadcast_to(ctx, zero, src.update(shape=()), src, ())
        props = {"comparison_direction": "#stablehlo<comparison_direction NE>",
                 "compare_type": f"#stablehlo<comparison_type {_compare_type(src.dtype)}>"}
        return ctx.op("stablehlo.compare", [x, zero], [tensor_type(src)] * 2,
                      [tensor_type(out)], props)
    return ctx.op("stablehlo.convert", [x], [tensor_type(src)], [tensor_type(out)])


convert_element_type_p = Primitive("convert_element_type", shape_rule=_convert_shape,
                                   sharding_rule=pointwise, lower=_lower_convert,
                                   prop_kind=PropKind.ELEMENTWISE, traits=Trait.FUSED)
convert_element_type_p.fold = _int_fold(lambda x, **_: x)   # integer/bool to integer/bool
convert_element_type_p.type_partial = ("layout", (0,))     # keeps partial sums (as jax)


# ---------------------------------------------------------------- gradients
# Each rule gets the output cotangent and the primal inputs (ctx.out is the primal
# output) and returns one cotangent per input; rank-0 operands get theirs summed.

def _unbroadcast(ct, aval):
    if ct is None or aval.ndim or not getattr(ct, "ndim", 0):
        return ct
    from . import lax as L
    return L.sum_all(ct)


def defvjp(prim, fn):
    """Register fn(ctx, ct, *xs, **params) -> cotangents as prim's VJP."""
    def rule(ctx, cts, *xs, **params):
        outs = fn(ctx, cts[0], *xs, **params)
        return [_unbroadcast(o, a) for o, a in zip(outs, ctx.in_avals)]
    prim.vjp = rule


_SQRT_PI = 3.141592653589793 ** 0.5


def _vjps():
    from ..ir.primitive import nondiff
    from . import lax as L      # looked up when a rule runs (lax imports this module)
    for p in (sign_p, floor_p, ceil_p, round_p, round_afz_p, not_p, is_finite_p, and_p, or_p,
              xor_p, eq_p, ne_p, lt_p, le_p, gt_p, ge_p, eq_to_p, lt_to_p, le_to_p,
              shift_right_logical_p,
              shift_right_arithmetic_p, shift_left_p):
        p.vjp = nondiff
    defvjp(neg_p, lambda c, g, x: (L.neg(g),))
    defvjp(abs_p, lambda c, g, x: (L.select(L.ge(x, 0), g, L.neg(g)),))
    defvjp(exp_p, lambda c, g, x: (L.mul(g, c.out),))
    defvjp(log_p, lambda c, g, x: (L.div(g, x),))
    defvjp(log1p_p, lambda c, g, x: (L.div(g, L.add(1, x)),))
    defvjp(expm1_p, lambda c, g, x: (L.mul(g, L.add(c.out, 1)),))
    defvjp(sqrt_p, lambda c, g, x: (L.mul(g, L.div(0.5, c.out)),))
    defvjp(rsqrt_p, lambda c, g, x: (L.mul(g, L.mul(-0.5, L.div(c.out, x))),))
    defvjp(sin_p, lambda c, g, x: (L.mul(g, L.cos(x)),))
    defvjp(cos_p, lambda c, g, x: (L.neg(L.mul(g, L.sin(x))),))
    defvjp(tan_p, lambda c, g, x: (L.mul(g, L.add(1, L.square(c.out))),))
    defvjp(tanh_p, lambda c, g, x: (L.mul(L.add(g, L.mul(g, c.out)), L.sub(1, c.out)),))
    defvjp(logistic_p, lambda c, g, x: (L.mul(g, L.mul(c.out, L.sub(1, c.out))),))
    defvjp(asin_p, lambda c, g, x: (L.mul(g, L.rsqrt(L.sub(1, L.square(x)))),))
    defvjp(acos_p, lambda c, g, x: (L.neg(L.mul(g, L.rsqrt(L.sub(1, L.square(x))))),))
    defvjp(atan_p, lambda c, g, x: (L.div(g, L.add(1, L.square(x))),))
    defvjp(sinh_p, lambda c, g, x: (L.mul(g, L.cosh(x)),))
    defvjp(cosh_p, lambda c, g, x: (L.mul(g, L.sinh(x)),))
    # jax's jvps, transposed (unconjugated, as theirs)
    defvjp(asinh_p, lambda c, g, x: (L.mul(g, L.rsqrt(L.add(L.square(x), 1))),))
    defvjp(acosh_p, lambda c, g, x: (L.mul(g, L.rsqrt(L.sub(L.square(x), 1))),))
    defvjp(atanh_p, lambda c, g, x: (L.mul(L.div(1, L.add(1, x)), L.div(g, L.sub(1, x))),))
    defvjp(erf_p, lambda c, g, x: (L.mul(g, L.mul(2 / _SQRT_PI,
                                                  L.exp(L.neg(L.square(x))))),))
    defvjp(erfc_p, lambda c, g, x: (L.mul(g, L.mul(-2 / _SQRT_PI,
                                                   L.exp(L.neg(L.square(x))))),))
    defvjp(add_p, lambda c, g, x, y: (g, g))
    defvjp(sub_p, lambda c, g, x, y: (g, L.neg(g)))
    defvjp(mul_p, lambda c, g, x, y: (L.mul(g, y), L.mul(x, g)))
    defvjp(div_p, lambda c, g, x, y: (L.div(g, y),
                                      L.mul(L.mul(L.neg(g), x), L.integer_pow(y, -2))))

    def trunc(v):
        return L.mul(L.sign(v), L.floor(L.abs(v)))
    defvjp(rem_p, lambda c, g, x, y: (g, L.mul(L.neg(g), trunc(L.div(x, y)))))

    def pow_vjp(c, g, x, y):
        xa = L.aval(x)
        # an integer exponent takes part in x's dtype (as jnp's promotion did)
        yf = L.convert_element_type(y, xa.dtype, L.aval(y).weak and xa.weak)
        dx = L.mul(yf, L.pow(x, L.sub(y, 1)))
        if L.aval(y).dtype != xa.dtype:   # jax's rule: 0 at y == 0 for an integer y only
            dx = L.select(L.eq(y, 0), L.zeros_like(c.out), dx)   # (0 * 0**-1.0 is NaN)
        safe = L.select(L.eq(x, 0), L.ones_like(x), x)
        return L.mul(g, dx), L.mul(g, L.mul(L.log(safe), c.out))
    defvjp(pow_p, pow_vjp)

    def balanced(x, z, y):
        """1 where x is the max/min, 0.5 where x and y tie for it, else 0 (as JAX)."""
        like = Aval((), L.aval(z).dtype)
        one, half, zero = (L.lit(v, like) for v in (1.0, 0.5, 0.0))
        return L.select(L.eq(x, z), L.select(L.eq(y, z), half, one), zero)

    def chooser(c, g, x, y):
        return L.mul(g, balanced(x, c.out, y)), L.mul(g, balanced(y, c.out, x))
    defvjp(max_p, chooser)
    defvjp(min_p, chooser)

    def clamp_vjp(c, g, lo, x, hi):
        """jax's clamp rule: the cotangent goes to whichever of x, min, max is the result,
        strictly (none at a tie, none at NaN)."""
        z = L.zeros_like(g)

        def to(picked):
            return L.select(picked, g, z)
        return (to(L.bitwise_and(L.lt(x, lo), L.lt(lo, hi))),
                to(L.bitwise_and(L.lt(lo, x), L.lt(x, hi))), to(L.lt(hi, x)))
    defvjp(clamp_p, clamp_vjp)

    def atan2_vjp(c, g, x, y):
        den = L.add(L.square(x), L.square(y))
        return L.mul(g, L.div(y, den)), L.mul(g, L.div(L.neg(x), den))
    defvjp(atan2_p, atan2_vjp)

    def select_vjp(c, g, p, t, f):
        z = L.zeros_like(g)
        return None, L.select(p, g, z), L.select(p, z, g)
    defvjp(select_p, select_vjp)

    def convert_vjp(c, g, x, *, new_dtype, weak_type=False):
        a = c.in_avals[0]
        if not dtypes.is_inexact(a.dtype) or not dtypes.is_inexact(new_dtype):
            return (None,)
        if dtypes.is_complex(new_dtype) and not dtypes.is_complex(a.dtype):
            from .complex import real_p
            g = real_p.bind(g)      # the transpose of the embedding ℝ → ℂ
        # back to the operand's type, weak if it was (as jax's transpose)
        return (L.convert_element_type(g, a.dtype, a.weak),)
    defvjp(convert_element_type_p, convert_vjp)


_vjps()


def _batch_rules():
    """vmap: every op of this family maps element by element (rank-0 operands broadcast
    inline, so an unbatched scalar stays a scalar)."""
    from .batching import elementwise_rule
    for p in list(globals().values()):
        if isinstance(p, Primitive):
            p.batch = elementwise_rule(p)


_batch_rules()
