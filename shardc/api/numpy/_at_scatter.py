"""Index updates by scatter: the flat positions of the elements `x[idx]` reads (known on
the host for a static index, read from an iota otherwise), which of them are in bounds
and unique, and the scatter that writes the values there (see _at.py)."""
from __future__ import annotations

import numpy as np

from ...trace import core
from ...ir import dtypes
from ...ops import indexing as ix
from ...ops.reduce import identity_of
from ...ops.scatter import BY_KIND, scatter_p
from . import _at_box as _box
from ._creation import full, iota, zeros
from ._indexing import _classify_shape
from ._indexing import getitem
from ._shapes import broadcast_to, concatenate, reshape, stack
from ._ufuncs import (add, floor_divide, greater_equal, less, logical_and,
    logical_or, maximum, minimum, multiply, remainder, where)
from ._util import aval, convert, index_for_dim

_COMBINE = {"mul": multiply, "min": minimum, "max": maximum}


def _boxed(x, idx, values, combine):
    """x updated through the box idx names (_at_box), or None when it names none."""
    shape = aval(x).shape
    if not shape:
        return None
    entries = _classify_shape(shape, idx)
    found = _box.box(shape, entries)
    if found is None:
        return None
    return x if found is _box.EMPTY else _box.update(x, entries, found, values, combine)


def _scatter_into(x, idx, values, kind):
    """x with the values scattered into the elements idx names by scatter_<kind>. The
    flat positions (as _placed's) become coordinates into x itself, not into x
    flattened, so x's sharding passes to the result as jax's does. A position out of
    bounds is dropped: the combiner's identity at position 0 (left out when static)."""
    boxed = _boxed(x, idx, values, _COMBINE[kind])
    if boxed is not None:
        return boxed
    xa = aval(x)
    if xa.ndim == 0:
        return reshape(_scatter_into(reshape(x, (1,)), (0,) + (
            idx if isinstance(idx, tuple) else (idx,)), values, kind), ())
    n = int(np.prod(xa.shape, dtype=np.int64))
    it = dtypes.default_int()
    entries = _classify_shape(xa.shape, idx)
    static = not any(core.is_tracer(e) for e in entries)
    pos = _positions(xa.shape, n, it, entries, static)
    shape = np.shape(pos) if static else aval(pos).shape
    k = int(np.prod(shape, dtype=np.int64))
    v = convert(values, xa.dtype) if aval(values).dtype != xa.dtype else values
    v = reshape(broadcast_to(v, shape), (k,))
    if static:
        flat = np.asarray(pos, np.int64).reshape(k)
        keep = flat < n
        if not keep.any():
            return x
        if not keep.all():
            v = getitem(v, (np.nonzero(keep)[0],))
        coords = np.stack(np.unravel_index(flat[keep], xa.shape), axis=1)
        coords = coords.astype(np.int32 if n < 2**31 else np.int64)
    else:
        flat = reshape(pos, (k,))
        inb = less(flat, n)
        v = where(inb, v, full((k,), identity_of(kind, xa.dtype), xa.dtype))
        coords = stack(_unravel(where(inb, flat, 0), xa.shape), axis=1)
    dims = tuple(range(xa.ndim))
    return BY_KIND[kind].bind(x, coords, v, update_window_dims=(), inserted_window_dims=dims,
                              scatter_dims_to_operand_dims=dims, index_vector_dim=1)


def _static_int_entries(shape, entries):
    """(position in entries, dim, entry) of each static int or int-array entry."""
    dim = 0
    for k, e in enumerate(entries):
        if e is None:
            continue
        if not isinstance(e, slice) and not core.is_tracer(e):
            yield k, dim, e
        dim += 1


def _clamp(shape, entries, traced=False):
    """Static int and int-array entries moved into bounds (negative ones counted from
    the end first), as XLA's gather clamps; traced ones too when asked (mode="clip"
    of an update, which no gather clamps for it)."""
    out = list(entries)
    for k, d, e in _static_int_entries(shape, entries):
        m = shape[d]
        a = index_for_dim(np.asarray(e), m)
        a = np.clip(np.where(a < 0, a + m, a), 0, max(m - 1, 0))
        out[k] = int(a) if a.ndim == 0 else a
    dim = 0
    for k, e in enumerate(entries):
        if e is None:
            continue
        if traced and core.is_tracer(e):
            m = shape[dim]
            e = index_for_dim(e, m)
            out[k] = minimum(maximum(where(less(e, 0), add(e, m), e), 0), max(m - 1, 0))
        dim += 1
    return out


def _oob(shape, entries):
    for _, d, e in _static_int_entries(shape, entries):
        a = index_for_dim(np.asarray(e), shape[d])
        yield (a < -shape[d]) | (a >= shape[d])


def _oob_mask(shape, entries):
    """Where x[idx] reads out of bounds: the same index applied to an array that has
    one extra, marked, element past the end of each indexed dim (a NumPy one when the
    index is static; built in the program when a traced index takes part)."""
    ext = list(shape)
    mapped = list(entries)
    dims = []
    for k, d, e in _static_int_entries(shape, entries):
        m = shape[d]
        a = index_for_dim(np.asarray(e), m)
        mapped[k] = np.where((a < -m) | (a >= m), m, np.where(a < 0, a + m, a))
        mapped[k] = int(mapped[k]) if mapped[k].ndim == 0 else mapped[k]
        ext[d] = m + 1
        dims.append(d)
    dim = 0
    for k, e in enumerate(entries):
        if e is None:
            continue
        if core.is_tracer(e):
            m = shape[dim]
            e = index_for_dim(e, m)
            if core.aval_of(e).dtype in dtypes._UINTS:   # (-m would wrap around)
                mapped[k] = where(greater_equal(e, m), m, e)
            else:
                bad = logical_or(less(e, -m), greater_equal(e, m))
                mapped[k] = where(bad, m, where(less(e, 0), add(e, m), e))
            ext[dim] = m + 1
            dims.append(dim)
        dim += 1
    if not any(core.is_tracer(e) for e in entries):
        marks = np.zeros(ext, bool)
        for d in dims:
            sl = [slice(None)] * len(ext)
            sl[d] = shape[d]
            marks[tuple(sl)] = True
        return marks[tuple(mapped)]
    marks = None
    for d in dims:
        past = greater_equal(iota(np.int32, None, d, tuple(ext)), shape[d])
        marks = past if marks is None else logical_or(marks, past)
    return getitem(marks, tuple(mapped))



def _is_array(e):
    return e is not None and not isinstance(e, (slice, int, np.integer))


def _unique(entries, shape=None) -> bool:
    """Can no element be named twice? Only an integer array with repeats (or a traced
    one, which might have them) can; with x's `shape`, a negative index counted from
    the end first (-1 and n - 1 name one element)."""
    dims = {k: d for k, d, _ in _static_int_entries(shape, entries)} if shape else {}
    for k, e in enumerate(entries):
        if not _is_array(e):
            continue
        if core.is_tracer(e):
            return False
        a = np.asarray(e, np.int64)
        if k in dims:
            a = np.where(a < 0, a + shape[dims[k]], a)
        if np.unique(a).size != np.size(a):
            return False
    return True


def _placed(x, idx, values, last_only=False):
    """(values scattered at the elements idx names, into -0.0s / 0s shaped like x; how
    often each element is named; whether none is named twice). Values are broadcast
    to x[idx]'s shape and cast to x's dtype. `last_only`: a static index keeps only
    each element's last write."""
    xa = aval(x)
    n = int(np.prod(xa.shape, dtype=np.int64))
    it = dtypes.default_int()
    entries = _classify_shape(xa.shape, idx)
    static = not any(core.is_tracer(e) for e in entries)
    pos = _positions(xa.shape, n, it, entries, static)     # flat positions x[idx] reads
    shape = np.shape(pos) if static else aval(pos).shape
    k = int(np.prod(shape, dtype=np.int64))
    v = convert(values, xa.dtype) if aval(values).dtype != xa.dtype else values
    v = reshape(broadcast_to(v, shape), (k,))
    if xa.dtype == dtypes.bool_:        # scatter-add counts for bools
        v = convert(v, it)
    unique = static or _unique(entries)
    if static:
        flat = np.asarray(pos, np.int64).reshape(k)
        keep = flat < n                 # out of bounds: dropped
        if last_only:                   # each element's last write
            last = {int(p): i for i, p in enumerate(flat) if p < n}
            keep = np.zeros(k, bool)
            keep[list(last.values())] = True
        if not keep.all():
            v = getitem(v, (np.nonzero(keep)[0],))
        flat = flat[keep]
        unique = unique and np.unique(flat).size == flat.size
        where_ = flat.astype(np.int32 if n < 2**31 else np.int64).reshape(-1, 1)
        counts = np.bincount(flat, minlength=n).reshape(xa.shape).astype(it)
    else:
        where_ = reshape(pos, (k, 1))

    def scatter(upd, dt):
        # floats start from -0.0, the additive identity (x + -0.0 is x, -0.0 included)
        base = full((n,), -0.0, dt) if dtypes.is_float(dt) else zeros((n,), dt)
        if static and where_.size == 0:
            return reshape(base, xa.shape)
        flat = ix.scatter_add_p.bind(base, where_, upd, update_window_dims=(),
                                     inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
        return reshape(flat, xa.shape)
    if static:
        return scatter(v, aval(v).dtype), counts, unique
    ones = broadcast_to(convert(1, it), (k,))
    return scatter(v, aval(v).dtype), scatter(ones, it), unique


def _positions(shape, n, it, entries, static):
    """The flat position of each element the index `entries` names (NumPy's placement
    of dims). An integer-array index out of bounds names position n, which the scatter
    drops: the positions get one more slice along that axis, holding n, to point at."""
    pos = np.arange(n).reshape(shape) if static else reshape(iota(it, n), shape)
    entries = list(entries)
    dim = 0
    for k, e in enumerate(entries):
        if e is None:
            continue
        m = shape[dim]
        if isinstance(e, (int, np.integer)) and not -m <= e < m:
            e = np.asarray(m)               # an int out of bounds names no element either
        if _is_array(e):
            cur = np.shape(pos) if static else aval(pos).shape    # earlier dims grown
            extra_shape = cur[:dim] + (1,) + cur[dim + 1:]
            if static:
                e = index_for_dim(np.asarray(e), m)
                e = np.where((e >= -m) & (e < m), np.mod(e, max(m, 1)), m)
                pos = np.concatenate([pos, np.full(extra_shape, n)], dim)
            else:
                et = aval(e).dtype
                if not dtypes.is_signed(et) and np.iinfo(et).max > np.iinfo(it).max:
                    e = minimum(e, m)      # (a huge one must not wrap to a negative int)
                e = convert(e, it)
                e = where(logical_and(greater_equal(e, -m), less(e, m)),
                          where(less(e, 0), add(e, m), e), m)
                pos = concatenate([pos, full(extra_shape, n, it)], dim)
            entries[k] = e
        dim += 1
    return pos[tuple(entries)] if static else getitem(pos, tuple(entries))


def _replaced(x, entries, values):
    """x with `values` written at the elements a traced index names, by one replacing
    scatter (jax's: of repeated indices one write wins, the last on CPU) at coordinates
    into x itself (so x's sharding passes on, as _scatter_into's). A position out of
    bounds gets a first coordinate far past every shard's end, which XLA drops."""
    xa = aval(x)
    if xa.ndim == 0:
        return reshape(_replaced(reshape(x, (1,)), [0, *entries], values), ())
    n = int(np.prod(xa.shape, dtype=np.int64))
    it = dtypes.default_int()
    pos = _positions(xa.shape, n, it, entries, False)
    k = int(np.prod(aval(pos).shape, dtype=np.int64))
    v = convert(values, xa.dtype) if aval(values).dtype != xa.dtype else values
    v = reshape(broadcast_to(v, aval(pos).shape), (k,))
    flat = reshape(pos, (k,))
    cols = _unravel(flat, xa.shape)
    cols[0] = where(less(flat, n), cols[0], np.iinfo(it).max // 2)
    dims = tuple(range(xa.ndim))
    return scatter_p.bind(x, stack(cols, axis=1), v, update_window_dims=(),
                          inserted_window_dims=dims, scatter_dims_to_operand_dims=dims,
                          index_vector_dim=1)


def _unravel(flat, shape):
    """The coordinates in `shape` of traced row-major flat positions, one array per dim."""
    strides = np.cumprod((1,) + shape[:0:-1])[::-1]
    return [remainder(floor_divide(flat, int(st)), m) for st, m in zip(strides, shape)]
