"""shardc.scipy.interpolate: RegularGridInterpolator, as jax.scipy.interpolate's: each
query's cell found by searchsorted per axis, then linear weights over the cell's
corners (or the nearest corner); points outside the grid take fill_value. A pytree, as
jax's, so it can be passed into and out of jitted functions."""
from __future__ import annotations

import itertools

import jax
import numpy as np

from ..errors import ArgumentError, ShardcNotImplementedError, wrap_public
from . import numpy as snp
from .numpy._util import aval, check_arraylike, promote_dtypes_inexact

__all__ = ["RegularGridInterpolator"]


def _ndim_coords_from_arrays(points, ndim=None):
    """A tuple of coordinate arrays, or an array (..., ndim), as one (..., ndim) array."""
    if isinstance(points, tuple) and len(points) == 1:
        points = points[0]
    if isinstance(points, tuple):
        ps = snp.broadcast_arrays(*points)
        out = snp.empty(aval(ps[0]).shape + (len(points),), dtype=float)
        for j, p in enumerate(ps):
            out = out.at[..., j].set(p)
        return out
    check_arraylike("_ndim_coords_from_arrays", points)
    points = snp.asarray(points)
    if aval(points).ndim == 1:
        points = snp.reshape(points, (-1, 1) if ndim is None else (-1, ndim))
    return points


class RegularGridInterpolator:
    """Interpolation on a regular (strictly increasing, possibly uneven) grid, as
    jax.scipy.interpolate.RegularGridInterpolator: method 'linear' or 'nearest';
    bounds_error must be False (checking needs concrete values under jit)."""

    def __init__(self, points, values, method="linear", bounds_error=False,
                 fill_value=np.nan):
        if method not in ("linear", "nearest"):
            raise ArgumentError(f"method {method!r} is not defined")
        self.method = method
        self.bounds_error = bounds_error
        if bounds_error:
            raise ShardcNotImplementedError("`bounds_error` takes no effect under JIT")
        check_arraylike("RegularGridInterpolator", values)
        if len(points) > aval(values).ndim:
            raise ArgumentError(f"there are {len(points)} point arrays, but values has "
                             f"{aval(values).ndim} dimensions")
        values, = promote_dtypes_inexact(snp.asarray(values))
        if fill_value is not None:
            check_arraylike("RegularGridInterpolator", fill_value)
            fill_value = snp.asarray(fill_value)
            if not np.can_cast(aval(fill_value).dtype, aval(values).dtype,
                               casting="same_kind"):
                raise ArgumentError("fill_value must be either 'None' or of a type compatible "
                                 "with values")
        self.fill_value = fill_value
        check_arraylike("RegularGridInterpolator", *points)
        self.grid = tuple(snp.asarray(p) for p in points)
        self.values = values

    def __call__(self, xi, method=None):
        method = self.method if method is None else method
        if method not in ("linear", "nearest"):
            raise ArgumentError(f"method {method!r} is not defined")
        ndim = len(self.grid)
        xi = _ndim_coords_from_arrays(xi, ndim=ndim)
        xshape = aval(xi).shape
        if xshape[-1] != ndim:
            raise ArgumentError(f"the requested sample points xi have dimension {xshape[-1]}, "
                             f"but this RegularGridInterpolator has dimension {ndim}")
        xi = snp.reshape(xi, (-1, xshape[-1]))
        indices, dists, out = self._find_indices(xi.T)
        if method == "linear":
            result = self._evaluate_linear(indices, dists)
        else:
            result = self._evaluate_nearest(indices, dists)
        if self.fill_value is not None:
            rank = aval(result).ndim
            bshape = aval(result).shape[:1] + (1,) * (rank - 1)
            result = snp.where(snp.reshape(out, bshape), self.fill_value, result)
        return snp.reshape(result, xshape[:-1] + aval(self.values).shape[ndim:])

    def _evaluate_linear(self, indices, dists):
        trailing = (slice(None),) + (None,) * (aval(self.values).ndim - len(indices))
        values = snp.asarray(0.0)
        for corner in itertools.product(*[[i, i + 1] for i in indices]):
            weight = snp.asarray(1.0)
            for ei, i, yi in zip(corner, indices, dists):
                weight = weight * snp.where(ei is i, 1 - yi, yi)
            values = values + self.values[corner] * weight[trailing]
        return values

    def _evaluate_nearest(self, indices, dists):
        return self.values[tuple(snp.where(yi <= 0.5, i, i + 1)
                                 for i, yi in zip(indices, dists))]

    def _find_indices(self, xi):
        indices, dists = [], []
        out = snp.zeros((aval(xi).shape[1],), dtype=bool)
        for x, g in zip(xi, self.grid):
            n = aval(g).shape[0]
            i = snp.searchsorted(g, x) - 1
            i = snp.where(i < 0, 0, i)
            i = snp.where(i > n - 2, n - 2, i)
            indices.append(i)
            dists.append((x - g[i]) / (g[i + 1] - g[i]))
            out = out | (x < g[0]) | (x > g[-1])
        return indices, dists, out


jax.tree_util.register_pytree_node(
    RegularGridInterpolator,
    lambda obj: ((obj.grid, obj.values, obj.fill_value), (obj.method, obj.bounds_error)),
    lambda aux, children: RegularGridInterpolator(*children[:2], *aux, *children[2:]),
)


wrap_public(globals())
