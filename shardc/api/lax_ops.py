"""jax.lax's functions over shardc's primitives, with jax.lax's semantics: no dtype
promotion (operands must share a dtype; a Python scalar is a weakly typed value of its
own kind, as in jax, so lax.add(f32 array, 2) is an error and lax.add(x, 2.0) is not),
rank-0 operands broadcast, and jax's error for everything else."""
from __future__ import annotations

import builtins
import math
import operator

import numpy as np

from ..errors import ShardcError, ShardcTypeError, wrap_public
from ..ir import dtypes
from ..ir.program import Lit
from ..ops import elementwise as ew
from ..ops import powers as pw
from .explicit import takes_out_sharding
from ..ops import shape as shp
from ..trace import core
from .numpy._util import as_lit, aval, canonical_dtype, convert, is_py_scalar


def _arr(x):
    """A Python scalar as a weakly typed literal of its kind (jax's lax.asarray)."""
    if is_py_scalar(x) or isinstance(x, (np.generic, np.ndarray)) and np.ndim(x) == 0 \
            and not isinstance(x, np.ndarray):
        return as_lit(x)
    if isinstance(x, (list, tuple)):
        raise ShardcTypeError(f"lax functions take arrays, got a {type(x).__name__}")
    return x


def _no_accuracy(name, accuracy):
    if accuracy is not None:
        raise ShardcError(f"lax.{name}: accuracy= is not supported")


def _same(name, *xs):
    """Operands of one dtype; rank-0 ones broadcast to the others' shape."""
    xs = [_arr(x) for x in xs]
    avs = [aval(x) for x in xs]
    dts = {a.dtype for a in avs}
    if len(dts) > 1:
        raise ShardcTypeError(f"lax.{name} requires arguments to have the same dtypes, got "
                              f"{', '.join(str(a.dtype) for a in avs)}. (Tip: "
                              f"shardc.numpy.{name} is a similar function that does "
                              "automatic type promotion on inputs).")
    shapes = {a.shape for a in avs if a.shape}
    if len(shapes) > 1:
        raise ShardcTypeError(f"lax.{name} got incompatible shapes for broadcasting: "
                              f"{', '.join(str(a.shape) for a in avs)}.")
    if shapes:
        (target,) = shapes
        xs = [x if a.shape or isinstance(x, Lit) else
              shp.broadcast_in_dim_p.bind(x, shape=target, broadcast_dimensions=())
              for x, a in zip(xs, avs)]
    return xs


def _unary(prim, name, accuracy=False):
    if accuracy:
        def f(x, *, accuracy=None):
            _no_accuracy(name, accuracy)
            return prim.bind(_arr(x))
    else:
        def f(x):
            return prim.bind(_arr(x))
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Elementwise {name} (as jax.lax.{name}; no type promotion)."
    return f


def _binary(prim, name):
    def f(x, y):
        return prim.bind(*_same(name, x, y))
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"Elementwise {name} (as jax.lax.{name}; no type promotion)."
    return f


neg, abs, sign = (_unary(p, n) for p, n in ((ew.neg_p, "neg"), (ew.abs_p, "abs"),
                                             (ew.sign_p, "sign")))
floor, ceil, is_finite = (_unary(p, n) for p, n in ((ew.floor_p, "floor"), (ew.ceil_p, "ceil"),
                                                     (ew.is_finite_p, "is_finite")))
exp, log, log1p, expm1 = (_unary(p, n, True) for p, n in (
    (ew.exp_p, "exp"), (ew.log_p, "log"), (ew.log1p_p, "log1p"), (ew.expm1_p, "expm1")))
sqrt, rsqrt, sin, cos, tan, tanh, logistic = (_unary(p, n, True) for p, n in (
    (ew.sqrt_p, "sqrt"), (ew.rsqrt_p, "rsqrt"), (ew.sin_p, "sin"), (ew.cos_p, "cos"),
    (ew.tan_p, "tan"), (ew.tanh_p, "tanh"), (ew.logistic_p, "logistic")))
asin, acos, atan, sinh, cosh, erf, erfc = (_unary(p, n) for p, n in (
    (ew.asin_p, "asin"), (ew.acos_p, "acos"), (ew.atan_p, "atan"), (ew.sinh_p, "sinh"),
    (ew.cosh_p, "cosh"), (ew.erf_p, "erf"), (ew.erfc_p, "erfc")))
bitwise_not = _unary(ew.not_p, "bitwise_not")
add, sub, div, rem = (_binary(p, n) for p, n in ((ew.add_p, "add"), (ew.sub_p, "sub"),
                                                 (ew.div_p, "div"), (ew.rem_p, "rem")))
max, min, atan2 = (_binary(p, n) for p, n in ((ew.max_p, "max"), (ew.min_p, "min"),
                                              (ew.atan2_p, "atan2")))
bitwise_and, bitwise_or, bitwise_xor = (_binary(p, n) for p, n in (
    (ew.and_p, "bitwise_and"), (ew.or_p, "bitwise_or"), (ew.xor_p, "bitwise_xor")))
shift_left, shift_right_logical, shift_right_arithmetic = (_binary(p, n) for p, n in (
    (ew.shift_left_p, "shift_left"), (ew.shift_right_logical_p, "shift_right_logical"),
    (ew.shift_right_arithmetic_p, "shift_right_arithmetic")))
eq, ne, lt, le, gt, ge = (_binary(p, n) for p, n in (
    (ew.eq_p, "eq"), (ew.ne_p, "ne"), (ew.lt_p, "lt"), (ew.le_p, "le"), (ew.gt_p, "gt"),
    (ew.ge_p, "ge")))


def mul(x, y, *, out_dtype=None):
    if out_dtype is not None:
        raise ShardcError("lax.mul: out_dtype= is not supported")
    return ew.mul_p.bind(*_same("mul", x, y))


def pow(x, y):
    """x ** y: a float base with a float or integer exponent (as jax.lax.pow)."""
    x, y = _arr(x), _arr(y)
    if dtypes.is_int(aval(y).dtype) or aval(x).dtype == aval(y).dtype:
        xs = [x, y]
        s = {aval(v).shape for v in xs if aval(v).shape}
        if len(s) > 1:
            raise ShardcTypeError(f"lax.pow got incompatible shapes: {aval(x).shape}, "
                                  f"{aval(y).shape}")
        return ew.pow_p.bind(x, y)
    raise ShardcTypeError(f"lax.pow requires an exponent of the base's dtype or an integer, "
                          f"got {aval(x).dtype} and {aval(y).dtype}")


def integer_pow(x, y):
    return pw.integer_pow_p.bind(_arr(x), y=operator.index(y))


def square(x):
    return pw.square_p.bind(_arr(x))


def reciprocal(x):
    return pw.integer_pow_p.bind(_arr(x), y=-1)


def _via_numpy(name):
    """Inverse hyperbolics: the shardc.numpy composites, without promotion."""
    def f(x):
        x = _arr(x)
        if not dtypes.is_inexact(aval(x).dtype):
            raise ShardcTypeError(f"{name} does not accept dtype {aval(x).dtype}. Accepted "
                                  "dtypes are subtypes of floating, complexfloating.")
        from .numpy import _math
        return getattr(_math, name)(x)
    f.__name__ = f.__qualname__ = name
    return f


asinh, acosh, atanh = _via_numpy("asinh"), _via_numpy("acosh"), _via_numpy("atanh")


class RoundingMethod:
    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x, rounding_method=RoundingMethod.AWAY_FROM_ZERO):
    x = _arr(x)
    rm = int(getattr(rounding_method, "value", rounding_method))
    return (ew.round_afz_p if rm == 0 else ew.round_p).bind(x)


def select_n(which, *cases):
    """cases[which] elementwise; `which` is a bool (two cases) or an int32 array."""
    if not cases:
        raise ShardcError("select_n() must have at least one case")
    cases = _same("select_n", *cases)
    which = _arr(which)
    wa = aval(which)
    if wa.dtype == dtypes.bool_ and len(cases) > 2:
        raise ShardcTypeError("select_n with a boolean predicate takes at most two cases")
    if wa.dtype == dtypes.bool_:
        return ew.select_p.bind(which, *cases[::-1]) if len(cases) == 2 else cases[0]
    out = cases[0]
    for i, c in enumerate(cases[1:], 1):
        out = ew.select_p.bind(ew.eq_p.bind(which, Lit(core._scalar(i, wa.dtype),
                                                        wa.update(shape=(), weak=False))),
                               c, out)
    return out


def clamp(min, x, max):
    """min <= x <= max elementwise; min and max may be rank-0 (as jax.lax.clamp)."""
    x = _arr(x)
    lo, hi = _same("clamp", min, x)[0], _same("clamp", max, x)[0]
    return ew.clamp_p.bind(lo, x, hi)




def convert_element_type(operand, new_dtype):
    return convert(_arr(operand), canonical_dtype(new_dtype))


def dtype(x):
    from .numpy import _util
    if isinstance(x, (np.dtype, type, str)):
        return _util.canonical_dtype(x)
    return aval(_arr(x)).dtype


def _shape(s):
    return tuple(operator.index(d) for d in s)


def _full_sharding(s):
    """lax.full's `sharding`: it places the result outside a trace; inside one jax
    ignores a concrete sharding ("ignored in jitted mode") and pins an abstract one."""
    inside = core.current_builder() is not None
    return None if inside and getattr(s, "_is_concrete", False) else s


def full(shape, fill_value, dtype=None, *, sharding=None):
    from .numpy._creation import full as _full
    return _full(_shape(shape), fill_value, dtype, out_sharding=_full_sharding(sharding))


def full_like(x, fill_value, dtype=None, shape=None, sharding=None):
    from .numpy._creation import full_like as _fl
    return _fl(x, fill_value, dtype, shape, out_sharding=_full_sharding(sharding))


def empty(shape, dtype, *, out_sharding=None):
    from .numpy._creation import zeros       # (XLA's CPU gives jax's empty_p zeros too)
    return zeros(_shape(np.atleast_1d(shape)), dtype, out_sharding=out_sharding)


def broadcast(operand, sizes, *, out_sharding=None):
    operand = _arr(operand)
    nd = aval(operand).ndim
    sizes = _shape(sizes)
    return shp.broadcast_in_dim_p.bind(operand, shape=sizes + aval(operand).shape,
                                       broadcast_dimensions=tuple(range(len(sizes),
                                                                        len(sizes) + nd)))


@takes_out_sharding
def broadcast_in_dim(operand, shape, broadcast_dimensions, *, out_sharding=None):
    operand = _arr(operand)
    shape, dims = _shape(shape), tuple(broadcast_dimensions)
    if aval(operand).shape == shape and dims == tuple(range(len(shape))):
        return operand
    return shp.broadcast_in_dim_p.bind(operand, shape=shape, broadcast_dimensions=dims)


def broadcast_to_rank(x, rank):
    x = _arr(x)
    nd = aval(x).ndim
    if nd == rank:
        return x
    return broadcast(x, (1,) * (rank - nd))


def broadcast_like(arr, like_arr):
    s, t = aval(arr).shape, aval(like_arr).shape
    return broadcast_in_dim(arr, t, tuple(range(len(t) - len(s), len(t))))


def broadcast_shapes(*shapes):
    try:
        return tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        raise ShardcTypeError(f"Incompatible shapes for broadcasting: shapes="
                              f"{[tuple(s) for s in shapes]}") from None


@takes_out_sharding
def reshape(operand, new_sizes, dimensions=None, *, out_sharding=None):
    operand = _arr(operand)
    if dimensions is not None and tuple(dimensions) != tuple(range(aval(operand).ndim)):
        operand = shp.transpose_p.bind(operand, permutation=tuple(dimensions))
    new = _shape(new_sizes)
    if aval(operand).shape == new:
        return operand
    return shp.reshape_p.bind(operand, shape=new)


def expand_dims(array, dimensions):
    array = _arr(array)
    s = list(aval(array).shape)
    n = len(s) + len(dimensions)
    dims = sorted(d % n for d in dimensions)
    for d in dims:
        s.insert(d, 1)
    return broadcast_in_dim(array, s, tuple(d for d in range(n) if d not in dims))


def squeeze(array, dimensions):
    array = _arr(array)
    s = aval(array).shape
    dims = {d % len(s) for d in dimensions} if s else set()
    for d in dims:
        if s[d] != 1:
            raise ShardcTypeError(f"cannot select an axis to squeeze out which has size not "
                                  f"equal to one, got shape={s} and dimensions={dimensions}")
    return reshape(array, tuple(n for d, n in enumerate(s) if d not in dims))


def collapse(operand, start_dimension, stop_dimension=None):
    s = aval(operand).shape
    lo = start_dimension % len(s) if s else 0
    hi = len(s) if stop_dimension is None else (stop_dimension if stop_dimension >= 0 else
                                                stop_dimension + len(s))
    return reshape(operand, s[:lo] + (math.prod(s[lo:hi]),) + s[hi:])


def rev(operand, dimensions):
    dims = tuple(dimensions)
    return shp.rev_p.bind(_arr(operand), dimensions=dims) if dims else operand


def slice_in_dim(operand, start_index, limit_index, stride=1, axis=0):
    s = aval(operand).shape
    axis = axis % len(s)
    start, stop, _ = builtins.slice(start_index, limit_index).indices(s[axis])
    starts, limits, strides = [0] * len(s), list(s), [1] * len(s)
    starts[axis], limits[axis], strides[axis] = start, builtins.max(start, stop), stride
    from . import lax as _lax
    return _lax.slice(operand, starts, limits, strides if stride != 1 else None)


def index_in_dim(operand, index, axis=0, keepdims=True):
    s = aval(operand).shape
    axis = axis % len(s)
    index = operator.index(index)
    if index < 0:
        index += s[axis]
    if not 0 <= index < s[axis]:
        raise ShardcError(f"index {index} is out of bounds for axis {axis} with size "
                          f"{s[axis]}")
    out = slice_in_dim(operand, index, index + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


def split(operand, sizes, axis=0):
    s = aval(operand).shape
    axis = axis % len(s)
    if builtins.sum(sizes) != s[axis]:
        raise ShardcError(f"Sum of sizes {builtins.sum(sizes)} must be equal to dimension "
                          f"{s[axis]} of the operand shape {s}")
    out, k = [], 0
    for n in sizes:
        out.append(slice_in_dim(operand, k, k + n, 1, axis))
        k += n
    return out


def tile(operand, reps):
    from .numpy._composite import tile as _tile
    reps = tuple(reps)
    if len(reps) != aval(operand).ndim:
        raise ShardcError(f"len(reps) must equal operand.ndim, got reps={reps} for "
                          f"operand.shape={aval(operand).shape}")
    return _tile(operand, reps)


def unstack(x, axis=0):
    s = aval(x).shape
    axis = axis % len(s)
    return tuple(index_in_dim(x, i, axis, keepdims=False) for i in range(s[axis]))


def stack(operands, axis=0):
    ops = [expand_dims(o, (axis,)) for o in operands]
    from . import lax as _lax
    return _lax.concatenate(ops, axis % aval(ops[0]).ndim)


# ---------------------------------------------------------------- dot

@takes_out_sharding
def dot(lhs, rhs, *, dimension_numbers=None, precision=None, preferred_element_type=None,
        out_sharding=None):
    from . import lax as _lax
    lhs, rhs = _arr(lhs), _arr(rhs)
    if dimension_numbers is not None:
        return _lax.dot_general(lhs, rhs, dimension_numbers, precision,
                                preferred_element_type)
    ln, rn = aval(lhs).ndim, aval(rhs).ndim
    if not (1 <= ln <= 2 and 1 <= rn <= 2) or aval(lhs).shape[-1] != aval(rhs).shape[0]:
        raise ShardcTypeError(f"Incompatible shapes for dot: got {aval(lhs).shape} and "
                              f"{aval(rhs).shape}.")
    return _lax.dot_general(lhs, rhs, (((ln - 1,), (0,)), ((), ())), precision,
                            preferred_element_type)


def batch_matmul(lhs, rhs, precision=None):
    from . import lax as _lax
    ln, rn = aval(lhs).ndim, aval(rhs).ndim
    if ln != rn or ln < 2:
        raise ShardcError(f"batch_matmul requires arguments of equal rank >= 2, got "
                          f"{aval(lhs).shape} and {aval(rhs).shape}")
    batch = tuple(range(ln - 2))
    return _lax.dot_general(lhs, rhs, (((ln - 1,), (rn - 2,)), (batch, batch)), precision)


# ---------------------------------------------------------------- misc

def platform_dependent(*args, default=None, **per_platform):
    """shardc compiles for CPU: the `cpu` branch if given, else `default`."""
    f = per_platform.get("cpu", default)
    if f is None:
        raise ShardcError("platform_dependent: no branch for cpu and no default")
    return f(*args)


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    """(low, high) paddings for 'SAME', 'SAME_LOWER' or 'VALID' windows, as jax's."""
    p = getattr(padding, "name", padding)
    p = p.upper() if isinstance(p, str) else p
    if p == "VALID":
        return [(0, 0)] * len(in_shape)
    if p not in ("SAME", "SAME_LOWER"):
        raise ShardcError(f"Unknown padding type: {padding}.")
    out = []
    for n, w, s in zip(in_shape, window_shape, window_strides):
        out_n = -(-n // s)
        total = builtins.max((out_n - 1) * s + w - n, 0)
        lo, hi = total // 2, total - total // 2
        out.append((hi, lo) if p == "SAME_LOWER" else (lo, hi))
    return out


wrap_public(globals())

__all__ = [n for n, v in list(globals().items()) if not n.startswith("_") and
           getattr(v, "__module__", None) == __name__]


def composite(decomposition, name, version=0):
    """jax.lax.composite's decorator: here the call is the decomposition, inlined."""
    import functools

    @functools.wraps(decomposition)
    def f(*args, **kwargs):
        return decomposition(*args, **kwargs)
    return f


def shape_as_value(shape):
    from .numpy._creation import asarray
    return asarray(np.array(_shape(shape), dtypes.default_int()))


__all__ += ["composite", "shape_as_value"]


DotDimensionNumbers = tuple      # jax's type aliases (for annotations)
PrecisionLike = object


def pshuffle(x, axis_name, perm):
    """Device i along axis_name gets device perm[i]'s block (ppermute, as jax's)."""
    if set(perm) != set(range(len(perm))):
        raise ShardcError(f"`perm` does not represent a permutation: {perm}")
    from .collectives import ppermute
    return ppermute(x, axis_name, list(zip(perm, range(len(perm)))))


wrap_public(globals())
__all__ += ["DotDimensionNumbers", "PrecisionLike", "pshuffle"]
