"""shardc.numpy.linalg: norm (the decompositions jax.numpy.linalg also has are not
shardc ops)."""
from __future__ import annotations

import numpy as np

from ...errors import ShardcError
from ...ops.common import norm_axes
from ._reductions import max as _max
from ._reductions import min as _min
from ._reductions import sum as _sum
from ._ufuncs import abs, not_equal, power, sqrt
from ._util import aval, check_arraylike, promote_dtypes_inexact


def norm(x, ord=None, axis=None, keepdims=False):
    """Vector and matrix norms (as jnp.linalg.norm): ord None/2/1/inf/-inf/0/p for
    vectors; None/'fro'/1/-1/inf/-inf for matrices."""
    check_arraylike("norm", x)
    (x,) = promote_dtypes_inexact(x)
    nd = aval(x).ndim
    if axis is None:
        if ord is None:
            return _keep(sqrt(_sum(x * x)), nd, keepdims)
        axis = tuple(range(nd))
    axes = norm_axes("norm", axis, nd)
    if len(axes) == 1:
        (a,) = axes
        ax = abs(x)
        if ord is None or ord == 2:
            return sqrt(_sum(x * x, axis=a, keepdims=keepdims))
        if ord == np.inf:
            return _max(ax, axis=a, keepdims=keepdims)
        if ord == -np.inf:
            return _min(ax, axis=a, keepdims=keepdims)
        if ord == 0:
            return _sum(not_equal(x, 0).astype(aval(x).dtype), axis=a, keepdims=keepdims)
        if ord == 1:
            return _sum(ax, axis=a, keepdims=keepdims)
        if isinstance(ord, str):
            raise ShardcError(f"norm: ord {ord!r} is for matrices; a vector norm takes a "
                              "number")
        return power(_sum(power(ax, ord), axis=a, keepdims=keepdims), 1.0 / ord)
    if len(axes) != 2:
        raise ShardcError(f"norm: axis must name one or two axes, got {axis}")
    r, c = axis if isinstance(axis, (tuple, list)) else axes
    r, c = r % nd, c % nd
    ax = abs(x)
    if ord is None or ord == "fro":
        return sqrt(_sum(x * x, axis=(r, c), keepdims=keepdims))
    if ord in (1, -1):
        # max/min over columns of the column sums
        out = (_max if ord == 1 else _min)(_sum(ax, axis=r, keepdims=True), axis=c,
                                           keepdims=True)
    elif ord in (np.inf, -np.inf):
        out = (_max if ord > 0 else _min)(_sum(ax, axis=c, keepdims=True), axis=r,
                                          keepdims=True)
    else:
        raise ShardcError(f"norm: matrix ord {ord!r} needs a singular value decomposition, "
                          "which shardc does not have; use None, 'fro', 1, -1, inf or -inf")
    if not keepdims:
        out = out.reshape(tuple(n for d, n in enumerate(aval(out).shape) if d not in (r, c)))
    return out


def _keep(v, nd, keepdims):
    return v.reshape((1,) * nd) if keepdims else v
