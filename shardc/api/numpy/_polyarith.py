"""jax.numpy's polynomial arithmetic: polyval polyadd polysub polyder polyint polymul
polydiv (poly, polyfit and roots, which need linear algebra: _poly.py)."""
from __future__ import annotations

import operator

import numpy as np

from ...errors import ShardcError
from . import _reductions as R
from ._creation import asarray, zeros
from ._indexing import getitem
from ._more2 import trim_zeros
from ._shapes import atleast_1d, concatenate, expand_dims, pad
from ._ufuncs import add, divide, multiply, negative
from ._util import aval, check_arraylike, convert, promote_dtypes, promote_dtypes_inexact


def polyval(p, x, *, unroll=16):
    """Horner's rule (jax scans over p; the steps are the same)."""
    check_arraylike("polyval", p, x)
    p, x = promote_dtypes(p, x)
    shape = np.broadcast_shapes(aval(p).shape[1:], aval(x).shape)
    from ._creation import full_like
    y = full_like(x, 0, shape=shape)
    for k in range(aval(p).shape[0]):
        y = add(multiply(y, x), getitem(p, k))
    return y


def polyadd(a1, a2):
    check_arraylike("polyadd", a1, a2)
    a1, a2 = promote_dtypes(a1, a2)
    n1, n2 = aval(a1).shape[0], aval(a2).shape[0]
    if n2 <= n1:
        return add(a1, pad(a2, [(n1 - n2, 0)] + [(0, 0)] * (aval(a2).ndim - 1)))
    return add(a2, pad(a1, [(n2 - n1, 0)] + [(0, 0)] * (aval(a1).ndim - 1)))


def polysub(a1, a2):
    check_arraylike("polysub", a1, a2)
    a1, a2 = promote_dtypes(a1, a2)
    return polyadd(a1, negative(a2))


def polyder(p, m=1):
    check_arraylike("polyder", p)
    m = operator.index(m)
    (p,) = promote_dtypes_inexact(p)
    if m < 0:
        raise ShardcError("Order of derivative must be positive")
    if m == 0:
        return p
    n = aval(p).shape[0]
    coeff = (np.arange(m, n)[None] - np.arange(m)[:, None]).prod(0)[::-1]
    return multiply(getitem(p, slice(None, -m)), convert(asarray(coeff.copy()),
                                                         aval(p).dtype))


def polyint(p, m=1, k=None):
    m = operator.index(m)
    k = 0 if k is None else k
    check_arraylike("polyint", p, k)
    p, k = promote_dtypes_inexact(p, k)
    if m < 0:
        raise ShardcError("Order of integral must be positive (see polyder)")
    k = atleast_1d(k)
    if aval(k).shape[0] == 1:
        from ._shapes import broadcast_to
        k = broadcast_to(k, (m,))
    if aval(k).shape != (m,):
        raise ShardcError("k must be a scalar or a rank-1 array of length 1 or m.")
    if m == 0:
        return p
    n = aval(p).shape[0]
    grid = np.arange(n + m)[None] - np.arange(m)[:, None]
    coeff = np.maximum(1, grid).prod(0)[::-1].copy()
    return divide(concatenate([p, k]), convert(asarray(coeff), aval(p).dtype))


def polymul(a1, a2, *, trim_leading_zeros=False):
    """The full convolution of the coefficients (a sum of anti-diagonals of the outer
    product; jax convolves)."""
    check_arraylike("polymul", a1, a2)
    a1, a2 = promote_dtypes_inexact(a1, a2)
    if trim_leading_zeros and (aval(a1).shape[0] > 1 or aval(a2).shape[0] > 1):
        a1, a2 = trim_zeros(a1, trim="f"), trim_zeros(a2, trim="f")
    if aval(a1).shape[0] == 0:
        a1 = zeros(1, dtype=aval(a2).dtype)
    if aval(a2).shape[0] == 0:
        a2 = zeros(1, dtype=aval(a1).dtype)
    n1 = aval(a1).shape[0]
    outer = multiply(expand_dims(a1, 1), expand_dims(a2, 0))      # (n1, n2)
    # row i shifted right by i: (n1, n1 + n2 - 1), then summed over rows
    rows = [pad(getitem(outer, i), [(i, n1 - 1 - i)]) for i in range(n1)]
    from ._shapes import stack
    return R.sum(stack(rows), axis=0)


def polydiv(u, v, *, trim_leading_zeros=False):
    """Quotient and remainder of polynomial long division (static lengths, as jax's)."""
    check_arraylike("polydiv", u, v)
    u, v = promote_dtypes_inexact(u, v)
    m, n = aval(u).shape[0] - 1, aval(v).shape[0] - 1
    scale = divide(1.0, getitem(v, 0))
    q = []
    for k in range(0, m - n + 1):
        d = multiply(scale, getitem(u, k))
        q.append(d)
        upd = pad(multiply(negative(d), v), [(k, m - n - k)])
        u = add(u, upd)
    from ._shapes import stack
    q = stack(q) if q else zeros(1, dtype=aval(u).dtype)
    if trim_leading_zeros:
        raise ShardcError("polydiv(trim_leading_zeros=True) has a data-dependent shape")
    return q, u

