"""shardc.numpy.pad: every mode of jnp.pad (constant, edge, wrap, reflect and symmetric
with even or odd reflection, linear_ramp, maximum / minimum / mean / median with
stat_length, empty, and a callable), with its keyword arguments, as jax.numpy pads."""
from __future__ import annotations

import numpy as np

from ...errors import ArgumentError, ShardcNotImplementedError, ShardcTypeError
from ...ir import dtypes
from ...ops import shape as shp
from ...trace import core
from ._util import aval, check_arraylike, convert
from ...trace import pytree as _tree

_KWARGS = {"empty": (), "edge": (), "wrap": (), "constant": ("constant_values",),
           "linear_ramp": ("end_values",), "maximum": ("stat_length",),
           "mean": ("stat_length",), "median": ("stat_length",),
           "minimum": ("stat_length",), "reflect": ("reflect_type",),
           "symmetric": ("reflect_type",)}


def pad(array, pad_width, mode="constant", **kwargs):
    check_arraylike("pad", array)
    from ._creation import asarray
    array = asarray(array)
    nd = aval(array).ndim
    widths = _pairs(pad_width, nd, "pad_width")
    if not all(_is_int(w) for p in widths for w in p):
        raise ShardcTypeError("`pad_width` must be of integral type.")
    widths = tuple((int(lo), int(hi)) for lo, hi in widths)
    if callable(mode):
        return _pad_func(array, widths, mode, **kwargs)
    if mode not in _KWARGS:
        raise ShardcNotImplementedError(f"Unimplemented padding mode '{mode}' for np.pad.")
    extra = set(kwargs) - set(_KWARGS[mode])
    if extra:
        raise ArgumentError(f"unsupported keyword arguments for mode '{mode}': {extra}")
    if nd == 0:
        return array
    if any(lo < 0 or hi < 0 for lo, hi in widths):
        raise ArgumentError("index can't contain negative values")
    if mode == "constant":
        return _pad_constant(array, widths, kwargs.get("constant_values", 0))
    if mode in ("reflect", "symmetric"):
        rt = kwargs.get("reflect_type", "even")
        if rt not in ("even", "odd"):
            raise ArgumentError(f"reflect_type must be 'even' or 'odd', got {rt!r}")
        out = array
        for d in range(nd):
            out = _reflect_axis(out, d, widths[d], mode, rt)
        return out
    if mode == "linear_ramp":
        ends = _pairs(kwargs.get("end_values", 0), nd, "end_values")
        return _pad_linear_ramp(array, widths, ends)
    if mode in ("maximum", "minimum", "mean", "median"):
        sl = kwargs.get("stat_length")
        sl = None if sl is None else _pairs(sl, nd, "stat_length")
        return _pad_stats(array, widths, sl, mode)
    fill = {"edge": _edge, "wrap": _wrap, "empty": _empty}[mode]
    out = array
    for d in range(nd):
        if aval(out).shape[d] == 0 and mode != "empty":
            _check_no_padding(widths[d], mode)
            continue
        out = _join(d, fill(out, d, widths[d][0], True), out, fill(out, d, widths[d][1], False))
    return out


# ---------------------------------------------------------------- arguments

def _is_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _pairs(vals, nd, name):
    """Per-axis (before, after) from the shapes jnp.pad accepts: (nd, 2), (1, 2), (2,),
    (1,) or ()."""
    if any(core.is_tracer(v) for v in _tree.tree_leaves(vals)):
        raise ShardcTypeError(f"the {name} argument of jnp.pad must be static (concrete), "
                              "not a traced value")
    try:
        v = np.asarray(vals)
    except ValueError:
        raise ShardcTypeError(f"`{name}` entries must be the same shape: {vals}") from None
    if v.dtype == object:
        raise ShardcTypeError(f"`{name}` entries must be the same shape: {vals}")
    if v.shape == (nd, 2):
        return tuple((a.item(), b.item()) for a, b in v)
    if v.shape in ((1, 2), (2,)):
        a, b = v.reshape(2)
        return ((a.item(), b.item()),) * nd
    if v.shape in ((1,), ()):
        a = v.reshape(()).item()
        return ((a, a),) * nd
    raise ArgumentError(f"jnp.pad: {name} with nd={nd} has unsupported shape {v.shape}. "
                        f"Valid shapes are ({nd}, 2), (1, 2), (2,), (1,), or ().")


def _check_no_padding(w, mode):
    if w[0] > 0 or w[1] > 0:
        raise ArgumentError(f"Cannot apply '{mode}' padding to empty axis")


# ---------------------------------------------------------------- pieces along one axis

def _slice(a, d, lo, hi):
    x = aval(a)
    n = x.shape[d]
    lo, hi = (lo + n if lo < 0 else lo), (n if hi is None else hi + n if hi < 0 else hi)
    start, limit = [0] * x.ndim, list(x.shape)
    start[d], limit[d] = lo, hi
    return shp.slice_p.bind(a, start_indices=tuple(start), limit_indices=tuple(limit))


def _join(d, *parts):
    parts = [p for p in parts if p is not None and aval(p).shape[d] > 0]
    if len(parts) == 1:
        return parts[0]
    from ._shapes import concatenate
    return concatenate(parts, d)


def _repeat_to(x, d, k):
    """x (size 1 along d) repeated k times along d."""
    if k == 0:
        return None
    from ._util import broadcast_to
    shape = list(aval(x).shape)
    shape[d] = k
    return broadcast_to(x, tuple(shape))


def _edge(a, d, k, before):
    n = aval(a).shape[d]
    return _repeat_to(_slice(a, d, 0, 1) if before else _slice(a, d, n - 1, n), d, k)


def _wrap(a, d, k, before):
    n = aval(a).shape[d]
    reps, rem = divmod(k, n)
    parts = [a] * reps
    if rem:
        parts = ([_slice(a, d, n - rem, n)] + parts) if before else (parts + [_slice(a, d, 0, rem)])
    return _join(d, *parts) if parts else None


def _empty(a, d, k, before):
    if k == 0:
        return None
    shape = list(aval(a).shape)
    shape[d] = k
    from ._creation import zeros
    return zeros(tuple(shape), aval(a).dtype)


def _reflect_axis(a, d, w, mode, reflect_type):
    n = aval(a).shape[d]
    if n == 0:
        _check_no_padding(w, mode)
        return a
    offset = 1 if (mode == "reflect" and n > 1) else 0
    from ._ufuncs import subtract, multiply
    for before, padding in ((True, w[0]), (False, w[1])):
        # (only odd reflections read the edge: an unused slice of a sharded dim to size 1
        # would still be an explicit-mode type error)
        if reflect_type == "odd" and padding > 0:
            edge = _slice(a, d, 0, 1) if before else _slice(a, d, -1, None)
        while padding > 0:
            cur = min(padding, n - offset)
            padding -= cur
            m = aval(a).shape[d]
            if before:
                x = _slice(a, d, offset, offset + cur)
            else:
                stop = m if (mode == "symmetric" or n == 1) else m - 1
                x = _slice(a, d, stop - cur, stop)
            x = shp.rev_p.bind(x, dimensions=(d,))
            if reflect_type == "odd":
                x = subtract(multiply(2, edge), x)
                if n > 1:
                    edge = _slice(x, d, 0, 1) if before else _slice(x, d, -1, None)
            a = _join(d, x, a) if before else _join(d, a, x)
    return a


# ---------------------------------------------------------------- modes over all axes

def _pad_constant(array, widths, constant_values):
    from ._creation import asarray
    x = aval(array)
    cv = asarray(constant_values)
    cv = convert(cv, x.dtype, x.weak) if aval(cv).dtype != x.dtype or aval(cv).weak != x.weak \
        else cv
    c = aval(cv)
    if c.ndim == 0:
        return shp.pad_p.bind(array, cv, padding_config=tuple((lo, hi, 0) for lo, hi in widths))
    from ._indexing import getitem
    from ._shapes import squeeze
    from ._util import broadcast_to
    if c.ndim == 1 and c.shape[-1] == 1:
        return shp.pad_p.bind(array, squeeze(cv), padding_config=tuple(
            (lo, hi, 0) for lo, hi in widths))
    if c.ndim <= 2 and c.shape[-1] != 2:
        raise ArgumentError(f"jnp.pad: constant_values has unsupported shape {c.shape}. If "
                            "the shape is 1D or 2D, the last dimension must be of size 1 or 2.")
    cv = broadcast_to(cv, (x.ndim, 2))
    for d, (lo, hi) in enumerate(widths):
        for side, k in ((0, lo), (1, hi)):
            if k:
                cfg = [(0, 0, 0)] * x.ndim
                cfg[d] = (k, 0, 0) if side == 0 else (0, k, 0)
                array = shp.pad_p.bind(array, getitem(cv, (d, side)), padding_config=tuple(cfg))
    return array


def _pad_linear_ramp(array, widths, ends):
    from ._composite import linspace
    from ._shapes import squeeze
    x = aval(array)
    for d in range(x.ndim):
        ramps = []
        for k, (end, before) in enumerate(((ends[d][0], True), (ends[d][1], False))):
            edge = _slice(array, d, 0, 1) if before else _slice(array, d, -1, None)
            r = linspace(end, squeeze(edge, d), num=widths[d][k], endpoint=False,
                         dtype=x.dtype, axis=d)
            if x.weak:
                r = convert(r, x.dtype, True)
            ramps.append(r if before else shp.rev_p.bind(r, dimensions=(d,)))
        array = _join(d, ramps[0], array, ramps[1])
    return array


def _pad_stats(array, widths, stat_length, mode):
    from . import _reductions as R
    from ._quantile import median
    from ._ufuncs import round as round_
    func = {"maximum": R.max, "minimum": R.min, "mean": R.mean, "median": median}[mode]
    x = aval(array)
    for d in range(x.ndim):
        n = aval(array).shape[d]
        if stat_length is None:
            before = after = func(array, axis=d, keepdims=True)
        else:
            lb, la = stat_length[d]
            if lb == 0 or la == 0:
                raise ArgumentError("stat_length of 0 yields no value for padding")
            lb, la = min(lb, n), min(la, n)
            before = func(_slice(array, d, 0, lb), axis=d, keepdims=True)
            after = func(_slice(array, d, n - la, n), axis=d, keepdims=True)
        if dtypes.is_int(x.dtype):
            before, after = round_(before), round_(after)
        before, after = convert(before, x.dtype, x.weak), convert(after, x.dtype, x.weak)
        array = _join(d, _repeat_to(before, d, widths[d][0]), array,
                      _repeat_to(after, d, widths[d][1]))
    return array


def _pad_func(array, widths, func, **kwargs):
    from ._more import apply_along_axis
    padded = _pad_constant(array, widths, 0)
    for d in range(aval(padded).ndim):
        padded = apply_along_axis(func, d, padded, widths[d], d, kwargs)
    return padded
