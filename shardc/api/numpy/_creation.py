"""Array creation in shardc.numpy: zeros ones full *_like arange eye iota asarray."""
from __future__ import annotations

import operator

import jax
import numpy as np
from jax.sharding import PartitionSpec

from ...trace import core, types
from ...ir import dtypes
from ...errors import ArgumentError, ShardcError, ShardcTypeError
from ...ir.program import Aval, Lit
from ...ops import elementwise as ew
from ...ops import shape as shp
from ._util import aval, broadcast_to, canonical_dtype, convert, is_py_scalar


def _shape(shape):
    if isinstance(shape, int) or np.ndim(shape) == 0:
        shape = (shape,)
    try:
        shape = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise ShardcError(f"shapes must be static Python ints, got {shape}") from None
    if any(d < 0 for d in shape):
        raise ShardcTypeError(f"shapes must not have negative sizes, got {shape}")
    return shape


def _weak_scalar(x) -> bool:
    """A Python bool, int, float or complex: jnp makes it a weakly typed array."""
    return is_py_scalar(x) or type(x) is complex


def full(shape, fill_value, dtype=None, *, device=None, out_sharding=None):
    return _place(_full(shape, fill_value, dtype), device, out_sharding, "full")


def _full(shape, fill_value, dtype=None):
    shape = _shape(shape)
    if dtype is None:
        fa = aval(fill_value)
        dt, weak = fa.dtype, fa.weak
    else:
        dt, weak = canonical_dtype(dtype), False
    if _weak_scalar(fill_value) or isinstance(fill_value, (np.generic, Lit)) or \
            (isinstance(fill_value, np.ndarray) and fill_value.ndim == 0):
        v = fill_value.value if isinstance(fill_value, Lit) else fill_value
        if not shape:
            from ...ops.special import constant_p
            params = {"value": np.asarray(v, dt)}
            if weak:
                params["weak_type"] = True
            return constant_p.bind(**params)
        lit = Lit(core._scalar(v, dt), Aval((), dt, weak))
        return shp.broadcast_in_dim_p.bind(lit, shape=shape, broadcast_dimensions=())
    return broadcast_to(convert(fill_value, dt, weak), shape)


def zeros(shape, dtype=None, *, device=None, out_sharding=None):
    return _place(_full(shape, 0, canonical_dtype(dtype) or dtypes.default_float()), device,
                  out_sharding, "zeros")


def ones(shape, dtype=None, *, device=None, out_sharding=None):
    return _place(_full(shape, 1, canonical_dtype(dtype) or dtypes.default_float()), device,
                  out_sharding, "ones")


def empty(shape, dtype=None, *, device=None, out_sharding=None):
    """zeros (XLA has no uninitialized arrays)."""
    return _place(zeros(shape, dtype), device, out_sharding, "empty")


def full_like(a, fill_value, dtype=None, shape=None, *, device=None, out_sharding=None):
    """As lax.full_like: without a dtype, the result has a's dtype and weak type."""
    return _place(_full_like(a, fill_value, dtype, shape), device, out_sharding, "full_like")


def _full_like(a, fill_value, dtype=None, shape=None):
    out = _full_like_untyped(a, fill_value, dtype, shape)
    ts = aval(a).ts
    if ts is not None and core.is_tracer(out) and aval(out).shape == aval(a).shape:
        # explicit mode: a *_like array has its prototype's type, sharding included (jax)
        from ...ops.special import sharding_constraint_p
        out = sharding_constraint_p.bind(out, sharding=ts, reshard=True)
        out.value.sharding = ts
    return out


def _full_like_untyped(a, fill_value, dtype=None, shape=None):
    x = aval(a)
    shape = x.shape if shape is None else shape
    if dtype is not None:
        return full(shape, fill_value, dtype)
    if is_py_scalar(fill_value) or isinstance(fill_value, (np.generic, np.ndarray)):
        v = np.asarray(fill_value).item() if not is_py_scalar(fill_value) else fill_value
        return full(shape, Lit(core._scalar(v, x.dtype), Aval((), x.dtype, x.weak)))
    return full(shape, convert(fill_value, x.dtype, x.weak))


def zeros_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
    return _place(_full_like(a, 0, dtype, shape), device, out_sharding, "zeros_like")


def ones_like(a, dtype=None, shape=None, *, device=None, out_sharding=None):
    return _place(_full_like(a, 1, dtype, shape), device, out_sharding, "ones_like")


def empty_like(prototype, dtype=None, shape=None, *, device=None):
    return zeros_like(prototype, dtype, shape, device=device)


def iota(dtype, size, dimension=0, shape=None):
    """0, 1, ..., size-1 (lax.iota); with `shape`, counts along `dimension`."""
    dt = canonical_dtype(dtype)
    shape = _shape(shape) if shape is not None else (int(size),)
    return shp.iota_p.bind(dtype=dt, shape=shape, dimension=dimension)


def arange(start, stop=None, step=None, dtype=None, *, device=None, out_sharding=None):
    """Static ranges only: an iota, scaled and shifted."""
    return _place(_arange(start, stop, step, dtype), device, out_sharding, "arange",
                  typed=True)


def _arange(start, stop=None, step=None, dtype=None):
    for v in (start, stop, step):
        if v is not None and (core.is_tracer(v) or isinstance(v, jax.Array)):
            raise ShardcError("arange needs static Python numbers (its length decides the "
                              "shape); pass them as static arguments")
    if stop is None:
        start, stop = 0, start
    step = 1 if step is None else step
    if step == 0:
        raise ShardcError("arange: step must not be zero")
    n = max(int(np.ceil((stop - start) / step)), 0)
    if dtype is None:
        is_int = all(isinstance(v, (int, np.integer)) for v in (start, stop, step))
        dt = dtypes.default_int() if is_int else dtypes.default_float()
    else:
        dt = canonical_dtype(dtype)
    out = shp.iota_p.bind(dtype=dt, shape=(n,), dimension=0)
    if step != 1:
        out = ew.mul_p.bind(out, Lit(core._scalar(step, dt), Aval((), dt, True)))
    if start != 0:
        out = ew.add_p.bind(out, Lit(core._scalar(start, dt), Aval((), dt, True)))
    return out


def eye(N, M=None, k=0, dtype=None, *, device=None):
    return _place(_eye(N, M, k, dtype), device, None, "eye", typed=True)


def _eye(N, M=None, k=0, dtype=None):
    n, m = operator.index(N), None if M is None else operator.index(M)
    if n < 0 or (m is not None and m < 0):
        raise ArgumentError(f"negative dimensions are not allowed, got {N} and {M}")
    M = N if M is None else M
    dt = canonical_dtype(dtype) or dtypes.default_float()
    it = dtypes.default_int()
    rows = shp.iota_p.bind(dtype=it, shape=(N, M), dimension=0)
    cols = shp.iota_p.bind(dtype=it, shape=(N, M), dimension=1)
    if k:
        rows = ew.add_p.bind(rows, Lit(int(k), Aval((), it, True)))
    return convert(ew.eq_p.bind(rows, cols), dt)


def identity(n, dtype=None):
    return eye(n, dtype=dtype)


def asarray(a, dtype=None, order=None, *, copy=None, device=None, out_sharding=None):
    """An array: traced values stay traced; anything else becomes a jax.Array."""
    return _place(_asarray(a, dtype, order), device, out_sharding, "asarray", convert=True)


def _asarray(a, dtype=None, order=None):
    if order not in (None, "C", "K", "A"):
        raise ShardcError(f"asarray: only order='C' (or 'K', 'A') is supported, got "
                          f"{order!r}")
    dt = canonical_dtype(dtype)
    if core.is_tracer(a) or isinstance(a, Lit):
        return convert(a, dt) if dt is not None else a
    if isinstance(a, (list, tuple)) and any(core.is_tracer(x) for x in _flat(a)):
        from ._shapes import stack
        out = stack([asarray(x) for x in a])
        return convert(out, dt) if dt is not None else out
    if isinstance(a, jax.Array):
        return a if dt is None or a.dtype == dt else convert(a, dt)
    if dt is None and _weak_scalar(a):      # weakly typed, as jnp.asarray(2) and (1j)
        return full((), a)
    arr = np.asarray(a, dtype=dtype)
    if arr.dtype == object:
        raise ShardcError("asarray: could not convert the input to an array")
    cdt = dtypes.canonicalize(arr.dtype)
    if cdt != arr.dtype and cdt.kind in "iu" and isinstance(a, (list, tuple)):
        _check_int_range(a, cdt)
    arr = arr.astype(cdt, copy=False)
    if core.current_builder() is not None:
        from ...ops.special import constant_p
        return constant_p.bind(value=arr)
    return jax.device_put(arr)


def _check_int_range(a, dt):
    """A Python list's integers must fit the (narrowed) dtype: jnp.asarray raises where
    the cast to int32 wrapped them silently."""
    info = np.iinfo(dt)
    for x in _flat(a):
        if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)) \
                and not info.min <= int(x) <= info.max:
            raise OverflowError(f"Python integer {int(x)} out of bounds for {dt}")


def array(object, dtype=None, *, copy=True, order="K", ndmin=0, device=None,
          out_sharding=None):
    """As jnp.array: an array of `object`, with at least `ndmin` dims (leading ones)."""
    out = asarray(object, dtype, None if order == "K" else order)
    n = aval(out).ndim
    if ndmin > n:
        from ._shapes import reshape
        out = reshape(out, (1,) * (ndmin - n) + aval(out).shape)
    return _place(out, device, out_sharding, "array", convert=True)


def _flat(xs):
    for x in xs:
        if isinstance(x, (list, tuple)):
            yield from _flat(x)
        else:
            yield x


def _place(x, device, out_sharding, name, convert=False, typed=False):
    """`device=` / `out_sharding=` of a creation op, as jnp's: outside a trace the result
    is put (committed) on the device or sharding. Inside one, out_sharding= types the
    result (Explicit axes); device= is ignored by jnp's creation ops under jax.jit (the
    program's propagation decides), while a conversion (`convert`: asarray, array,
    astype) constrains its result to a device= sharding, as jnp's convert_element_type
    does under jax.jit (on any axes; linspace too). `typed` (arange and eye, which jnp makes as
    constants and device_puts): on a mesh with Explicit axes device= is their type."""
    if device is None and out_sharding is None:
        return x
    if device is not None and out_sharding is not None:
        raise ArgumentError(f"{name}: Only one of `device` or `out_sharding` can be set. "
                            f"Got {device=} and {out_sharding=}")
    from ..explicit import apply_out_sharding
    if out_sharding is not None:
        return apply_out_sharding(x, out_sharding, f"{name}'s out_sharding")
    if isinstance(device, jax.Device):
        device = jax.sharding.SingleDeviceSharding(device)
    if not isinstance(device, (jax.sharding.Sharding, PartitionSpec)):
        raise ArgumentError(f"{name}: device= takes a jax Device or Sharding, got "
                            f"{type(device).__name__}")
    if core.is_tracer(x):
        if typed and isinstance(device, jax.sharding.NamedSharding) and \
                types.explicit_axes_of(core.current_builder()):
            convert = True
        if not convert or isinstance(device, jax.sharding.SingleDeviceSharding):
            return x
        return apply_out_sharding(x, device, f"{name}'s device", check=False)
    from ..device import device_put
    return device_put(x, device)
