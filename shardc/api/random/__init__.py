"""shardc.random: jax.random's API, bit-identical to it (threefry2x32, partitionable)."""
from __future__ import annotations

# ruff: noqa: F401  (re-exports)
from ._base import (PRNGKey, bernoulli, bits, clone, default_prng_impl, fold_in, key,
                    key_data, key_dtype, key_impl, normal, randint, split, truncated_normal,
                    uniform, wrap_key_data)
from ._keys import KeyArray
from ...errors import wrap_public as _wrap_public

_wrap_public(globals())
from ._dist import (cauchy, categorical, double_sided_maxwell, exponential, geometric,
                    gumbel, laplace, logistic, lognormal, maxwell, pareto, rademacher,
                    rayleigh, triangular, wald, weibull_min)

_wrap_public(globals())
from ._gamma import (ball, beta, chisquare, dirichlet, f, gamma, generalized_normal,
                     loggamma, t)

_wrap_public(globals())
from ._discrete import binomial, multinomial, poisson

_wrap_public(globals())
from ._perm import choice, multivariate_normal, orthogonal, permutation, shuffle

_wrap_public(globals())
