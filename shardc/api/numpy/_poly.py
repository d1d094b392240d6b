"""shardc.numpy's polynomial functions built on linear algebra: poly, polyfit, roots (as
jax.numpy's: eigvals of the companion matrix, a scaled least-squares fit)."""
from __future__ import annotations

import numpy as np

from ...errors import ShardcError, wrap_public
from ...ir import dtypes
from ...trace import core


def _np():
    from .. import numpy as snp       # shardc.api.numpy: functions of several files
    return snp


def _inexact(name, *xs):
    from ._util import check_arraylike, promote_dtypes_inexact
    check_arraylike(name, *xs)
    return promote_dtypes_inexact(*xs)


def poly(seq_of_zeros):
    """The coefficients of the polynomial with the given roots (or a square matrix's
    characteristic polynomial)."""
    snp = _np()
    (z,) = _inexact("poly", seq_of_zeros)
    z = snp.atleast_1d(z)
    sh = z.shape
    if len(sh) == 2 and sh[0] == sh[1] and sh[0] != 0:
        z = snp.linalg.eigvals(z)
    if z.ndim != 1:
        raise ShardcError("poly: input must be 1d or non-empty square 2d array.")
    dt = z.dtype
    if len(z) == 0:
        return snp.ones((), dtype=dt)
    a = snp.ones((1,), dtype=dt)
    one = snp.ones((1,), dtype=dt)
    for k in range(len(z)):
        a = snp.convolve(a, snp.concatenate([one, -z[k:k + 1]]), mode="full")
    return a


def _roots_no_zeros(p):
    snp = _np()
    if p.size < 2:
        return snp.zeros((0,), dtypes.complex_dtype(p.dtype))
    n = p.size - 1
    first = snp.reshape(-p[1:] / p[0], (1, n))
    below = snp.eye(n - 1, n, dtype=p.dtype)          # ones just below the diagonal
    return snp.linalg.eigvals(snp.concatenate([first, below], axis=0))


def roots(p, *, strip_zeros=True):
    """The roots of a polynomial (coefficients highest degree first), as the eigenvalues of
    its companion matrix."""
    snp = _np()
    (p,) = _inexact("roots", p)
    p = snp.atleast_1d(p)
    if p.ndim != 1:
        raise ShardcError("roots: Input must be a rank-1 array.")
    if p.size < 2:
        return snp.zeros((0,), dtypes.complex_dtype(p.dtype))
    lead = snp.where(snp.all(p == 0), len(p), snp.argmin(p == 0))
    if strip_zeros:
        if core.is_tracer(lead):
            raise ShardcError("roots: strip_zeros=True needs concrete coefficients (the "
                              "result's size depends on them); inside jit pass "
                              "strip_zeros=False, which gives NaN roots for leading zeros")
        return _roots_no_zeros(p[int(lead):])
    p = snp.where(len(p) == lead, 1.0, p)
    r = _roots_no_zeros(snp.take(p, (snp.arange(len(p)) + lead) % len(p)))  # roll(p, -lead)
    from ..lax_sorting import sort_key_val
    r = sort_key_val(r == 0, r)[1]
    nan = complex(np.nan, np.nan)
    return snp.where(snp.arange(r.size) < r.size - lead, r, nan)


def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """Least-squares polynomial fit (columns of the Vandermonde matrix scaled to unit norm,
    as jnp.polyfit)."""
    snp = _np()
    x, y = (snp.asarray(x), snp.asarray(y))
    deg = int(deg)
    order = deg + 1
    if deg < 0:
        raise ShardcError("polyfit: expected deg >= 0")
    if x.ndim != 1:
        raise ShardcError("polyfit: expected 1D vector for x")
    if x.size == 0:
        raise ShardcError("polyfit: expected non-empty vector for x")
    if y.ndim < 1 or y.ndim > 2:
        raise ShardcError("polyfit: expected 1D or 2D array for y")
    if x.shape[0] != y.shape[0]:
        raise ShardcError("polyfit: expected x and y to have same length")
    if rcond is None:
        rcond = len(x) * float(snp.finfo(x.dtype).eps)
    lhs = snp.vander(x, order)
    rhs = y
    if w is not None:
        (w,) = _inexact("polyfit", w)
        if w.ndim != 1 or w.shape[0] != y.shape[0]:
            raise ShardcError("polyfit: expected a 1-d array of weights of y's length")
        lhs = lhs * w[:, None]
        rhs = rhs * (w[:, None] if rhs.ndim == 2 else w)
    scale = snp.sqrt((lhs * lhs).sum(axis=0))
    lhs = lhs / scale[None, :]
    c, resids, rank, s = snp.linalg.lstsq(lhs, rhs, rcond)
    c = (c.T / scale[None, :]).T if c.ndim > 1 else c / scale
    if full:
        from ...ops import lax as L     # a weakly typed scalar, as jax's lax.asarray(rcond)
        return c, resids, rank, s, L.full((), rcond, dtypes.default_float(), weak=True)
    if cov:
        vbase = snp.linalg.inv(snp.dot(lhs.T, lhs)) / snp.outer(scale, scale)
        if cov == "unscaled":
            fac = snp.asarray(1.0)
        else:
            if len(x) <= order:
                raise ShardcError("polyfit: the number of data points must exceed order to "
                                  "scale the covariance matrix")
            fac = resids / (len(x) - order)
        if y.ndim == 1:
            return c, vbase * snp.atleast_1d(fac)[None]
        return c, vbase[:, :, None] * snp.atleast_1d(fac)[None, None, :]
    return c


wrap_public(globals())
