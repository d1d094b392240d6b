"""shardc.nn: activation functions and friends, as jax.nn."""
from __future__ import annotations

import numpy as np

from ..ir import dtypes
from . import numpy as snp
from ..transforms.ad import custom_vjp
from ..errors import ArgumentError, ShardcError, wrap_public
from .numpy._util import as_lit, aval, canonical_dtype, promote_dtypes_inexact
from ..ops import elementwise as ew
from ..ops.common import norm_axes


@custom_vjp
def relu(x):
    """max(x, 0), with jax.nn.relu's derivative: 0 at x == 0 (maximum's splits ties)."""
    return snp.maximum(x, 0)


def _relu_fwd(x):
    # the residual is the bool mask, as jax's (its jvp computes x > 0 on the primal):
    # a quarter of x's bytes, stacked per iteration in a scan's gradient
    return relu(x), snp.greater(x, 0)


def _relu_bwd(mask, g):
    # as jax's: select(x > 0, g, 0), the mask first (so ties in sharding go its way)
    return (snp.where(mask, g, snp.zeros_like(g)),)


relu.defvjp(_relu_fwd, _relu_bwd)


def _check_float(name, x):
    a = aval(x)
    if not dtypes.is_float(a.dtype):
        raise ShardcError(f"shardc.nn.{name} needs a floating-point array, got {a}; convert "
                          "it first (e.g. x.astype(jnp.float32))")


def sigmoid(x):
    """1 / (1 + exp(-x)) (lax.logistic); floating-point x only, as jax.nn.sigmoid."""
    _check_float("sigmoid", x)
    return ew.logistic_p.bind(as_lit(x))


def silu(x):
    return snp.multiply(x, sigmoid(x))


swish = silu


def gelu(x, approximate=True):
    """The tanh approximation by default, as jax.nn.gelu (constants in x's dtype)."""
    (x,) = promote_dtypes_inexact(x)
    dt = aval(x).dtype
    mul, add = snp.multiply, snp.add
    if approximate:
        c = np.sqrt(2 / np.pi).astype(dt)     # a strongly typed scalar, as jax's
        cdf = mul(0.5, add(1.0, snp.tanh(mul(c, add(x, mul(0.044715, snp.power(x, 3)))))))
        return mul(x, cdf)
    sqrt_half = np.sqrt(0.5).astype(dt)
    z = ew.erfc_p.bind(mul(snp.negative(x), sqrt_half))
    return snp.astype(mul(mul(0.5, x), z), dt)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False, where=None):
    """log(sum(b * exp(a))) computed stably around the max, as jax.nn.logsumexp."""
    from ..transforms.ad import stop_gradient
    if where is not None:
        a = snp.where(where, a, 0)
    if b is not None:
        a, b = promote_dtypes_inexact(a, b)
        a = snp.where(snp.not_equal(b, 0), a, -np.inf)
    else:
        (a,) = promote_dtypes_inexact(a)
    x = aval(a)
    cplx = dtypes.is_complex(x.dtype)     # the max of the real parts, a complex log (as jax)
    ar = snp.real(a) if cplx else a
    dims = norm_axes("logsumexp", axis, x.ndim)
    amax = snp.max(ar, axis=dims, keepdims=keepdims, where=where, initial=-np.inf) \
        if where is not None else _max(ar, dims, keepdims=keepdims)
    amax = stop_gradient(ew.select_p.bind(snp.isfinite(amax), amax, snp.zeros_like(amax)))
    amax_with_dims = amax if keepdims else snp.expand_dims(amax, dims)
    exp_a = ew.exp_p.bind(snp.subtract(a, snp.astype(amax_with_dims, x.dtype)))
    if b is not None:
        exp_a = snp.multiply(exp_a, b)
    sumexp = snp.sum(exp_a, axis=dims, keepdims=keepdims, where=where)
    sign = snp.sign(sumexp)
    if return_sign or not cplx:
        sumexp = snp.abs(sumexp)
    out = ew.add_p.bind(ew.log_p.bind(sumexp), snp.astype(amax, aval(sumexp).dtype))
    if return_sign:
        return out, sign
    if b is not None and not cplx:
        out = snp.where(snp.less(sign, 0), np.array(np.nan, aval(out).dtype), out)
    return out


def _max(x, axis, keepdims):
    """The max over `axis`; over an empty one -inf, as jax's (it passes initial=-inf)."""
    shape = aval(x).shape
    dims = range(len(shape)) if axis is None else \
        [a % len(shape) for a in ((axis,) if isinstance(axis, int) else axis)]
    empty = any(shape[d] == 0 for d in dims)
    return snp.max(x, axis, keepdims=keepdims, initial=-np.inf if empty else None)


def softmax(x, axis=-1, where=None):
    """exp(x - max) normalized over `axis` (only where `where` holds), as jax.nn.softmax."""
    if where is None:
        unnormalized = snp.exp(snp.subtract(x, _max(x, axis, keepdims=True)))
        return snp.divide(unnormalized, snp.sum(unnormalized, axis, keepdims=True))
    x_max = snp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = snp.where(where, x, -np.inf)
    unnormalized = snp.exp(snp.subtract(x_safe, x_max))
    result = snp.divide(unnormalized, snp.sum(unnormalized, axis, where=where, keepdims=True))
    return snp.where(where, result, 0)


def log_softmax(x, axis=-1, where=None):
    from ..transforms.ad import stop_gradient
    if where is None:
        shifted = snp.subtract(x, stop_gradient(_max(x, axis, keepdims=True)))
        return snp.subtract(shifted, snp.log(snp.sum(snp.exp(shifted), axis, keepdims=True)))
    x_max = snp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    shifted = snp.subtract(snp.where(where, x, -np.inf), stop_gradient(x_max))
    lse = snp.log(snp.sum(snp.exp(shifted), axis, where=where, keepdims=True))
    return snp.where(where, snp.subtract(shifted, lse), -np.inf)


def one_hot(x, num_classes, *, dtype=None, axis=-1):
    """x[..., None] == arange(num_classes), as a float array by default."""
    if not isinstance(num_classes, (int, np.integer)):
        raise ShardcError("one_hot: num_classes must be a static Python int")
    num_classes = int(num_classes)
    dt = canonical_dtype(dtype) or dtypes.default_float()
    xa = aval(x)
    if xa.dtype == dtypes.bool_:
        raise ShardcError(f"one_hot needs integer class indices, got {xa}; convert them "
                          "with .astype(int) first")
    out_ndim = xa.ndim + 1
    if not -out_ndim <= axis < out_ndim:      # (axis % out_ndim wrapped it silently)
        raise ArgumentError(f"axis {axis} is out of bounds for array of dimension {out_ndim}")
    ax = axis % out_ndim
    lhs = snp.expand_dims(x, ax)
    shape = [1] * out_ndim
    shape[ax] = num_classes
    rhs = snp.iota(dtypes.default_int() if not dtypes.is_int(xa.dtype) else xa.dtype,
                   num_classes, dimension=ax, shape=tuple(shape))
    return snp.astype(snp.equal(lhs, rhs), dt)


def _masked_mean(x, axis, where):
    if where is None:
        return snp.mean(x, axis, keepdims=True)
    w = snp.broadcast_to(where, aval(x).shape)
    total = snp.sum(x, axis, keepdims=True, where=w)
    count = snp.sum(w, axis, keepdims=True, dtype=aval(total).dtype)
    return snp.divide(total, count)


def standardize(x, axis=-1, mean=None, variance=None, epsilon=1e-5, where=None, *,
                algorithm="fast"):
    """(x - mean) / sqrt(variance + epsilon) over `axis`, as jax.nn.standardize."""
    if mean is None:
        mean = _masked_mean(x, axis, where)
    if variance is None:
        if algorithm == "stable":
            variance = _masked_mean(snp.square(snp.subtract(x, mean)), axis, where)
        elif algorithm == "fast":
            variance = snp.subtract(_masked_mean(snp.square(x), axis, where), snp.square(mean))
            variance = snp.clip(variance, 0)
        else:
            raise ShardcError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
    return snp.multiply(snp.subtract(x, mean), snp.rsqrt(snp.add(variance, epsilon)))


wrap_public(globals())
from .nn_more import *  # noqa: E402,F401,F403  (issue 16: the rest of jax.nn)
from . import nn_init as initializers  # noqa: E402,F401
