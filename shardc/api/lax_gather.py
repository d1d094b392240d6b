"""jax.lax's gather and scatter family (XLA's dimension numbers, jax's modes) over
shardc's gather, scatter_add and scatter_mul / _min / _max primitives."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import ShardcError, ShardcTypeError, wrap_public
from ..ir import dtypes
from ..ir.program import Lit
from ..ops import elementwise as ew
from ..ops import indexing as ix
from ..ops import scatter as sc
from ..ops.reduce import identity_of
from ..ops import shape as shp
from ..trace import core
from .lax_ops import _arr, _shape, index_in_dim
from .numpy._util import aval, default_fill, convert, index_for_dim


# ---------------------------------------------------------------- gather / scatter

class GatherDimensionNumbers(NamedTuple):
    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()


class ScatterDimensionNumbers(NamedTuple):
    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple
    operand_batching_dims: tuple = ()
    scatter_indices_batching_dims: tuple = ()


def _mode(mode):
    m = getattr(mode, "name", mode)
    m = {None: "fill", "FILL_OR_DROP": "fill", "fill": "fill", "drop": "fill",
         "CLIP": "clip", "clip": "clip", "PROMISE_IN_BOUNDS": "promise",
         "promise_in_bounds": "promise"}.get(m if not isinstance(m, str) else
                                             m if m.islower() else m.upper())
    if m is None:
        raise ShardcError(f"unknown gather/scatter mode {mode!r}")
    return m


def gather(operand, start_indices, dimension_numbers, slice_sizes, *, unique_indices=False,
           indices_are_sorted=False, mode=None, fill_value=None):
    """XLA's gather (index_vector_dim last, as jax.lax.gather). Out-of-bound starts:
    mode fill gives fill_value (NaN, the dtype's extreme, True); clip and
    promise_in_bounds (the default, as jax's) clamp."""
    dn = dimension_numbers
    x, idx = _arr(operand), _arr(start_indices)
    idx = index_for_dim(idx, max(aval(x).shape, default=0))    # (the bounds: not in uint8)
    xa, ia = aval(x), aval(idx)
    slice_sizes = _shape(slice_sizes)
    params = dict(offset_dims=tuple(dn.offset_dims),
                  collapsed_slice_dims=tuple(dn.collapsed_slice_dims),
                  start_index_map=tuple(dn.start_index_map), index_vector_dim=ia.ndim - 1,
                  slice_sizes=slice_sizes,
                  **_batching(dn, "start_indices_batching_dims", "gather"))
    m = _mode(mode) if mode is not None else "promise"
    if m == "clip":
        idx = _clamp_starts(idx, xa.shape, params["start_index_map"], slice_sizes)
    out = ix.gather_p.bind(x, idx, **params)
    if m != "fill":
        return out
    ok = _in_bounds(idx, xa.shape, params["start_index_map"], slice_sizes)
    if ok is None:
        return out
    oa = aval(out)
    batch_dims = tuple(d for d in range(oa.ndim) if d not in params["offset_dims"])
    mask = shp.broadcast_in_dim_p.bind(ok, shape=oa.shape, broadcast_dimensions=batch_dims)
    dt = oa.dtype
    if fill_value is None:
        fill_value = default_fill(dt)
    fill = Lit(core._scalar(fill_value, dt), oa.update(shape=(), weak=False))
    return ew.select_p.bind(mask, out, shp.broadcast_in_dim_p.bind(
        fill, shape=oa.shape, broadcast_dimensions=()))


def _clamp_starts(idx, shape, start_index_map, slice_sizes):
    ia = aval(idx)
    upper = np.array([shape[d] - slice_sizes[d] for d in start_index_map], ia.dtype)
    hi = shp.broadcast_in_dim_p.bind(_const(upper), shape=ia.shape,
                                     broadcast_dimensions=(ia.ndim - 1,))
    zero = Lit(core._scalar(0, ia.dtype), ia.update(shape=(), weak=False))
    return ew.min_p.bind(ew.max_p.bind(idx, zero), hi)


def _const(v):
    from ..ops.special import constant_p
    return constant_p.bind(value=v)


def scatter_add(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """XLA's scatter-add (index_vector_dim last). Out-of-bound windows are dropped (mode
    fill, the default, and promise_in_bounds, as XLA's) or clamped (clip)."""
    return _scatter("scatter_add", ix.scatter_add_p, operand, scatter_indices, updates,
                    dimension_numbers, mode)


def scatter_mul(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """XLA's scatter-multiply: each element is the operand's times every update
    scattered to it (repeated indices included). Modes as scatter_add's."""
    return _scatter("scatter_mul", sc.scatter_mul_p, operand, scatter_indices, updates,
                    dimension_numbers, mode)


def scatter_min(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """XLA's scatter-min: the min of the operand's element and every update scattered
    to it. Modes as scatter_add's."""
    return _scatter("scatter_min", sc.scatter_min_p, operand, scatter_indices, updates,
                    dimension_numbers, mode)


def scatter_max(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    """XLA's scatter-max: the max of the operand's element and every update scattered
    to it. Modes as scatter_add's."""
    return _scatter("scatter_max", sc.scatter_max_p, operand, scatter_indices, updates,
                    dimension_numbers, mode)


def _scatter(name, prim, operand, scatter_indices, updates, dn, mode):
    """A scatter primitive with jax's modes: a window out of bounds is dropped (fill,
    the default, and promise_in_bounds, as XLA's: its update becomes the combiner's
    identity at a clamped position; XLA's own dropping of such indices differs once
    partitioned) or clamped (clip)."""
    x, idx, upd = _arr(operand), _arr(scatter_indices), _arr(updates)
    xa, ua = aval(x), aval(upd)
    idx = index_for_dim(idx, max(xa.shape, default=0))  # (bounds, past the end: not in uint8)
    if xa.dtype == dtypes.bool_ and name in ("scatter_add", "scatter_mul"):
        raise ShardcTypeError(f"{name[8:]} does not accept dtype bool at position 0. "
                              "Accepted dtypes at position 0 are subtypes of integer, "
                              "floating, complexfloating.")
    if xa.dtype != ua.dtype:
        raise ShardcTypeError(f"lax.{name} requires arguments to have the same dtypes, "
                              f"got {xa.dtype}, {ua.dtype}.")
    inserted, smap = tuple(dn.inserted_window_dims), tuple(dn.scatter_dims_to_operand_dims)
    batching = _batching(dn, "scatter_indices_batching_dims", name)
    obd = batching.get("operand_batching_dims", ())
    sizes = [1] * xa.ndim
    win = iter(ua.shape[d] for d in dn.update_window_dims)
    for d in range(xa.ndim):
        if d not in inserted and d not in obd:
            sizes[d] = next(win)
    params = dict(update_window_dims=tuple(dn.update_window_dims),
                  inserted_window_dims=inserted, scatter_dims_to_operand_dims=smap,
                  **batching)
    # promise_in_bounds drops a window out of bounds too, as XLA's scatter (jax's
    # gradient of an indexing, whose clamped out-of-range index gets no cotangent)
    if _mode(mode) == "promise" and prim is ix.scatter_add_p:
        # XLA drops the window; its transpose reads it clamped, as jax's gather
        return prim.bind(x, idx, upd, index_vector_dim=aval(idx).ndim - 1,
                         clamped_transpose=True, **params)
    if _mode(mode) != "clip" and prim is sc.scatter_p:
        return _scatter_dropping(x, idx, upd, smap, sizes, params)
    if _mode(mode) != "clip":
        ok = _in_bounds(idx, xa.shape, smap, sizes)
        batch = tuple(d for d in range(ua.ndim) if d not in dn.update_window_dims)
        mask = shp.broadcast_in_dim_p.bind(ok, shape=ua.shape, broadcast_dimensions=batch)
        kind = "add" if prim is ix.scatter_add_p else sc.KINDS[prim.name]
        ident = Lit(core._scalar(identity_of(kind, ua.dtype), ua.dtype),
                    ua.update(shape=(), weak=False))
        upd = ew.select_p.bind(mask, upd, shp.broadcast_in_dim_p.bind(
            ident, shape=ua.shape, broadcast_dimensions=()))
    idx = _clamp_starts(idx, xa.shape, smap, sizes)
    return prim.bind(x, idx, upd, index_vector_dim=aval(idx).ndim - 1, **params)


def _scatter_dropping(x, idx, upd, smap, sizes, params):
    """A replacing scatter whose windows out of bounds are dropped: the operand gets a
    window's room past its end on each indexed dim, where those windows are sent, and
    loses it after (a replaced element has no identity to write instead, and XLA's own
    dropping differs once partitioned)."""
    xa, ia = aval(x), aval(idx)
    ok = _in_bounds(idx, xa.shape, smap, sizes)
    okb = shp.broadcast_in_dim_p.bind(ok, shape=ia.shape,
                                      broadcast_dimensions=tuple(range(ia.ndim - 1)))
    past = shp.broadcast_in_dim_p.bind(_const(np.array([xa.shape[d] for d in smap],
                                                        ia.dtype)),
                                       shape=ia.shape, broadcast_dimensions=(ia.ndim - 1,))
    idx = ew.select_p.bind(okb, idx, past)
    room = [(0, sizes[d] if d in smap else 0, 0) for d in range(xa.ndim)]
    zero = Lit(core._scalar(0, xa.dtype), xa.update(shape=(), weak=False))
    padded = shp.pad_p.bind(x, zero, padding_config=tuple(room))
    out = sc.scatter_p.bind(padded, idx, upd, index_vector_dim=ia.ndim - 1, **params)
    return shp.slice_p.bind(out, start_indices=(0,) * xa.ndim, limit_indices=xa.shape,
                            strides=None)


def _batching(dn, indices_field, name):
    """The batching-dim params of jax's dimension numbers `dn` (none when it has none)."""
    obd = tuple(getattr(dn, "operand_batching_dims", ()))
    ibd = tuple(getattr(dn, indices_field, ()))
    if len(obd) != len(ibd):
        raise ShardcError(f"{name}: operand_batching_dims and {indices_field} must have "
                          "the same length")
    return ix.batching(obd, ibd, scatter=indices_field.startswith("scatter"))


def _in_bounds(idx, shape, start_index_map, slice_sizes):
    """Which index vectors (the last dim of idx) start a window inside `shape`."""
    ia = aval(idx)
    ok = None
    for k, d in enumerate(start_index_map):
        col = index_in_dim(idx, k, ia.ndim - 1, keepdims=False)
        ca = aval(col)
        upper = Lit(core._scalar(shape[d] - slice_sizes[d], ca.dtype),
                    ca.update(shape=(), weak=False))
        zero = Lit(core._scalar(0, ca.dtype), ca.update(shape=(), weak=False))
        good = ew.and_p.bind(ew.ge_p.bind(col, zero), ew.le_p.bind(col, upper))
        ok = good if ok is None else ew.and_p.bind(ok, good)
    if ok is None:      # an empty index vector: every window is the whole operand's
        t = Lit(np.bool_(True), ia.update(shape=(), dtype=np.dtype(bool), weak=False))
        ok = shp.broadcast_in_dim_p.bind(t, shape=ia.shape[:-1], broadcast_dimensions=())
    return ok


def index_take(src, idxs, axes):
    """src[idxs[0], idxs[1], ...] along `axes` (as jax.lax.index_take)."""
    idxs = [_arr(i) for i in idxs]
    axes = tuple(axes)
    n = aval(idxs[0]).shape[0]
    from .numpy._shapes import stack
    indices = stack([convert(i, aval(idxs[0]).dtype) for i in idxs], axis=1)
    slice_sizes = list(aval(src).shape)
    for a in axes:
        slice_sizes[a] = 1
    offset_dims = tuple(range(1, aval(src).ndim - len(axes) + 1))
    dn = GatherDimensionNumbers(offset_dims=offset_dims, collapsed_slice_dims=axes,
                                start_index_map=axes)
    _ = n
    return gather(src, indices, dn, slice_sizes)


def scatter(operand, scatter_indices, updates, dimension_numbers, *,
            indices_are_sorted=False, unique_indices=False, mode=None):
    """XLA's scatter (replace), out-of-bound windows dropped by default. Of several
    updates to one element one wins (jax leaves which unspecified: the last on CPU)."""
    return _scatter("scatter", sc.scatter_p, operand, scatter_indices, updates,
                    dimension_numbers, mode)


def scatter_apply(operand, scatter_indices, func, dimension_numbers, *, update_shape=(),
                  indices_are_sorted=False, unique_indices=False, mode=None):
    """`func` (of a scalar) applied at the elements the scatter names, once for each
    index that names them (jax's scatter_apply: a repeated index applies it again)."""
    from .lax_apply import apply_counted
    from .numpy._creation import full
    x = _arr(operand)
    counts = scatter_add(full(aval(x).shape, 0, np.int32), scatter_indices,
                         full(_shape(update_shape), 1, np.int32), dimension_numbers,
                         mode=mode)
    return apply_counted(x, counts, func, unique_indices)


def scatter_sub(operand, scatter_indices, updates, dimension_numbers, *,
                indices_are_sorted=False, unique_indices=False, mode=None):
    return scatter_add(operand, scatter_indices, ew.neg_p.bind(_arr(updates)),
                       dimension_numbers, mode=mode)


wrap_public(globals())
__all__ = [n for n, v in list(globals().items()) if not n.startswith("_") and
           getattr(v, "__module__", None) == __name__]
