"""More elementwise ops, as jax.lax's: clz, population_count, nextafter, cbrt,
reduce_precision. Each is pointwise for sharding and batches elementwise."""
from __future__ import annotations


from ..errors import ShardcError, ShardcNotImplementedError
from ..ir.primitive import PropKind, Trait
from ..trace.core import Primitive
from . import elementwise as ew
from .batching import elementwise_rule
from .common import check_dtype


def _op(name, hlo, kind, nargs=1):
    p = ew.elementwise(name, hlo, kind, nargs)
    p.batch = elementwise_rule(p)
    return p


clz_p = _op("clz", "stablehlo.count_leading_zeros", "int")
population_count_p = _op("population_count", "stablehlo.popcnt", "int")
nextafter_p = _op("nextafter", "chlo.next_after", "float", 2)
cbrt_p = _op("cbrt", "stablehlo.cbrt", "float")
cbrt_p.traits |= Trait.EXPENSIVE


def _rp_shape(x, *, exponent_bits, mantissa_bits):
    check_dtype("reduce_precision", x, "float")
    if exponent_bits < 1 or mantissa_bits < 0:
        raise ShardcError("reduce_precision needs exponent_bits >= 1 and mantissa_bits >= 0, "
                          f"got {exponent_bits} and {mantissa_bits}")
    return x


def _lower_rp(ctx, x, *, exponent_bits, mantissa_bits):
    t = ew.tensor_type(ctx.out_avals[0])
    return ctx.op("stablehlo.reduce_precision", [x], [t], [t],
                  {"exponent_bits": f"{exponent_bits} : i32",
                   "mantissa_bits": f"{mantissa_bits} : i32"})


reduce_precision_p = Primitive("reduce_precision", shape_rule=_rp_shape,
                               sharding_rule=ew.pointwise, lower=_lower_rp,
                               prop_kind=PropKind.ELEMENTWISE)
reduce_precision_p.batch = elementwise_rule(reduce_precision_p)
reduce_precision_p.type_partial = ("layout", (0,))    # keeps partial sums (as jax)


def reduce_precision(x, exponent_bits, mantissa_bits):
    return reduce_precision_p.bind(x, exponent_bits=int(exponent_bits),
                                   mantissa_bits=int(mantissa_bits))


def _nextafter_vjp(ctx, cts, x, y):
    """jax has no rule (its derivative is 1 in x almost everywhere, 0 in y, but a zero
    would be silently wrong for x): an error when a differentiated value reaches it."""
    if ctx.active is None or any(ctx.active):
        raise ShardcNotImplementedError("Differentiation rule for 'nextafter' not "
                                        "implemented", ctx.op.loc)
    return [None, None]


def _vjps():
    from ..ir.primitive import nondiff
    from . import lax as L
    for p in (clz_p, population_count_p):
        p.vjp = nondiff
    nextafter_p.vjp = _nextafter_vjp
    ew.defvjp(cbrt_p, lambda c, g, x: (L.mul(g, L.mul(1 / 3, L.integer_pow(c.out, -2))),))
    ew.defvjp(reduce_precision_p, lambda c, g, x, **kw: (reduce_precision_p.bind(g, **kw),))


_vjps()
