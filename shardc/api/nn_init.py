"""shardc.nn.initializers: jax.nn.initializers' names and formulas, drawing from
shardc.random (looked up when an initializer runs, so this module loads without it)."""
from __future__ import annotations

import math

import numpy as np

from ..errors import ShardcError, ShardcNotImplementedError
from ..ir import dtypes
from . import numpy as snp
from .numpy._util import canonical_dtype


def _random():
    try:
        from . import random
    except ImportError:
        raise ShardcError("shardc.nn.initializers needs shardc.random, which this build "
                          "does not have") from None
    return random


def _dtype(dtype):
    return dtypes.default_float() if dtype is None else canonical_dtype(dtype)


def _shape(shape):
    return (shape,) if isinstance(shape, int) else tuple(int(d) for d in shape)


def _no_sharding(out_sharding, name):
    if out_sharding is not None:     # as jax's (its random.orthogonal has no out_sharding)
        raise ShardcNotImplementedError(f"initializers.{name}: out_sharding= is not "
                                   "implemented, as in jax; constrain the result "
                                   "(shardc.lax.with_sharding_constraint)")


def zeros(key, shape, dtype=None, out_sharding=None):
    return snp.zeros(_shape(shape), _dtype(dtype), out_sharding=out_sharding)


def ones(key, shape, dtype=None, out_sharding=None):
    return snp.ones(_shape(shape), _dtype(dtype), out_sharding=out_sharding)


def constant(value, dtype=None):
    def init(key, shape, dtype=dtype, out_sharding=None):
        return snp.full(_shape(shape), value, dtype=_dtype(dtype), out_sharding=out_sharding)
    return init


def uniform(scale=1e-2, dtype=None):
    def init(key, shape, dtype=dtype, out_sharding=None):
        dt = _dtype(dtype)
        return snp.multiply(_random().uniform(key, _shape(shape), dt,
                                              out_sharding=out_sharding),
                            snp.asarray(np.array(scale, dt)))
    return init


def normal(stddev=1e-2, dtype=None):
    def init(key, shape, dtype=dtype, out_sharding=None):
        dt = _dtype(dtype)
        return snp.multiply(_random().normal(key, _shape(shape), dt,
                                             out_sharding=out_sharding),
                            snp.asarray(np.array(stddev, dt)))
    return init


def truncated_normal(stddev=1e-2, dtype=None, lower=-2.0, upper=2.0):
    def init(key, shape, dtype=dtype, out_sharding=None):
        dt = _dtype(dtype)
        return snp.multiply(_random().truncated_normal(key, lower, upper, _shape(shape), dt,
                                                       out_sharding=out_sharding),
                            snp.asarray(np.array(stddev, dt)))
    return init


def _compute_fans(shape, in_axis=-2, out_axis=-1, batch_axis=()):
    if isinstance(in_axis, int) and in_axis == -2 and len(shape) <= 1:
        raise ShardcError(f"Can't compute input and output sizes of a {len(shape)}-"
                          "dimensional weights tensor with default in_axis. Must be at least "
                          "2D or specify in_axis explicitly.")

    def size(ax):
        return shape[ax] if isinstance(ax, int) else math.prod(shape[i] for i in ax)
    in_size, out_size, batch_size = size(in_axis), size(out_axis), size(batch_axis)
    receptive = math.prod(shape) / in_size / out_size / batch_size
    return in_size * receptive, out_size * receptive


def variance_scaling(scale, mode, distribution, in_axis=-2, out_axis=-1, batch_axis=(),
                     dtype=None):
    def init(key, shape, dtype=dtype, out_sharding=None):
        shape = _shape(shape)
        dt = _dtype(dtype)
        fan_in, fan_out = _compute_fans(shape, in_axis, out_axis, batch_axis)
        denominator = {"fan_in": fan_in, "fan_out": fan_out,
                       "fan_avg": (fan_in + fan_out) / 2,
                       "fan_geo_avg": (fan_in * fan_out) ** 0.5}.get(mode)
        if denominator is None:
            raise ShardcError(f"invalid mode for variance scaling initializer: {mode}")
        variance = snp.asarray(np.array(scale / denominator, dt))
        r = _random()
        if distribution == "truncated_normal":
            stddev = snp.divide(snp.sqrt(variance), snp.asarray(np.array(0.8796256610342398,
                                                                          dt)))
            return snp.multiply(r.truncated_normal(key, -2, 2, shape, dt,
                                                   out_sharding=out_sharding), stddev)
        if distribution == "normal":
            return snp.multiply(r.normal(key, shape, dt, out_sharding=out_sharding),
                                snp.sqrt(variance))
        if distribution == "uniform":
            return snp.multiply(r.uniform(key, shape, dt, -1, out_sharding=out_sharding),
                                snp.sqrt(snp.multiply(3, variance)))
        raise ShardcError(f"invalid distribution for variance scaling initializer: "
                          f"{distribution}")
    return init


def _named(scale, mode, distribution):
    def make(in_axis=-2, out_axis=-1, batch_axis=(), dtype=None):
        return variance_scaling(scale, mode, distribution, in_axis, out_axis, batch_axis,
                                dtype)
    return make


glorot_uniform = xavier_uniform = _named(1.0, "fan_avg", "uniform")
glorot_normal = xavier_normal = _named(1.0, "fan_avg", "truncated_normal")
lecun_uniform = _named(1.0, "fan_in", "uniform")
lecun_normal = _named(1.0, "fan_in", "truncated_normal")
he_uniform = kaiming_uniform = _named(2.0, "fan_in", "uniform")
he_normal = kaiming_normal = _named(2.0, "fan_in", "truncated_normal")


def orthogonal(scale=1.0, column_axis=-1, dtype=None):
    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding(out_sharding, "orthogonal")
        shape = _shape(shape)
        dt = _dtype(dtype)
        if len(shape) < 2:
            raise ShardcError("orthogonal initializer requires at least a 2D shape")
        if any(d == 0 for d in shape):
            return snp.zeros(shape, dtype=dt)
        n_rows, n_cols = math.prod(shape) // shape[column_axis], shape[column_axis]
        Q = _random().orthogonal(key, n_rows, (), dt, n_cols)
        Q = snp.reshape(Q, tuple(np.delete(shape, column_axis)) + (shape[column_axis],))
        Q = snp.moveaxis(Q, -1, column_axis)
        return snp.multiply(snp.asarray(np.array(scale, dt)), Q)
    return init


def delta_orthogonal(scale=1.0, column_axis=-1, dtype=None):
    def init(key, shape, dtype=dtype, out_sharding=None):
        _no_sharding(out_sharding, "delta_orthogonal")
        shape = _shape(shape)
        dt = _dtype(dtype)
        if len(shape) not in (3, 4, 5):
            raise ShardcError("Delta orthogonal initializer requires a 3D, 4D or 5D shape.")
        if shape[-1] < shape[-2]:
            raise ShardcError("`fan_in` must be less or equal than `fan_out`. ")
        ortho = orthogonal(scale=scale, column_axis=column_axis, dtype=dt)(key, shape[-2:])
        centre = tuple((k - 1) // 2 for k in shape[:-2])
        # ortho placed at the kernel's centre: a one-hot over the spatial dims times it
        hot = np.zeros(shape[:-2], dt)
        hot[centre] = 1
        hot = snp.asarray(hot).reshape(shape[:-2] + (1, 1))
        return snp.multiply(hot, ortho)
    return init


Initializer = object   # jax's is a typing Protocol: any callable(key, shape, dtype)

__all__ = [n for n, v in list(globals().items()) if not n.startswith("_") and
           (getattr(v, "__module__", None) == __name__ or n == "Initializer")]
