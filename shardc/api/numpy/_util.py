"""Argument handling shared by shardc.numpy: dtype promotion and NumPy broadcasting."""
from __future__ import annotations

import numpy as np

from ...trace import core
from ...ir import dtypes
from ...errors import ArgumentError, ShardcError, ShardcTypeError
from ...ir.program import Aval, Lit
from ...ops import lax as _lax
from ...ops import shape as shp



is_py_scalar = _lax.is_py_scalar


_Tracer = core.Tracer
_ARRAYS = core._ARRAY_TYPES     # jax.Array's concrete classes (filled as they are seen)
_JAX_AVALS = core._JAX_AVALS


def aval(x) -> Aval:
    """x's abstract value; a Python bool is strongly typed (jax has no weak bool)."""
    t = type(x)
    if t is _Tracer:       # the common case while tracing
        return x.value.aval
    if t in _ARRAYS:       # ... and eagerly: jax's interned aval -> ours (core.aval_of)
        a = _JAX_AVALS.get(x.aval)
        if a is not None:
            return a
    if isinstance(x, Lit):
        return x.aval
    if isinstance(x, bool):
        return Aval((), dtypes.bool_, False)
    return core.aval_of(x)


def shape(x):
    return aval(x).shape


def ndim(x):
    return len(aval(x).shape)


def check_arraylike(name, *xs):
    for x in xs:
        if type(x) is _Tracer:
            continue
        if isinstance(x, (list, tuple)):
            raise ShardcTypeError(f"{name} requires array arguments; got a "
                                  f"{type(x).__name__}. Use shardc.numpy.asarray(...) first")
        if isinstance(x, str) or x is None:
            raise ShardcTypeError(f"{name} requires array arguments; got {x!r}")


def convert(x, dtype, weak=False):
    """x as `dtype` (a no-op if it already is)."""
    return _lax.convert_element_type(x, dtype, weak)


def as_lit(x):
    """Python scalars become typed literals (weak, as JAX types them)."""
    if is_py_scalar(x):
        a = aval(x)
        return Lit(core._scalar(x, a.dtype), a)
    return x


def result_type(*xs):
    return dtypes.promote(*[(a.dtype, a.weak) for a in map(aval, xs)])


def const_like(x, value):
    """A strongly typed scalar of x's dtype (jnp's _constant_like)."""
    dt = aval(x).dtype
    return Lit(core._scalar(value, dt), Aval((), dt, False))


def lax_const(x, value):
    """lax._const: weak if x is a weakly typed scalar, else strongly typed."""
    a = aval(x)
    return Lit(core._scalar(value, a.dtype), Aval((), a.dtype, a.weak and a.ndim == 0))


def zero_scalar(x):
    """lax._zero: a rank-0 zero of x's dtype and weak type."""
    a = aval(x)
    return Lit(core._scalar(0, a.dtype), Aval((), a.dtype, a.weak))


def promote_dtypes(*xs):
    """Convert all arguments to their common (JAX-promoted) dtype."""
    if len(xs) == 1:
        return [as_lit(xs[0])]
    if all(type(x) is _Tracer or type(x) in _ARRAYS for x in xs):
        # traced values or jax.Arrays already alike: as they are
        a, *rest = map(aval, xs)
        # (weak bools are the exception: jax's result of several is a strong bool)
        if all(b.dtype == a.dtype and b.weak == a.weak for b in rest) \
                and not (a.weak and a.dtype == dtypes.bool_):
            return list(xs)
    dt, weak = result_type(*xs)
    return [convert(as_lit(x), dt, weak) for x in xs]


def promote_dtypes_inexact(*xs):
    """As promote_dtypes, but integers and bools become the default float."""
    dt, weak = result_type(*xs)
    if not dtypes.is_inexact(dt):
        dt = dtypes.default_float()
    return [convert(as_lit(x), dt, weak) for x in xs]


def promote_dtypes_numeric(*xs):
    dt, weak = result_type(*xs)
    if dt == dtypes.bool_:
        dt, weak = dtypes.default_int(), weak
    return [convert(as_lit(x), dt, weak) for x in xs]


def broadcast_shapes(name, *shapes):
    rank = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(rank):
        sizes = {s[i - rank + len(s)] for s in shapes if i - rank + len(s) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            raise ArgumentError(f"{name}: shapes {' and '.join(str(tuple(s)) for s in shapes)} "
                              "cannot be broadcast together")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_to(x, target):
    """x broadcast (NumPy rules) to `target` with one broadcast_in_dim."""
    s = shape(x)
    target = tuple(target)
    if s == target:
        return x
    if len(s) > len(target):
        raise ArgumentError(f"cannot broadcast shape {s} to {target}")
    lead = len(target) - len(s)
    for i, n in enumerate(s):
        if n not in (1, target[lead + i]):
            raise ArgumentError(f"cannot broadcast shape {s} to {target}")
    if isinstance(x, Lit) or is_py_scalar(x):
        x = as_lit(x)
    return shp.broadcast_in_dim_p.bind(x, shape=target,
                                       broadcast_dimensions=tuple(range(lead, len(target))))


def promote_shapes(name, *xs):
    """Broadcast non-scalar arguments to one shape; rank-0 ones stay scalars (as jnp)."""
    shapes = [aval(x).shape for x in xs]
    nonscalar = [s for s in shapes if s]
    if not nonscalar or all(s == nonscalar[0] for s in nonscalar):
        return list(xs)
    if len({len(s) for s in nonscalar}) > 1:
        _rank_promotion(name, shapes)
    target = broadcast_shapes(name, *shapes)
    return [x if not s else broadcast_to(x, target) for x, s in zip(xs, shapes)]


def _rank_promotion(name, shapes):
    """jax_numpy_rank_promotion='warn' / 'raise': jax's warning or error."""
    from jax._src.config import numpy_rank_promotion
    how = numpy_rank_promotion.value
    if how == "allow":
        return
    shapes = " ".join(map(str, shapes))
    if how == "warn":
        import warnings
        warnings.warn(f"Following NumPy automatic rank promotion for {name} on shapes {shapes}. "
                      "Set the jax_numpy_rank_promotion config option to 'allow' to disable "
                      "this warning; for more information, see "
                      "https://docs.jax.dev/en/latest/rank_promotion_warning.html.",
                      stacklevel=2)
        return
    raise ArgumentError(f"Operands could not be broadcast together for {name} on shapes "
                      f"{shapes} and with the config option jax_numpy_rank_promotion='raise'. "
                      "For more information, see "
                      "https://docs.jax.dev/en/latest/rank_promotion_warning.html.")


def promote_args(name, *xs):
    if len(xs) == 2:
        # the common call: two arrays (or traced values) of one type need nothing
        x, y = xs
        tx, ty = type(x), type(y)
        if (tx is _Tracer or tx in _ARRAYS) and (ty is _Tracer or ty in _ARRAYS):
            a, b = aval(x), aval(y)
            if a is b and not (a.weak and a.dtype == dtypes.bool_):
                return [x, y]
    check_arraylike(name, *xs)
    return promote_shapes(name, *promote_dtypes(*xs))


def promote_args_inexact(name, *xs):
    check_arraylike(name, *xs)
    return promote_shapes(name, *promote_dtypes_inexact(*xs))


def promote_args_numeric(name, *xs):
    check_arraylike(name, *xs)
    return promote_shapes(name, *promote_dtypes_numeric(*xs))


def canonical_dtype(dtype):
    if dtype is None:
        return None
    if dtype is float:
        return dtypes.default_float()
    if dtype is int:
        return dtypes.default_int()
    if dtype is bool:
        return dtypes.bool_
    if dtype is complex:
        return dtypes.default_complex()
    try:
        return dtypes.canonicalize(np.dtype(dtype))
    except TypeError as e:
        raise ShardcError(str(e)) from None


def default_fill(dt):
    """jax's fill for out-of-bounds reads: NaN (complex too), True, or the most negative
    (signed) or largest (unsigned) int."""
    if dtypes.is_inexact(dt):
        return np.nan
    if dt == dtypes.bool_:
        return True
    return np.iinfo(dt).min if dtypes.is_signed(dt) else np.iinfo(dt).max


def index_for_dim(idx, n):
    """An integer index (traced, or NumPy and kept so) into a dim of size `n`, in a dtype
    that holds n: one too narrow for the arithmetic with n (i + n for a negative one, a
    comparison with n, a clamp to n - 1: in int8, 300 wraps to 44) is widened to int32
    (int64 past 2**31 - 1), as jax's index_dtype_for_axis_size. Values are unchanged."""
    dt = aval(idx).dtype
    if not dtypes.is_int(dt) or dtypes.iinfo(dt).max >= n:
        return idx
    wide = dtypes.int32 if n <= np.iinfo(np.int32).max else dtypes.default_int()
    if isinstance(idx, (np.ndarray, np.generic)):
        return np.asarray(idx).astype(wide)
    return convert(idx, wide)
