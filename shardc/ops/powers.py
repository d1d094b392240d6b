"""Powers by a static integer: integer_pow (x ** y by repeated squaring) and square.

Elementwise ops like those in elementwise.py, with their own lowering (products, as
jax's) and sharding rule (x ** 0 is a constant).
"""
from __future__ import annotations

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.primitive import PropKind
from ..ir.rules import no_rule
from ..lower.emit import tensor_type
from ..trace.core import Primitive
from .common import check_dtype
from .elementwise import defvjp, pointwise


# integer_pow: x ** y for a static int y, by repeated squaring (as JAX lowers it)
def _ipow_shape(x, *, y):
    check_dtype("integer_pow", x, "numeric")
    if y < 0 and not dtypes.is_inexact(x.dtype):
        raise ShardcError("integer_pow: negative powers need a floating-point array")
    return x


def _lower_ipow(ctx, x, *, y):
    t = tensor_type(ctx.out_avals[0])

    def mul(a, b):
        return ctx.op("stablehlo.multiply", [a, b], [t, t], [t])[0]
    if y == 0:
        one = ctx.constant(1, ctx.out_avals[0].update(shape=()))
        from .common import broadcast_to
        return broadcast_to(ctx, one, ctx.out_avals[0].update(shape=()), ctx.out_avals[0], ())
    acc, base, n = None, x, abs(y)
    while n:
        if n & 1:
            acc = base if acc is None else mul(acc, base)
        n >>= 1
        if n:
            base = mul(base, base)
    if y < 0:
        one = ctx.constant(1, ctx.out_avals[0].update(shape=()))
        from .common import broadcast_to
        one = broadcast_to(ctx, one, ctx.out_avals[0].update(shape=()), ctx.out_avals[0], ())
        acc = ctx.op("stablehlo.divide", [one, acc], [t, t], [t])[0]
    return acc


def _ipow_rule(in_avals, out_avals, *, y):
    """x ** 0 lowers to a constant (as jax's), which links nothing to x."""
    return no_rule(in_avals, out_avals) if y == 0 else pointwise(in_avals, out_avals)


integer_pow_p = Primitive("integer_pow", shape_rule=_ipow_shape, sharding_rule=_ipow_rule,
                          lower=_lower_ipow, prop_kind=PropKind.ELEMENTWISE,
                          operand_uses=lambda y: 1 if abs(y) <= 1 else 2)


def _lower_square(ctx, x):
    t = tensor_type(ctx.out_avals[0])
    return ctx.op("stablehlo.multiply", [x, x], [t, t], [t])


square_p = Primitive("square", shape_rule=lambda x: (check_dtype("square", x, "numeric"), x)[1],
                     sharding_rule=pointwise, lower=_lower_square,
                     prop_kind=PropKind.ELEMENTWISE, operand_uses=lambda: 2)


def _vjps():
    from . import lax as L      # looked up when a rule runs (lax imports this module)
    defvjp(integer_pow_p, lambda c, g, x, *, y: (
        L.zeros_like(x) if y == 0 else L.mul(g, L.mul(float(y), L.integer_pow(x, y - 1))),))
    defvjp(square_p, lambda c, g, x: (L.mul(g, L.mul(2.0, x)),))


_vjps()


def _batch_rules():
    from .batching import elementwise_rule
    for p in (integer_pow_p, square_p):
        p.batch = elementwise_rule(p)


_batch_rules()
