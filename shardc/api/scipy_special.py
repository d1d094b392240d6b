"""shardc.scipy.special: jax.scipy.special's functions on shardc's ops, in jax's
formulas (the same operations in the same order, so values are bit-identical)."""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError, ShardcTypeError, wrap_public
from ..ir import dtypes
from ..ops import elementwise as ew
from ..ops import special_math as sm
from . import numpy as jnp
from .nn import log_softmax as _log_softmax
from .nn import logsumexp  # noqa: F401  (re-exported, as jax.scipy.special's)
from .nn import softmax as _softmax
from .numpy._util import aval, promote_args_inexact


def _one(name, x):
    (x,) = promote_args_inexact(name, x)
    return x


def gammaln(x):
    return sm.lgamma_p.bind(_one("gammaln", x))


def digamma(x):
    return sm.digamma_p.bind(_one("digamma", x))


def erf(x):
    return ew.erf_p.bind(_one("erf", x))


def erfc(x):
    return ew.erfc_p.bind(_one("erfc", x))


def erfinv(x):
    return sm.erf_inv_p.bind(_one("erfinv", x))


def expit(x):
    return ew.logistic_p.bind(_one("expit", x))


def logit(x):
    x = _one("logit", x)
    return jnp.log(jnp.divide(x, jnp.subtract(np.array(1, aval(x).dtype), x)))


def i1e(x):
    return sm.bessel_i1e_p.bind(_one("i1e", x))


def polygamma(n, x):
    if not dtypes.is_int(aval(n).dtype):
        raise ArgumentError("Argument `n` to polygamma must be of integer type. Got dtype "
                            f"{aval(n).dtype}.")
    n, x = promote_args_inexact("polygamma", n, x)
    return sm.polygamma_p.bind(n, x)


def zeta(x, q=None):
    if q is None:
        raise NotImplementedError("Riemann zeta function not implemented; pass q != None to "
                                  "compute the Hurwitz Zeta function.")
    x, q = promote_args_inexact("zeta", x, q)
    return sm.zeta_p.bind(x, q)


def xlogy(x, y):
    x, y = promote_args_inexact("xlogy", x, y)
    ok = jnp.logical_or(jnp.not_equal(x, 0.), jnp.isnan(y))
    return jnp.where(ok, jnp.multiply(x, jnp.log(y)), jnp.zeros_like(x))


def xlog1py(x, y):
    x, y = promote_args_inexact("xlog1py", x, y)
    ok = jnp.logical_or(jnp.not_equal(x, 0.), jnp.isnan(y))
    return jnp.where(ok, jnp.multiply(x, jnp.log1p(y)), jnp.zeros_like(x))


def entr(x):
    x = _one("entr", x)
    dt = aval(x).dtype
    return jnp.where(jnp.less(x, np.array(0, dt)), np.array(-np.inf, dt),
                     jnp.negative(xlogy(x, x)))


def rel_entr(p, q):
    p, q = promote_args_inexact("rel_entr", p, q)
    dt = aval(p).dtype
    zero = np.array(0.0, dt)
    both = jnp.logical_and(jnp.greater(p, zero), jnp.greater(q, zero))
    one_zero = jnp.logical_and(jnp.equal(p, zero), jnp.greater_equal(q, zero))
    safe_p = jnp.where(both, p, np.array(1, dt))
    safe_q = jnp.where(both, q, np.array(1, dt))
    log_val = jnp.subtract(xlogy(safe_p, safe_p), xlogy(safe_p, safe_q))
    return jnp.where(both, log_val, jnp.where(one_zero, zero, np.array(np.inf, dt)))


def kl_div(p, q):
    p, q = promote_args_inexact("kl_div", p, q)
    return jnp.add(jnp.subtract(rel_entr(p, q), p), q)


def gammasgn(x):
    x = _one("gammasgn", x)
    dt = aval(x).dtype
    floor_x = jnp.floor(x)
    neg = jnp.less(x, np.array(0, dt))
    nan_case = jnp.logical_or(jnp.logical_and(neg, jnp.equal(x, floor_x)), jnp.isnan(x))
    odd = jnp.not_equal(jnp.remainder(floor_x, np.array(2, dt)), np.array(0, dt))
    minus_case = jnp.logical_or(jnp.logical_and(neg, odd), jnp.logical_and(
        jnp.equal(x, np.array(0, dt)), _signbit(x)))
    return jnp.where(nan_case, np.array(np.nan, dt),
                     jnp.where(minus_case, np.array(-1.0, dt), np.array(1.0, dt)))


def _signbit(x):
    from .random._threefry import bitcast, shr
    dt = aval(x).dtype
    bits = dt.itemsize * 8
    u = bitcast(x, np.dtype(f"uint{bits}"))
    return jnp.not_equal(shr(u, bits - 1), np.array(0, np.dtype(f"uint{bits}")))


def gamma(x):
    x = _one("gamma", x)
    return jnp.multiply(gammasgn(x), jnp.exp(sm.lgamma_p.bind(x)))


def factorial(n, exact=False):
    if exact:
        raise NotImplementedError("factorial with exact=True")
    n = _one("factorial", n)
    return jnp.where(jnp.less(n, 0), 0, jnp.exp(sm.lgamma_p.bind(jnp.add(n, 1))))


def multigammaln(a, d):
    d = int(d)
    a, d_ = promote_args_inexact("multigammaln", a, d)
    dt = aval(a).dtype
    constant = jnp.multiply(jnp.multiply(jnp.multiply(np.array(0.25, dt), d_),
                                         jnp.subtract(d_, np.array(1, dt))),
                            jnp.log(np.array(np.pi, dt)))
    b = jnp.divide(jnp.arange(d, dtype=aval(d_).dtype), np.array(2, dt))
    nd = aval(a).ndim
    res = jnp.sum(gammaln(jnp.subtract(jnp.expand_dims(a, -1),
                                       jnp.reshape(b, (1,) * nd + (d,)))), axis=-1)
    return jnp.add(res, constant)


def ndtr(x):
    x = jnp.asarray(x)
    dt = aval(x).dtype
    if dt not in (np.float32, np.float64):
        raise ShardcTypeError(f"x.dtype={dt} is not supported, see docstring for supported "
                              "types.")
    half_sqrt_2 = np.array(dt.type(0.5) * np.sqrt(2., dtype=dt), dt)
    w = jnp.multiply(x, half_sqrt_2)
    z = jnp.abs(w)
    y = jnp.where(jnp.less(z, half_sqrt_2), jnp.add(np.array(1., dt), erf(w)),
                  jnp.where(jnp.greater(w, np.array(0., dt)),
                            jnp.subtract(np.array(2., dt), erfc(z)), erfc(z)))
    return jnp.multiply(np.array(0.5, dt), y)


def _incomplete(fn, name, a, x):
    """One compiled program eagerly (as jax's igamma primitive): op by op, the series'
    arithmetic would round differently from the fused program."""
    from .random._run import run

    def impl(a, x):
        a, x = promote_args_inexact(name, a, x)
        return fn(*jnp.broadcast_arrays(a, x))
    return run(impl, a, x)


def gammainc(a, x):
    from .igamma import igamma
    return _incomplete(igamma, "gammainc", a, x)


def gammaincc(a, x):
    from .igamma import igammac
    return _incomplete(igammac, "gammaincc", a, x)


def softmax(x, /, *, axis=None):
    return _softmax(x, axis=axis)


def log_softmax(x, /, *, axis=None):
    return _log_softmax(x, axis=axis)


wrap_public(globals())

__all__ = ["digamma", "entr", "erf", "erfc", "erfinv", "expit", "factorial", "gamma",
           "gammainc", "gammaincc", "gammaln", "gammasgn", "i1e", "kl_div", "log_softmax",
           "logit", "logsumexp", "multigammaln", "ndtr", "polygamma", "rel_entr", "softmax",
           "xlog1py", "xlogy", "zeta"]
