"""More of jax.numpy's names, composed as jax composes them: i0 and kaiser (the Bessel
function through lax.bessel_i0e), bitwise_count, sort_complex and put_along_axis."""
from __future__ import annotations

import operator

import numpy as np

from ...errors import ArgumentError, ShardcTypeError
from ...ir import dtypes
from ...ops import numeric as nu
from ...ops.common import check_axis
from ...ops.sort import sort_p
from ...transforms.custom_jvp import custom_jvp
from ._construct import indices as _indices
from ._creation import full, iota
from ._shapes import broadcast_to, ravel, reshape
from ._ufuncs import abs, divide, exp, multiply, sqrt, subtract, where
from ._sorting import asarray_
from ._util import aval, convert, promote_args_inexact, promote_args_numeric

__all__ = ["i0", "kaiser", "bitwise_count", "sort_complex", "put_along_axis"]


def _i0e(x):
    from ..scipy_special5 import i0e        # scipy.special builds on shardc.numpy
    return i0e(x)


@custom_jvp
def _i0(x):
    return multiply(exp(abs(x)), _i0e(abs(x)))


@_i0.defjvp
def _i0_jvp(primals, tangents):
    from ..grad import jvp
    out, t = jvp(_i0.fun, primals, tangents)
    return out, where(primals[0] == 0, 0.0, t)      # jax's: 0 at 0, where |x| has a kink


def i0(x):
    """The modified Bessel function of the first kind, order 0 (real inputs)."""
    (x,) = promote_args_inexact("i0", x)
    if not dtypes.is_float(aval(x).dtype):
        raise ArgumentError(f"Unsupported input type to shardc.numpy.i0: {aval(x).dtype}")
    return _i0(x)


def kaiser(M, beta):
    """The Kaiser window of M points (as jnp.kaiser)."""
    M = operator.index(M)
    dt = dtypes.default_float()
    if M <= 1:
        return full((M,), 1, dt)
    n = iota(dt, M)
    alpha = 0.5 * (M - 1)
    r = divide(subtract(n, alpha), alpha)
    return divide(i0(multiply(beta, sqrt(subtract(1, multiply(r, r))))), i0(beta))


def bitwise_count(x, /):
    """The number of 1 bits in |x|, as uint8 (NumPy's)."""
    (x,) = promote_args_numeric("bitwise_count", x)
    if not dtypes.is_int(aval(x).dtype) and aval(x).dtype != dtypes.bool_:
        raise ShardcTypeError(f"bitwise_count: an integer array is needed, got "
                              f"{aval(x).dtype}")
    return convert(nu.population_count_p.bind(abs(x)), np.dtype(np.uint8))


def sort_complex(a):
    """`a` sorted along its last axis (complex values by real part, then imaginary),
    as a complex array."""
    a = asarray_("sort_complex", a)
    (out,) = sort_p.bind(a, dimension=aval(a).ndim - 1, is_stable=True, num_keys=1)
    dt = aval(out).dtype
    return out if dtypes.is_complex(dt) else convert(out, dtypes.complex_dtype(
        dt if dtypes.is_float(dt) else dtypes.default_float()))


def put_along_axis(arr, indices, values, axis, inplace=True, *, mode=None):
    """A copy of `arr` with `values` put at `indices` along `axis` (inplace=False is
    required, as jax: arrays are immutable)."""
    if inplace:
        raise ArgumentError("shardc.numpy.put_along_axis cannot modify arrays in-place, "
                            "because shardc arrays are immutable. Pass inplace=False to "
                            "instead return an updated array.")
    arr = asarray_("put_along_axis", arr)
    idx = asarray_("put_along_axis", indices)
    values = asarray_("put_along_axis", values)
    shape = aval(arr).shape
    if axis is None:
        arr, axis = ravel(arr), 0
    if aval(arr).ndim != aval(idx).ndim:
        raise ArgumentError(f"put_along_axis arguments 'arr' and 'indices' must have same "
                            f"ndim. Got arr.ndim={aval(arr).ndim} and "
                            f"indices.ndim={aval(idx).ndim}.")
    try:
        values = broadcast_to(values, aval(idx).shape)
    except Exception:   # noqa: BLE001  (any broadcast failure is the user's shapes)
        raise ArgumentError(f"put_along_axis argument 'values' must be broadcastable to "
                            f"'indices'. Got values.shape={aval(values).shape} and "
                            f"indices.shape={aval(idx).shape}.") from None
    axis = check_axis("put_along_axis", operator.index(axis), aval(arr).ndim)
    where_ = list(_indices(aval(arr).shape, sparse=True))
    where_[axis] = idx
    out = arr.at[tuple(where_)].set(values, mode=mode)
    return reshape(out, shape) if out is not None and aval(out).shape != shape else out
