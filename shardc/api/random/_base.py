"""Keys and the basic samplers: key, PRNGKey, split, fold_in, bits, uniform, normal,
truncated_normal, bernoulli, randint (jax.random's algorithms, bit for bit)."""
from __future__ import annotations

import numpy as np

from ...errors import ArgumentError, ShardcTypeError
from ...ir import dtypes
from ...ops import lax as L
from ...ops.special_math import erf_inv_p
from ...trace import core
from .. import numpy as jnp
from . import _threefry as tf
from . import _impls
from ._keys import (KeyArray, as_output, is_typed_key, keys_bits, keys_fold_in, keys_of,
                    keys_split, make_typed)
from ._run import float_dtype, run, shape_of

U32 = tf.U32


# ---------------------------------------------------------------- keys

def _seed_arg(seed, name):
    if is_typed_key(seed):
        raise ShardcTypeError(f"{name} accepts a scalar seed, but was given a PRNG key.")
    if np.ndim(seed) if not core.is_tracer(seed) else seed.ndim:
        raise ShardcTypeError(
            f"{name} accepts a scalar seed, but was given an array of shape "
            f"{np.shape(seed) if not core.is_tracer(seed) else seed.shape} != (). "
            "Use jax.vmap for batching")
    if isinstance(seed, int) and not isinstance(seed, (bool, np.generic)):
        # as jax: a Python int goes through int64 (wrapping to int32 without x64)
        seed = np.asarray(np.int64(seed)).astype(dtypes.default_int())
    return seed


def _resolve_impl(impl, dtype=None):
    """Our PRNGImpl for an impl= or dtype= argument (jax's default when neither)."""
    if dtype is not None:
        if impl is not None:
            raise ArgumentError("Cannot specify both `impl` and `dtype` arguments")
        impl = dtype
    return _impls.resolve(impl)


def key(seed, *, impl=None, dtype=None):
    """A typed PRNG key (shape (), dtype key<fry>, key<rbg>, ...) from an integer seed."""
    impl = _resolve_impl(impl, dtype)
    return make_typed(KeyArray(run(impl.seed, _seed_arg(seed, "key")), impl))


def PRNGKey(seed, *, impl=None):
    """A raw key: uint32[2] (uint32[4] for rbg) from an integer seed."""
    return run(_resolve_impl(impl).seed, _seed_arg(seed, "PRNGKey"))


def key_data(keys):
    return keys_of(keys, "key_data", allow_batched=True)[0]._data


def wrap_key_data(key_bits_array, *, impl=None, dtype=None):
    impl = _resolve_impl(impl, dtype)
    if is_typed_key(key_bits_array):
        raise ShardcTypeError("wrap_key_data takes raw key data (uint32), got a typed key")
    a = L.aval(key_bits_array)
    if a.ndim < 1 or a.shape[-1] != impl.key_size or a.dtype != U32:
        raise ShardcTypeError(
            "JAX encountered invalid PRNG key data: expected key_data.shape to end with "
            f"({impl.key_size},) and dtype uint32; got {a.dtype}{list(a.shape)} for "
            f"impl={impl!r}")
    return make_typed(KeyArray(key_bits_array, impl))


def key_impl(keys):
    return keys_of(keys, "key_impl", allow_batched=True)[0].impl.name


def key_dtype(impl=None):
    return _impls.key_dtype(_resolve_impl(impl))


def default_prng_impl():
    return _resolve_impl(None).jax


def clone(key):
    return key


def _split(keys, shape):
    return keys_split(keys, shape)._data


def split(key, num=2):
    keys, typed = keys_of(key, "split")
    shape = tuple(num) if isinstance(num, (tuple, list)) else (int(num),)
    return as_output(KeyArray(run(_split, keys, shape=shape_of(shape)), keys.impl), typed)


def _fold_in(keys, msg):
    return keys_fold_in(keys, L.convert_element_type(msg, U32))._data


def fold_in(key, data):
    keys, typed = keys_of(key, "fold_in")
    if (data.ndim if core.is_tracer(data) else np.ndim(data)):
        raise ShardcTypeError("fold_in accepts a scalar, but was given an array of"
                              f"shape {jnp.shape(data)} != (). Use jax.vmap for batching.")
    if isinstance(data, int) and not isinstance(data, (bool, np.generic)):
        if not 0 <= data < 2 ** 32:     # as jnp.asarray(data, 'uint32')
            raise OverflowError(f"Python integer {data} out of bounds for uint32")
        data = np.uint32(data)
    return as_output(KeyArray(run(_fold_in, keys, data), keys.impl), typed)


def bits(key, shape=(), dtype=None, *, out_sharding=None):
    data, _ = keys_of(key, "bits")
    d = dtypes.canonicalize(np.uint64) if dtype is None else dtypes.canonicalize(dtype)
    if d.kind != "u":
        raise ArgumentError(f"dtype argument to `bits` must be an unsigned int dtype, got {d}")
    return _sharded(run(keys_bits, data, bit_width=d.itemsize * 8, shape=shape_of(shape)),
                    out_sharding)


def _sharded(x, out_sharding):
    if out_sharding is None:
        return x
    from ..explicit import apply_out_sharding
    return apply_out_sharding(x, out_sharding)


# ---------------------------------------------------------------- uniform & co

def _check_shape(name, shape, *param_shapes):
    if param_shapes:
        try:
            out = np.broadcast_shapes(shape, *param_shapes)
        except ValueError:
            raise ArgumentError(f"Incompatible shapes for broadcasting: shapes="
                                f"{[tuple(shape), *map(tuple, param_shapes)]}") from None
        if out != tuple(shape):
            raise ArgumentError(
                f"{name} parameter shapes must be broadcast-compatible with shape argument, "
                "and the result of broadcasting the shapes must equal the shape argument, "
                f"but got result {out} for shape argument {tuple(shape)}.")


def _to_rank(x, rank):
    nd = jnp.ndim(x)
    return jnp.reshape(x, (1,) * (rank - nd) + tuple(jnp.shape(x))) if nd < rank else x


def uniform_impl(data, minval, maxval, *, shape, dtype):
    _check_shape("uniform", shape)
    minval = _to_rank(L.convert_element_type(minval, dtype), len(shape))
    maxval = _to_rank(L.convert_element_type(maxval, dtype), len(shape))
    fi = jnp.finfo(dtype)
    nbits, nmant = fi.bits, fi.nmant
    rng_bits = 8 if nmant < 8 else nbits
    uint = np.dtype(f"uint{nbits}")
    b = keys_bits(data, rng_bits, shape)
    if rng_bits != nbits:
        b = L.convert_element_type(b, uint)
    fb = tf.bitor(tf.shr(b, rng_bits - nmant), np.array(1.0, dtype).view(uint).item())
    floats = L.sub(tf.bitcast(fb, dtype), 1.0)
    floats = L.convert_element_type(floats, dtype)
    return jnp.maximum(minval, jnp.add(jnp.multiply(floats, jnp.subtract(maxval, minval)),
                                       minval))


def uniform(key, shape=(), dtype=None, minval=0., maxval=1., *, out_sharding=None):
    data, _ = keys_of(key, "uniform")
    dtype = float_dtype(dtype, "uniform")
    return _sharded(run(uniform_impl, data, minval, maxval, shape=shape_of(shape),
                        dtype=dtype), out_sharding)


def _nextafter_const(x, toward, dtype):
    return np.nextafter(np.array(x, dtype), np.array(toward, dtype), dtype=dtype)


def normal_impl(data, *, shape, dtype):
    if dtypes.is_complex(dtype):        # (re + 1j im) / sqrt(2) from two keys, as jax's
        k = keys_split(data, (2,))
        real = dtypes.real_dtype(dtype)
        re, im = (L.convert_element_type(normal_impl(k[i], shape=shape, dtype=real), dtype)
                  for i in (0, 1))
        return jnp.divide(jnp.add(re, jnp.multiply(1j, im)), np.array(np.sqrt(2), dtype))
    _check_shape("normal", shape)
    lo = _nextafter_const(-1., 0., dtype)
    u = uniform_impl(data, lo, np.array(1., dtype), shape=shape, dtype=dtype)
    return jnp.multiply(np.array(np.sqrt(2), dtype), erf_inv_p.bind(u))


def normal(key, shape=(), dtype=None, *, out_sharding=None):
    data, _ = keys_of(key, "normal")
    dtype = dtypes.default_float() if dtype is None else dtypes.canonicalize(dtype)
    if not (dtypes.is_float(dtype) or dtypes.is_complex(dtype)):
        raise ArgumentError("dtype argument to `normal` must be a float or complex dtype, "
                            f"got {dtype}")
    return _sharded(run(normal_impl, data, shape=shape_of(shape), dtype=dtype), out_sharding)


def nextafter(x, y):
    """lax.nextafter on floats as chlo.next_after computes it, from bit arithmetic."""
    a = L.aval(x)
    uint = np.dtype(f"uint{a.dtype.itemsize * 8}")
    xb, yb = tf.bitcast(x, uint), tf.bitcast(y, uint)
    sign = L.full((), 1 << (a.dtype.itemsize * 8 - 1), uint)
    tiny = tf.bitor(jnp.bitwise_and(yb, sign), 1)
    away = jnp.equal(jnp.less(x, y), jnp.greater(x, 0))
    moved = jnp.where(away, jnp.add(xb, np.array(1, uint)), jnp.subtract(xb, np.array(1, uint)))
    out = jnp.where(jnp.equal(x, 0), tiny, moved)
    out = tf.bitcast(out, a.dtype)
    out = jnp.where(jnp.equal(x, y), y, out)
    return jnp.where(jnp.isnan(x) | jnp.isnan(y), np.array(np.nan, a.dtype), out)


def truncated_normal_impl(data, lower, upper, *, shape, dtype):
    if shape is None:
        shape = np.broadcast_shapes(jnp.shape(lower), jnp.shape(upper))
    else:
        _check_shape("truncated_normal", shape, jnp.shape(lower), jnp.shape(upper))
    sqrt2 = np.array(np.sqrt(2), dtype)
    lower = L.convert_element_type(lower, dtype)
    upper = L.convert_element_type(upper, dtype)
    a = jnp.erf(jnp.divide(lower, sqrt2))
    b = jnp.erf(jnp.divide(upper, sqrt2))
    u = uniform_impl(data, a, b, shape=shape, dtype=dtype)
    out = jnp.multiply(sqrt2, erf_inv_p.bind(u))
    from ...transforms.ad import stop_gradient
    lo = nextafter(stop_gradient(lower), L.full(jnp.shape(lower), np.inf, dtype))
    hi = nextafter(stop_gradient(upper), L.full(jnp.shape(upper), -np.inf, dtype))
    return jnp.clip(out, lo, hi)


def truncated_normal(key, lower, upper, shape=None, dtype=None, *, out_sharding=None):
    data, _ = keys_of(key, "truncated_normal")
    dtype = float_dtype(dtype, "truncated_normal")
    shape = None if shape is None else shape_of(shape)
    return _sharded(run(truncated_normal_impl, data, lower, upper, shape=shape, dtype=dtype),
                    out_sharding)


def bernoulli_impl(data, p, *, shape, mode):
    if shape is None:
        shape = jnp.shape(p)
    else:
        _check_shape("bernoulli", shape, jnp.shape(p))
    dtype = L.aval(p).dtype
    if mode == "high":
        u = uniform_impl(data, 0., 1., shape=(2, *shape), dtype=dtype)
        u1, u2 = u[0], u[1]
        u2 = jnp.multiply(u2, np.array(2 ** -jnp.finfo(dtype).nmant, dtype))
        return jnp.less(u2, jnp.subtract(p, u1))
    return jnp.less(uniform_impl(data, 0., 1., shape=shape, dtype=dtype), p)


def bernoulli(key, p=np.float32(0.5), shape=None, mode="low", *, out_sharding=None):
    if mode not in ("high", "low"):
        raise ArgumentError(f"got mode={mode!r}, expected 'high' or 'low'")
    data, _ = keys_of(key, "bernoulli")
    dt = L.aval(p).dtype
    if not dtypes.is_float(dt):
        raise ShardcTypeError(f"bernoulli probability `p` must have a floating dtype, got {dt}.")
    if not core.is_tracer(p):
        p = jnp.asarray(p, dt)
    shape = None if shape is None else shape_of(shape)
    return _sharded(run(bernoulli_impl, data, p, shape=shape, mode=mode), out_sharding)


def _clip_int(val, dtype):
    """val converted to integer `dtype`, clipped to its range rather than wrapped."""
    vd = L.aval(val).dtype
    lo = max(np.iinfo(dtype).min, np.iinfo(vd).min)
    hi = min(np.iinfo(dtype).max, np.iinfo(vd).max)
    return L.convert_element_type(jnp.clip(val, np.array(lo, vd), np.array(hi, vd)), dtype)


def randint_impl(data, minval, maxval, *, shape, dtype):
    _check_shape("randint", shape, jnp.shape(minval), jnp.shape(maxval))
    minval, maxval = jnp.asarray(minval), jnp.asarray(maxval)
    if not dtypes.is_int(L.aval(minval).dtype):
        minval = L.convert_element_type(minval, dtypes.default_int())
    if not dtypes.is_int(L.aval(maxval).dtype):
        maxval = L.convert_element_type(maxval, dtypes.default_int())
    top = _clip_int(L.full((), np.iinfo(dtype).max, dtype), L.aval(maxval).dtype)
    maxval_out_of_range = L.gt(L.convert_element_type(maxval, L.aval(maxval).dtype), top) \
        if not jnp.shape(maxval) else jnp.greater(maxval, top)
    minval = _to_rank(_clip_int(minval, dtype), len(shape))
    maxval = _to_rank(_clip_int(maxval, dtype), len(shape))
    nbits = np.iinfo(dtype).bits
    keys = keys_split(data, (2,))
    higher = keys_bits(keys[0], nbits, shape)
    lower = keys_bits(keys[1], nbits, shape)
    uint = np.dtype(f"uint{nbits}")
    span = L.convert_element_type(jnp.subtract(maxval, minval), uint)
    span = jnp.where(jnp.less_equal(maxval, minval), np.array(1, uint), span)
    span = jnp.where(jnp.logical_and(_to_rank(maxval_out_of_range, len(shape)),
                                     jnp.greater(maxval, minval)),
                     jnp.add(span, np.array(1, uint)), span)
    mult = jnp.remainder(np.array(2 ** (nbits // 2), uint), span)
    mult = jnp.remainder(jnp.multiply(mult, mult), span)
    off = jnp.add(jnp.multiply(jnp.remainder(higher, span), mult), jnp.remainder(lower, span))
    off = jnp.remainder(off, span)
    return jnp.add(minval, L.convert_element_type(off, dtype))


def randint(key, shape, minval, maxval, dtype=None, *, out_sharding=None):
    data, _ = keys_of(key, "randint")
    dtype = dtypes.default_int() if dtype is None else dtypes.canonicalize(dtype)
    if not dtypes.is_int(dtype):
        raise ShardcTypeError(f"randint only accepts integer dtypes, got {dtype}")
    info = np.iinfo(dtype)
    sampling = dtype
    if info.bits < 32:
        sampling = np.dtype(np.int32)
        minval = jnp.clip(jnp.asarray(minval).astype(np.int32), int(info.min), int(info.max))
        maxval = jnp.clip(jnp.asarray(maxval).astype(np.int32), int(info.min),
                          int(info.max) + 1)
    out = run(randint_impl, data, minval, maxval, shape=shape_of(shape), dtype=sampling)
    return _sharded(jnp.asarray(out).astype(dtype), out_sharding)
