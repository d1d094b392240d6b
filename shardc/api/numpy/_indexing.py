"""x[...] on traced arrays: ints, slices, None, Ellipsis, and integer-array indices.

Basic indexing becomes rev/slice/reshape; integer arrays (or traced integers), several
broadcast together, become one gather, placed where NumPy places advanced-index dims.
"""
from __future__ import annotations

import operator

import jax
import numpy as np

from ...trace import core
from ...ir import dtypes
from ...errors import ShardcError
from ...ops import indexing as ix
from ...ops import shape as shp
from . import _creation
from ._shapes import broadcast_to, expand_dims, stack, transpose
from ._ufuncs import add, less, where
from ._ufuncs import clip as clip_
from ._util import aval, convert, index_for_dim


def _is_int(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def _is_array_index(x):
    if core.is_tracer(x) or isinstance(x, (np.ndarray, jax.Array)):
        return True
    return isinstance(x, (list, tuple))


def _has_tracer(seq) -> bool:
    return any(_has_tracer(v) if isinstance(v, (list, tuple)) else core.is_tracer(v)
               for v in seq)


def _classify(x, idx):
    return _classify_shape(aval(x).shape, idx)


def _classify_shape(shape, idx):
    """idx as a list of entries, one per dim of an array of `shape` (Ellipsis expanded,
    missing trailing dims as full slices) plus the Nones; checked."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    out, masks = [], {}
    for pos, e in enumerate(idx):
        if e is None or e is Ellipsis or isinstance(e, slice) or _is_int(e):
            out.append(e)
        elif _is_array_index(e):
            if isinstance(e, (list, tuple)):    # a sequence is an array, as jax's
                e = _creation.asarray(e) if _has_tracer(e) else np.asarray(e)
            m = _concrete_mask(e)
            if m is not None:
                # a concrete mask has a static number of Trues: its np.nonzero, as jax's
                for i in np.nonzero(m):
                    i = i.astype(np.int32) if m.size < 2 ** 31 else i
                    masks[id(i)] = (pos, m.shape)
                    out.append(i)
                continue
            a = aval(e)
            if a.dtype == dtypes.bool_:
                raise ShardcError(
                    "boolean mask indexing gives a data-dependent shape, which a compiled "
                    "program cannot have; use shardc.numpy.where(mask, x, 0) instead")
            if not dtypes.is_int(a.dtype):
                raise ShardcError(f"indices must be integers, got an array of {a.dtype}")
            out.append(e)
        else:
            raise ShardcError(f"unsupported index {e!r}: use ints, slices, None, ... or an "
                              "integer array")
    if sum(e is Ellipsis for e in out) > 1:
        raise ShardcError("an index can only have a single ellipsis ('...')")
    n = len(shape)
    consumed = sum(1 for e in out if e is not None and e is not Ellipsis)
    if consumed > n:
        raise ShardcError(f"too many indices for array: array is {n}-dimensional, but "
                          f"{consumed} were indexed")
    if Ellipsis in [e if e is Ellipsis else None for e in out]:
        k = [i for i, e in enumerate(out) if e is Ellipsis][0]
        out = out[:k] + [slice(None)] * (n - consumed) + out[k + 1:]
    else:
        out = out + [slice(None)] * (n - consumed)
    if masks:
        _check_masks(out, masks, shape)
    return out


def _check_masks(out, masks, shape):
    """A mask's shape must be the shape of the dims it indexes (or 0 there), as jax's."""
    got, dim = {}, 0
    for e in out:
        if e is None:
            continue
        if id(e) in masks:
            pos, mshape = masks[id(e)]
            got.setdefault(pos, (mshape, []))[1].append(shape[dim])
        dim += 1
    for pos, (mshape, expected) in got.items():
        if not all(s in (0, t) for s, t in zip(mshape, expected)):
            raise IndexError(f"boolean index did not match shape of indexed array in index "
                             f"{pos}: got {mshape}, expected {expected}")


def _is_scalar_bool(e):
    if isinstance(e, (bool, np.bool_)):
        return True
    return (isinstance(e, (np.ndarray, jax.Array)) and not core.is_tracer(e)
            and e.ndim == 0 and e.dtype == np.bool_)


def _scalar_bools(x, idx):
    """x[..., True, ...] as jax's: a new dim of size 1 there, indexed by arange(1) (or
    arange(0) for False), an integer-array index like any other."""
    def width(e):       # the dims an entry consumes (a mask as many as it has)
        if e is None or e is Ellipsis or _is_scalar_bool(e):
            return 0
        m = _concrete_mask(e)
        return 1 if m is None else m.ndim
    rank = len(aval(x).shape)
    rest = max(rank - sum(map(width, idx)), 0)
    shape, new_idx, dim = list(aval(x).shape), [], 0
    for e in idx:
        if _is_scalar_bool(e):
            shape.insert(dim, 1)
            new_idx.append(np.arange(int(bool(e)), dtype=np.int32))
            dim += 1
            continue
        new_idx.append(e)
        dim += rest if e is Ellipsis else width(e)
    return shp.reshape_p.bind(x, shape=tuple(shape)), tuple(new_idx)


def _concrete_mask(e):
    """`e` as a NumPy boolean array when it is a concrete mask (of rank >= 1), else None."""
    if core.is_tracer(e) or not isinstance(e, (np.ndarray, jax.Array, list, tuple)):
        return None
    if isinstance(e, (list, tuple)) and _has_tracer(e):
        return None
    m = np.asarray(e)
    return m if m.dtype == np.bool_ and m.ndim else None


def getitem(x, idx):
    if any(_is_scalar_bool(e) for e in (idx if isinstance(idx, tuple) else (idx,))):
        return getitem(*_scalar_bools(x, idx if isinstance(idx, tuple) else (idx,)))
    entries = _gathered_ints(_classify(x, idx), aval(x).shape)
    shape = aval(x).shape
    # 1. basic slicing of every consumed dim (array-indexed dims kept whole)
    start, limit, stride, rev, squeeze = [], [], [], [], []
    dim = 0
    for e in entries:
        if e is None:
            continue
        n = shape[dim]
        if isinstance(e, slice):
            s, t, st = e.indices(n)
            if st < 0:      # reversed first: the same slice counted from the other end
                rev.append(dim)
                s, t, st = n - 1 - s, n - 1 - t, -st
            # the limit as written, as jax's (XLA's partitioner mis-sizes a strided
            # slice of a split dim whose limit was cut to the last element taken)
            start.append(s)
            limit.append(max(s, t))
            stride.append(st)
        elif _is_int(e):
            i = operator.index(e)
            if n == 0:
                raise ShardcError(f"index {i} is out of bounds for axis {dim} with size {n}")
            # out of bounds is clamped, as jax's indexing (a dynamic_slice) does
            i = 0 if i < -n else n - 1 if i >= n else i % n
            start.append(i)
            limit.append(i + 1)
            stride.append(1)
            squeeze.append(dim)
        else:
            start.append(0)
            limit.append(n)
            stride.append(1)
        dim += 1
    y = x
    if rev:
        y = shp.rev_p.bind(y, dimensions=tuple(rev))
    if tuple(start) != (0,) * len(shape) or tuple(limit) != tuple(shape) or \
            any(s != 1 for s in stride):
        extra = {} if all(s == 1 for s in stride) else {"strides": tuple(stride)}
        y = shp.slice_p.bind(y, start_indices=tuple(start), limit_indices=tuple(limit), **extra)
    if squeeze:
        ys = aval(y).shape
        y = shp.reshape_p.bind(y, shape=tuple(n for d, n in enumerate(ys) if d not in squeeze))
    # 2. the integer-array index, as a gather
    adv = [k for k, e in enumerate(entries) if e is not None and not isinstance(e, slice)
           and not _is_int(e)]
    labels = []     # what each dim of y is: the entry index that made it
    for k, e in enumerate(entries):
        if isinstance(e, slice) or (k in adv):
            labels.append(k)
    # only scalars and unit-step slices: jax reads them with a dynamic_slice, which
    # clamps a start out of bounds both ways (its gradient lands on the clamped
    # element), where a gather's transpose drops it
    clip = all(aval(entries[k]).ndim == 0 for k in adv) and \
        all(e.step in (None, 1, -1) for e in entries if isinstance(e, slice))
    if len(adv) == 1:
        k = adv[0]
        axis = labels.index(k)
        y, nidx = _take(y, entries[k], axis, clip)
        labels = labels[:axis] + [k] * nidx + labels[axis + 1:]
    elif adv:
        axes = [labels.index(k) for k in adv]
        y, nidx = _take_many(y, [entries[k] for k in adv], axes, clip)
        keep = [lab for lab in labels if lab not in adv]
        labels = keep[:axes[0]] + [adv[0]] * nidx + keep[axes[0]:]
    # 3. NumPy's placement of advanced dims, then new axes for None
    advanced = [k for k, e in enumerate(entries) if k in adv or _is_int(e)]
    contiguous = not advanced or advanced == list(range(advanced[0], advanced[-1] + 1))
    if adv and not contiguous:
        front = [d for d, lab in enumerate(labels) if lab in adv]
        rest = [d for d, lab in enumerate(labels) if lab not in adv]
        y = transpose(y, front + rest)
        labels = [labels[d] for d in front + rest]
    nones = []
    pos = len([lab for lab in labels if lab in adv]) if adv and not contiguous else 0
    placed_adv = bool(adv and not contiguous)
    for k, e in enumerate(entries):
        if e is None:
            nones.append(pos)
            pos += 1
        elif isinstance(e, slice):
            pos += 1
        elif k in adv and not placed_adv:
            pos += labels.count(k)
    if nones:
        y = expand_dims(y, tuple(nones))
    return y


def _gathered_ints(entries, shape):
    """Beside an index array, an int out of bounds is read by the gather as jax's (which
    clamps it, and its gradient drops it), not by a clamped slice."""
    if not any(e is not None and not isinstance(e, slice) and not _is_int(e) and
               aval(e).ndim for e in entries):
        return entries
    out, dim = [], 0
    for e in entries:
        if _is_int(e) and not -shape[dim] <= e < shape[dim]:
            e = np.asarray(min(max(e, -shape[dim] - 1), shape[dim]), dtypes.default_int())
        out.append(e)
        dim += e is not None
    return out


def _take(y, idx, axis, clip=False):
    """Gather whole slices of `y` at integer positions `idx` along `axis` (clamped
    into it first with `clip`)."""
    n = aval(y).shape[axis]
    idx = index_for_dim(idx, n)
    if isinstance(idx, np.ndarray):
        idx = np.where(idx < 0, idx + n, idx).astype(dtypes.canonicalize(idx.dtype))
        idx = np.clip(idx, 0, n - 1) if clip and n else idx
    else:
        idx = _clamped(where(less(idx, 0), add(idx, n), idx), n, clip)
    ia = aval(idx)
    idx = shp.broadcast_in_dim_p.bind(idx, shape=ia.shape + (1,),
                                      broadcast_dimensions=tuple(range(ia.ndim)))
    ys = aval(y).shape
    out_rank = len(ys) - 1 + ia.ndim
    offset_dims = tuple(d for d in range(out_rank) if not axis <= d < axis + ia.ndim)
    slice_sizes = tuple(1 if d == axis else s for d, s in enumerate(ys))
    out = ix.gather_p.bind(y, idx, offset_dims=offset_dims, collapsed_slice_dims=(axis,),
                           start_index_map=(axis,), index_vector_dim=ia.ndim,
                           slice_sizes=slice_sizes)
    return out, ia.ndim


def _clamped(idx, n, clip):
    return clip_(idx, 0, n - 1) if clip and n else idx


def _take_many(y, idxs, axes, clip=False):
    """Gather at several integer-array indices of `y` (on `axes`, in order) broadcast
    together, as NumPy's advanced indexing: the broadcast dims replace the first
    indexed axis, the others are dropped."""
    ys = aval(y).shape
    norm = []
    for idx, axis in zip(idxs, axes):
        n = ys[axis]
        idx = index_for_dim(idx, n)
        if isinstance(idx, np.ndarray):
            idx = np.where(idx < 0, idx + n, idx)
            idx = np.clip(idx, 0, n - 1) if clip and n else idx
            norm.append(idx.astype(dtypes.default_int()))
        else:
            idx = _clamped(where(less(idx, 0), add(idx, n), idx), n, clip)
            norm.append(idx if aval(idx).dtype == dtypes.default_int()
                        else convert(idx, dtypes.default_int()))
    shape = np.broadcast_shapes(*[aval(i).shape for i in norm])
    idx = stack([broadcast_to(i, shape) for i in norm], axis=len(shape))
    rank = len(ys) - len(axes) + len(shape)
    first = axes[0]
    offset_dims = tuple(d for d in range(rank) if not first <= d < first + len(shape))
    slice_sizes = tuple(1 if d in axes else s for d, s in enumerate(ys))
    out = ix.gather_p.bind(y, idx, offset_dims=offset_dims, collapsed_slice_dims=tuple(
        sorted(axes)), start_index_map=tuple(axes), index_vector_dim=len(shape),
        slice_sizes=slice_sizes)
    return out, len(shape)
