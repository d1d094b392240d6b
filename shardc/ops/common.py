"""Helpers shared by the op families: checks that raise user errors, lowering snippets."""
from __future__ import annotations

import operator

from ..ir import dtypes
from ..errors import AxisError, ShardcError, ShardcTypeError
from ..ir.program import Aval
from ..lower.emit import tensor_type
from ..ir.sharding import Sharding

KINDS = {
    "float": (dtypes.is_float, "a floating-point"),
    "inexact": (dtypes.is_inexact, "a floating-point or complex"),
    "int": (dtypes.is_int, "an integer"),
    "numeric": (lambda d: d != dtypes.bool_, "a numeric"),
    "bool_int": (lambda d: d == dtypes.bool_ or dtypes.is_int(d), "a boolean or integer"),
    "real": (lambda d: not dtypes.is_complex(d), "a real (not complex)"),
    "any": (lambda d: True, "any"),
}


def check_dtype(name, aval, kind):
    ok, what = KINDS[kind]
    if not ok(aval.dtype):
        raise ShardcError(f"{name} needs {what} array, got {aval}")


def same_shapes(name, avals):
    """Elementwise operands: one shape (rank-0 scalars broadcast); one dtype."""
    shape = None
    for a in avals:
        if a.ndim:
            if shape is None:
                shape = a.shape
            elif a.shape != shape:
                raise ShardcError(
                    f"{name} got arrays of shapes {[x.shape for x in avals]}; elementwise "
                    "operands must have one shape (broadcast them first)")
    dts = {a.dtype for a in avals}
    if len(dts) > 1:
        raise ShardcError(f"{name} got mixed dtypes {[str(a) for a in avals]}; convert "
                          "them to one dtype first")
    return shape if shape is not None else ()


def check_axis(name, axis, ndim):
    try:
        axis = operator.index(axis)
    except TypeError:
        raise ShardcTypeError(f"{name}: axis must be an int, got {axis!r}") from None
    if not -ndim <= axis < max(ndim, 1) or (ndim == 0 and axis not in (0, -1)):
        raise AxisError(f"{name}: axis {axis} is out of bounds for an array of rank {ndim}")
    return axis % ndim if ndim else 0


def broadcast_to(ctx, x, in_aval: Aval, out_aval: Aval, dims=None, sharding=None):
    """Emit broadcast_in_dim of `x` to out_aval's shape (dims: where x's dims go)."""
    if dims is None:
        dims = tuple(range(out_aval.ndim - in_aval.ndim, out_aval.ndim))
    t_out = tensor_type(out_aval)
    sh = sharding if sharding is not None else ctx.out_shardings[0]
    (r,) = ctx.op("stablehlo.broadcast_in_dim", [x], [tensor_type(in_aval)], [t_out],
                  {"broadcast_dimensions": i64_array(dims)}, [sh])
    ctx.lowering.types[r] = t_out
    return r


def expand_scalars(ctx, xs, out_shape, sharding=None):
    """Broadcast rank-0 operands of an elementwise op to the result shape."""
    out = []
    sh = sharding if sharding is not None else ctx.out_shardings[0]
    for x, a in zip(xs, ctx.in_avals):
        if a.ndim == 0 and out_shape:
            b = a.update(shape=out_shape)
            # partial sums behind a constraint: Shardy takes a scalar's broadcast for one
            # it may re-create per use and drops its sharding, so XLA would reduce them
            out.append(ctx.held(broadcast_to(ctx, x, a, b, (), sh), b, sh))
        else:
            out.append(x)
    return out


def i64_array(xs) -> str:
    xs = list(xs)
    return "array<i64" + (": " + ", ".join(map(str, xs)) if xs else "") + ">"


def replicated(rank) -> Sharding:
    return Sharding.replicated(rank)


def norm_axes(name, axes, ndim):
    if axes is None:
        return tuple(range(ndim))
    if not isinstance(axes, (tuple, list)):
        axes = (axes,)
    out = tuple(check_axis(name, a, ndim) for a in axes)
    if len(set(out)) != len(out):
        raise ShardcError(f"{name}: repeated axis in {axes}")
    return out
