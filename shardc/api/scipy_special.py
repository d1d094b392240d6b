"""shardc.scipy.special, part 1: the gamma family, erf family, entropies, logit/expit,
the normal distribution's functions and Bessel i0/i1, as jax.scipy.special (0.10).

Each follows jax's own algorithm (its selects, segments and polynomial coefficients), so
values under shardc.jit match jax.jit's to rounding; gradients that jax defines with
custom_jvp (xlogy, xlog1py, entr, logit, log_ndtr) use shardc's custom_jvp with jax's rules
so derivatives at the edges (0, the segments' ends) are jax's."""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError, ShardcNotImplementedError, ShardcTypeError
from ..ir import dtypes
from ..ops import elementwise as ew
from ..ops import special_math as sm
from ..transforms.custom_jvp import custom_jvp
from . import nn as _nn
from . import numpy as snp
from ..ir.program import Lit
from ..ops import shape as _shp
from .numpy._util import aval, promote_args_inexact

__all__ = ["gammaln", "gammasgn", "loggamma", "gamma", "betaln", "beta", "factorial", "comb",
           "digamma", "polygamma", "zeta", "erf", "erfc", "erfinv", "logit", "expit",
           "logsumexp", "softmax", "log_softmax", "xlogy", "xlog1py", "entr", "rel_entr",
           "kl_div", "boxcox", "boxcox1p", "multigammaln"]



def _c(x, v):
    """A strongly typed constant of x's dtype (jax's _lax_const / dtype(v))."""
    return np.array(v, aval(x).dtype)


def promote(name, *xs):
    """promote_args_inexact, with inline scalar literals made traced values (weak type
    kept) so that Python's operators apply to every argument."""
    return [_shp.broadcast_in_dim_p.bind(v, shape=(), broadcast_dimensions=())
            if isinstance(v, Lit) else v for v in promote_args_inexact(name, *xs)]


def _real_only(name, x):
    if dtypes.is_complex(aval(x).dtype):
        raise ArgumentError(f"{name} does not support complex-valued inputs.")


def polyval(coeffs, x):
    """Horner's rule from a zero start, as jnp.polyval (so inf stays nan as jax's)."""
    y = snp.zeros_like(x)
    for c in coeffs:
        y = y * x + _c(x, c)
    return y


# ---------------------------------------------------------------- gamma family

def gammaln(x):
    """log|Gamma(x)| (lax.lgamma), real x only."""
    (x,) = promote("gammaln", x)
    _real_only("gammaln", x)
    return sm.lgamma_p.bind(x)


def gammasgn(x):
    """The sign of Gamma(x): nan at the poles and at nan, -1 where Gamma is negative
    (and at -0), else 1, as jax's select."""
    (x,) = promote("gammasgn", x)
    _real_only("gammasgn", x)
    floor_x = snp.floor(x)
    neg = x < 0
    return snp.select([(neg & (x == floor_x)) | snp.isnan(x),
                       (neg & (floor_x % 2 != 0)) | ((x == 0) & snp.signbit(x))],
                      [_c(x, np.nan), _c(x, -1.0)], _c(x, 1.0))


def loggamma(x):
    """log(Gamma(x)) for real x > 0, nan elsewhere (the principal branch)."""
    (x,) = promote("loggamma", x)
    if dtypes.is_complex(aval(x).dtype):
        from .scipy_cgamma import complex_loggamma
        return complex_loggamma(x)
    return snp.where(x > 0, sm.lgamma_p.bind(x), np.nan)


def gamma(x):
    """Gamma(x) = gammasgn(x) * exp(lgamma(x)), real x."""
    (x,) = promote("gamma", x)
    if dtypes.is_complex(aval(x).dtype):
        from .scipy_cgamma import complex_gamma
        return complex_gamma(x)
    return gammasgn(x) * snp.exp(sm.lgamma_p.bind(x))


def _algdiv(a, b):
    """ln(Gamma(b) / Gamma(a + b)) for b >= 8 (TOMS 708's algdiv, jax's third-party code)."""
    c0, c1, c2 = 0.0833333333333333, -0.00277777777760991, 0.00079365066682539
    c3, c4, c5 = -0.00059520293135187, 0.000837308034031215, -0.00165322962780713
    h = a / b
    c = h / (1 + h)
    x = h / (1 + h)
    d = b + (a - 0.5)
    x2 = x * x
    s3 = 1.0 + (x + x2)
    s5 = 1.0 + (x + x2 * s3)
    s7 = 1.0 + (x + x2 * s5)
    s9 = 1.0 + (x + x2 * s7)
    s11 = 1.0 + (x + x2 * s9)
    t = (1.0 / b) ** 2
    w = ((((c5 * s11 * t + c4 * s9) * t + c3 * s7) * t + c2 * s5) * t + c1 * s3) * t + c0
    w = w * (c / b)
    u = d * snp.log1p(a / b)
    v = a * (snp.log(b) - 1.0)
    return snp.where(u <= v, w - v - u, w - u - v)


def betaln(a, b):
    """log|B(a, b)|: lgammas while the larger argument is < 8, else algdiv (jax's)."""
    a, b = promote("betaln", a, b)
    a, b = snp.minimum(a, b), snp.maximum(a, b)
    lg = sm.lgamma_p.bind
    small_b = lg(a) + (lg(b) - lg(a + b))
    large_b = lg(a) + _algdiv(a, b)
    return snp.where(b < 8, small_b, large_b)


def beta(a, b):
    """B(a, b) with its sign: gammasgn(a) gammasgn(b) gammasgn(a + b) exp(betaln(a, b))."""
    a, b = promote("beta", a, b)
    _real_only("beta", a)
    sign = gammasgn(a) * gammasgn(b) * gammasgn(a + b)
    return sign * snp.exp(betaln(a, b))


def factorial(n, exact=False):
    """n! as exp(lgamma(n + 1)) (0 for n < 0); exact=True is not supported, as jax."""
    if exact:
        raise ShardcNotImplementedError("factorial with exact=True")
    (n,) = promote("factorial", n)
    return snp.where(n < 0, 0, snp.exp(sm.lgamma_p.bind(n + 1)))


def comb(N, k, *, repetition=False):
    """N choose k through gammaln (0 where k > N, N < 0 or k < 0); with repetition,
    comb(N + k - 1, k) and 1 where k == 0 and N >= 0."""
    N, k = promote("comb", N, k)
    if repetition:
        cond = (k == 0) & (N >= 0)
        return snp.where(cond, 1.0, comb(N + k - 1, k, repetition=False))
    cond = (k <= N) & (N >= 0) & (k >= 0)
    safe_N = snp.where(cond, N, 0.0)
    safe_k = snp.where(cond, k, 0.0)
    result = snp.exp(gammaln(safe_N + 1) - gammaln(safe_k + 1) - gammaln(safe_N + 1 - safe_k))
    return snp.where(cond, result, 0.0)


def digamma(x):
    (x,) = promote("digamma", x)
    _real_only("digamma", x)
    return sm.digamma_p.bind(x)


def polygamma(n, x):
    """The n-th derivative of digamma; n must have an integer dtype, as jax."""
    ndt = aval(n).dtype
    if not dtypes.is_int(ndt):
        raise ArgumentError(f"Argument `n` to polygamma must be of integer type. Got dtype "
                          f"{ndt}.")
    n, x = promote("polygamma", n, x)
    _real_only("polygamma", x)
    return sm.polygamma_p.bind(n, x)


def _zeta_fn(x, q=None):
    if q is None:
        raise ShardcNotImplementedError("Riemann zeta function not implemented; pass q != "
                                        "None to compute the Hurwitz Zeta function.")
    x, q = promote("zeta", x, q)
    return sm.zeta_p.bind(x, q)


zeta = custom_jvp(_zeta_fn)
zeta.__doc__ = "The Hurwitz zeta function zeta(x, q) (q is required, as jax)."

# 12, -720, 30240, ...: (2k)! / B_2k, the Euler-Maclaurin terms' denominators
_BERNOULLI_COEFS = [12, -720, 30240, -1209600, 47900160, -1307674368000 / 691, 74724249600,
                    -10670622842880000 / 3617, 5109094217170944000 / 43867,
                    -802857662698291200000 / 174611, 14101100039391805440000 / 77683,
                    -1693824136731743669452800000 / 236364091,
                    186134520519971831808000000 / 657931,
                    -37893265687455865519472640000000 / 3392780147,
                    759790291646040068357842010112000000 / 1723168255201,
                    -134196726836183700385281186201600000000 / 7709321041217]


def _zeta_series(x, q):
    """Euler-Maclaurin summation of zeta(s, a): jax differentiates this for zeta's
    derivatives (in s as well as a)."""
    s, a = promote("zeta", x, q)
    dt = aval(a).dtype
    s_, a_ = snp.expand_dims(s, -1), snp.expand_dims(a, -1)
    n = 8 if dt == np.float32 else 16
    k = np.arange(n, dtype=dt).reshape((1,) * aval(a).ndim + (n,))
    total = snp.sum((a_ + k) ** (-s_), -1)
    integral = (a + _c(a, n)) ** (_c(a, 1) - s) / (s - _c(a, 1))
    t0 = (a + _c(a, n)) ** (-s)
    m = np.arange(2 * n, dtype=dt).reshape((1,) * aval(s).ndim + (2 * n,))
    t1 = snp.cumprod((s_ + m) / (a_ + _c(a, n)), -1)[..., ::2]
    t1 = snp.clip(t1, max=np.finfo(dt).max)
    t1 = t1 / np.asarray(_BERNOULLI_COEFS[:aval(t1).shape[-1]], dt)
    return total + integral + t0 * (_c(a, 0.5) + snp.sum(t1, -1))


@zeta.defjvp
def _zeta_jvp(primals, tangents):
    from .grad import jvp
    return jvp(_zeta_series, primals, tangents)


def multigammaln(a, d):
    """The log of the multivariate gamma function of dimension d (a Python int)."""
    if not isinstance(d, (int, np.integer)) or isinstance(d, bool):
        raise ShardcTypeError(f"multigammaln: d must be a concrete int, got {d!r}")
    d = int(d)
    a, d_ = promote("multigammaln", a, d)
    constant = _c(a, 0.25) * d_ * (d_ - _c(a, 1)) * snp.log(_c(a, np.pi))
    b = snp.arange(d, dtype=aval(d_).dtype) / _c(a, 2)
    nd = aval(a).ndim
    res = snp.sum(gammaln(snp.expand_dims(a, -1) - snp.expand_dims(b, tuple(range(nd)))),
                  axis=-1)
    return res + constant


# ---------------------------------------------------------------- erf family, logit

def erf(x):
    (x,) = promote("erf", x)
    return ew.erf_p.bind(x)


def erfc(x):
    (x,) = promote("erfc", x)
    return ew.erfc_p.bind(x)


def erfinv(x):
    (x,) = promote("erfinv", x)
    return sm.erf_inv_p.bind(x)


def _logit(x):
    (x,) = promote("logit", x)
    return snp.log(x / (1 - x))     # lax ops on jax's constants keep x's weak type


logit = custom_jvp(_logit)
logit.defjvps(lambda g, ans, x: g / (x * (1 - x)))


def expit(x):
    (x,) = promote("expit", x)
    return ew.logistic_p.bind(x)


logsumexp = _nn.logsumexp


def softmax(x, /, *, axis=None):
    return _nn.softmax(x, axis=axis)


def log_softmax(x, /, *, axis=None):
    return _nn.log_softmax(x, axis=axis)


# ---------------------------------------------------------------- entropies

@custom_jvp
def xlogy(x, y):
    """x * log(y), 0 where x == 0 (unless y is nan); jax's gradient (log(y), x / y)."""
    x, y = promote("xlogy", x, y)
    return snp.where((x != 0.0) | snp.isnan(y), x * snp.log(y), snp.zeros_like(x))


@xlogy.defjvp
def _xlogy_jvp(primals, tangents):
    (x, y), (xd, yd) = primals, tangents
    out = xlogy(x, y)
    return out, snp.astype(xd * snp.log(y) + yd * x / y, aval(out).dtype)


@custom_jvp
def xlog1py(x, y):
    """x * log1p(y), 0 where x == 0 (unless y is nan)."""
    x, y = promote("xlog1py", x, y)
    return snp.where((x != 0.0) | snp.isnan(y), x * snp.log1p(y), snp.zeros_like(x))


@xlog1py.defjvp
def _xlog1py_jvp(primals, tangents):
    (x, y), (xd, yd) = primals, tangents
    out = xlog1py(x, y)
    return out, snp.astype(xd * snp.log1p(y) + yd * x / (1 + y), aval(out).dtype)


@custom_jvp
def _xlogx(x):
    return xlogy(x, x)


@_xlogx.defjvp
def _xlogx_jvp(primals, tangents):
    (x,), (xd,) = primals, tangents
    return _xlogx(x), xd * (snp.log(x) + 1)


def entr(x):
    """-x log x for x >= 0, -inf for x < 0."""
    (x,) = promote("entr", x)
    _real_only("entr", x)
    return snp.where(x < _c(x, 0), snp.full_like(x, -np.inf), -_xlogx(x))


def rel_entr(p, q):
    """p log(p / q) where both are > 0, 0 where p == 0 <= q, inf elsewhere."""
    p, q = promote("rel_entr", p, q)
    _real_only("rel_entr", p)
    zero = 0.0      # (jax's constant keeps p's weak type)
    both = (p > zero) & (q > zero)
    one_zero = (p == zero) & (q >= zero)
    safe_p = snp.where(both, p, 1)
    safe_q = snp.where(both, q, 1)
    log_val = _xlogx(safe_p) - xlogy(safe_p, safe_q)
    return snp.where(both, log_val, snp.where(one_zero, zero, np.inf))


def kl_div(p, q):
    """rel_entr(p, q) - p + q."""
    p, q = promote("kl_div", p, q)
    _real_only("kl_div", p)
    return rel_entr(p, q) - p + q


def _boxcox(name, x, lmbda, log):
    x, lmbda = promote(name, x, lmbda)
    zero = lmbda == 0
    safe = snp.where(zero, snp.ones_like(lmbda), lmbda)
    lx = log(x)
    return snp.where(zero, lx, snp.expm1(safe * lx) / safe)


def boxcox(x, lmbda):
    """(x**lmbda - 1) / lmbda, log(x) where lmbda == 0."""
    return _boxcox("boxcox", x, lmbda, snp.log)


def boxcox1p(x, lmbda):
    """boxcox of 1 + x, computed with log1p."""
    return _boxcox("boxcox1p", x, lmbda, snp.log1p)
