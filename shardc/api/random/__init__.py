"""shardc.random: jax.random's API, bit-identical to it (threefry2x32 with jax's
partitionable counters, built from shardc's own ops; rbg and unsafe_rbg on XLA's bit
generator, _impls)."""
from __future__ import annotations

# ruff: noqa: F401  (re-exports)
from ._base import (PRNGKey, bernoulli, bits, clone, default_prng_impl, fold_in, key,
                    key_data, key_dtype, key_impl, normal, randint, split, truncated_normal,
                    uniform, wrap_key_data)
from ._dist import (cauchy, categorical, double_sided_maxwell, exponential, geometric,
                    gumbel, laplace, logistic, lognormal, maxwell, pareto, rademacher,
                    rayleigh, triangular, wald, weibull_min)
from ._discrete import binomial, multinomial, poisson
from ._gamma import (ball, beta, chisquare, dirichlet, f, gamma, generalized_normal,
                     loggamma, t)
from ._keys import KeyArray
from ._perm import choice, multivariate_normal, orthogonal, permutation
from ...errors import wrap_public as _wrap_public

_wrap_public(globals())

__all__ = ["PRNGKey", "ball", "bernoulli", "beta", "binomial", "bits", "categorical", "cauchy",
           "chisquare", "choice", "clone", "default_prng_impl", "dirichlet",
           "double_sided_maxwell", "exponential", "f", "fold_in", "gamma", "generalized_normal",
           "geometric", "gumbel", "key", "key_data", "key_dtype", "key_impl", "laplace",
           "loggamma", "logistic", "lognormal", "maxwell", "multinomial",
           "multivariate_normal", "normal", "orthogonal", "pareto", "permutation", "poisson",
           "rademacher", "randint", "rayleigh", "split", "t", "triangular", "truncated_normal",
           "uniform", "wald", "weibull_min", "wrap_key_data"]
