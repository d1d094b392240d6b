"""jax.scipy.stats.gaussian_kde: a Gaussian kernel density estimate, a pytree (so it can
be passed through shardc.jit, grad and vmap) whose leaves are neff, dataset, weights,
covariance and inv_cov, as jax's."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from .. import numpy as snp
from .. import random as srandom
from ...errors import ArgumentError, ShardcNotImplementedError
from ...ir import dtypes
from ..lax_linalg import cholesky, triangular_solve
from ..nn import logsumexp
from ..numpy._util import aval, check_arraylike, promote_dtypes_inexact
from ..scipy_special2 import ndtr
from ._util import jitted, materialize

__all__ = ["gaussian_kde"]


def _is_complex(x):
    return dtypes.is_complex(aval(x).dtype)


def _cho_lower(a):
    """The lower Cholesky factor, without symmetrizing (as jax.scipy.linalg's)."""
    return cholesky(a, symmetrize_input=False)


def _cho_solve_lower(chol, b):
    """a^-1 b for a = chol chol^T."""
    y = triangular_solve(chol, b, left_side=True, lower=True)
    return triangular_solve(chol, y, left_side=True, lower=True, transpose_a=True)


def _convolve(chol, norm, target, weights, means):
    """For each column m of `means`: norm * sum_j w_j exp(-(t_j - m)^T a^-1 (t_j - m) / 2)
    over the columns t_j of `target` (jax maps this over the means)."""
    d, k = aval(means).shape
    n = aval(target).shape[1]
    diff = target[:, None, :] - means[:, :, None]                  # (d, k, n)
    alpha = snp.reshape(_cho_solve_lower(chol, snp.reshape(diff, (d, k * n))), (d, k, n))
    arg = 0.5 * snp.sum(diff * alpha, axis=0)
    return norm * snp.sum(snp.exp(-arg) * weights, axis=1)


def _kernel_eval(points, values, xi, precision, in_log):
    """Sum (or log-sum-exp) over the training points of values * N(xi; point, precision^-1)
    for each row of xi; points (n, d), values (n, 1), xi (m, d): an (m, 1) result."""
    points, values, xi, precision = materialize(
        *promote_dtypes_inexact(points, values, xi, precision))
    d = aval(points).shape[1]
    if aval(xi).shape[1] != d:
        raise ArgumentError("points and xi must have same trailing dim")
    if aval(precision).shape != (d, d):
        raise ArgumentError("precision matrix must match data dims")
    whitening = _cho_lower(precision)
    points = snp.dot(points, whitening)
    xi = snp.dot(xi, whitening)
    log_norm = snp.sum(snp.log(snp.diag(whitening))) - 0.5 * d * snp.log(2 * np.pi)
    arg = log_norm - 0.5 * snp.sum(snp.square(points[None, :, :] - xi[:, None, :]), axis=-1)
    if in_log:
        return logsumexp(snp.log(values)[None] + arg[:, :, None], axis=1)
    return snp.sum(values[None] * snp.exp(arg)[:, :, None], axis=1)


def _box_1d(kde, low, high):
    if kde.d != 1:
        raise ArgumentError("integrate_box_1d() only handles 1D pdfs")
    if aval(low).ndim != 0 or aval(high).ndim != 0:
        raise ArgumentError("the limits of integration in integrate_box_1d must be scalars")
    sigma = snp.squeeze(snp.sqrt(kde.covariance))
    low = snp.squeeze((low - kde.dataset) / sigma)
    high = snp.squeeze((high - kde.dataset) / sigma)
    return snp.sum(kde.weights * (ndtr(high) - ndtr(low)))


def _resample(kde, key, shape):
    ind_key, eps_key = srandom.split(key)
    ind = srandom.choice(ind_key, kde.n, shape=shape, p=kde.weights)
    eps = srandom.multivariate_normal(eps_key, snp.zeros(kde.d, aval(kde.covariance).dtype),
                                      kde.covariance, shape=shape,
                                      dtype=aval(kde.dataset).dtype).T
    return kde.dataset[:, ind] + eps


@jax.tree_util.register_pytree_node_class
@dataclass(frozen=True, init=False, slots=True)
class gaussian_kde:
    """A Gaussian kernel density estimate of `dataset` (d x n, or n points in 1-d), as
    scipy.stats.gaussian_kde; bw_method 'scott', 'silverman', a scalar or a callable."""
    neff: Any
    dataset: Any
    weights: Any
    covariance: Any
    inv_cov: Any

    def __init__(self, dataset, bw_method=None, weights=None):
        check_arraylike("gaussian_kde", dataset)
        dataset = snp.atleast_2d(dataset)
        if _is_complex(dataset):
            raise ShardcNotImplementedError("gaussian_kde does not support complex data")
        if not math.prod(aval(dataset).shape) > 1:
            raise ArgumentError("`dataset` input should have multiple elements.")
        d, n = aval(dataset).shape
        if weights is not None:
            check_arraylike("gaussian_kde", weights)
            dataset, weights = materialize(*promote_dtypes_inexact(dataset, weights))
            weights = snp.atleast_1d(weights)
            weights = weights / snp.sum(weights)
            if aval(weights).ndim != 1:
                raise ArgumentError("`weights` input should be one-dimensional.")
            if aval(weights).shape[0] != n:
                raise ArgumentError("`weights` input should be of length n")
        else:
            (dataset,) = materialize(*promote_dtypes_inexact(dataset))
            weights = snp.full(n, 1.0 / n, dtype=aval(dataset).dtype)
        self._setattr("dataset", dataset)
        self._setattr("weights", weights)
        neff = self._setattr("neff", 1 / snp.sum(weights ** 2))
        bw_method = "scott" if bw_method is None else bw_method
        if isinstance(bw_method, str) and bw_method == "scott":
            factor = snp.power(neff, -1.0 / (d + 4))
        elif isinstance(bw_method, str) and bw_method == "silverman":
            factor = snp.power(neff * (d + 2) / 4.0, -1.0 / (d + 4))
        elif snp.isscalar(bw_method) and not isinstance(bw_method, str):
            factor = bw_method
        elif callable(bw_method):
            factor = bw_method(self)
        else:
            raise ArgumentError("`bw_method` should be 'scott', 'silverman', a scalar, "
                                "or a callable.")
        data_cov = snp.atleast_2d(snp.cov(dataset, rowvar=1, bias=False, aweights=weights))
        data_inv_cov = snp.linalg.inv(data_cov)
        self._setattr("covariance", data_cov * factor ** 2)
        self._setattr("inv_cov", data_inv_cov / factor ** 2)

    def _setattr(self, name, value):
        # frozen dataclass: fields are set once, here and in tree_unflatten
        object.__setattr__(self, name, value)
        return value

    def tree_flatten(self):
        return ((self.neff, self.dataset, self.weights, self.covariance, self.inv_cov), None)

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        del aux_data
        kde = cls.__new__(cls)
        for name, value in zip(("neff", "dataset", "weights", "covariance", "inv_cov"),
                               children):
            kde._setattr(name, value)
        return kde

    @property
    def d(self):
        return aval(self.dataset).shape[0]

    @property
    def n(self):
        return aval(self.dataset).shape[1]

    def evaluate(self, points):
        """The estimated density at each of `points` (d x m)."""
        check_arraylike("evaluate", points)
        points = self._reshape_points(points)
        return jitted(_kernel_eval, self.dataset.T, self.weights[:, None], points.T,
                      self.inv_cov, in_log=False)[:, 0]

    def __call__(self, points):
        return self.evaluate(points)

    def pdf(self, x):
        return self.evaluate(x)

    def logpdf(self, x):
        """The log of the estimated density at each of `x` (d x m)."""
        check_arraylike("logpdf", x)
        x = self._reshape_points(x)
        return jitted(_kernel_eval, self.dataset.T, self.weights[:, None], x.T,
                      self.inv_cov, in_log=True)[:, 0]

    def _norm_and_chol(self, cov):
        chol = _cho_lower(self.covariance + cov)
        norm = snp.sqrt(2 * np.pi) ** self.d * snp.prod(snp.diag(chol))
        return chol, 1.0 / norm

    def integrate_gaussian(self, mean, cov):
        """The integral of the density times a Gaussian N(mean, cov)."""
        mean = snp.atleast_1d(snp.squeeze(mean))
        cov = snp.atleast_2d(cov)
        if aval(mean).shape != (self.d,):
            raise ArgumentError(f"mean does not have dimension {self.d}")
        if aval(cov).shape != (self.d, self.d):
            raise ArgumentError(f"covariance does not have dimension {self.d}")
        chol, norm = self._norm_and_chol(cov)
        return _convolve(chol, norm, self.dataset, self.weights, mean[:, None])[0]

    def integrate_box_1d(self, low, high):
        """The density's mass between `low` and `high` (1-d estimates only)."""
        return jitted(_box_1d, self, low, high)

    def integrate_kde(self, other):
        """The integral of the product of this density and `other`'s."""
        if other.d != self.d:
            raise ArgumentError("KDEs are not the same dimensionality")
        chol, norm = self._norm_and_chol(other.covariance)
        sm, lg = (self, other) if self.n < other.n else (other, self)
        result = _convolve(chol, norm, lg.dataset, lg.weights, sm.dataset)
        return snp.sum(result * sm.weights)

    def resample(self, key, shape=()):
        """Points drawn from the estimated density: `shape` + (d,) transposed, as jax's."""
        return jitted(_resample, self, key, shape=shape)

    def integrate_box(self, low_bounds, high_bounds, maxpts=None):
        del low_bounds, high_bounds, maxpts
        raise ShardcNotImplementedError(
            "only 1D box integrations are supported; use `integrate_box_1d`")

    def set_bandwidth(self, bw_method=None):
        del bw_method
        raise ShardcNotImplementedError(
            "dynamically changing the bandwidth method is not supported")

    def _reshape_points(self, points):
        if _is_complex(points):
            raise ShardcNotImplementedError(
                "gaussian_kde does not support complex coordinates")
        points = snp.atleast_2d(points)
        d, m = aval(points).shape
        if d != self.d:
            if d == 1 and m == self.d:
                points = snp.reshape(points, (self.d, 1))
            else:
                raise ArgumentError(f"points have dimension {d}, dataset has dimension "
                                    f"{self.d}")
        return points
