"""`x.at[idx].set(v)` and friends on traced arrays: functional index updates, as jax's.

An index that names a box (ints, traced scalars, unit-step slices) is updated with a
slice and a dynamic_update_slice (_at_box.py). Otherwise:
An update is written at the flat positions of the elements `x[idx]` reads, by a
scatter-add into a flat array of -0.0 (floats) or 0. The positions are known on the
host when the index is static (ints, slices, None, ..., NumPy arrays) and are read
from an iota over x's elements otherwise. An integer-array index out of bounds
names no element (jax drops such updates). `add` is exact with repeated indices
(they add up, as in jax). `set` keeps each element's last write when the index is
static (as jax does on CPU); a traced index is one replacing scatter, as jax's (of
repeated indices one write wins: the last on CPU). `multiply`, `divide`, `power`, `min`
and `max` are one scatter whose region multiplies or takes the min / max, so every
update is combined in, repeated indices included (as jax's). `apply` applies the
function to the values x holds at idx when the index cannot repeat; otherwise once per
index that names an element, as jax's (lax_apply).
"""
from __future__ import annotations

import functools

import numpy as np

from ...trace import core, types
from ...ir import dtypes
from ...errors import ShardcError
from ...ops import indexing as ix
from ...ops.reduce import identity_of
from ...ops.scatter import BY_KIND, scatter_p
from . import _at_box as _box
from ._creation import full, full_like, iota, zeros
from ._indexing import _classify_shape
from ._indexing import getitem
from ._shapes import broadcast_to, concatenate, reshape, stack
from ._ufuncs import (add, divide, floor_divide, greater, greater_equal, less, logical_and,
    logical_or, maximum, minimum, multiply, power, remainder, subtract, where)
from ._util import aval, default_fill, convert, result_type
from ._methods import _has_foreign
from ..explicit import apply_out_sharding
from ...transforms.ad import _retype


def _with_out_sharding(method):
    """`x.at[idx].get` with jax's `out_sharding=`: the result's type when given."""
    @functools.wraps(method)
    def run(self, *args, out_sharding=None, **kwargs):
        if out_sharding is None:
            return method(self, *args, **kwargs)
        with types.lenient():
            out = method(self, *args, **kwargs)
        return apply_out_sharding(out, out_sharding)
    return run


def _typed_update(method):
    """An update method with jax's `out_sharding=`. In explicit mode its result has x's
    type (as jax's scatter), or out_sharding's: the update itself runs untyped, since
    its flat positions (x's elements in a row) have no layout a type could name."""
    @functools.wraps(method)
    def run(self, *args, out_sharding=None, **kwargs):
        b = core.current_builder()
        if b is None or not types.explicit_axes_of(b):
            out = method(self, *args, **kwargs)
            return out if out_sharding is None else apply_out_sharding(out, out_sharding)
        ts = aval(self.array).ts
        with types.lenient():
            out = method(self, *args, **kwargs)
        if out_sharding is not None:
            return apply_out_sharding(out, out_sharding)
        return out if ts is None else _retype(out, ts, b)
    return run


class _IndexUpdateHelper:
    """`x.at`: index it to get an update reference. `jax_at` is jax's `.at` (of the
    tracer class shardc's derives from), taken when the index or the values hold a jax
    transformation's tracer: jax's update then binds on that trace."""
    __slots__ = ("array", "jax_at")

    def __init__(self, array, jax_at=None):
        self.array, self.jax_at = array, jax_at

    def __getitem__(self, idx):
        return _IndexUpdateRef(self.array, idx, self.jax_at)


def _foreign_aware(method):
    """Run jax's update method instead when a jax transformation's tracer is involved."""
    name = method.__name__

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        if self.jax_at is not None and _has_foreign((self.index, args, kwargs)):
            return getattr(self.jax_at(self.array)[self.index], name)(*args, **kwargs)
        return method(self, *args, **kwargs)
    return run


class _IndexUpdateRef:
    __slots__ = ("array", "index", "jax_at")

    def __init__(self, array, index, jax_at=None):
        self.array, self.index, self.jax_at = array, index, jax_at

    @_foreign_aware
    @_with_out_sharding
    def get(self, *, mode=None, fill_value=None, **_):
        """x[idx] with jax's out-of-bound rules: static indices past either end are
        clamped (mode None, "clip" or "promise_in_bounds") or read `fill_value`
        (mode "fill"; by default NaN, the lowest signed or highest unsigned int, True)."""
        x = self.array
        xa = aval(x)
        entries = _classify_shape(xa.shape, self.index)
        # clip clamps traced indices here too, so the gradient lands where they read
        out = getitem(x, tuple(_clamp(xa.shape, entries, traced=mode == "clip")))
        if mode != "fill" or not (any(core.is_tracer(e) for e in entries) or
                                  any(m.any() for m in _oob(xa.shape, entries))):
            return out
        if fill_value is None:
            fill_value = default_fill(xa.dtype)
        return where(_oob_mask(xa.shape, entries), convert(fill_value, xa.dtype), out)

    def _moded(self, mode):
        """The index with static out-of-bound entries clamped when mode is "clip"
        (otherwise updates there are dropped, as jax's default)."""
        if mode != "clip":
            return self
        xa = aval(self.array)
        return _IndexUpdateRef(self.array,
                               tuple(_clamp(xa.shape, _classify_shape(xa.shape, self.index),
                                            traced=True)))

    @_foreign_aware
    @_typed_update
    def set(self, values, *, mode=None, **_):
        if mode == "clip":
            return self._moded(mode).set(values)
        x = self.array
        boxed = _boxed(x, self.index, values, lambda old, new: new)
        if boxed is not None:
            return boxed
        xa = aval(x)
        entries = _classify_shape(xa.shape, self.index)
        if any(core.is_tracer(e) for e in entries):
            return _replaced(x, entries, values)
        placed, count, _ = _placed(x, self.index, values, last_only=True)
        new = greater(placed, 0) if xa.dtype == dtypes.bool_ else placed
        return where(greater(count, 0), new, x)

    def _promoted(self, name, values):
        """As jax: an update whose dtype x's cannot hold exactly (0.5 into ints, ints
        into bools, f32 into bf16) is combined in the promoted dtype, then cast back."""
        x = self.array
        xa = aval(x)
        pt = result_type(x, values)[0]
        if pt == xa.dtype:
            return None
        new = getattr(_IndexUpdateRef(convert(x, pt), self.index), name)(values)
        return convert(new, xa.dtype, xa.weak)

    @_foreign_aware
    @_typed_update
    def add(self, values, *, mode=None, **_):
        if mode == "clip":
            return self._moded(mode).add(values)
        x = self.array
        promoted = self._promoted("add", values)
        if promoted is not None:
            return promoted
        boxed = _boxed(x, self.index, values, add)
        if boxed is not None:
            return boxed
        placed = _placed(x, self.index, values)[0]
        if aval(x).dtype == dtypes.bool_:
            return logical_or(x, greater(placed, 0))
        return add(x, placed)

    @_foreign_aware
    @_typed_update
    def subtract(self, values, *, mode=None, **_):
        if mode == "clip":
            return self._moded(mode).subtract(values)
        promoted = self._promoted("subtract", values)
        if promoted is not None:
            return promoted
        if aval(self.array).dtype == dtypes.bool_:
            raise ShardcError("x.at[idx].subtract on a bool array: use logical operations")
        boxed = _boxed(self.array, self.index, values, subtract)
        if boxed is not None:
            return boxed
        return subtract(self.array, _placed(self.array, self.index, values)[0])

    @_foreign_aware
    @_typed_update
    def multiply(self, values, *, mode=None, **_):
        if mode == "clip":
            return self._moded(mode).multiply(values)
        return self._scatter("mul", values)

    mul = multiply

    @_foreign_aware
    @_typed_update
    def divide(self, values, *, mode=None, **_):
        if mode == "clip":
            return self._moded(mode).divide(values)
        # as jax: x / (ones with the values multiplied in at idx), a true division, so
        # an integer array comes back as floats (and untouched elements divide by 1)
        x = self.array
        ones = _IndexUpdateRef(full_like(x, 1), self.index)
        return divide(x, ones._scatter("mul", values))

    @_foreign_aware
    @_typed_update
    def power(self, values, *, mode=None, **_):
        if mode == "clip":
            return self._moded(mode).power(values)
        # as jax: x ** (ones with the values multiplied in at idx), so the exponents
        # take x's dtype first (int_x.at[i].power(1.7) raises to the power 1)
        x = self.array
        ones = _IndexUpdateRef(full_like(x, 1), self.index)
        return power(x, ones._scatter("mul", values))

    @_foreign_aware
    @_typed_update
    def min(self, values, *, mode=None, **_):
        if mode == "clip":
            return self._moded(mode).min(values)
        return self._scatter("min", values)

    @_foreign_aware
    @_typed_update
    def max(self, values, *, mode=None, **_):
        if mode == "clip":
            return self._moded(mode).max(values)
        return self._scatter("max", values)

    @_foreign_aware
    @_typed_update
    def apply(self, func, *, unique_indices=False, mode=None, **_):
        if mode == "clip":
            return self._moded(mode).apply(func, unique_indices=unique_indices)
        from ..lax_apply import apply_counted, elementwise
        x = self.array
        entries = _classify_shape(aval(x).shape, self.index)
        if not _unique(entries):
            # a repeated index applies func again: count the applications (lax_apply)
            counts = _IndexUpdateRef(zeros(aval(x).shape, np.int32), self.index).add(1)
            return apply_counted(x, counts, func, unique_indices)
        # read at clamped positions: the update at an out-of-bound one is dropped anyway
        new = elementwise(func, getitem(x, tuple(_clamp(aval(x).shape, entries))))
        return _IndexUpdateRef(x, self.index).set(new)

    def _scatter(self, kind, values):
        """x with `values` combined in at idx by one scatter whose region multiplies or
        takes the min / max: each update in turn, repeated indices included (as jax's
        scatter_mul / _min / _max). Combined in the promoted dtype, as jax."""
        x = self.array
        xa = aval(x)
        pt = result_type(x, values)[0]
        if pt != xa.dtype:
            new = _IndexUpdateRef(convert(x, pt), self.index)._scatter(kind, values)
            return convert(new, xa.dtype, xa.weak)
        return _scatter_into(x, self.index, values, kind)


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
        a = np.asarray(e)
        a = np.clip(np.where(a < 0, a + m, a), 0, max(m - 1, 0))
        out[k] = int(a) if a.ndim == 0 else a
    dim = 0
    for k, e in enumerate(entries):
        if e is None:
            continue
        if traced and core.is_tracer(e):
            m = shape[dim]
            out[k] = minimum(maximum(where(less(e, 0), add(e, m), e), 0), max(m - 1, 0))
        dim += 1
    return out


def _oob(shape, entries):
    for _, d, e in _static_int_entries(shape, entries):
        a = np.asarray(e)
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
        a = np.asarray(e)
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


def _unique(entries) -> bool:
    """Can no element be named twice? Only an integer array with repeats (or a traced
    one, which might have them) can."""
    for e in entries:
        if _is_array(e) and (core.is_tracer(e) or np.unique(e).size != np.size(e)):
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
        if static and isinstance(e, (int, np.integer)) and not -m <= e < m:
            e = np.asarray(m)               # an int out of bounds names no element either
        if _is_array(e):
            cur = np.shape(pos) if static else aval(pos).shape    # earlier dims grown
            extra_shape = cur[:dim] + (1,) + cur[dim + 1:]
            if static:
                e = np.asarray(e)
                e = np.where((e >= -m) & (e < m), np.mod(e, max(m, 1)), m)
                pos = np.concatenate([pos, np.full(extra_shape, n)], dim)
            else:
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
