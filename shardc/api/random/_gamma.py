"""Gamma-based samplers: gamma and loggamma (Marsaglia-Tsang with rejection loops, one
key per element, as jax's), beta, dirichlet, chisquare, f, t, generalized_normal, ball,
poisson, binomial, multinomial."""
from __future__ import annotations

import math

import numpy as np

from ...errors import ArgumentError
from ...ir import dtypes
from ...ops import lax as L
from .. import numpy as jnp
from ._base import _check_shape, _sharded, normal_impl, uniform_impl
from ._dist import _bshape, exponential_impl, rademacher_impl
from ._impls import THREEFRY
from ._keys import KeyArray, as_keys, keys_of, keys_split
from ._run import float_dtype, run, shape_of


def _lanes_while(cond, body, init):
    """A while loop over lanes, as jax batches one whose predicate differs per lane:
    it runs while any lane's predicate holds, and a lane whose predicate is false keeps
    its carry."""
    from ..control import while_loop

    def keep(pred, new, old):
        if type(new) is KeyArray:
            return KeyArray(keep(pred, new._data, old._data), new.impl)
        extra = L.aval(new).ndim - 1
        p = L.broadcast_in_dim(pred, L.aval(new).shape, (0,)) if extra else pred
        return jnp.where(p, new, old)

    def step(s):
        pred = cond(s)
        return tuple(keep(pred, n, o) for n, o in zip(body(s), s))
    return while_loop(lambda s: jnp.any(cond(s)), step, tuple(init))


def _gamma_lanes(keys, alpha, log_space):
    """Gamma(alpha) samples (log-space if asked), a key per lane (keys (n, 2), alpha
    (n,)): jax's _gamma_one as jax.vmap runs it (its CPU lowering), lanes in lockstep."""
    dtype = L.aval(alpha).dtype
    n = L.aval(alpha).shape[0]
    zero, one, minus_one = (L.full((), v, dtype) for v in (0, 1, -1))
    one_over_two, one_over_three = np.array(0.5, dtype), np.array(1. / 3., dtype)
    squeeze = np.array(0.0331, dtype)
    boost_mask = jnp.greater_equal(alpha, one)
    alpha_orig = alpha
    alpha = jnp.where(boost_mask, alpha, jnp.add(alpha, one))
    d = jnp.subtract(alpha, one_over_three)
    c = jnp.divide(one_over_three, jnp.sqrt(d))

    def full(v):
        return L.full((n,), v, dtype)

    def cond_fn(s):
        _, X, V, U = s
        return jnp.logical_and(
            jnp.greater_equal(U, jnp.subtract(one, jnp.multiply(squeeze, jnp.multiply(X, X)))),
            jnp.greater_equal(jnp.log(U), jnp.add(
                jnp.multiply(X, one_over_two),
                jnp.multiply(d, jnp.add(jnp.subtract(one, V), jnp.log(V))))))

    def body_fn(s):
        def next_kxv(kxv):
            k = keys_split(kxv[0], (2,))
            x = normal_impl(k[:, 1], shape=(), dtype=dtype)
            return k[:, 0], x, jnp.add(one, jnp.multiply(x, c))
        k = keys_split(s[0], (3,))
        _, x, v = _lanes_while(lambda kxv: jnp.less_equal(kxv[2], zero), next_kxv,
                               (k[:, 1], full(0), full(-1)))
        X = jnp.multiply(x, x)
        V = jnp.multiply(jnp.multiply(v, v), v)
        U = uniform_impl(k[:, 2], 0., 1., shape=(), dtype=dtype)
        return k[:, 0], X, V, U

    k = keys_split(keys, (2,))
    _, _, V, _ = _lanes_while(cond_fn, body_fn, (k[:, 0], full(0), full(1), full(2)))
    if log_space:
        log_samples = jnp.negative(exponential_impl(k[:, 1], shape=(), dtype=dtype))
        log_boost = jnp.where(jnp.logical_or(boost_mask, jnp.equal(log_samples, 0)), zero,
                              jnp.multiply(log_samples, jnp.divide(one, alpha_orig)))
        return jnp.add(jnp.add(jnp.log(d), jnp.log(V)), log_boost)
    samples = jnp.subtract(1, uniform_impl(k[:, 1], 0., 1., shape=(), dtype=dtype))
    boost = jnp.where(boost_mask, one, L.pow(samples, jnp.divide(one, alpha_orig)))
    return jnp.multiply(jnp.multiply(d, V), boost)


def _gamma_grad(sample, a, log_space):
    """d sample / d a, by implicit differentiation (jax's _gamma_grad: per element, as
    its CPU path maps over them)."""
    from ..control import map as lmap
    from ..igamma import random_gamma_grad
    samples, alphas = jnp.reshape(sample, (-1,)), jnp.reshape(a, (-1,))
    if log_space:
        samples = jnp.exp(samples)
        tiny = jnp.full_like(samples, jnp.finfo(L.aval(samples).dtype).tiny)
        samples = jnp.where(jnp.equal(samples, 0), tiny, samples)

        def grad(al, s):
            return jnp.divide(random_gamma_grad(al, s), s)
    else:
        grad = random_gamma_grad
    grads = lmap(lambda args: grad(*args), (alphas, samples))
    return jnp.reshape(grads, jnp.shape(a))


def _differentiable(log_space):
    from ...transforms.ad import custom_vjp

    def fwd(data, a):
        out = _random_gamma_values(data, a, log_space)
        return out, (out, a)

    def bwd(data, res, ct):
        out, a = res
        return (jnp.multiply(ct, _gamma_grad(out, a, log_space)),)
    f = custom_vjp(lambda data, a: _random_gamma_values(data, a, log_space),
                   nondiff_argnums=(0,))
    f.defvjp(fwd, bwd)
    return f


_GAMMA = {}


def _random_gamma(data, a, log_space):
    """Gamma samples, differentiable in `a` (jax's random_gamma_p with its jvp)."""
    f = _GAMMA.get(log_space)
    if f is None:
        f = _GAMMA[log_space] = _differentiable(log_space)
    return f(data, a)


def _random_gamma_values(keys, a, log_space):
    """Gamma samples of a's shape: each of `keys` (a prefix of a's shape) split into a
    key per element of the rest of a's dims. As jax's CPU lowering: threefry keys
    run in lanes (its vmap), others one after another (its lax.map; XLA's generator
    under vmap would draw every lane's bits from one key)."""
    keys = as_keys(keys)     # (a custom_vjp rebuilds concrete keys as jax's key arrays)
    if keys.impl is THREEFRY:
        return _gamma_values(keys, a, log_space)
    f = _MAPPED.get(log_space)
    if f is None:
        f = _MAPPED[log_space] = _mapped(log_space)
    return f(keys, a)


def _gamma_values(keys, a, log_space):
    a_shape = tuple(jnp.shape(a))
    n = math.prod(a_shape)
    nk = math.prod(keys.shape)
    keys = keys_split(keys.reshape(nk), (n // nk,)).reshape(n)
    alphas = jnp.reshape(a, (n,))
    if keys.impl is THREEFRY:
        samples = _gamma_lanes(keys, alphas, log_space)
    else:
        from ..control import map as lmap
        samples = lmap(lambda ka: jnp.reshape(_gamma_lanes(
            ka[0].reshape(1), jnp.reshape(ka[1], (1,)), log_space), ()), (keys, alphas))
    return jnp.reshape(samples, a_shape)


_MAPPED = {}


def _mapped(log_space):
    """_gamma_values batched as jax's random_gamma: a vmap makes the keys a batch (its
    mapped dim first) and samples one after another over the whole batch, rather than
    vmapping the loop (whose draws would all come from the batch's first key)."""
    from ..custom_batching import custom_vmap
    f = custom_vmap(lambda keys, a: _gamma_values(keys, a, log_space))

    @f.def_vmap
    def rule(size, in_batched, keys, a):
        if not in_batched[0]:
            keys = KeyArray(jnp.broadcast_to(keys._data, (size, *jnp.shape(keys._data))),
                            keys.impl)
        if not in_batched[1]:
            a = jnp.broadcast_to(a, (size, *jnp.shape(a)))
        return f(keys, a), True
    return f


def gamma_impl(data, a, *, shape, dtype, log_space=False):
    if shape is None:
        shape = tuple(jnp.shape(a))
    else:
        _check_shape("gamma", shape, jnp.shape(a))
    a = L.convert_element_type(jnp.asarray(a), dtype)
    if tuple(jnp.shape(a)) != tuple(shape):
        a = jnp.broadcast_to(a, shape)
    return _random_gamma(data, a, log_space)


def gamma(key, a, shape=None, dtype=None, *, out_sharding=None):
    data, _ = keys_of(key, "gamma")
    dtype = float_dtype(dtype, "gamma")
    shape = None if shape is None else shape_of(shape)
    return _sharded(run(gamma_impl, data, a, shape=shape, dtype=dtype), out_sharding)


def loggamma(key, a, shape=None, dtype=None, *, out_sharding=None):
    data, _ = keys_of(key, "loggamma")
    dtype = float_dtype(dtype, "gamma")
    shape = None if shape is None else shape_of(shape)
    return _sharded(run(gamma_impl, data, a, shape=shape, dtype=dtype, log_space=True),
                    out_sharding)


def beta_impl(data, a, b, *, shape, dtype):
    a = L.convert_element_type(jnp.asarray(a), dtype)
    b = L.convert_element_type(jnp.asarray(b), dtype)
    k = keys_split(data, (2,))
    a, b = jnp.broadcast_to(a, shape), jnp.broadcast_to(b, shape)
    lga = gamma_impl(k[0], a, shape=shape, dtype=dtype, log_space=True)
    lgb = gamma_impl(k[1], b, shape=shape, dtype=dtype, log_space=True)
    log_max = jnp.maximum(lga, lgb)
    ga = jnp.exp(jnp.subtract(lga, log_max))
    gb = jnp.exp(jnp.subtract(lgb, log_max))
    return jnp.divide(ga, jnp.add(ga, gb))


def beta(key, a, b, shape=None, dtype=None, *, out_sharding=None):
    data, _ = keys_of(key, "beta")
    dtype = float_dtype(dtype, "beta")
    shape = _bshape("beta", shape, a, b)
    return _sharded(run(beta_impl, data, a, b, shape=shape, dtype=dtype), out_sharding)


def dirichlet_impl(data, alpha, *, shape, dtype):
    if jnp.ndim(alpha) < 1:
        raise ArgumentError(f"dirichlet requires alpha.ndim >= 1, got alpha.ndim == "
                            f"{jnp.ndim(alpha)}")
    ashape = tuple(jnp.shape(alpha))
    if shape is None:
        shape = ashape[:-1]
    else:
        _check_shape("dirichlet", shape, ashape[:-1])
    alpha = L.convert_element_type(jnp.asarray(alpha), dtype)
    lg = gamma_impl(data, alpha, shape=tuple(shape) + ashape[-1:], dtype=dtype, log_space=True)
    from ...transforms.ad import stop_gradient
    un = jnp.exp(jnp.subtract(lg, stop_gradient(jnp.max(lg, -1, keepdims=True))))
    return jnp.divide(un, jnp.sum(un, -1, keepdims=True))


def dirichlet(key, alpha, shape=None, dtype=None, *, out_sharding=None):
    data, _ = keys_of(key, "dirichlet")
    dtype = float_dtype(dtype, "dirichlet")
    shape = None if shape is None else shape_of(shape)
    return _sharded(run(dirichlet_impl, data, alpha, shape=shape, dtype=dtype), out_sharding)


def chisquare_impl(data, df, *, shape, dtype):
    df = L.convert_element_type(jnp.asarray(df), dtype)
    half = jnp.divide(df, np.array(2, dtype))
    log_g = gamma_impl(data, half, shape=shape, dtype=dtype, log_space=True)
    return jnp.multiply(jnp.exp(log_g), np.array(2, dtype))


def chisquare(key, df, shape=None, dtype=None, *, out_sharding=None):
    data, _ = keys_of(key, "chisquare")
    dtype = float_dtype(dtype, "chisquare")
    shape = _bshape("chisquare", shape, df)
    return _sharded(run(chisquare_impl, data, df, shape=shape, dtype=dtype), out_sharding)


def f_impl(data, dfnum, dfden, *, shape, dtype):
    dfden = L.convert_element_type(jnp.asarray(dfden), dtype)
    dfnum = L.convert_element_type(jnp.asarray(dfnum), dtype)
    k = keys_split(data, (2,))
    chi_n = chisquare_impl(k[1], dfnum, shape=shape, dtype=dtype)
    chi_d = chisquare_impl(k[0], dfden, shape=shape, dtype=dtype)
    return jnp.divide(jnp.divide(chi_n, dfnum), jnp.divide(chi_d, dfden))


def f(key, dfnum, dfden, shape=None, dtype=None, *, out_sharding=None):
    data, _ = keys_of(key, "f")
    dtype = float_dtype(dtype, "f")
    shape = _bshape("f", shape, dfnum, dfden)
    return _sharded(run(f_impl, data, dfnum, dfden, shape=shape, dtype=dtype), out_sharding)


def t_impl(data, df, *, shape, dtype):
    df = L.convert_element_type(jnp.asarray(df), dtype)
    k = keys_split(data, (2,))
    n = normal_impl(k[0], shape=shape, dtype=dtype)
    half_df = jnp.divide(df, np.array(2, dtype))
    g = gamma_impl(k[1], half_df, shape=shape, dtype=dtype)
    return jnp.multiply(n, jnp.sqrt(jnp.divide(half_df, g)))


def t(key, df, shape=None, dtype=None, *, out_sharding=None):
    data, _ = keys_of(key, "t")
    dtype = float_dtype(dtype, "t")
    shape = _bshape("t", shape, df)
    return _sharded(run(t_impl, data, df, shape=shape, dtype=dtype), out_sharding)


def generalized_normal_impl(data, p, *, shape, dtype):
    k = keys_split(data, (2,))
    inv_p = jnp.divide(1, p)
    g = gamma_impl(k[0], inv_p, shape=shape, dtype=dtype)
    r = rademacher_impl(k[1], shape=shape, dtype=dtype)
    return jnp.multiply(r, jnp.power(g, jnp.divide(1, p)))


def generalized_normal(key, p, shape=(), dtype=None, *, out_sharding=None):
    data, _ = keys_of(key, "generalized_normal")
    dtype = float_dtype(dtype, "generalized_normal")
    return _sharded(run(generalized_normal_impl, data, p, shape=shape_of(shape), dtype=dtype),
                    out_sharding)


def ball_impl(data, p, *, d, shape, dtype):
    k = keys_split(data, (2,))
    g = generalized_normal_impl(k[0], p, shape=(*shape, d), dtype=dtype)
    e = exponential_impl(k[1], shape=shape, dtype=dtype)
    s = jnp.add(jnp.sum(jnp.power(jnp.abs(g), p), -1), e)
    return jnp.divide(g, jnp.expand_dims(jnp.power(s, jnp.divide(1, p)), -1))


def ball(key, d, p=2, shape=(), dtype=None, *, out_sharding=None):
    data, _ = keys_of(key, "ball")
    dtype = float_dtype(dtype, "ball")
    return _sharded(run(ball_impl, data, p, d=int(d), shape=shape_of(shape), dtype=dtype),
                    out_sharding)


_ = dtypes
