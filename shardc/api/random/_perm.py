"""Samplers that sort or factor: shuffle, permutation, choice, categorical without
replacement (lax.sort_key_val / top_k / searchsorted), multivariate_normal (cholesky,
eigh, svd) and orthogonal (qr), as jax's. The ops come from shardc.lax and
shardc.numpy.linalg, looked up when called."""
from __future__ import annotations

import math

import numpy as np

from ...errors import ArgumentError, ShardcTypeError
from ...ir import dtypes
from ...ops import lax as L
from ...trace import core
from .. import numpy as jnp
from ._base import _check_shape, _sharded, normal_impl, uniform_impl
from ._dist import gumbel_impl
from ._keys import keys_bits, keys_of, keys_split
from ._run import float_dtype, run, shape_of


def _need(module, name, what):
    fn = getattr(module, name, None)
    if fn is None:
        raise NotImplementedError(f"{what} needs {module.__name__}.{name}, which this build "
                                  "of shardc does not have")
    return fn


def _slax():
    from .. import lax
    return lax


def _shuffle_impl(data, x, *, axis):
    sort_key_val = _need(_slax(), "sort_key_val", "permutation")
    size = math.prod(jnp.shape(x))
    rounds = int(np.ceil(3 * np.log(max(1, size)) / np.log(np.iinfo(np.uint32).max)))
    for _ in range(rounds):
        ks = keys_split(data, (2,))
        data, sub = ks[0], ks[1]
        sort_keys = keys_bits(sub, 32, tuple(jnp.shape(x)))
        _, x = sort_key_val(sort_keys, x, axis)
    return x


def _range_permutation_impl(data, *, n):
    return _shuffle_impl(data, jnp.arange(n), axis=0)


def _permutation_impl(data, x, *, axis, independent):
    if independent or jnp.ndim(x) == 1:
        return _shuffle_impl(data, x, axis=axis)
    ind = _shuffle_impl(data, jnp.arange(jnp.shape(x)[axis]), axis=0)
    return jnp.take(x, ind, axis)


def permutation(key, x, axis=0, independent=False, *, out_sharding=None):
    """A shuffled copy of x along `axis` (or of arange(x) for an integer x)."""
    data, _ = keys_of(key, "permutation")
    if not core.is_tracer(x) and np.ndim(x) == 0:
        if not np.issubdtype(np.asarray(x).dtype, np.integer):
            raise ShardcTypeError("x must be an integer or at least 1-dimensional")
        return _sharded(run(_range_permutation_impl, data, n=int(x)), out_sharding)
    nd = jnp.ndim(x)
    axis = axis % nd if -nd <= axis < nd else axis
    if not 0 <= axis < nd:
        raise ArgumentError(f"axis {axis} is out of bounds for array of dimension {nd}")
    return _sharded(run(_permutation_impl, data, x, axis=axis, independent=bool(independent)),
                    out_sharding)


def shuffle(key, x, axis=0):
    """Deprecated in jax (use permutation); the same values as jax's shuffle."""
    data, _ = keys_of(key, "shuffle")
    return run(_shuffle_impl, data, x, axis=axis % jnp.ndim(x))


def choice(key, a, shape=(), replace=True, p=None, axis=0, mode=None):
    data, typed = keys_of(key, "choice")
    if not isinstance(shape, (tuple, list)):
        raise ShardcTypeError("shape argument of jax.random.choice must be a sequence, "
                              f"got {shape}")
    shape = shape_of(shape)
    arr = jnp.asarray(a)
    if jnp.ndim(arr) == 0:
        n_inputs = int(a)
    else:
        axis = axis % jnp.ndim(arr)
        n_inputs = jnp.shape(arr)[axis]
    n_draws = math.prod(shape)
    if n_draws == 0:
        return jnp.zeros(shape, dtype=L.aval(arr).dtype)
    if n_inputs <= 0:
        raise ArgumentError("a must be greater than 0 unless no samples are taken")
    if not replace and n_draws > n_inputs:
        raise ArgumentError(f"Cannot take a larger sample (size {n_draws}) than population "
                            f"(size {n_inputs}) when 'replace=False'")
    scalar = jnp.ndim(arr) == 0
    if p is None:
        if replace:
            from ._base import randint
            ind = randint(key, shape, 0, n_inputs)
            result = ind if scalar else jnp.take(arr, ind, axis)
        else:
            result = permutation(key, n_inputs if scalar else arr, axis)
            result = result[(slice(None),) * axis + (slice(n_draws),)]
    else:
        p_arr = jnp.asarray(p)
        if not dtypes.is_float(L.aval(p_arr).dtype):
            p_arr = L.convert_element_type(p_arr, dtypes.default_float())
        if tuple(jnp.shape(p_arr)) != (n_inputs,):
            raise ArgumentError(
                "p must be None or a 1D vector with the same size as a.shape[axis]. "
                f"p has shape {jnp.shape(p_arr)} and a.shape[axis] is {n_inputs}.")
        if replace:
            ind = run(_choice_p_impl, data, p_arr, shape=shape)
        else:
            mode = "low" if mode is None else mode
            ind = run(_choice_gumbel_impl, data, p_arr, n_draws=n_draws, mode=mode)
        result = ind if scalar else jnp.take(arr, ind, axis)
    out_shape = shape if scalar else \
        tuple(jnp.shape(arr)[:axis]) + shape + tuple(jnp.shape(arr)[axis + 1:])
    return jnp.reshape(result, out_shape)


def _choice_p_impl(data, p, *, shape):
    from .. import numpy as snp
    searchsorted = _need(snp, "searchsorted", "choice with p")
    p_cuml = jnp.cumsum(p)
    dt = L.aval(p_cuml).dtype
    r = p_cuml[-1] * (1 - uniform_impl(data, 0., 1., shape=shape, dtype=dt))
    return L.convert_element_type(searchsorted(p_cuml, r), dtypes.default_int())


def _choice_gumbel_impl(data, p, *, n_draws, mode):
    top_k = _need(_slax(), "top_k", "choice without replacement with p")
    n = jnp.shape(p)[0]
    g = gumbel_impl(data, shape=(n,), dtype=L.aval(p).dtype, mode=mode) + jnp.log(p)
    return L.convert_element_type(top_k(g, n_draws)[1], dtypes.default_int())


def categorical_noreplace_impl(data, logits, *, shape, batch_shape, axis, mode):
    top_k = _need(_slax(), "top_k", "categorical(replace=False)")
    logits = logits + gumbel_impl(data, shape=tuple(jnp.shape(logits)),
                                  dtype=L.aval(logits).dtype, mode=mode)
    prefix = shape[:len(shape) - len(batch_shape)]
    k = math.prod(prefix)
    if k > jnp.shape(logits)[axis]:
        raise ArgumentError(f"Number of samples without replacement ({k}) cannot exceed "
                            f"number of categories ({jnp.shape(logits)[axis]}).")
    _, indices = top_k(jnp.moveaxis(logits, axis, -1), k)
    nd = jnp.ndim(indices)
    indices = jnp.transpose(indices, (nd - 1, *range(nd - 1)))
    return jnp.reshape(indices, shape)


def _linalg():
    from ..numpy import linalg
    return linalg


def _mvn_impl(data, mean, cov, *, shape, dtype, method):
    if jnp.ndim(mean) < 1:
        raise ArgumentError("multivariate_normal requires mean.ndim >= 1, got mean.ndim == "
                            f"{jnp.ndim(mean)}")
    if jnp.ndim(cov) < 2:
        raise ArgumentError("multivariate_normal requires cov.ndim >= 2, got cov.ndim == "
                            f"{jnp.ndim(cov)}")
    n = jnp.shape(mean)[-1]
    if tuple(jnp.shape(cov)[-2:]) != (n, n):
        raise ArgumentError(f"multivariate_normal requires cov.shape == (..., n, n) for n={n}, "
                            f"but got cov.shape == {jnp.shape(cov)}.")
    if shape is None:
        shape = np.broadcast_shapes(jnp.shape(mean)[:-1], jnp.shape(cov)[:-2])
    else:
        _check_shape("normal", shape, jnp.shape(mean)[:-1], jnp.shape(cov)[:-2])
    la = _linalg()
    if method == "svd":
        u, s, _ = _need(la, "svd", "multivariate_normal(method='svd')")(cov)
        factor = u * jnp.sqrt(s[..., None, :])
    elif method == "eigh":
        w, v = _need(la, "eigh", "multivariate_normal(method='eigh')")(cov)
        factor = v * jnp.sqrt(w[..., None, :])
    else:
        factor = _need(la, "cholesky", "multivariate_normal")(cov)
    samples = normal_impl(data, shape=tuple(shape) + tuple(jnp.shape(mean)[-1:]), dtype=dtype)
    return mean + jnp.einsum("...ij,...j->...i", factor, samples)


def multivariate_normal(key, mean, cov, shape=None, dtype=None, method="cholesky", *,
                        out_sharding=None):
    data, _ = keys_of(key, "multivariate_normal")
    if method not in {"svd", "eigh", "cholesky"}:
        raise ArgumentError("method must be one of {'svd', 'eigh', 'cholesky'}")
    mean, cov = jnp.asarray(mean), jnp.asarray(cov)
    ft = dtypes.default_float()
    md, cd = L.aval(mean).dtype, L.aval(cov).dtype
    common = md if md == cd and dtypes.is_float(md) else \
        (md if dtypes.is_float(md) and not dtypes.is_float(cd) else
         cd if dtypes.is_float(cd) and not dtypes.is_float(md) else ft)
    if dtypes.is_float(md) and dtypes.is_float(cd) and md != cd:
        common = max(md, cd, key=lambda d: d.itemsize)
    mean, cov = L.convert_element_type(mean, common), L.convert_element_type(cov, common)
    dtype = common if dtype is None else float_dtype(dtype, "multivariate_normal")
    shape = None if shape is None else shape_of(shape)
    return _sharded(run(_mvn_impl, data, mean, cov, shape=shape, dtype=dtype, method=method),
                    out_sharding)


def _orthogonal_impl(data, *, n, m, shape, dtype):
    la = _linalg()
    z = normal_impl(data, shape=(*shape, max(n, m), min(n, m)), dtype=dtype)
    q, r = _need(la, "qr", "orthogonal")(z)
    d = _need(la, "diagonal", "orthogonal")(r)
    x = q * jnp.expand_dims(jnp.sign(d), -2)
    return jnp.swapaxes(x, -1, -2) if n < m else x


def orthogonal(key, n, shape=(), dtype=None, m=None, *, out_sharding=None):
    data, _ = keys_of(key, "orthogonal")
    dtype = float_dtype(dtype, "orthogonal")
    shape = shape_of(shape)
    _check_shape("orthogonal", shape)
    n, m = shape_of((n, n if m is None else m), "orthogonal's n and m")
    return _sharded(run(_orthogonal_impl, data, n=n, m=m, shape=shape, dtype=dtype),
                    out_sharding)
