"""Counting samplers with rejection loops: poisson (Knuth below lam 10, else
transformed rejection), binomial (inversion or BTRS), multinomial; as jax's."""
from __future__ import annotations

import numpy as np

from ...errors import ArgumentError
from ...ir import dtypes
from ...ops import lax as L
from .. import numpy as jnp
from ._base import _check_shape, uniform_impl
from ._impls import THREEFRY
from ._keys import keys_of, keys_split
from ._run import float_dtype, run, shape_of

F32 = np.dtype(np.float32)


def _while(cond, body, init):
    from ..control import while_loop
    return while_loop(cond, body, init)


def _poisson_knuth(data, lam, shape, dtype, max_iters):
    def body(c):
        i, k, rng, log_prod = c
        ks = keys_split(rng, (2,))
        k = jnp.where(log_prod > -lam, k + 1, k)
        u = uniform_impl(ks[1], 0., 1., shape=shape, dtype=F32)
        return i + 1, k, ks[0], log_prod + jnp.log(u)

    def cond(c):
        i, log_prod = c[0], c[3]
        return jnp.logical_and(jnp.any(log_prod > -lam), i < max_iters)
    k0 = jnp.zeros(shape, dtype)
    lp0 = jnp.zeros(shape, F32)
    k = _while(cond, body, (0, k0, data, lp0))[1]
    return L.convert_element_type(k - 1, dtype)


def _poisson_rejection(data, lam, shape, dtype, max_iters):
    log_lam = jnp.log(lam)
    b = 0.931 + 2.53 * jnp.sqrt(lam)
    a = -0.059 + 0.02483 * b
    inv_alpha = 1.1239 + 1.1328 / (b - 3.4)
    v_r = 0.9277 - 3.6224 / (b - 2)

    def body(c):
        i, k_out, accepted, key = c
        ks = keys_split(key, (3,))
        u = uniform_impl(ks[1], 0., 1., shape=shape, dtype=F32) - 0.5
        v = uniform_impl(ks[2], 0., 1., shape=shape, dtype=F32)
        u_shifted = 0.5 - jnp.abs(u)
        k = jnp.floor((2 * a / u_shifted + b) * u + lam + 0.43)
        s = jnp.log(v * inv_alpha / (a / (u_shifted * u_shifted) + b))
        from ...ops.special_math import lgamma_p
        t = -lam + k * log_lam - lgamma_p.bind(k + 1)
        accept1 = (u_shifted >= 0.07) & (v <= v_r)
        reject = (k < 0) | ((u_shifted < 0.013) & (v > u_shifted))
        accept2 = s <= t
        accept = accept1 | (~reject & accept2)
        k_out = jnp.where(accept, k, k_out)
        return i + 1, k_out, accepted | accept, ks[0]

    def cond(c):
        i, _, accepted, _ = c
        return jnp.logical_and(jnp.any(~accepted), i < max_iters)
    k0 = jnp.full(shape, -1, F32)
    acc0 = jnp.full(shape, False, np.bool_)
    k = _while(cond, body, (0, k0, acc0, data))[1]
    return L.convert_element_type(k, dtype)


def poisson_impl(data, lam, *, shape, dtype):
    use_knuth = jnp.isnan(lam) | (lam < 10)
    lam_knuth = jnp.where(use_knuth, lam, np.float32(0.0))
    lam_rej = jnp.where(use_knuth, np.float32(1e5), lam)
    max_iters = dtype.type(np.iinfo(dtype).max)
    result = jnp.where(use_knuth, _poisson_knuth(data, lam_knuth, shape, dtype, max_iters),
                       _poisson_rejection(data, lam_rej, shape, dtype, max_iters))
    return jnp.where(lam == 0, jnp.zeros_like(result), result)


def poisson(key, lam, shape=None, dtype=None, *, out_sharding=None):
    data, _ = keys_of(key, "poisson")
    if data.impl is not THREEFRY:       # as jax's
        raise NotImplementedError("`poisson` is only implemented for the threefry2x32 RNG, "
                                  f"not {data.impl.jax}")
    dtype = dtypes.default_int() if dtype is None else dtypes.canonicalize(dtype)
    shape = tuple(jnp.shape(lam)) if shape is None else shape_of(shape)
    lam = L.convert_element_type(jnp.broadcast_to(jnp.asarray(lam), shape), F32)
    from ._base import _sharded
    return _sharded(run(poisson_impl, data, lam, shape=shape, dtype=dtype), out_sharding)


# ---------------------------------------------------------------- binomial

_STIRLING = [0.0810614667953272, 0.0413406959554092, 0.0276779256849983,
             0.02079067210376509, 0.0166446911898211, 0.0138761288230707,
             0.0118967099458917, 0.0104112652619720, 0.00925546218271273,
             0.00833056343336287]


def _stirling_approx_tail(k):
    dt = L.aval(k).dtype
    vals = jnp.asarray(np.array(_STIRLING, dt))
    use_tail = k <= 9
    k = jnp.clip(k, np.array(0.0, dt), np.array(9.0, dt))
    kp1sq = (k + 1) * (k + 1)
    approx = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (k + 1)
    k = jnp.floor(k)
    return jnp.where(use_tail, jnp.take(vals, L.convert_element_type(k, np.dtype(np.int32))),
                     approx)


def _binomial_inversion(data, count, prob, shape, dtype, max_iters):
    log1mp = jnp.log1p(-prob)
    pd = L.aval(prob).dtype

    def body(c):
        i, num_geom, geom_sum, key = c
        ks = keys_split(key, (2,))
        subkey, key = ks[0], ks[1]
        out = jnp.where(geom_sum <= count, num_geom + 1, num_geom)
        u = uniform_impl(subkey, 0., 1., shape=shape, dtype=pd)
        geom = jnp.ceil(jnp.log(u) / log1mp)
        return i + 1, out, geom_sum + geom, key

    def cond(c):
        i, geom_sum = c[0], c[2]
        return jnp.logical_and(jnp.any(geom_sum <= count), i < max_iters)
    init = (0, jnp.zeros(shape, pd), jnp.zeros(shape, pd), data)
    k = _while(cond, body, init)[1]
    return L.convert_element_type(k - 1, dtype)


def _btrs(data, count, prob, shape, dtype, max_iters):
    pd = L.aval(prob).dtype
    stddev = jnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = jnp.floor((count + 1) * prob)

    def body(carry):
        i, k_out, accepted, key = carry
        ks = keys_split(key, (3,))
        u = uniform_impl(ks[1], 0., 1., shape=shape, dtype=pd)
        v = uniform_impl(ks[2], 0., 1., shape=shape, dtype=pd)
        u = u - 0.5
        us = 0.5 - jnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = jnp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = jnp.log(v * alpha / (a / (us * us) + b))
        ub = ((m + 0.5) * jnp.log((m + 1) / (r * (count - m + 1)))
              + (count + 1) * jnp.log((count - m + 1) / (count - k + 1))
              + (k + 0.5) * jnp.log(r * (count - k + 1) / (k + 1))
              + _stirling_approx_tail(m)
              + _stirling_approx_tail(count - m)
              - _stirling_approx_tail(k)
              - _stirling_approx_tail(count - k))
        accept2 = v <= ub
        accept = accept1 | (~reject & accept2)
        return i + 1, jnp.where(accept, k, k_out), accepted | accept, ks[0]

    def cond(carry):
        i, accepted = carry[0], carry[2]
        return jnp.logical_and(jnp.any(~accepted), i < max_iters)
    init = (0, jnp.full(shape, -1, pd), jnp.full(shape, False, np.bool_), data)
    return L.convert_element_type(_while(cond, body, init)[1], dtype)


def binomial_impl(data, count, prob, *, shape, dtype):
    if shape is None:
        shape = np.broadcast_shapes(jnp.shape(count), jnp.shape(prob))
    else:
        _check_shape("binomial", shape, jnp.shape(count), jnp.shape(prob))
    prob = jnp.asarray(prob)
    if not dtypes.is_float(L.aval(prob).dtype):
        prob = L.convert_element_type(prob, dtypes.default_float())
    pd = L.aval(prob).dtype
    count = jnp.broadcast_to(L.convert_element_type(jnp.asarray(count), pd), shape)
    prob = jnp.broadcast_to(prob, shape)
    p_lt_half = prob < 0.5
    q = jnp.where(p_lt_half, prob, 1.0 - prob)
    count_nan_or_neg = jnp.isnan(count) | (count < 0.0)
    count_inf = jnp.isinf(count)
    q_is_nan = jnp.isnan(q)
    q_l_0 = q < 0.0
    q = jnp.where(q_is_nan | q_l_0, np.array(0.01, pd), q)
    use_inversion = count_nan_or_neg | (count * q <= 10.0)
    count = jnp.floor(count)
    count_inv = jnp.where(use_inversion, count, np.array(0.0, pd))
    count_btrs = jnp.where(use_inversion, np.array(1e4, pd), count)
    q_btrs = jnp.where(use_inversion, np.array(0.5, pd), q)
    max_iters = dtype.type(np.finfo(dtype).max)
    samples = jnp.where(use_inversion,
                        _binomial_inversion(data, count_inv, q, shape, dtype, max_iters),
                        _btrs(data, count_btrs, q_btrs, shape, dtype, max_iters))
    invalid = q_l_0 | q_is_nan | count_nan_or_neg
    samples = jnp.where(invalid, np.array(np.nan, dtype), samples)
    samples = jnp.where(count_inf & ~invalid, np.array(np.inf, dtype), samples)
    return jnp.where(p_lt_half | count_nan_or_neg | q_is_nan | count_inf, samples,
                     L.convert_element_type(count, dtype) - samples)


def binomial(key, n, p, shape=None, dtype=None):
    data, _ = keys_of(key, "binomial")
    dtype = float_dtype(dtype, "binomial")
    shape = None if shape is None else shape_of(shape)
    return run(binomial_impl, data, n, p, shape=shape, dtype=dtype)


def multinomial(key, n, p, *, shape=None, dtype=None, unroll=1):
    data, _ = keys_of(key, "multinomial")
    dtype = float_dtype(dtype, "multinomial")
    shape = None if shape is None else shape_of(shape)
    return run(_multinomial_impl, data, n, p, shape=shape, dtype=dtype)


def _multinomial_impl(data, n, p, *, shape, dtype):
    from ..control import scan
    n, p = jnp.asarray(n), jnp.asarray(p)
    fd = dtypes.default_float()
    ft = jnp.result_type(n, p) if hasattr(jnp, "result_type") else None
    ft = ft if ft is not None and dtypes.is_float(np.dtype(ft)) else fd
    n, p = L.convert_element_type(n, ft), L.convert_element_type(p, ft)
    if shape is None:
        shape = tuple(jnp.shape(p))
    n = jnp.broadcast_to(n, shape[:-1])
    p = jnp.moveaxis(jnp.broadcast_to(p, shape), -1, 0)
    remaining = jnp.flip(jnp.cumsum(jnp.flip(p, 0), 0), 0)
    ratios = p / jnp.where(remaining == 0, 1, remaining)
    keys = keys_split(data, (L.aval(ratios).shape[0],))

    def step(rem, rk):
        ratio, key = rk
        count = binomial_impl(key, rem, jnp.clip(ratio, 0, 1), shape=None,
                              dtype=L.aval(rem).dtype)
        return rem - count, count
    _, counts = scan(step, n, (ratios, keys))
    return L.convert_element_type(jnp.moveaxis(counts, 0, -1), dtype)


_ = ArgumentError
