"""jax.scipy.stats's mode, rankdata and sem.

mode and rankdata work on runs of equal values in sorted order. jax finds those with
jnp.unique / jnp.nonzero under vmap; here each element's run bounds come from a running
max (run start) and a reversed running min (run end) along the sorted axis, which gives
the same values for every column at once without data-dependent sizes."""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import numpy as snp
from ...errors import ArgumentError, ShardcNotImplementedError, wrap_public
from ...ir import dtypes
from ...ops.common import check_axis
from ..lax_sorting import cummax, cummin, sort_key_val
from ..numpy._util import aval, check_arraylike
from ._util import jitted, promote

__all__ = ["ModeResult", "mode", "rankdata", "sem"]


class ModeResult(NamedTuple):
    mode: object
    count: object


def _check_nan_policy(name, nan_policy):
    if nan_policy not in ("propagate", "omit", "raise"):
        raise ArgumentError(f"Illegal nan_policy value {nan_policy!r}; expected one of "
                            "{'propagate', 'omit', 'raise'}")
    if nan_policy == "omit":
        raise ShardcNotImplementedError(f"Logic for `nan_policy` of {nan_policy} is not "
                                        "implemented")
    if nan_policy == "raise":
        raise ShardcNotImplementedError(
            f"In order to best JIT compile `{name}`, we cannot know whether `x` contains "
            f"nans. Please check if nans exist in `x` outside of the `{name}` function.")


def _runs(s):
    """For `s` sorted along its last axis: each element's run start index and one past
    its run end (runs of equal values; NaNs equal one another where `s` is inexact)."""
    n = aval(s).shape[-1]
    lo, hi = s[..., :-1], s[..., 1:]
    new = lo != hi
    if dtypes.is_inexact(aval(s).dtype):
        new = new & ~(snp.isnan(lo) & snp.isnan(hi))
    true = snp.ones(aval(s).shape[:-1] + (1,), bool)
    starts = snp.concatenate([true, new], axis=-1)
    ends = snp.concatenate([new, true], axis=-1)       # the last of each run
    idx = snp.arange(n)
    first = cummax(snp.where(starts, idx, 0), axis=aval(s).ndim - 1)
    stop = cummin(snp.where(ends, idx + 1, n), axis=aval(s).ndim - 1, reverse=True)
    return first, stop


# ---------------------------------------------------------------- mode

def _mode(a, axis, nan_policy, keepdims):
    check_arraylike("mode", a)
    x = snp.atleast_1d(a)
    _check_nan_policy("mode", nan_policy)
    shape = aval(x).shape
    if axis is not None:
        axis = check_axis("mode", axis, len(shape))
    if keepdims:
        out_shape = tuple(1 if axis is None or i == axis else d for i, d in enumerate(shape))
    else:
        out_shape = () if axis is None else shape[:axis] + shape[axis + 1:]
    if axis is None:
        axis, x = 0, snp.ravel(x)
    x = snp.moveaxis(x, axis, -1)
    n = aval(x).shape[-1]
    cols = math.prod(aval(x).shape[:-1])
    x = snp.reshape(x, (cols, n))
    if n == 0:       # jax's answer for an empty slice: nan, and a count of 0 (both float)
        vals = snp.full((cols,), np.nan, dtypes.default_float())
        counts = snp.zeros((cols,), dtypes.default_float())
    else:
        s = snp.sort(x, axis=-1)
        first, stop = _runs(s)
        count = stop - first
        # the first longest run in sorted order: the smallest of the most frequent values
        best = snp.argmax(count, axis=-1)
        vals = snp.take_along_axis(s, best[:, None], axis=-1)[:, 0]
        counts = snp.max(count, axis=-1)
    return ModeResult(snp.reshape(vals, out_shape), snp.reshape(counts, out_shape))


def mode(a, axis=0, nan_policy="propagate", keepdims=False):
    """The most common value along `axis` (the smallest of ties) and its count."""
    return ModeResult(*jitted(_mode, a, axis=axis, nan_policy=nan_policy,
                              keepdims=keepdims))


# ---------------------------------------------------------------- rankdata

def _ranks(a, method):
    """Ranks along the last axis of `a` (no NaN check)."""
    out_dtype = dtypes.default_float()
    n = aval(a).shape[-1]
    idx = snp.broadcast_to(snp.arange(n), aval(a).shape)
    arr, order = sort_key_val(a, idx, dimension=-1)
    inv = sort_key_val(order, idx, dimension=-1)[1]      # the inverse permutation
    if method == "ordinal":
        return snp.astype(inv + 1, out_dtype)
    if method == "dense":
        new = arr[..., 1:] != arr[..., :-1]
        obs = snp.concatenate([snp.ones(aval(a).shape[:-1] + (1,), bool), new], axis=-1)
        dense = snp.take_along_axis(snp.cumsum(obs, axis=-1), inv, axis=-1)
        return snp.astype(dense, out_dtype)
    first, stop = _runs(arr)
    first = snp.astype(first, out_dtype)
    stop = snp.astype(stop, out_dtype)
    if method == "max":
        r = stop
    elif method == "min":
        r = first + 1
    else:
        r = 0.5 * (stop + first + 1)
    return snp.take_along_axis(r, inv, axis=-1)


def _rankdata(a, method, axis, nan_policy):
    check_arraylike("rankdata", a)
    _check_nan_policy("rankdata", nan_policy)
    if method not in ("average", "min", "max", "dense", "ordinal"):
        raise ArgumentError(f"unknown method '{method}'")
    a = snp.asarray(a)
    # with an axis every 1-d slice is ranked on its own (NaN check included), as jax's
    # apply_along_axis; without, the flattened array is
    if axis is None:
        a = snp.ravel(a)
        axis = 0
    else:
        axis = check_axis("rankdata", axis, aval(a).ndim)
    a = snp.moveaxis(a, axis, -1)
    ranks = _ranks(a, method)
    has_nan = snp.any(snp.isnan(a), axis=-1, keepdims=True)
    out = snp.where(has_nan, snp.asarray(np.nan, aval(ranks).dtype), ranks)
    return snp.moveaxis(out, -1, axis)


def rankdata(a, method="average", *, axis=None, nan_policy="propagate"):
    """Ranks of the data, ties resolved by `method`, as scipy.stats.rankdata."""
    return jitted(_rankdata, a, method=method, axis=axis, nan_policy=nan_policy)


# ---------------------------------------------------------------- sem

def _sem(a, axis, ddof, nan_policy, keepdims):
    (b,) = promote("sem", a)
    dt, shape = aval(b).dtype, aval(b).shape
    if axis is not None:
        check_axis("sem", axis, len(shape))
    if nan_policy == "propagate":
        size = math.prod(shape) if axis is None else shape[axis]
        return snp.std(b, axis, ddof=ddof, keepdims=keepdims) / snp.astype(snp.sqrt(size), dt)
    if nan_policy == "omit":
        count = snp.sum(~snp.isnan(b), axis, keepdims=keepdims)
        return (snp.nanstd(b, axis, ddof=ddof, keepdims=keepdims)
                / snp.astype(snp.sqrt(count), dt))
    raise ArgumentError(f"{nan_policy} is not supported")


def sem(a, axis=0, ddof=1, nan_policy="propagate", *, keepdims=False):
    """The standard error of the mean: std(a, ddof) / sqrt(count) along `axis`."""
    return jitted(_sem, a, axis=axis, ddof=ddof, nan_policy=nan_policy, keepdims=keepdims)


wrap_public(globals())
