"""shardc.nn: activation functions and friends, as jax.nn."""
from __future__ import annotations

import numpy as np

from ..ir import dtypes
from . import numpy as snp
from ..transforms.ad import custom_vjp
from ..errors import ShardcError, wrap_public
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


def logsumexp(a, axis=None, keepdims=False):
    """log(sum(exp(a))) computed stably around the max, as jax.nn.logsumexp."""
    (a,) = promote_dtypes_inexact(a)
    x = aval(a)
    dims = norm_axes("logsumexp", axis, x.ndim)
    amax = snp.max(a, axis=dims, keepdims=keepdims)
    amax = ew.select_p.bind(snp.isfinite(amax), amax, snp.zeros_like(amax))
    amax_with_dims = amax if keepdims else snp.expand_dims(amax, dims)
    exp_a = ew.exp_p.bind(snp.subtract(a, snp.astype(amax_with_dims, x.dtype)))
    sumexp = snp.abs(snp.sum(exp_a, axis=dims, keepdims=keepdims))
    return ew.add_p.bind(ew.log_p.bind(sumexp), snp.astype(amax, aval(sumexp).dtype))


def softmax(x, axis=-1):
    unnormalized = snp.exp(snp.subtract(x, snp.max(x, axis, keepdims=True)))
    return snp.divide(unnormalized, snp.sum(unnormalized, axis, keepdims=True))


def log_softmax(x, axis=-1):
    shifted = snp.subtract(x, snp.max(x, axis, keepdims=True))
    return snp.subtract(shifted, snp.log(snp.sum(snp.exp(shifted), axis, keepdims=True)))


def one_hot(x, num_classes, dtype=None, axis=-1):
    """x[..., None] == arange(num_classes), as a float array by default."""
    if not isinstance(num_classes, int):
        raise ShardcError("one_hot: num_classes must be a static Python int")
    dt = canonical_dtype(dtype) or dtypes.default_float()
    xa = aval(x)
    if xa.dtype == dtypes.bool_:
        raise ShardcError(f"one_hot needs integer class indices, got {xa}; convert them "
                          "with .astype(int) first")
    out_ndim = xa.ndim + 1
    ax = axis % out_ndim
    lhs = snp.expand_dims(x, ax)
    shape = [1] * out_ndim
    shape[ax] = num_classes
    rhs = snp.iota(dtypes.default_int() if not dtypes.is_int(xa.dtype) else xa.dtype,
                   num_classes, dimension=ax, shape=tuple(shape))
    return snp.astype(snp.equal(lhs, rhs), dt)


def standardize(x, axis=-1, epsilon=1e-5):
    mean = snp.mean(x, axis, keepdims=True)
    var = snp.subtract(snp.mean(snp.square(x), axis, keepdims=True), snp.square(mean))
    return snp.multiply(snp.subtract(x, mean), snp.rsqrt(snp.add(var, epsilon)))


wrap_public(globals())
