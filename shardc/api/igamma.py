"""The regularized incomplete gamma functions and their derivatives (igamma, igammac,
igamma_grad_a, random_gamma_grad), composed of shardc's ops exactly as jax's lowering
expands them (a series and a continued fraction in while loops)."""
from __future__ import annotations

import numpy as np

from ..ops import special_math as sm
from . import numpy as jnp
from .numpy._util import aval

VALUE, DERIVATIVE, SAMPLE_DERIVATIVE = 1, 2, 3


def _c(x, v):
    return np.array(v, aval(x).dtype)


def _while(cond, body, init):
    from .control import while_loop
    return while_loop(cond, body, init)


def _igamma_series(ax, x, a, enabled, dtype, mode):
    eps = np.finfo(dtype).eps if dtype != np.dtype("bfloat16") else \
        float(jnp.finfo(dtype).eps)

    def body(vals):
        enabled, r, c, ans, x, dc_da, dans_da = vals
        r = r + _c(r, 1.)
        dc_da = dc_da * (x / r) - (c * x) / (r * r)
        dans_da = dans_da + dc_da
        c = c * (x / r)
        ans = ans + c
        if mode == VALUE:
            cond = enabled & (c / ans > eps)
        else:
            cond = enabled & (jnp.abs(dc_da / dans_da) > eps)
        new = (r, c, ans, x, dc_da, dans_da)
        return (cond, *(jnp.where(enabled, n, o) for n, o in zip(new, vals[1:])))
    init = (enabled, a, jnp.ones_like(a), jnp.ones_like(a), x, jnp.zeros_like(a),
            jnp.zeros_like(a))
    vals = _while(lambda v: jnp.any(v[0]), body, init)
    ans, dans_da = vals[3], vals[6]
    if mode == VALUE:
        return (ans * ax) / a
    dlogax_da = jnp.log(x) - sm.digamma_p.bind(a + _c(a, 1))
    if mode == DERIVATIVE:
        return ax * (ans * dlogax_da + dans_da) / a
    return -(dans_da + ans * dlogax_da) * x / a


def _igammac_continued_fraction(ax, x, a, enabled, dtype, mode):
    eps = float(jnp.finfo(dtype).eps)

    def cond(vals):
        return (vals[5] < _c(vals[5], 2000)) & jnp.any(vals[0])

    def body(vals):
        (enabled, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2,
         dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da, dans_da) = vals
        c = c + _c(c, 1)
        y = y + _c(y, 1)
        z = z + _c(z, 2)
        yc = y * c
        pk = pkm1 * z - pkm2 * yc
        qk = qkm1 * z - qkm2 * yc
        nz = qk != _c(qk, 0)
        r = pk / qk
        t = jnp.where(nz, jnp.abs((ans - r) / r), jnp.ones_like(r))
        ans = jnp.where(nz, r, ans)
        dpk_da = dpkm1_da * z - pkm1 - dpkm2_da * yc + pkm2 * c
        dqk_da = dqkm1_da * z - qkm1 - dqkm2_da * yc + qkm2 * c
        dans_da_new = jnp.where(nz, (dpk_da - ans * dqk_da) / qk, dans_da)
        grad_cond = jnp.where(nz, jnp.abs(dans_da_new - dans_da), jnp.ones_like(dans_da))
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = dpkm1_da, dqkm1_da, dpk_da, dqk_da
        rescale = jnp.abs(pk) > jnp.reciprocal(_c(pk, eps))

        def sc(v):
            return jnp.where(rescale, v * _c(v, eps), v)
        pkm2, pkm1, qkm2, qkm1 = sc(pkm2), sc(pkm1), sc(qkm2), sc(qkm1)
        dpkm2_da, dqkm2_da, dpkm1_da, dqkm1_da = (sc(dpkm2_da), sc(dqkm2_da), sc(dpkm1_da),
                                                  sc(dqkm1_da))
        if mode == VALUE:
            conditional = enabled & (t > eps)
        else:
            conditional = enabled & (grad_cond > _c(grad_cond, eps))
        keep = lambda n, o: jnp.where(enabled, n, o)  # noqa: E731
        return (conditional, keep(ans, vals[1]), keep(t, vals[2]), keep(y, vals[3]),
                keep(z, vals[4]), c, keep(pkm1, vals[6]), keep(qkm1, vals[7]),
                keep(pkm2, vals[8]), keep(qkm2, vals[9]), keep(dpkm2_da, vals[10]),
                keep(dqkm2_da, vals[11]), keep(dpkm1_da, vals[12]), keep(dqkm1_da, vals[13]),
                keep(dans_da_new, vals[14]))

    y = _c(a, 1) - a
    z = x + y + _c(x, 1)
    c = jnp.asarray(_c(x, 0))
    pkm2 = jnp.ones_like(x)
    qkm2 = x
    pkm1 = x + _c(x, 1)
    qkm1 = z * x
    ans = pkm1 / qkm1
    t = jnp.ones_like(x)
    dpkm2_da = jnp.zeros_like(x)
    dqkm2_da = jnp.zeros_like(x)
    dpkm1_da = jnp.zeros_like(x)
    dqkm1_da = -x
    dans_da = (dpkm1_da - ans * dqkm1_da) / qkm1
    vals = _while(cond, body, (enabled, ans, t, y, z, c, pkm1, qkm1, pkm2, qkm2, dpkm2_da,
                               dqkm2_da, dpkm1_da, dqkm1_da, dans_da))
    ans = vals[1]
    if mode == VALUE:
        return ans * ax
    dans_da = vals[14]
    dlogax_da = jnp.log(x) - sm.digamma_p.bind(a)
    if mode == DERIVATIVE:
        return ax * (ans * dlogax_da + dans_da)
    return -((dans_da + ans * dlogax_da) * x)


def _common(a, x):
    dtype = aval(a).dtype
    ax = a * jnp.log(x) - x - sm.lgamma_p.bind(a)
    underflow = ax < -np.log(np.array(jnp.finfo(dtype).max, np.float64)).astype(dtype)
    return dtype, ax, underflow


def igamma(a, x):
    dtype = aval(a).dtype
    is_nan = jnp.isnan(a) | jnp.isnan(x)
    x_inf = x == _c(x, np.inf)
    a_zero = a == _c(a, 0)
    x_zero = x == _c(x, 0)
    domain = (x < _c(x, 0)) | (a < _c(a, 0)) | (a_zero & x_zero) | is_nan
    use_c = (x >= _c(x, 1)) & (x > a)
    _, ax, underflow = _common(a, x)
    ax = jnp.exp(ax)
    enabled = ~(x_zero | domain | underflow | x_inf)
    out = jnp.where(use_c,
                    _c(a, 1) - _igammac_continued_fraction(ax, x, a, enabled & use_c, dtype,
                                                           VALUE),
                    _igamma_series(ax, x, a, enabled & ~use_c, dtype, VALUE))
    out = jnp.where(x_zero, jnp.zeros_like(a), out)
    out = jnp.where(x_inf, jnp.ones_like(a), out)
    return jnp.where(domain, jnp.full_like(a, np.nan), out)


def igammac(a, x):
    dtype = aval(a).dtype
    is_nan = jnp.isnan(a) | jnp.isnan(x)
    a_zero = a == _c(a, 0)
    x_zero = x == _c(x, 0)
    x_inf = x == _c(x, np.inf)
    domain = (x < _c(x, 0)) | (a < _c(a, 0)) | (a_zero & x_zero) | is_nan
    use_igamma = (x < _c(x, 1)) | (x < a)
    _, ax, underflow = _common(a, x)
    enabled = ~(domain | underflow | x_inf | a_zero)
    ax = jnp.exp(ax)
    ig = _igamma_series(ax, x, a, enabled & use_igamma, dtype, VALUE)
    cf = _igammac_continued_fraction(ax, x, a, enabled & ~use_igamma, dtype, VALUE)
    out = jnp.where(use_igamma, _c(a, 1) - ig, cf)
    out = jnp.where(x_inf | a_zero, jnp.zeros_like(out), out)
    return jnp.where(domain, jnp.full_like(a, np.nan), out)


def _grad(a, x, mode):
    dtype = aval(a).dtype
    is_nan = jnp.isnan(a) | jnp.isnan(x)
    x_zero = x == jnp.zeros_like(x)
    domain = (x < jnp.zeros_like(x)) | (a <= jnp.zeros_like(a))
    use_c = (x > jnp.ones_like(x)) & (x > a)
    _, ax, underflow = _common(a, x)
    ax = jnp.exp(ax)
    enabled = ~(((x_zero | domain) | underflow) | is_nan)
    out = jnp.where(use_c,
                    -_igammac_continued_fraction(ax, x, a, enabled & use_c, dtype, mode),
                    _igamma_series(ax, x, a, enabled & ~use_c, dtype, mode))
    out = jnp.where(x_zero, jnp.zeros_like(out), out)
    return jnp.where(domain | is_nan, jnp.full_like(a, np.nan), out)


def igamma_grad_a(a, x):
    return _grad(a, x, DERIVATIVE)


def random_gamma_grad(a, x):
    return _grad(a, x, SAMPLE_DERIVATIVE)
