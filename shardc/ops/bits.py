"""bitcast_convert_type: reinterpret an array's bits as another dtype (as lax's); and
mulhi, the high half of an integer product.

Same width: one shape. A narrower result gains a minor dim of width ratio; a wider one
consumes the operand's minor dim (which must be the ratio), as StableHLO's
bitcast_convert. Shardy's rule: the common dims are pass factors, the extra dim a
size-1 factor of its own (it is never sharded).
"""
from __future__ import annotations

import numpy as np

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.primitive import PropKind, nondiff
from ..ir.program import Aval
from ..ir.rules import RuleBuilder
from ..lower.emit import tensor_type
from ..trace.core import Primitive
from .batching import elementwise_rule
from .common import broadcast_to, expand_scalars
from .elementwise import elementwise


def _bits(d):
    return dtypes.bit_width(d)


def _bitcast_shape(x, *, new_dtype):
    if new_dtype not in dtypes.SUPPORTED:
        raise ShardcError(f"bitcast_convert_type: unsupported dtype {new_dtype}")
    if dtypes.bool_ in (x.dtype, new_dtype) and x.dtype != new_dtype:
        raise ShardcError("bitcast_convert_type does not convert to or from bool")
    a, b = _bits(x.dtype), _bits(new_dtype)
    if a == b:
        return Aval(x.shape, new_dtype, False)
    if a > b:
        return Aval((*x.shape, a // b), new_dtype, False)
    if not x.ndim or x.shape[-1] != b // a:
        raise ShardcError(
            f"bitcast_convert_type from {x.dtype} to {new_dtype}: the operand's last dim "
            f"must be {b // a} (the ratio of their widths), got shape {x.shape}")
    return Aval(x.shape[:-1], new_dtype, False)


def _bitcast_rule(in_avals, out_avals, *, new_dtype):
    common = min(in_avals[0].shape, out_avals[0].shape, key=len)
    if 0 in out_avals[0].shape:
        return None
    return RuleBuilder(in_avals, out_avals).same_dims(common).build(
        elementwise=len(in_avals[0].shape) == len(out_avals[0].shape))


def _lower_bitcast(ctx, x, *, new_dtype):
    return ctx.op("stablehlo.bitcast_convert", [x], [tensor_type(ctx.in_avals[0])],
                  [tensor_type(ctx.out_avals[0])])


bitcast_convert_type_p = Primitive("bitcast_convert_type", shape_rule=_bitcast_shape,
                                   sharding_rule=_bitcast_rule, lower=_lower_bitcast,
                                   prop_kind=PropKind.NONE)   # not elementwise in Shardy
bitcast_convert_type_p.vjp = nondiff


def _batch(ctx, args, batched, *, new_dtype):
    """Elementwise on the leading dims: the mapped dim stays first."""
    return bitcast_convert_type_p.bind(args[0], new_dtype=new_dtype), True


bitcast_convert_type_p.batch = _batch


# ---------------------------------------------------------------- mulhi

def _lower_mulhi(ctx, x, y):
    """jax's lowering below 64 bits: the product in integers twice as wide, shifted
    right by the width (the wide type lives only in the HLO, so it exists in 32-bit
    mode too). 64-bit mulhi is built from 32-bit halves above the op (api.lax_special)."""
    out = ctx.out_avals[0].update(weak=False)
    bits = dtypes.bit_width(out.dtype)
    if bits == 64:
        raise ShardcError("internal: mulhi_p is for integers narrower than 64 bits")
    x, y = expand_scalars(ctx, (x, y), out.shape)
    signed = dtypes.is_signed(out.dtype)
    wide = out.update(dtype=np.dtype(f"{'i' if signed else 'u'}{bits // 4}"))
    t, tw = tensor_type(out), tensor_type(wide)
    xw, yw = (ctx.op("stablehlo.convert", [v], [t], [tw])[0] for v in (x, y))
    (p,) = ctx.op("stablehlo.multiply", [xw, yw], [tw, tw], [tw])
    scalar = wide.update(shape=())
    shift = broadcast_to(ctx, ctx.constant(bits, scalar), scalar, wide, ())
    (hi,) = ctx.op("stablehlo.shift_right_" + ("arithmetic" if signed else "logical"),
                   [p, shift], [tw, tw], [tw])
    return ctx.op("stablehlo.convert", [hi], [tw], [t])


mulhi_p = elementwise("mulhi", None, "int", 2, lower=_lower_mulhi)
mulhi_p.vjp = nondiff
mulhi_p.batch = elementwise_rule(mulhi_p)
