"""Thin lax-level wrappers that bind primitives, for gradient rules and IR transforms.

Semantics as jax.lax, not jax.numpy: operands already share one dtype (no promotion);
a Python scalar becomes a literal of the other operand's dtype and weak type; rank-0
operands of elementwise ops broadcast inline, other shapes must match. Rules use these
instead of shardc.numpy so the op families do not depend on the user-facing frontend.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.program import Aval, Lit
from ..trace import core
from . import elementwise as ew
from . import powers as pw
from . import reduce as red
from . import shape as shp

_PY_SCALARS = (bool, int, float)


def is_py_scalar(x) -> bool:
    return isinstance(x, _PY_SCALARS) and not isinstance(x, np.generic)


def aval(x) -> Aval:
    if type(x) is core.Tracer:
        return x.value.aval
    if isinstance(x, Lit):
        return x.aval
    return core.aval_of(x)


def lit(v, like: Aval) -> Lit:
    """The scalar v as a literal of like's dtype and weak type."""
    return Lit(core._scalar(v, like.dtype), Aval((), like.dtype, like.weak))


def _operands(*xs):
    """Python scalars as literals of the (first) array operand's dtype and weak type."""
    like = next((aval(x) for x in xs if not is_py_scalar(x)), None)
    if like is None:
        raise ShardcError("internal: a lax wrapper needs at least one array operand")
    return [lit(x, like) if is_py_scalar(x) else x for x in xs]


def _unary(prim):
    def f(x):
        return prim.bind(x)
    f.__name__ = prim.name
    return f


def _binary(prim):
    def f(x, y):
        return prim.bind(*_operands(x, y))
    f.__name__ = prim.name
    return f


neg, abs, sign, floor = map(_unary, (ew.neg_p, ew.abs_p, ew.sign_p, ew.floor_p))
exp, log, sqrt, rsqrt = map(_unary, (ew.exp_p, ew.log_p, ew.sqrt_p, ew.rsqrt_p))
sin, cos, sinh, cosh = map(_unary, (ew.sin_p, ew.cos_p, ew.sinh_p, ew.cosh_p))
square = _unary(pw.square_p)
add, sub, mul, div = map(_binary, (ew.add_p, ew.sub_p, ew.mul_p, ew.div_p))
max, min, pow = map(_binary, (ew.max_p, ew.min_p, ew.pow_p))
eq, ne, lt, le, gt, ge = map(_binary, (ew.eq_p, ew.ne_p, ew.lt_p, ew.le_p, ew.gt_p, ew.ge_p))
bitwise_or, bitwise_and = _binary(ew.or_p), _binary(ew.and_p)


def integer_pow(x, y: int):
    return pw.integer_pow_p.bind(x, y=int(y))


def convert_element_type(x, dtype, weak=False):
    """x as `dtype` (a no-op if it already is); a scalar literal stays a literal."""
    a = aval(x)
    if a.dtype == dtype and a.weak == weak:
        return x
    if isinstance(x, Lit) or is_py_scalar(x):
        v = x.value if isinstance(x, Lit) else x
        return Lit(core._scalar(v, dtype), Aval((), dtype, weak))
    if a.dtype == dtype and not core.is_tracer(x) and not weak:
        return x
    return ew.convert_element_type_p.bind(x, new_dtype=dtype, weak_type=weak)


def broadcast_in_dim(x, shape, broadcast_dimensions):
    return shp.broadcast_in_dim_p.bind(x, shape=tuple(shape),
                                       broadcast_dimensions=tuple(broadcast_dimensions))


def _expand(x, shape):
    """A rank-0 x broadcast to `shape` (the only broadcasting these wrappers do)."""
    s = aval(x).shape
    if s == tuple(shape):
        return x
    if s:
        raise ShardcError(f"internal: cannot broadcast shape {s} to {tuple(shape)}")
    return broadcast_in_dim(x, shape, ())


def select(pred, on_true, on_false):
    """where(pred, on_true, on_false): rank-0 branches are broadcast to the others' (or a
    non-scalar pred's) shape, as jnp.where does; a rank-0 pred stays as it is."""
    t, f = _operands(on_true, on_false)
    shapes = [aval(v).shape for v in (pred, t, f) if aval(v).shape]
    target = shapes[0] if shapes else ()
    if aval(pred).shape:
        pred = _expand(pred, target)
    return ew.select_p.bind(pred, _expand(t, target), _expand(f, target))


where = select


def full(shape, value, dtype, weak=False):
    """A constant array: a constant op if rank-0, else a broadcast literal (as jnp.full)."""
    shape = tuple(shape)
    if not shape:
        from .special import constant_p
        params = {"value": np.asarray(value, dtype)}
        if weak:
            params["weak_type"] = True
        return constant_p.bind(**params)
    return broadcast_in_dim(Lit(core._scalar(value, dtype), Aval((), dtype, weak)), shape, ())


def zeros(shape, dtype):
    return full(shape, 0, dtype)


def full_like(x, value):
    a = aval(x)
    return full(a.shape, value, a.dtype, a.weak)


def zeros_like(x):
    return full_like(x, 0)


def ones_like(x):
    return full_like(x, 1)


def reduce_sum(x, axes):
    return red.reduce_sum_p.bind(x, axes=tuple(axes))


def sum_all(x):
    """The sum of all elements, as jnp.sum: half floats accumulate in float32, the
    result has x's dtype and is strongly typed."""
    a = aval(x)
    comp = dtypes.float32 if a.dtype in (dtypes.float16, dtypes.bfloat16) else a.dtype
    out = reduce_sum(convert_element_type(x, comp), range(a.ndim))
    return convert_element_type(out, a.dtype)


def reshape(x, shape):
    return shp.reshape_p.bind(x, shape=tuple(shape))


def transpose(x, permutation):
    return shp.transpose_p.bind(x, permutation=tuple(permutation))


def pad(x, padding_value, padding_config):
    return shp.pad_p.bind(x, padding_value, padding_config=tuple(padding_config))


def slice(x, start_indices, limit_indices, strides=None):
    params = {"start_indices": tuple(start_indices), "limit_indices": tuple(limit_indices)}
    if strides is not None:
        params["strides"] = tuple(strides)
    return shp.slice_p.bind(x, **params)


def concatenate(xs, dimension):
    return shp.concatenate_p.bind(*xs, dimension=dimension)


def rev(x, dimensions):
    return shp.rev_p.bind(x, dimensions=tuple(dimensions))


def iota(dtype, shape, dimension=0):
    return shp.iota_p.bind(dtype=dtype, shape=tuple(shape), dimension=dimension)
