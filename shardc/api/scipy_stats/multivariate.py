"""Multivariate densities of jax.scipy.stats: dirichlet and multivariate_normal."""
from __future__ import annotations

import functools

import numpy as np

from .. import numpy as snp
from ...errors import ArgumentError, ShardcNotImplementedError, wrap_public
from ..lax_linalg import cholesky, triangular_solve
from ..numpy._util import aval, promote_dtypes_inexact
from ..scipy_special import gammaln, xlogy
from ._util import materialize

__all__ = ["dirichlet_logpdf", "dirichlet_pdf", "multivariate_normal_logpdf",
           "multivariate_normal_pdf"]


# ---------------------------------------------------------------- dirichlet

def _is_simplex(x):
    return snp.all(x > 0, axis=0) & (abs(snp.sum(x, axis=0) - 1) < 1e-6)


def dirichlet_logpdf(x, alpha):
    x, alpha = materialize(*promote_dtypes_inexact(x, alpha))
    xs, al = aval(x).shape, aval(alpha).shape
    if len(al) != 1:
        raise ArgumentError(f"`alpha` must be one-dimensional; got alpha.shape={al}")
    if not xs:
        raise ArgumentError("dirichlet.logpdf: `x` must have at least one dimension "
                            "(its first indexes the categories); got a scalar")
    if xs[0] not in (al[0], al[0] - 1):
        raise ArgumentError("`x` must have either the same number of entries as `alpha` or "
                            f"one entry fewer; got x.shape={xs}, alpha.shape={al}")
    if xs[0] != al[0]:     # the last category's share is what the others leave
        x = snp.concatenate([x, 1 - snp.sum(x, axis=0, keepdims=True)], axis=0)
    normalize_term = snp.sum(gammaln(alpha)) - gammaln(snp.sum(alpha))
    if len(xs) > 1:
        alpha = snp.reshape(alpha, al + (1,) * (len(xs) - 1))
    log_probs = snp.sum(xlogy(alpha - 1, x), axis=0) - normalize_term
    return snp.where(_is_simplex(x), log_probs, -np.inf)


def dirichlet_pdf(x, alpha):
    return snp.exp(dirichlet_logpdf(x, alpha))


# ---------------------------------------------------------------- multivariate_normal

def multivariate_normal_logpdf(x, mean, cov, allow_singular=None):
    if allow_singular is not None:
        raise ShardcNotImplementedError("allow_singular argument of "
                                        "multivariate_normal.logpdf")
    x, mean, cov = materialize(*promote_dtypes_inexact(x, mean, cov))
    log_2pi = snp.log(2 * np.pi)
    if not aval(mean).shape:
        return -1 / 2 * snp.square(x - mean) / cov - 1 / 2 * (log_2pi + snp.log(cov))
    n = aval(mean).shape[-1]
    if not aval(cov).shape:
        y = x - mean
        return (-1 / 2 * snp.einsum("...i,...i->...", y, y) / cov
                - n / 2 * (log_2pi + snp.log(cov)))
    cs = aval(cov).shape
    if len(cs) < 2 or cs[-2:] != (n, n):
        raise ArgumentError("multivariate_normal.logpdf got incompatible shapes")
    chol = cholesky(cov)
    # whitened residuals y = chol^-1 (x - mean), solved as y @ chol^T = x - mean
    solve = functools.partial(triangular_solve, lower=True, transpose_a=True)
    r = x - mean
    if len(cs) == 2:     # one factor: every point is a row of one solve (as jax's vmap)
        rs = aval(r).shape
        y = snp.reshape(solve(chol, snp.reshape(r, (-1, n))), rs)
    else:
        y = snp.vectorize(solve, signature="(n,n),(n)->(n)")(chol, r)
    return (-1 / 2 * snp.einsum("...i,...i->...", y, y) - n / 2 * log_2pi
            - snp.sum(snp.log(snp.diagonal(chol, axis1=-1, axis2=-2)), axis=-1))


def multivariate_normal_pdf(x, mean, cov):
    return snp.exp(multivariate_normal_logpdf(x, mean, cov))


wrap_public(globals())
