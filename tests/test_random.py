"""shardc.random is jax.random bit for bit: every sampler, eagerly and under jit, on
typed and raw keys, in several shapes and dtypes."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
from shardc import random as sr
from helpers import sample

jr = jax.random


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    assert np.array_equal(a, b, equal_nan=True), (a.ravel()[:6], b.ravel()[:6])


# parameters are arguments of the jitted functions (as jax.random's own jit passes
# them): XLA constant-folds transcendental functions of constants with its evaluator,
# whose last bits differ from the compiled kernels' (jax.jit vs jax's eager differ too)
PARAMS = dict(
    A=jnp.array([0.3, 1.0, 2.5, 7.0]),
    LOGITS=jnp.arange(12.).reshape(3, 4) / 5,
    LAM=jnp.array([0., 0.5, 3., 9.9, 10., 25., 300.]),
    N=jnp.array([0., 5., 20., 100., 1000., -1., jnp.inf]),
    PN=jnp.array([0.3, 0.5, 0.9, 0.2, 0.05, 0.3, 0.3]),
    P=jnp.float32(1.5), P2=2,
    COV=jnp.array([[2., .5, 0.], [.5, 1., .2], [0., .2, 1.5]]),
)

# (name, call(random_module, key)) — each runs on shardc.random and jax.random
CASES = [
    ("bits", lambda r, k, p: r.bits(k, (3, 5))),
    ("bits_u8", lambda r, k, p: r.bits(k, (7,), jnp.uint8)),
    ("bits_u16", lambda r, k, p: r.bits(k, (2, 3), jnp.uint16)),
    ("uniform", lambda r, k, p: r.uniform(k, (4, 5))),
    ("uniform_scalar", lambda r, k, p: r.uniform(k)),
    ("uniform_bf16", lambda r, k, p: r.uniform(k, (9,), jnp.bfloat16)),
    ("uniform_f16", lambda r, k, p: r.uniform(k, (9,), jnp.float16)),
    ("uniform_bounds", lambda r, k, p: r.uniform(k, (4,), minval=-2., maxval=jnp.arange(4.))),
    ("normal", lambda r, k, p: r.normal(k, (3, 4))),
    ("normal_bf16", lambda r, k, p: r.normal(k, (5,), jnp.bfloat16)),
    ("normal_f16", lambda r, k, p: r.normal(k, (5,), jnp.float16)),
    ("normal_complex", lambda r, k, p: r.normal(k, (2, 3), jnp.complex64)),
    ("truncated_normal", lambda r, k, p: r.truncated_normal(k, -1., 2., (10,))),
    ("truncated_normal_bcast", lambda r, k, p: r.truncated_normal(k, jnp.zeros(3), 1.)),
    ("bernoulli", lambda r, k, p: r.bernoulli(k, 0.3, (10,))),
    ("bernoulli_high", lambda r, k, p: r.bernoulli(k, 0.3, (10,), mode="high")),
    ("bernoulli_p", lambda r, k, p: r.bernoulli(k, jnp.linspace(0, 1, 6))),
    ("randint", lambda r, k, p: r.randint(k, (20,), 0, 100)),
    ("randint_i8", lambda r, k, p: r.randint(k, (20,), -100, 300, jnp.int8)),
    ("randint_u8", lambda r, k, p: r.randint(k, (20,), 0, 256, jnp.uint8)),
    ("randint_arr", lambda r, k, p: r.randint(k, (20,), -5, jnp.arange(20))),
    ("exponential", lambda r, k, p: r.exponential(k, (5, 3))),
    ("exponential_bf16", lambda r, k, p: r.exponential(k, (5,), jnp.bfloat16)),
    ("laplace", lambda r, k, p: r.laplace(k, (5, 3))),
    ("logistic", lambda r, k, p: r.logistic(k, (5, 3), jnp.float16)),
    ("cauchy", lambda r, k, p: r.cauchy(k, (5, 3))),
    ("gumbel", lambda r, k, p: r.gumbel(k, (5, 3))),
    ("gumbel_high", lambda r, k, p: r.gumbel(k, (6,), mode="high")),
    ("gumbel_highest", lambda r, k, p: r.gumbel(k, (4, 5), mode="highest")),
    ("gumbel_highest_bf16", lambda r, k, p: r.gumbel(k, (6,), jnp.bfloat16, mode="highest")),
    ("categorical_highest", lambda r, k, p: r.categorical(k, p['LOGITS'], mode="highest")),
    ("categorical", lambda r, k, p: r.categorical(k, p['LOGITS'])),
    ("categorical_axis0", lambda r, k, p: r.categorical(k, p['LOGITS'], axis=0, shape=(2, 4))),
    ("maxwell", lambda r, k, p: r.maxwell(k, (5, 3))),
    ("double_sided_maxwell", lambda r, k, p: r.double_sided_maxwell(k, 1., 2., (7,))),
    ("rademacher", lambda r, k, p: r.rademacher(k, (5, 3))),
    ("rademacher_f32", lambda r, k, p: r.rademacher(k, (5,), jnp.float32)),
    ("pareto", lambda r, k, p: r.pareto(k, 2., (4, 3))),
    ("rayleigh", lambda r, k, p: r.rayleigh(k, 1.5, (4, 3))),
    ("wald", lambda r, k, p: r.wald(k, jnp.array([1., 2., 3.]), (4, 3))),
    ("triangular", lambda r, k, p: r.triangular(k, 0., 0.3, 1., (4, 3))),
    ("lognormal", lambda r, k, p: r.lognormal(k, 0.5, (4, 3))),
    ("geometric", lambda r, k, p: r.geometric(k, 0.3, (4, 3))),
    ("weibull_min", lambda r, k, p: r.weibull_min(k, 2., 1.5, (7,))),
    ("gamma", lambda r, k, p: r.gamma(k, p['A'])),
    ("gamma_shape", lambda r, k, p: r.gamma(k, 2.0, (3,))),
    ("gamma_bf16", lambda r, k, p: r.gamma(k, p['A'], dtype=jnp.bfloat16)),
    ("loggamma", lambda r, k, p: r.loggamma(k, p['A'])),
    ("beta", lambda r, k, p: r.beta(k, 2., p['A'])),
    ("dirichlet", lambda r, k, p: r.dirichlet(k, p['A'], (2,))),
    ("chisquare", lambda r, k, p: r.chisquare(k, p['A'])),
    ("f", lambda r, k, p: r.f(k, p['A'], 3.)),
    ("t", lambda r, k, p: r.t(k, p['A'])),
    ("generalized_normal", lambda r, k, p: r.generalized_normal(k, p['P'], (5,))),
    ("ball", lambda r, k, p: r.ball(k, 3, p['P2'], (4,))),
    ("poisson", lambda r, k, p: r.poisson(k, p['LAM'])),
    ("poisson_shape", lambda r, k, p: r.poisson(k, 4.0, (5,))),
    ("binomial", lambda r, k, p: r.binomial(k, p['N'], p['PN'])),
    ("multinomial", lambda r, k, p: r.multinomial(k, 10., jnp.array([0.2, 0.3, 0.5]))),
]

NEEDS_SORT = [
    ("permutation_int", lambda r, k, p: r.permutation(k, 10)),
    ("permutation", lambda r, k, p: r.permutation(k, jnp.arange(24.).reshape(4, 6))),
    ("permutation_independent", lambda r, k, p: r.permutation(
        k, jnp.arange(24.).reshape(4, 6), axis=1, independent=True)),
    ("choice", lambda r, k, p: r.choice(k, 10, (3,))),
    ("choice_noreplace", lambda r, k, p: r.choice(k, jnp.arange(24.).reshape(4, 6), (2,),
                                                replace=False)),
    ("choice_p", lambda r, k, p: r.choice(k, 4, (5,), p=jnp.array([.1, .2, .3, .4]))),
    ("choice_p_noreplace", lambda r, k, p: r.choice(k, 4, (3,), replace=False,
                                                  p=jnp.array([.1, .2, .3, .4]))),
    ("categorical_noreplace", lambda r, k, p: r.categorical(k, p['LOGITS'], shape=(2, 3),
                                                         replace=False)),
]
NEEDS_LINALG = [
    ("mvn", lambda r, k, p: r.multivariate_normal(k, jnp.array([1., 2., 3.]), p['COV'], (4,))),
    ("mvn_eigh", lambda r, k, p: r.multivariate_normal(k, jnp.zeros(3), p['COV'], method="eigh")),
    ("mvn_svd", lambda r, k, p: r.multivariate_normal(k, jnp.zeros(3), p['COV'], method="svd")),
    ("orthogonal", lambda r, k, p: r.orthogonal(k, 4)),
    ("orthogonal_nm", lambda r, k, p: r.orthogonal(k, 3, (2,), m=5)),
]


def _available(cases, *names):
    have = all(hasattr(shardc.lax, n) or hasattr(shardc.numpy.linalg, n) for n in names)
    marks = [] if have else [pytest.mark.skip(reason=f"needs {names} (another branch)")]
    return [pytest.param(c, id=c[0], marks=marks) for c in cases]


ALL = [pytest.param(c, id=c[0]) for c in CASES] + \
    _available(NEEDS_SORT, "sort_key_val", "top_k") + _available(NEEDS_LINALG, "qr")


# `make test` compiles half the samplers (all of them in `make test-slow`); eager runs
# the jit path's ops one by one: a quarter of them
JIT = sample(ALL, 2)
EAGER = sample(ALL, 4)


@pytest.mark.parametrize("case", EAGER)
def test_eager_matches_jax(case):
    _, call = case
    k = jr.key(3)
    same(call(sr, k, PARAMS), call(jr, k, PARAMS))


@pytest.mark.parametrize("case", JIT)
def test_jit_matches_jax(case):
    _, call = case
    k = jr.key(11)
    same(shardc.jit(lambda k, p: call(sr, k, p))(k, PARAMS),
         jax.jit(lambda k, p: call(jr, k, p))(k, PARAMS))


@pytest.mark.parametrize("seed", [0, 42, -1, 2 ** 31 - 1, 2 ** 35])
def test_keys_from_seeds(seed):
    same(sr.PRNGKey(seed), jr.PRNGKey(seed))
    same(jr.key_data(sr.key(seed)), jr.key_data(jr.key(seed)))


def test_seed_under_jit_and_numpy_seeds():
    for s in (np.int32(-7), np.uint32(3_000_000_000), np.int8(-3)):
        same(sr.PRNGKey(s), jr.PRNGKey(s))
    f = shardc.jit(lambda s: sr.key_data(sr.key(s)))
    same(f(jnp.int32(123)), jr.key_data(jr.key(123)))


@pytest.mark.parametrize("typed", [True, False])
def test_split_fold_in_bits(typed):
    k = jr.key(1) if typed else jr.PRNGKey(1)
    data = jr.key_data if typed else (lambda x: x)
    for num in (2, 5, (2, 3)):
        same(data(sr.split(k, num)), data(jr.split(k, num)))
    for d in (0, 7, 2 ** 32 - 1, jnp.int32(-3)):
        same(data(sr.fold_in(k, d)), data(jr.fold_in(k, d)))
    for bad in (-3, 2 ** 32):
        with pytest.raises(OverflowError):
            jr.fold_in(k, bad)
        with pytest.raises(OverflowError):
            sr.fold_in(k, bad)
    same(data(sr.fold_in(k, jnp.uint32(9))), data(jr.fold_in(k, jnp.uint32(9))))
    same(sr.bits(k, (4, 3)), jr.bits(k, (4, 3)))


def test_typed_results_are_jax_keys_and_interoperate():
    k = sr.key(0)
    assert isinstance(k, type(jr.key(0))) and k.dtype == jr.key(0).dtype and k.shape == ()
    ks = sr.split(k, 3)
    assert ks.shape == (3,) and ks.dtype == k.dtype
    same(jr.normal(ks[1], (3,)), sr.normal(ks[1], (3,)))
    same(sr.key_data(sr.wrap_key_data(jr.key_data(ks))), jr.key_data(ks))
    assert sr.key_impl(k) == jr.key_impl(k)
    assert sr.key_dtype() == jr.key_dtype()
    assert sr.clone(k) is k


def test_raw_keys_stay_raw():
    k = sr.PRNGKey(0)
    assert k.dtype == jnp.uint32 and k.shape == (2,)
    assert sr.split(k).shape == (2, 2) and sr.split(k).dtype == jnp.uint32
    assert sr.fold_in(k, 1).shape == (2,)


def test_public_names_cover_jax_random():
    ours = {n for n in dir(sr) if not n.startswith("_")}
    theirs = {n for n in dir(jr) if not n.startswith("_")}
    assert len(ours & theirs) >= 35
    assert theirs - ours <= {"random_gamma_p"}, theirs - ours
