"""shardc.scipy.special, part 4: the hypergeometric functions hyp1f1 and hyp2f1 and
bessel_jn, as jax.scipy.special: per-element series loops (jax vectorizes a scalar
while loop; shardc.numpy.vectorize does the same over shardc's vmap)."""
from __future__ import annotations

import operator

import numpy as np

from ..errors import ArgumentError, ShardcNotImplementedError, ShardcTypeError
from ..ir import dtypes
from ..transforms.custom_jvp import custom_jvp
from . import numpy as snp
from .numpy._util import aval
from .scipy_special import digamma, gamma, promote

__all__ = ["hyp1f1", "hyp2f1", "bessel_jn", "sph_harm_y"]


def _lax():
    from . import lax as slax
    return slax


def _eps(x):
    return float(np.finfo(aval(x).dtype).eps)


def _one(x):
    return snp.ones_like(x)


def _series(a_term, update, init_term, x, add=lambda s, t, k: s + t, start=1.0):
    """jax's (serie, k, term) loops: serie starts at `start`, k at 1; stops after 250
    terms or when |term| / |serie| <= eps."""
    slax = _lax()
    eps = _eps(x)

    def body(st):
        serie, k, term = st
        serie = add(serie, term, k)
        return serie, k + 1, term * update(k)

    def cond(st):
        serie, k, term = st
        return (k < 250) & (snp.abs(term) / snp.abs(serie) > eps)
    init = (snp.full_like(x, start), np.int32(1), init_term)
    del a_term
    return slax.while_loop(cond, body, init)[0]


# ---------------------------------------------------------------- hyp1f1

def _hyp1f1_serie(a, b, x):
    return _series(None, lambda k: (a + k) / (b + k) * x / (k + 1), a / b * x, x)


def _hyp1f1_asymptotic(a, b, x):
    serie = _series(None, lambda k: (b - a + k) * (1 - a + k) / (k + 1) / x,
                    (b - a) * (1 - a) / x, x)
    return gamma(b) / gamma(a) * snp.exp(x) * x ** (a - b) * serie


def _hyp1f1_scalar(a, b, x):
    slax = _lax()
    result = slax.cond(snp.abs(x) < 100, _hyp1f1_serie, _hyp1f1_asymptotic, a, b, x)
    index = ((a == 0) * 1 + ((a == b) & (a != 0)) * 2 + ((b == 0) & (a != 0)) * 3)
    dt = aval(x).dtype
    return slax.select_n(index, result, snp.ones_like(x), snp.exp(x),
                         snp.full_like(x, np.inf, dtype=dt))


def _hyp1f1_da(a, b, x):
    return _series(None, lambda k: (a + k) / (b + k) * x / (k + 1), a / b * x, x,
                   add=lambda s, t, k: s + t * (digamma(a + k) - digamma(a)), start=0.0)


def _hyp1f1_db(a, b, x):
    return _series(None, lambda k: (a + k) / (b + k) * x / (k + 1), a / b * x, x,
                   add=lambda s, t, k: s + t * (digamma(b) - digamma(b + k)), start=0.0)


def _hyp1f1_fn(a, b, x):
    a, b, x = promote("hyp1f1", a, b, x)
    if dtypes.is_complex(aval(x).dtype):
        raise ArgumentError("hyp1f1 does not support complex-valued inputs.")
    return snp.vectorize(_hyp1f1_scalar)(*_arrays(a, b, x))


def _arrays(*xs):
    from ..ir.program import Lit
    return [snp.full((), v.value, dtype=v.aval.dtype) if isinstance(v, Lit) else v
            for v in xs]


hyp1f1 = custom_jvp(_hyp1f1_fn)
hyp1f1.defjvps(
    lambda ad, out, a, b, x: snp.vectorize(_hyp1f1_da)(*_arrays(a, b, x)) * ad,
    lambda bd, out, a, b, x: snp.vectorize(_hyp1f1_db)(*_arrays(a, b, x)) * bd,
    lambda xd, out, a, b, x: a / b * hyp1f1(a + 1, b + 1, x) * xd)


# ---------------------------------------------------------------- hyp2f1

def _hyp2f1_terminal(a, b, c, x):
    slax = _lax()
    eps = _eps(x) * 50
    ib = snp.round(b)
    mask = (b < a) & (snp.abs(b - ib) < eps) & ~((c % 1 == 0) & (c <= 0) & (c > b))
    a, b = snp.where(mask, b, a), snp.where(mask, a, b)
    a = snp.abs(a)

    def body(st):     # jax's fori_loop over float bounds 1 .. a
        i, serie, term = st
        term = term * (-(a - i + 1) / (c + i - 1) * (b + i - 1) / i * x)
        return i + 1, serie + term, term
    one = _one(x)
    return slax.while_loop(lambda st: st[0] < a + 1, body, (_one(a), one, one))[1]


def _hyp2f1_serie(a, b, c, x):
    slax = _lax()
    rtol = _eps(x)

    def body(st):
        serie, k, term = st
        serie = serie + term
        term = term * ((a + k - 1) * (b + k - 1) / (c + k - 1) / k * x)
        return serie, k + 1, term

    def cond(st):
        serie, k, term = st
        return (k < 250) & (snp.abs(term) > rtol * snp.abs(serie))
    return slax.while_loop(cond, body, (snp.zeros_like(x), _one(x), _one(x)))[0]


def _hyp2f1_digamma_transform(a, b, c, x):
    slax = _lax()
    rtol = _eps(x)
    d = c - a - b
    s = 1 - x
    rd = snp.round(d)
    zero = snp.zeros_like(d)
    e = snp.where(rd >= 0, d, -d)
    d1 = snp.where(rd >= 0, d, zero)
    d2 = snp.where(rd >= 0, zero, d)
    ard = snp.astype(snp.where(rd >= 0, rd, -rd), np.int32)
    ax = snp.log(s)
    y = digamma(1.0) + digamma(1.0 + e) - digamma(a + d1) - digamma(b + d1) - ax
    y = y / gamma(e + 1.0)
    p = (a + d1) * (b + d1) * s / gamma(e + 2.0)

    def cond(st):
        p, q, t, y = st
        return (t < 250) & (snp.abs(q) >= rtol * snp.abs(y))

    def body(st):
        p, q, t, y = st
        r = (digamma(1.0 + t) + digamma(1.0 + t + e) - digamma(a + t + d1)
             - digamma(b + t + d1) - ax)
        q = p * r
        y = y + q
        p = p * (s * (a + t + d1) / (t + 1.0))
        p = p * ((b + t + d1) / (t + 1.0 + e))
        return p, q, t + 1.0, y
    _, _, _, y = slax.while_loop(cond, body, (p, y, _one(x), y))

    def compute_sum(y):
        def for_body(st):
            i, p, t, y1 = st
            r = 1.0 - e + t
            p = p * (s * (a + t + d2) * (b + t + d2) / r)
            t = t + 1.0
            p = p / t
            return i + 1, p, t, y1 + p
        one = _one(x)
        y1 = slax.while_loop(lambda st: st[0] < ard, for_body,
                             (np.int32(1), one, snp.zeros_like(x), one))[3]
        pc = gamma(c)
        y1 = y1 * (gamma(e) * pc / (gamma(a + d1) * gamma(b + d1)))
        y = y * (pc / (gamma(a + d2) * gamma(b + d2)))
        y = snp.where((ard & 1) != 0, -y, y)
        q = s ** rd
        return snp.where(rd > 0, y * q + y1, y + y1 * q)
    return snp.where(rd == 0, y * gamma(c) / (gamma(a) * gamma(b)), compute_sum(y))


def _hyp2f1_terminal_or_serie(a, b, c, x):
    eps = _eps(x) * 50
    d = c - a - b
    ia, ib, id_ = snp.round(a), snp.round(b), snp.round(d)
    neg_int = ((a <= 0) & (snp.abs(a - ia) < eps)) | ((b <= 0) & (snp.abs(b - ib) < eps))
    index = snp.where((x > 0.9) & ~neg_int, snp.where(snp.abs(d - id_) >= eps, 0, 1),
                      snp.where(neg_int, 2, 0))
    return _lax().select_n(index, _hyp2f1_serie(a, b, c, x),
                           _hyp2f1_digamma_transform(a, b, c, x),
                           _hyp2f1_terminal(a, b, c, x))


def _hyp2f1_scalar(a, b, c, x):
    eps = _eps(x) * 50
    d = c - a - b
    s = 1 - x
    ca, cb = c - a, c - b
    id_ = snp.round(d)
    w = snp.where
    index = w((x == 0) | (((a == 0) | (b == 0)) & (c != 0)), 0,
              w((c == 0) | ((c < 0) & (c % 1 == 0)), 1,
                w((d <= -1) & ~((snp.abs(d - id_) >= eps) & (s < 0)), 2,
                  w((d <= 0) & (x == 1), 1,
                    w((x < 1) & (b == c), 3,
                      w((x < 1) & (a == c), 4,
                        w(x > 1, 1, w(x == 1, 5, 6))))))))
    return _lax().select_n(
        index, _one(x), snp.full_like(x, np.inf),
        s ** d * _hyp2f1_terminal_or_serie(ca, cb, c, x), s ** (-a), s ** (-b),
        gamma(c) * gamma(d) / (gamma(ca) * gamma(cb)), _hyp2f1_terminal_or_serie(a, b, c, x))


def _hyp2f1_deriv(which):
    def f(a, b, c, x):
        slax = _lax()
        eps = _eps(x)
        p = {"a": a, "b": b, "c": c}[which]

        def body(st):
            serie, k, term = st
            if which == "c":
                serie = serie + term * (digamma(c) - digamma(c + k))
            else:
                serie = serie + term * (digamma(p + k) - digamma(p))
            term = term * ((a + k) * (b + k) / (c + k) / (k + 1) * x)
            return serie, k + 1, term

        def cond(st):
            serie, k, term = st
            return (k < 250) & (snp.abs(term) / snp.abs(serie) > eps)
        return slax.while_loop(cond, body, (snp.zeros_like(x), np.int32(1), a * b / c * x))[0]
    return f


def _hyp2f1_fn(a, b, c, x):
    a, b, c, x = promote("hyp2f1", a, b, c, x)
    return snp.vectorize(_hyp2f1_scalar)(*_arrays(a, b, c, x))


hyp2f1 = custom_jvp(_hyp2f1_fn)
hyp2f1.defjvps(
    lambda t, out, a, b, c, x: snp.vectorize(_hyp2f1_deriv("a"))(*_arrays(a, b, c, x)) * t,
    lambda t, out, a, b, c, x: snp.vectorize(_hyp2f1_deriv("b"))(*_arrays(a, b, c, x)) * t,
    lambda t, out, a, b, c, x: snp.vectorize(_hyp2f1_deriv("c"))(*_arrays(a, b, c, x)) * t,
    lambda t, out, a, b, c, x: a * b / c * hyp2f1(a + 1, b + 1, c + 1, x) * t)


# ---------------------------------------------------------------- bessel_jn

def bessel_jn(z, *, v, n_iter=50):
    """J_0(z) .. J_v(z) stacked on a new leading axis (Miller's backward recurrence over
    n_iter terms, normalized by the Neumann sum, as jax's)."""
    slax = _lax()
    try:
        v, n_iter = operator.index(v), int(n_iter)
    except TypeError:
        raise ShardcTypeError("bessel_jn: v and n_iter must be concrete ints") from None
    (z,) = promote("bessel_jn", snp.asarray(z))
    if dtypes.is_complex(aval(z).dtype):
        raise ArgumentError("complex input not supported.")
    (z,) = _arrays(z)

    def step(carry, k):
        f0, f1, bs = carry
        f = 2.0 * (k + 1.0) * f1 / z - f0
        bs = snp.where(snp.mod(k, 2) == 0, bs + 2.0 * f, bs)
        return (f1, f, bs), f
    zero = snp.zeros_like(z)
    init = (zero, snp.full_like(z, 1e-16), zero)
    (_, _, bs), j_vals = slax.scan(step, init,
                                   slax.iota(aval(z).dtype, n_iter + 1), reverse=True)
    return j_vals[:v + 1] / (bs - j_vals[0])


# ---------------------------------------------------------------- sph_harm_y

def _recurrence_masks(l_max, dtype):
    """The normalized recurrence's coefficients d0, d1 as (l+1)^3 masks (jax's
    _gen_recurrence_mask; l_max is static, so they are constants here)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.arange(l_max + 1, dtype=dtype)
        m_mat, l_mat = np.meshgrid(r, r, indexing="ij")
        c0, c1 = l_mat * l_mat, m_mat * m_mat
        c2, c3 = 2.0 * l_mat, (l_mat - 1.0) * (l_mat - 1.0)
        d0 = np.sqrt((4.0 * c0 - 1.0) / (c0 - c1))
        d1 = np.sqrt((c2 + 1.0) * (c3 - c1) / ((c2 - 3.0) * (c0 - c1)))
    d0m, d1m = np.zeros_like(d0), np.zeros_like(d1)
    i0, i1 = np.triu_indices(l_max + 1, 1), np.triu_indices(l_max + 1, 2)
    d0m[i0], d1m[i1] = d0[i0], d1[i1]
    i, j, k = np.ogrid[:l_max + 1, :l_max + 1, :l_max + 1]
    mask = (i + j - k == 0).astype(dtype)
    return (d0m[None] * mask).astype(dtype), (d1m[None] * mask).astype(dtype)


def _legendre_normalized(l_max, x):
    """P[m, l, :] of the normalized associated Legendre functions at x (jax's
    _gen_associated_legendre with is_normalized=True)."""
    slax = _lax()
    dt = aval(x).dtype
    nx = aval(x).shape[0]
    init = np.array(0.5 / np.sqrt(np.pi), dt)
    a_idx = snp.arange(1, l_max + 1, dtype=dt)
    b_idx = snp.arange(l_max, dtype=dt)
    f_a = snp.cumprod(-1 * snp.sqrt(1.0 + 0.5 / a_idx))
    f_b = snp.sqrt(2.0 * b_idx + 3.0)
    y = snp.cumprod(snp.broadcast_to(snp.sqrt(1.0 - x * x), (l_max, nx)), axis=0)
    # the diagonal P[i, i] and the superdiagonal P[i, i + 1] = f_b[i] x P[i, i], placed
    # with 0/1 masks (exact: the values are finite) rather than two-index scatters
    diag = snp.concatenate([snp.full((1, nx), init, dtype=dt), init * (f_a[:, None] * y)])
    sup = snp.concatenate([(f_b[:, None] * x[None, :]) * diag[:l_max],
                           snp.zeros((1, nx), dtype=dt)])
    eye0 = np.eye(l_max + 1, dtype=dt)[:, :, None]
    eye1 = np.eye(l_max + 1, k=1, dtype=dt)[:, :, None]
    p = eye0 * diag[:, None, :] + eye1 * sup[:, None, :]
    d0, d1 = _recurrence_masks(l_max, dt)

    def body(i, pv):
        c0 = slax.dynamic_index_in_dim(d0, i, keepdims=False)
        c1 = slax.dynamic_index_in_dim(d1, i, keepdims=False)
        h = (c0[:, :, None] * (snp.roll(pv, 1, axis=1) * x)
             - c1[:, :, None] * snp.roll(pv, 2, axis=1))
        return pv + h
    if l_max > 1:
        p = slax.fori_loop(2, l_max + 1, body, p)
    return p


def sph_harm_y(n, m, theta, phi, diff_n=None, n_max=None):
    """The spherical harmonics Y_n^m(theta, phi) (theta the polar angle), complex, from
    the normalized associated Legendre functions up to degree n_max (static)."""
    if diff_n is not None:
        raise ShardcNotImplementedError("The 'diff_n' argument to "
                                        "jax.scipy.special.sph_harm_y is not supported.")
    if np.ndim(theta) == 0 and not hasattr(theta, "shape"):
        theta = snp.array([theta])
    if n_max is None:
        try:
            n_max = int(np.max(np.asarray(n)))
        except Exception:
            raise ShardcTypeError("The `n_max` argument of `jnp.scipy.special.sph_harm` must "
                                  "be statically specified to use `sph_harm` within "
                                  "transformations.") from None
    n_max = operator.index(n_max)
    n, m, theta, phi = (snp.asarray(v) for v in (n, m, theta, phi))
    legendre = _legendre_normalized(n_max, snp.cos(theta))
    am = snp.abs(m)
    size = aval(legendre).shape
    # legendre.at[|m|, n, arange(len(n))].get(mode='clip') as one flat gather
    i = snp.clip(am, 0, size[0] - 1)
    j = snp.clip(n, 0, size[1] - 1)
    k = snp.clip(snp.arange(aval(n).shape[0]), 0, size[2] - 1)
    val = snp.reshape(legendre, (-1,))[(i * size[1] + j) * size[2] + k]
    angle = am * phi
    re, im = val * snp.cos(angle), val * snp.sin(angle)
    from ..ops import complex as cx
    h = cx.complex_p.bind(re, im)
    return snp.where(m < 0, (-1.0) ** am * snp.conjugate(h), h)
