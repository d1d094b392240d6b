"""Samplers built on uniform/normal, as jax.random's (same operations in the same
order and dtypes, so the values are bit-identical)."""
from __future__ import annotations

import numpy as np

from ...errors import ArgumentError, ShardcTypeError
from ...ir import dtypes
from ...ops import lax as L
from .. import numpy as jnp
from . import _threefry as tf
from ._base import _check_shape, _sharded, normal_impl, uniform_impl
from ._keys import keys_bits, keys_of, keys_split
from ._run import float_dtype, run, shape_of


def _finfo(dtype):
    return jnp.finfo(dtype)


def _c(v, dtype):
    return np.array(v, dtype)


def _bshape(name, shape, *args):
    """The sample shape: `shape` checked against the parameters', or theirs broadcast."""
    arg_shapes = [tuple(jnp.shape(a)) for a in args]
    if shape is None:
        return np.broadcast_shapes(*arg_shapes) if arg_shapes else ()
    shape = shape_of(shape)
    _check_shape(name, shape, *arg_shapes)
    return shape


def _simple(name, impl):
    """A sampler of signature (key, shape=(), dtype=None)."""
    def sampler(key, shape=(), dtype=None, *, out_sharding=None):
        data, _ = keys_of(key, name)
        dtype = float_dtype(dtype, name)
        return _sharded(run(impl, data, shape=shape_of(shape), dtype=dtype), out_sharding)
    sampler.__name__ = sampler.__qualname__ = name
    sampler.__doc__ = f"jax.random.{name}'s samples, bit for bit."
    return sampler


def exponential_impl(data, *, shape, dtype):
    u = uniform_impl(data, 0., 1., shape=shape, dtype=dtype)
    return jnp.negative(jnp.log1p(jnp.negative(u)))


def laplace_impl(data, *, shape, dtype):
    u = uniform_impl(data, -1. + float(_finfo(dtype).epsneg), 1., shape=shape, dtype=dtype)
    return jnp.multiply(jnp.sign(u), jnp.log1p(jnp.negative(jnp.abs(u))))


def logistic_impl(data, *, shape, dtype):
    x = uniform_impl(data, float(_finfo(dtype).tiny), 1., shape=shape, dtype=dtype)
    return jnp.subtract(jnp.log(x), jnp.log1p(jnp.negative(x)))


def cauchy_impl(data, *, shape, dtype):
    u = uniform_impl(data, float(_finfo(dtype).eps), 1., shape=shape, dtype=dtype)
    return jnp.tan(jnp.multiply(_c(np.pi, dtype), jnp.subtract(u, _c(0.5, dtype))))


exponential = _simple("exponential", exponential_impl)
laplace = _simple("laplace", laplace_impl)
logistic = _simple("logistic", logistic_impl)
cauchy = _simple("cauchy", cauchy_impl)


def _safe_int_to_float(bits):
    """A float32 in (0, 1) from 64 random bits (u32[2, ...]), keeping precision near 0
    (jax's _safe_int_to_float)."""
    from .. import lax as slax
    u32 = tf.U32
    hiclz, loclz = slax.clz(bits[0]), slax.clz(bits[1])
    hi, lo = bits[0], bits[1]
    wide = jnp.equal(hiclz, np.array(32, u32))
    mantissa = tf.bitor(tf.shl(hi, hiclz), jnp.where(wide, tf.shl(lo, loclz),
                                                     tf.shr(lo, jnp.subtract(32, hiclz))))
    mantissa = tf.shr(mantissa, np.array(32 - 23 - 1, u32))
    mantissa = jnp.bitwise_and(mantissa, np.array((1 << 23) - 1, u32))
    exp = tf.shl(jnp.subtract(126, jnp.where(wide, jnp.add(32, loclz), hiclz)),
                 np.array(23, u32))
    exp = jnp.bitwise_and(exp, np.array((1 << 30) - (1 << 22), u32))
    return tf.bitcast(tf.bitor(exp, mantissa), np.float32)


def _gumbel_highest(data, shape):
    u32 = tf.U32
    bits = keys_bits(data, 32, (2, *shape))
    neg = jnp.bitwise_not(bits)
    lo_bits = neg[1]
    carry = jnp.stack([L.convert_element_type(jnp.equal(lo_bits, np.array(0xFFFFFFFF, u32)),
                                              u32), jnp.ones_like(lo_bits)])
    neg = jnp.add(neg, carry)
    flip = jnp.less(bits[0], np.array(1 << 31, u32))
    x = _safe_int_to_float(jnp.where(flip, bits, neg))
    return jnp.where(flip, jnp.negative(jnp.log(jnp.negative(jnp.log1p(jnp.negative(x))))),
                     jnp.negative(jnp.log(jnp.negative(jnp.log(x)))))


def gumbel_impl(data, *, shape, dtype, mode):
    info = _finfo(dtype)
    if mode == "highest" and dtype == np.float32:
        return _gumbel_highest(data, shape)
    if mode == "low":
        u = uniform_impl(data, float(info.tiny), 1., shape=shape, dtype=dtype)
        return jnp.negative(jnp.log(jnp.negative(jnp.log(u))))
    hl = uniform_impl(data, 0., 1., shape=(2, *shape), dtype=dtype)
    high, low = hl[0], hl[1]
    x = jnp.where(jnp.greater_equal(high, 0.5), high,
                  jnp.add(jnp.add(high, jnp.multiply(_c(2 ** -int(info.nmant), dtype), low)),
                          _c(info.tiny, dtype)))
    return jnp.negative(jnp.log(jnp.negative(jnp.log1p(jnp.negative(x)))))


def gumbel(key, shape=(), dtype=None, mode=None, *, out_sharding=None):
    data, _ = keys_of(key, "gumbel")
    dtype = float_dtype(dtype, "gumbel")
    mode = "low" if mode is None else mode
    if mode not in ("highest", "high", "low"):
        raise ArgumentError(f"Must provide valid mode for gumbel got: {mode}")
    mode = "high" if mode == "highest" and dtype != np.float32 else mode
    return _sharded(run(gumbel_impl, data, shape=shape_of(shape), dtype=dtype, mode=mode),
                    out_sharding)


def categorical_impl(data, logits, *, shape, batch_shape, axis, mode):
    nd = jnp.ndim(logits)
    prefix = shape[:len(shape) - len(batch_shape)]
    if axis >= 0:
        axis -= nd
    logits_shape = list(shape[len(shape) - len(batch_shape):])
    logits_shape.insert(axis % nd, jnp.shape(logits)[axis])
    g = gumbel_impl(data, shape=(*prefix, *logits_shape), dtype=L.aval(logits).dtype,
                    mode=mode)
    lg = jnp.reshape(logits, (1,) * len(prefix) + tuple(jnp.shape(logits)))
    return jnp.argmax(jnp.add(g, lg), axis=axis)


def categorical(key, logits, axis=-1, shape=None, replace=True, mode=None, *,
                out_sharding=None):
    data, _ = keys_of(key, "categorical")
    logits = jnp.asarray(logits)
    lshape = tuple(jnp.shape(logits))
    batch_shape = tuple(int(d) for d in np.delete(lshape, axis))
    if shape is None:
        shape = batch_shape
    else:
        shape = shape_of(shape)
        _check_shape("categorical", shape, batch_shape)
    mode = "low" if mode is None else mode
    if not replace:
        from ._perm import categorical_noreplace_impl as impl
        axis = axis % len(lshape)
    else:
        impl = categorical_impl
    return _sharded(run(impl, data, logits, shape=shape, batch_shape=batch_shape,
                        axis=axis, mode=mode), out_sharding)


def _param_sampler(name, impl, nparams, defaults=()):
    """A sampler of signature (key, *params, shape=None, dtype=None)."""
    def sampler(key, *args, shape=None, dtype=None, out_sharding=None):
        args = list(args)
        # positional shape/dtype after the parameters, as jax's signatures
        if len(args) > nparams:
            extra = args[nparams:]
            args = args[:nparams]
            shape = extra[0]
            if len(extra) > 1:
                dtype = extra[1]
        while len(args) < nparams:
            args.append(defaults[len(args) - (nparams - len(defaults))])
        data, _ = keys_of(key, name)
        dtype = float_dtype(dtype, name)
        shape = _bshape(name, shape, *args)
        return _sharded(run(impl, data, *args, shape=shape, dtype=dtype), out_sharding)
    sampler.__name__ = sampler.__qualname__ = name
    sampler.__doc__ = f"jax.random.{name}'s samples, bit for bit."
    return sampler


def pareto_impl(data, b, *, shape, dtype):
    b = L.convert_element_type(b, dtype)
    return jnp.exp(jnp.divide(exponential_impl(data, shape=shape, dtype=dtype), b))


def rayleigh_impl(data, scale, *, shape, dtype):
    u = uniform_impl(data, 0., 1., shape=shape, dtype=dtype)
    scale = jnp.broadcast_to(L.convert_element_type(jnp.asarray(scale), dtype), shape)
    return jnp.multiply(scale, jnp.sqrt(jnp.multiply(jnp.log(u), _c(-2, dtype))))


def wald_impl(data, mean, *, shape, dtype):
    k = keys_split(data, (2,))
    mean = jnp.broadcast_to(L.convert_element_type(jnp.asarray(mean), dtype), shape)
    v = normal_impl(k[0], shape=shape, dtype=dtype)
    z = uniform_impl(k[1], 0., 1., shape=shape, dtype=dtype)
    y = L.integer_pow(v, 2)
    y_sq = L.integer_pow(y, 2)
    mean_sq = L.integer_pow(mean, 2)
    sqrt_term = jnp.sqrt(jnp.add(jnp.multiply(jnp.multiply(4, mean), y),
                                 jnp.multiply(mean_sq, y_sq)))
    x = jnp.subtract(jnp.add(mean, jnp.divide(jnp.multiply(mean_sq, y), 2)),
                     jnp.multiply(jnp.divide(mean, 2), sqrt_term))
    return jnp.where(jnp.less_equal(z, jnp.divide(mean, jnp.add(mean, x))), x,
                     jnp.divide(mean_sq, x))


def triangular_impl(data, left, mode, right, *, shape, dtype):
    left, mode, right = (jnp.broadcast_to(L.convert_element_type(jnp.asarray(v), dtype), shape)
                         for v in (left, mode, right))
    fc = jnp.divide(jnp.subtract(mode, left), jnp.subtract(right, left))
    u = uniform_impl(data, 0., 1., shape=shape, dtype=dtype)
    out1 = jnp.add(left, jnp.sqrt(jnp.multiply(jnp.multiply(u, jnp.subtract(right, left)),
                                               jnp.subtract(mode, left))))
    out2 = jnp.subtract(right, jnp.sqrt(jnp.multiply(
        jnp.multiply(jnp.subtract(1, u), jnp.subtract(right, left)),
        jnp.subtract(right, mode))))
    return jnp.where(jnp.less(u, fc), out1, out2)


def lognormal_impl(data, sigma, *, shape, dtype):
    sigma = L.convert_element_type(sigma, dtype)
    return jnp.exp(jnp.multiply(normal_impl(data, shape=shape, dtype=dtype), sigma))


pareto = _param_sampler("pareto", pareto_impl, 1)
rayleigh = _param_sampler("rayleigh", rayleigh_impl, 1)
wald = _param_sampler("wald", wald_impl, 1)
triangular = _param_sampler("triangular", triangular_impl, 3)
lognormal = _param_sampler("lognormal", lognormal_impl, 1, defaults=(np.float32(1),))


def geometric_impl(data, p, *, shape, dtype):
    p = jnp.asarray(p)
    if not dtypes.is_float(L.aval(p).dtype):
        p = L.convert_element_type(p, dtypes.default_float())
    pd = L.aval(p).dtype
    u = uniform_impl(data, 0., 1., shape=shape, dtype=pd)
    u = jnp.where(jnp.equal(u, 0), _c(1, pd), u)
    g = jnp.add(jnp.floor(jnp.divide(jnp.log(u), jnp.broadcast_to(jnp.log1p(jnp.negative(p)),
                                                                 shape))), 1)
    return L.convert_element_type(g, dtype)


def geometric(key, p, shape=None, dtype=None, *, out_sharding=None):
    data, _ = keys_of(key, "geometric")
    dtype = dtypes.default_int() if dtype is None else dtypes.canonicalize(dtype)
    if not dtypes.is_int(dtype):
        raise ArgumentError(f"dtype argument to `geometric` must be an int dtype, got {dtype}")
    shape = _bshape("geometric", shape, p)
    return _sharded(run(geometric_impl, data, p, shape=shape, dtype=dtype), out_sharding)


def weibull_min_impl(data, scale, concentration, *, shape, dtype):
    u = uniform_impl(data, 0, 1, shape=shape, dtype=dtype)
    return jnp.multiply(jnp.power(jnp.negative(jnp.log1p(jnp.negative(u))),
                                  jnp.divide(1.0, concentration)), scale)


def weibull_min(key, scale, concentration, shape=(), dtype=None):
    data, _ = keys_of(key, "weibull_min")
    dtype = float_dtype(dtype, "weibull_min")
    return run(weibull_min_impl, data, scale, concentration, shape=shape_of(shape),
               dtype=dtype)


def rademacher_impl(data, *, shape, dtype):
    from ._base import bernoulli_impl
    b = L.convert_element_type(bernoulli_impl(data, np.float32(0.5) if
                                              dtypes.default_float() == np.float32 else
                                              np.float64(0.5), shape=shape, mode="low"), dtype)
    return L.convert_element_type(jnp.subtract(jnp.multiply(2, b), 1), dtype)


def rademacher(key, shape=(), dtype=None, *, out_sharding=None):
    data, _ = keys_of(key, "rademacher")
    dtype = dtypes.default_int() if dtype is None else dtypes.canonicalize(dtype)
    return _sharded(run(rademacher_impl, data, shape=shape_of(shape), dtype=dtype),
                    out_sharding)


def maxwell_impl(data, *, shape, dtype):
    x = normal_impl(data, shape=(*shape, 3), dtype=dtype)
    return jnp.sqrt(jnp.sum(jnp.multiply(x, x), axis=-1))


maxwell = _simple("maxwell", maxwell_impl)


def double_sided_maxwell_impl(data, loc, scale, *, shape, dtype):
    params = np.broadcast_shapes(jnp.shape(loc), jnp.shape(scale))
    if not shape:
        shape = params
    shape = tuple(shape) + tuple(params)
    k = keys_split(data, (2,))
    m = maxwell_impl(k[0], shape=shape, dtype=dtype)
    s = rademacher_impl(k[1], shape=shape, dtype=dtype)
    return jnp.add(jnp.multiply(jnp.multiply(s, m), scale), loc)


def double_sided_maxwell(key, loc, scale, shape=(), dtype=None):
    data, _ = keys_of(key, "double_sided_maxwell")
    dtype = float_dtype(dtype, "double_sided_maxwell")
    return run(double_sided_maxwell_impl, data, loc, scale, shape=shape_of(shape), dtype=dtype)


_ = ShardcTypeError
