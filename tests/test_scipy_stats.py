"""shardc.scipy.stats vs jax.scipy.stats: every distribution's functions under jit (edge
and out-of-support inputs, bad parameters), dtypes and weak types, output shardings,
gradients, eager calls, gaussian_kde as a pytree, mode / rankdata / sem, bad input."""
import inspect

import jax
import jax.numpy as jnp
import jax.scipy.stats as JST
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.scipy.stats as SST
from shardc.scipy.stats import norm as snorm
from helpers import Case, assert_close, compare_cases

XY = P("x", "y")


def st(m):
    """The stats module matching a test namespace (shardc's or jax's)."""
    return SST if m.nn is shardc.nn else JST


def grid(edges, lo, hi, seed=0):
    """An 8x16 f32 array: the edge values first, uniform(lo, hi) elsewhere."""
    out = np.random.default_rng(seed).uniform(lo, hi, (8, 16)).astype(np.float32)
    out.reshape(-1)[:len(edges)] = edges
    return out


X = grid([-np.inf, -5, -2.5, -1, -0.5, -0.0, 0, 1e-3, 0.5, 1, 2, 3.5, 10, 50, np.inf, np.nan,
          np.pi, 2 * np.pi, 7], -6, 8)
U = grid([-0.1, 0, 1e-30, 1e-6, 0.01, 0.3, 0.5, 0.7, 0.99, 0.999999, 1, 1.1, np.nan], 0, 1, 1)
# parameters: mostly valid, a few zero / negative / nan (bad-parameter results)
PRM = grid([0.5, 1, 2, 0, -1, np.nan, 0.25, 7, 1.5, 3, 0.1, 12], 0.2, 5, 2)
LOC = grid([0, 1, -1, 2], -2, 2, 3)
SMALL = grid([0.5, 0.1, 0.9, 0, 1, -0.2, 1.2], 0.05, 0.95, 4)     # probabilities
K = grid([-np.inf, -2, -1, -0.0, 0, 0.5, 1, 1.5, 2, 3, 5, 10, 40, np.inf, np.nan], 0, 12, 5)
K = np.where(np.isfinite(K) & (np.arange(128).reshape(8, 16) > 15), np.round(K), K)
N = np.round(grid([0, 1, 2, 5, 10, -1, 3], 0, 12, 6)).astype(np.float32)
PRM_B = np.float32(2.0)      # a strongly typed scalar parameter


def _case(name, fn, arrays, spec=XY, **kw):
    specs = spec if isinstance(spec, list) else [spec] * len(arrays)
    return Case(name, lambda m, *xs: fn(st(m), *xs), arrays, specs, numpy_ref=False, **kw)


CONTINUOUS = {  # name: (fn(stats, *arrays), arrays)
    "norm.logpdf": (lambda s, x: s.norm.logpdf(x), [X]),
    "norm.logpdf3": (lambda s, x, l, c: s.norm.logpdf(x, l, c), [X, LOC, PRM]),
    "norm.pdf": (lambda s, x: s.norm.pdf(x, 1.0, 2.0), [X]),
    "norm.cdf": (lambda s, x, l: s.norm.cdf(x, l), [X, LOC]),
    "norm.logcdf": (lambda s, x: s.norm.logcdf(x * 4), [X]),
    "norm.sf": (lambda s, x, c: s.norm.sf(x, 0.5, c), [X, PRM]),
    "norm.logsf": (lambda s, x: s.norm.logsf(x * 4), [X]),
    "norm.ppf": (lambda s, u, c: s.norm.ppf(u, 1, c), [U, PRM]),
    "norm.isf": (lambda s, u: s.norm.isf(u, 1.0, 2.0), [U]),
    "cauchy": (lambda s, x, l, c: [getattr(s.cauchy, f)(x, l, c) for f in
                                   ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")],
               [X, LOC, PRM]),
    "cauchy.q": (lambda s, u: [s.cauchy.ppf(u, 1.0, 2.0), s.cauchy.isf(u)], [U]),
    "expon": (lambda s, x, l, c: [getattr(s.expon, f)(x, l, c) for f in
                                  ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")],
              [X, LOC, PRM]),
    "expon.ppf": (lambda s, u: s.expon.ppf(u, 1.0, 2.0), [U]),
    "laplace": (lambda s, x, l, c: [s.laplace.logpdf(x, l, c), s.laplace.pdf(x),
                                    s.laplace.cdf(x, l, c)], [X, LOC, PRM]),
    "logistic": (lambda s, x, l, c: [getattr(s.logistic, f)(x, l, c) for f in
                                     ("logpdf", "pdf", "cdf", "sf")], [X, LOC, PRM]),
    "logistic.q": (lambda s, u: [s.logistic.ppf(u, 1.0, 2.0), s.logistic.isf(u)], [U]),
    "uniform": (lambda s, x, l, c: [s.uniform.logpdf(x, l, c), s.uniform.pdf(x),
                                    s.uniform.cdf(x, l, c)], [X, LOC, PRM]),
    "uniform.ppf": (lambda s, u: s.uniform.ppf(u, -1.0, 3.0), [U]),
    "t": (lambda s, x, d, l: [s.t.logpdf(x, d, l, 2.0), s.t.pdf(x, d)], [X, PRM, LOC]),
    "gumbel_l": (lambda s, x, l, c: [getattr(s.gumbel_l, f)(x, l, c) for f in
                                     ("logpdf", "pdf", "logcdf", "cdf", "sf", "logsf")],
                 [X, LOC, PRM]),
    "gumbel_r": (lambda s, x, l, c: [getattr(s.gumbel_r, f)(x, l, c) for f in
                                     ("logpdf", "pdf", "logcdf", "cdf", "sf", "logsf")],
                 [X, LOC, PRM]),
    "gumbel.ppf": (lambda s, u, c: [s.gumbel_l.ppf(u, 1.0, c), s.gumbel_r.ppf(u, -1, c)],
                   [U, PRM]),
    "pareto": (lambda s, x, b, l: [getattr(s.pareto, f)(x, b, l, 0.5) for f in
                                   ("logpdf", "pdf", "cdf", "logcdf", "sf", "logsf")],
               [X, PRM, LOC]),
    "pareto.ppf": (lambda s, u, b: s.pareto.ppf(u, b, 1.0, 2.0), [U, PRM]),
    "gennorm": (lambda s, x, b: [s.gennorm.logpdf(x, b), s.gennorm.pdf(x, b),
                                 s.gennorm.cdf(x, b)], [X, PRM]),
    "vonmises": (lambda s, x, k: [s.vonmises.logpdf(x, k), s.vonmises.pdf(x, 2.0)], [X, PRM]),
    "wrapcauchy": (lambda s, x, c: [s.wrapcauchy.logpdf(x, c), s.wrapcauchy.pdf(x, 0.3)],
                   [X, SMALL]),
    # the incomplete gamma / beta functions are loops, slow to compile: log- and
    # complementary forms of these four are checked eagerly (test_eager_wrappers)
    "beta": (lambda s, x, a, b: [getattr(s.beta, f)(x, a, b) for f in ("logpdf", "pdf", "cdf")],
             [X / 8 + 0.3, PRM, PRM[::-1]]),
    "beta.loc": (lambda s, x: s.beta.logpdf(x, 2.0, 3.0, -1.0, 4.0), [X]),
    "chi2": (lambda s, x, d: [s.chi2.logpdf(x, d), s.chi2.pdf(x, d, 1.0, 2.0), s.chi2.sf(x, d)],
             [X, PRM]),
    "gamma": (lambda s, x, a: [s.gamma.logpdf(x, a), s.gamma.pdf(x, a), s.gamma.cdf(x, a)],
              [X, PRM]),
    "gamma.loc": (lambda s, x, l: s.gamma.logpdf(x, 2.5, l, 2.0), [X, LOC]),
    # (pdf = exp(logpdf) in test_eager; sf = exp(logsf), cdf = exp(logcdf))
    "truncnorm": (lambda s, x: [getattr(s.truncnorm, f)(x, -1.0, 2.5, 0.5, 2.0) for f in
                                ("logpdf", "logcdf", "sf")], [X]),
    "truncnorm.ab": (lambda s, x, a: s.truncnorm.logpdf(x, a - 3, a - 1), [X, PRM]),
}


def test_continuous(mesh2x4):
    compare_cases([_case(n, fn, arrays) for n, (fn, arrays) in CONTINUOUS.items()], mesh2x4)


DISCRETE = {
    "bernoulli": (lambda s, k, p: [s.bernoulli.logpmf(k, p), s.bernoulli.pmf(k, p, 1),
                                   s.bernoulli.cdf(k, p)], [K / 4, SMALL]),
    "bernoulli.ppf": (lambda s, q, p: s.bernoulli.ppf(q, p), [U, SMALL]),
    "binom": (lambda s, k, n, p: [s.binom.logpmf(k, n, p), s.binom.pmf(k, n, p, 1.0)],
              [K, N, SMALL]),
    "betabinom": (lambda s, k, n, a: [s.betabinom.logpmf(k, n, a, PRM_B, 1),
                                      s.betabinom.pmf(k, n, a, PRM_B, 1)], [K, N, PRM]),
    "geom": (lambda s, k, p: [s.geom.logpmf(k, p), s.geom.pmf(k, p, -1)], [K, SMALL]),
    "nbinom": (lambda s, k, n, p: [s.nbinom.logpmf(k, n, p), s.nbinom.pmf(k, n, p, 1.0)],
               [K, N, SMALL]),
    "poisson": (lambda s, k, mu: [s.poisson.logpmf(k, mu), s.poisson.pmf(k, mu, 1),
                                  s.poisson.cdf(k, mu, 2.0)], [K, PRM]),
    "poisson.entropy": (lambda s, mu: s.poisson.entropy(mu), [grid(
        [0, 0.5, 1, 9.9, 10, 50, 99.9, 100, 1e4, -1, np.nan], 0, 150, 7)]),
}


def test_discrete(mesh2x4):
    compare_cases([_case(n, fn, arrays) for n, (fn, arrays) in DISCRETE.items()], mesh2x4)


_rng = np.random.default_rng(8)
SIMPLEX = _rng.dirichlet([1.0, 2.0, 0.5, 1.0], 16).T.astype(np.float32)     # (4, 16)
SIMPLEX[:, :3] = np.array([[0, 0.5, 0.5, 0], [0.3, 0.3, 0.3, 0.3], [-0.1, 0.6, 0.3, 0.2]]).T
ALPHA = np.array([1.5, 2.0, 0.7, 1.0], np.float32)
_A = _rng.normal(size=(4, 4))
COV = (_A @ _A.T + np.eye(4)).astype(np.float32)
PTS = _rng.normal(size=(8, 4)).astype(np.float32)
COUNTS = _rng.multinomial(10, [0.1, 0.2, 0.3, 0.4], 8).astype(np.int32)
COUNTS[0] = [1, 2, 3, 5]       # does not sum to n
PROBS = np.array([0.1, 0.2, 0.3, 0.4], np.float32)

MULTI = [
    _case("dirichlet", lambda s, x, a: [s.dirichlet.logpdf(x, a), s.dirichlet.pdf(x, a)],
          [SIMPLEX, ALPHA], [P(None, "x"), P()]),
    _case("dirichlet.short", lambda s, x, a: s.dirichlet.logpdf(x[:3], a), [SIMPLEX, ALPHA],
          P()),
    _case("dirichlet.1d", lambda s, x, a: s.dirichlet.logpdf(x[:, 5], a), [SIMPLEX, ALPHA],
          P()),
    _case("mvn", lambda s, x, m, c: [s.multivariate_normal.logpdf(x, m, c),
                                     s.multivariate_normal.pdf(x, m, c)],
          [PTS, PTS[0], COV], P()),
    Case("mvn.sharded", lambda m, x, mu, c: st(m).multivariate_normal.logpdf(x, mu, c),
         [PTS, PTS[0], COV], [P("x", None), P(), P()], numpy_ref=False),
    _case("mvn.batched_cov", lambda s, x, m, c: s.multivariate_normal.logpdf(x[:, None], m, c),
          [PTS, PTS[0], np.stack([COV, 2 * COV])], P()),
    _case("mvn.scalar_cov", lambda s, x, m: s.multivariate_normal.logpdf(x, m, 2.0),
          [PTS, PTS[0]], P()),
    _case("mvn.scalar_mean", lambda s, x: s.multivariate_normal.logpdf(x, 0.5, 2.0), [X]),
    _case("multinomial", lambda s, x, p: [s.multinomial.logpmf(x, 10, p),
                                          s.multinomial.pmf(x[1], 10, p)],
          [COUNTS, PROBS], P()),
]


def test_multivariate(mesh2x4):
    compare_cases(MULTI, mesh2x4)


A = np.random.default_rng(9).integers(0, 4, (8, 16)).astype(np.float32)
A_NAN = A.copy()
A_NAN[:, 5] = [np.nan] * 4 + [0, 1, 2, 3]              # NaNs (counted as one value) win
A_NAN[:, 7] = [np.nan, np.nan, 1, 1, 0, 2, 3, 0]       # a three-way tie: the smallest, 0
A_NAN[2, 9] = np.nan                                   # one NaN: the row's ranks are NaN
A_NAN[0, 0], A_NAN[1, 0] = -0.0, 0.0
AI = A.astype(np.int32)


def test_mode_rankdata_sem(mesh2x4):
    cases = [_case(f"mode{i}", lambda s, a, kw=kw: s.mode(a, **kw), [arr])
             for i, (arr, kw) in enumerate([
                 (A_NAN, {}), (AI, dict(axis=None, keepdims=True)),
                 (AI > 1, dict(axis=-1, keepdims=True))])]
    cases += [_case("mode.empty", lambda s, a: s.mode(a[:0]), [A], P())]
    # ranks along an axis: jax's vmapped gathers leave the ranked axis replicated, the
    # sorts here keep the input's sharding (same values)
    cases += [_case(f"rankdata{i}", lambda s, a, kw=kw: s.rankdata(a, **kw), [arr],
                    check_sharding=kw.get("axis") is None)
              for i, (arr, kw) in enumerate([
                  (A_NAN, {}), (A, dict(method="max")), (A_NAN, dict(axis=1)),
                  (AI, dict(method="dense", axis=0)), (A, dict(method="ordinal", axis=-1))])]
    cases += [_case(f"sem{i}", lambda s, a, kw=kw: s.sem(a, **kw), [arr])
              for i, (arr, kw) in enumerate([
                  (X, {}), (A, dict(axis=None)), (A_NAN, dict(axis=1, ddof=0, keepdims=True)),
                  (A_NAN, dict(nan_policy="omit", ddof=8))])]
    compare_cases(cases, mesh2x4)


def test_dtypes_and_weak_types(mesh2x4):
    """Python scalars give weak results, ints the default float, bfloat16 stays bfloat16
    (as jax's promote_args_inexact), norm.ppf always the default float."""
    weak = [(n, fn) for n, fn in [
        ("norm.logpdf", lambda s, x: s.norm.logpdf(x)),
        ("norm.ppf", lambda s, x: s.norm.ppf(x / 4)),
        ("uniform.cdf", lambda s, x: s.uniform.cdf(x)),
        ("pareto.cdf", lambda s, x: s.pareto.cdf(x, 2.0)),
        ("gamma.sf", lambda s, x: s.gamma.sf(x, 2.0)),
        ("bernoulli.cdf", lambda s, x: s.bernoulli.cdf(x, 0.3)),
        ("bernoulli.ppf", lambda s, x: s.bernoulli.ppf(x / 4, 0.3)),
        ("poisson.cdf", lambda s, x: s.poisson.cdf(x, 2.0)),
        ("truncnorm.logpdf", lambda s, x: s.truncnorm.logpdf(x, -1.0, 2.0)),
        ("mvn", lambda s, x: s.multivariate_normal.logpdf(x, 0.5, 2.0)),
        ("vonmises", lambda s, x: s.vonmises.logpdf(x, 1.0)),
        ("wrapcauchy", lambda s, x: s.wrapcauchy.logpdf(x, 0.5)),
        ("sem", lambda s, x: s.sem(x, axis=None))]]
    cases = [_case(f"{n}-weak", fn, [1.25], None) for n, fn in weak]
    ints = np.random.default_rng(1).integers(0, 5, (8, 16)).astype(np.int32)
    for n, fn in [("norm.cdf", lambda s, x: s.norm.cdf(x, 1, 2)),
                  ("chi2.logpdf", lambda s, x: s.chi2.logpdf(x, 3)),
                  ("binom.logpmf", lambda s, x: s.binom.logpmf(x, 5, 0.5)),
                  ("poisson.logpmf", lambda s, x: s.poisson.logpmf(x, 2)),
                  ("laplace.cdf", lambda s, x: s.laplace.cdf(x)),
                  ("rankdata", lambda s, x: s.rankdata(x))]:
        cases.append(_case(f"{n}-int", fn, [ints]))
    bf = X.astype(jnp.bfloat16)
    for n, fn in [("norm.logpdf", lambda s, x: s.norm.logpdf(x, 0.5)),
                  ("expon.cdf", lambda s, x: s.expon.cdf(x)),
                  ("gamma.logpdf", lambda s, x: s.gamma.logpdf(x, 2.0)),
                  ("norm.ppf-f32", lambda s, x: s.norm.ppf(0.3, 0, x)),
                  ("logistic.sf", lambda s, x: s.logistic.sf(x))]:
        cases.append(_case(f"{n}-bf16", fn, [bf]))
    compare_cases(cases, mesh2x4)


def test_float64(mesh2x4):
    with jax.enable_x64(True):
        x, u = X.astype(np.float64), U.astype(np.float64)
        compare_cases([
            _case("norm.logcdf", lambda s, x: s.norm.logcdf(x * 4), [x]),
            _case("norm.ppf", lambda s, u: s.norm.ppf(u), [u]),
            _case("gamma.logpdf", lambda s, x: s.gamma.logpdf(x, 2.5), [x]),
            _case("rankdata", lambda s, x: s.rankdata(x, "average"), [x])], mesh2x4)


def test_eager(mesh2x4):
    """Without jit: op by op, and jax's jitted functions (truncnorm, betabinom, mode, ...)
    as one compiled program each."""
    compare_cases([
        _case("norm.logpdf", lambda s, x: s.norm.logpdf(x, 1.0, 2.0), [X]),
        _case("truncnorm.pdf", lambda s, x: s.truncnorm.pdf(x, -1.0, 2.0), [X]),
        _case("mode", lambda s, a: s.mode(a, axis=1), [A_NAN]),
        _case("rankdata", lambda s, a: s.rankdata(a, "min"), [A]),
    ], mesh2x4, eager=True)


def test_eager_wrappers(mesh2x4):
    """The log and complementary forms of beta, chi2 and gamma (eagerly: each compiles the
    incomplete gamma or beta function once; logsf = log(sf), logcdf = log(cdf))."""
    x, p1, p2 = X / 8 + 0.3, PRM, PRM[::-1]
    compare_cases([_case(f"beta.{f}", lambda s, x, a, b, f=f: getattr(s.beta, f)(x, a, b),
                         [x, p1, p2]) for f in ("logcdf", "logsf")]
                  + [_case(f"{d}.{f}", lambda s, x, a, d=d, f=f: getattr(getattr(s, d), f)(x, a),
                           [X, p1]) for d in ("chi2", "gamma") for f in ("logcdf", "logsf")],
                  mesh2x4, eager=True)


# ---------------------------------------------------------------- gradients

GRADS = {  # name: (fn(stats, x) summed, x)
    "norm.logpdf": (lambda s, x: s.norm.logpdf(x, 0.5 * x, 1 + x * x), X / 4),
    "norm.logcdf": (lambda s, x: s.norm.logcdf(x), X * 3),
    "t.logpdf": (lambda s, x: s.t.logpdf(1.5, x), PRM),
    "gamma.logpdf": (lambda s, x: s.gamma.logpdf(2.0, x, 0.5), PRM),
    "beta.logpdf": (lambda s, x: s.beta.logpdf(0.3, x, 2.0), PRM),
    # (not at NaN: shardc's lax.clamp differentiates as max then min, jax's clamp gives 0)
    "beta.cdf": (lambda s, x: s.beta.cdf(x, 2.0, 3.5), np.nan_to_num(U)),
    "chi2.cdf": (lambda s, x: s.chi2.cdf(x, 3.0), np.nan_to_num(PRM)),
    "truncnorm.logpdf": (lambda s, x: s.truncnorm.logpdf(x, -1.0, 2.0), X / 4),
    "poisson.logpmf": (lambda s, x: s.poisson.logpmf(3.0, x), PRM),
    "binom.logpmf": (lambda s, x: s.binom.logpmf(3.0, 6.0, x), SMALL),
    "gumbel_r.logsf": (lambda s, x: s.gumbel_r.logsf(x), X / 4),
    "logistic.cdf": (lambda s, x: s.logistic.cdf(x, 0.5, 2.0), X),
    "vonmises.logpdf": (lambda s, x: s.vonmises.logpdf(1.0, x), PRM),
    "pareto.logsf": (lambda s, x: s.pareto.logsf(3.0, x), PRM),
}


def test_gradients(mesh2x4):
    names = sorted(GRADS)
    xs = [jax.device_put(jnp.asarray(GRADS[n][1]), NamedSharding(mesh2x4, XY)) for n in names]

    def run(mod, grad):
        def f(*xs):
            return [grad(lambda x, n=n: GRADS[n][0](mod, x).sum())(x)
                    for n, x in zip(names, xs)]
        return f
    ours = shardc.jit(run(SST, shardc.grad))(*xs)
    ref = jax.jit(run(JST, jax.grad))(*xs)
    for n, o, r in zip(names, ours, ref):
        assert_close(o, r, f"grad of {n}")


def test_multivariate_gradients():
    def f(mod):
        def loss(mean, cov):
            return mod.multivariate_normal.logpdf(PTS, mean, cov).sum() + \
                mod.gaussian_kde(PTS.T[:2]).logpdf(mean[:2]).sum()
        return loss
    ours = shardc.jit(shardc.grad(f(SST), argnums=(0, 1)))(PTS[0], COV)
    ref = jax.jit(jax.grad(f(JST), argnums=(0, 1)))(PTS[0], COV)
    assert_close(ours[0], ref[0], "d/dmean")
    np.testing.assert_allclose(ours[1], ref[1], rtol=1e-4, atol=1e-5, err_msg="d/dcov")


# ---------------------------------------------------------------- gaussian_kde

D2 = np.random.default_rng(10).normal(size=(2, 32)).astype(np.float32)
W = np.random.default_rng(11).uniform(0.1, 1, 32).astype(np.float32)
Q = np.random.default_rng(12).normal(size=(2, 8)).astype(np.float32)


def _kde_all(s, d, w, q, bw=0.3):
    k, kw = s.gaussian_kde(d), s.gaussian_kde(d, "silverman", weights=w)
    kb = s.gaussian_kde(d, bw_method=bw)       # a traced scalar bandwidth under jit
    k1 = s.gaussian_kde(d[0], bw_method=0.4)
    kc = s.gaussian_kde(d[1], bw_method=lambda kde: 0.5 * kde.neff ** -0.2)
    return [k, kw, k.evaluate(q), kw(q), kw.logpdf(q), k.pdf(q[:, 0]), k1.logpdf(q[0]),
            k.integrate_gaussian(q[:, 0], jnp.eye(2) if s is JST else shardc.numpy.eye(2)),
            k1.integrate_box_1d(-1.0, 0.5), k.integrate_kde(kw), k1.integrate_kde(kc),
            kb.covariance]


def test_gaussian_kde(mesh2x4):
    compare_cases([Case("kde", lambda m, *xs: _kde_all(st(m), *xs), [D2, W, Q, 0.3],
                        [P(None, "x"), P("x"), P(), None], numpy_ref=False)], mesh2x4)


def test_gaussian_kde_eager_pytree_and_resample():
    ours, ref = SST.gaussian_kde(D2, weights=W), JST.gaussian_kde(D2, weights=W)
    for what, o, r in [("fields", ours, ref), ("logpdf", ours.logpdf(Q), ref.logpdf(Q))]:
        for i, (a, b) in enumerate(zip(jax.tree_util.tree_leaves(o),
                                       jax.tree_util.tree_leaves(r))):
            np.testing.assert_allclose(a, b, rtol=5e-5, atol=1e-6, err_msg=f"eager {what} {i}")
    leaves, tree = jax.tree_util.tree_flatten(ours)
    assert len(leaves) == 5 and isinstance(jax.tree_util.tree_unflatten(tree, leaves),
                                           SST.gaussian_kde)
    assert (ours.d, ours.n) == (2, 32)
    # through jit as an argument; resample draws what jax's draws from the same key
    key = jax.random.key(3)
    got = shardc.jit(lambda k, key: k.resample(key, (5,)))(ours, key)
    assert_close(got, ref.resample(key, (5,)), "resample")


# ---------------------------------------------------------------- errors, namespace

ERRORS = {  # jax rejects these; shardc must too, naming the user's line
    "mvn_allow_singular": lambda s, x: s.multivariate_normal.logpdf(x, x, 1.0,
                                                                    allow_singular=True),
    "mvn_cov_shape": lambda s, x: s.multivariate_normal.logpdf(x, x[0], x[:3, :5]),
    "dirichlet_alpha_2d": lambda s, x: s.dirichlet.logpdf(x[:, :2], x[:2, :2]),
    "dirichlet_x_len": lambda s, x: s.dirichlet.logpdf(x[:5], x[0, :3]),
    "multinomial_float": lambda s, x: s.multinomial.logpmf(x[0], 3.0, x[1]),
    "mode_omit": lambda s, x: s.mode(x, nan_policy="omit"),
    "mode_policy": lambda s, x: s.mode(x, nan_policy="skip"),
    "mode_axis": lambda s, x: s.mode(x, axis=2),
    "rankdata_method": lambda s, x: s.rankdata(x, "median"),
    "rankdata_raise": lambda s, x: s.rankdata(x, nan_policy="raise"),
    "sem_policy": lambda s, x: s.sem(x, nan_policy="raise"),
    "norm_ppf_f16": lambda s, x: s.norm.ppf(x.astype(jnp.float16)),
    "kde_complex": lambda s, x: s.gaussian_kde(x.astype(jnp.complex64)),
    "kde_one_point": lambda s, x: s.gaussian_kde(x[0, :1]),
    "kde_bw": lambda s, x: s.gaussian_kde(x[:2], bw_method="wide"),
    "kde_weights": lambda s, x: s.gaussian_kde(x[:2], weights=x[0, :3]),
    "kde_points": lambda s, x: s.gaussian_kde(x[:2]).evaluate(x[:3]),
    "kde_box_2d": lambda s, x: s.gaussian_kde(x[:2]).integrate_box_1d(0.0, 1.0),
    "kde_box_nd": lambda s, x: s.gaussian_kde(x[:2]).integrate_box([0, 0], [1, 1]),
    "kde_set_bw": lambda s, x: s.gaussian_kde(x[:2]).set_bandwidth("scott"),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors(name):
    fn = ERRORS[name]
    compare_cases([Case(name, lambda m, x: fn(st(m), x), [X], numpy_ref=False)])


def _params(f):
    return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]


def test_namespace():
    """Every public name of jax.scipy.stats, each submodule's functions with jax's
    signatures; `import shardc.scipy.stats.norm` and attribute access agree."""
    import shardc.scipy.stats.norm
    assert shardc.scipy.stats.norm is snorm is SST.norm
    public = sorted(n for n in dir(JST) if not n.startswith("_"))
    assert not set(public) - set(dir(SST)), set(public) - set(dir(SST))
    for n in public:
        j, s = getattr(JST, n), getattr(SST, n)
        if not inspect.ismodule(j):
            continue
        names = sorted(f for f in dir(j) if not f.startswith("_"))
        assert names == sorted(s.__all__), n
        for f in names:
            assert _params(getattr(s, f)) == _params(getattr(j, f)), f"{n}.{f}"
    for f in ("mode", "rankdata", "sem", "gaussian_kde"):
        assert _params(getattr(SST, f)) == _params(getattr(JST, f)), f
