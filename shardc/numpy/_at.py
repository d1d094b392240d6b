"""`x.at[idx].set(v)` and friends on traced arrays: functional index updates, as jax's.

An update is written at the positions `x[idx]` reads: those positions, as integers
(`x[idx]` of an iota over x's elements), take the values by a scatter-add into a
flat zero array. So `add` is exact with repeated indices (they add up, as in jax);
`set` writes the mean of the values given for a repeated index (jax leaves which one
wins unspecified; equal values, the common case, are exact). `multiply`, `divide`,
`power`, `min`, `max` and `apply` combine with the values x holds at idx, which for a
repeated index would need the updates applied one after another: they accept indices
that cannot repeat (ints, slices, or a NumPy index array without repeats).
"""
from __future__ import annotations

import numpy as np

from .. import core, dtypes
from ..errors import ShardcError
from ..ops import indexing as ix
from ._creation import full, iota, zeros
from ._indexing import _classify_shape as _classify_index
from ._indexing import getitem
from ._shapes import broadcast_to, concatenate, reshape
from ._ufuncs import (add, divide, floor_divide, greater, greater_equal, less, logical_and,
                      logical_or, maximum, minimum, multiply, power, subtract, where)
from ._util import aval, convert


class _IndexUpdateHelper:
    """`x.at`: index it to get an update reference."""
    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, idx):
        return _IndexUpdateRef(self.array, idx)


class _IndexUpdateRef:
    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array, self.index = array, index

    def get(self, **_):
        return getitem(self.array, self.index)

    def set(self, values, **_):
        x = self.array
        placed, count = _placed(x, self.index, values)
        if aval(x).dtype == dtypes.bool_:
            mean = greater(placed, 0)          # a repeated index: any True wins
        elif _unique(self.index):
            mean = placed
        else:
            mean = _mean(placed, count, aval(x).dtype)
        return where(greater(count, 0), mean, x)

    def add(self, values, **_):
        x = self.array
        placed = _placed(x, self.index, values)[0]
        if aval(x).dtype == dtypes.bool_:
            return logical_or(x, greater(placed, 0))
        return add(x, placed)

    def subtract(self, values, **_):
        if aval(self.array).dtype == dtypes.bool_:
            raise ShardcError("x.at[idx].subtract on a bool array: use logical operations")
        return subtract(self.array, _placed(self.array, self.index, values)[0])

    def multiply(self, values, **_):
        return self._combine("multiply", multiply, values)

    mul = multiply

    def divide(self, values, **_):
        return self._combine("divide", divide, values)

    def power(self, values, **_):
        return self._combine("power", power, values)

    def min(self, values, **_):
        return self._combine("min", minimum, values)

    def max(self, values, **_):
        return self._combine("max", maximum, values)

    def apply(self, func, **_):
        return self._combine("apply", lambda old, _: func(old), 0)

    def _combine(self, name, op, values):
        if not _unique(self.index):
            raise ShardcError(
                f"x.at[idx].{name}(...) with an integer-array index that may repeat: shardc "
                "applies updates at once, so a repeated index would not see the update "
                "before it. Use a NumPy index array without repeats, or .add / .set")
        x = self.array
        new = op(getitem(x, self.index), values)
        dt = aval(x).dtype
        return _IndexUpdateRef(x, self.index).set(convert(new, dt) if aval(new).dtype != dt
                                                  else new)


def _entries(idx):
    return idx if isinstance(idx, tuple) else (idx,)


def _unique(idx) -> bool:
    """Can no element of x be named twice by `idx`? Ints, slices, None and Ellipsis
    name each element once; a NumPy (or list) integer index only without repeats."""
    for e in _entries(idx):
        if e is None or e is Ellipsis or isinstance(e, (slice, int, np.integer)):
            continue
        if core.is_tracer(e) or not isinstance(e, (np.ndarray, list)):
            return False
        a = np.asarray(e)
        if a.dtype == np.bool_ or np.unique(a).size != a.size:
            return False
    return True


def _placed(x, idx, values):
    """(values scattered into zeros shaped like x at idx, how often each element is
    named by idx). Values are broadcast to x[idx]'s shape and cast to x's dtype."""
    xa = aval(x)
    n = int(np.prod(xa.shape, dtype=np.int64))
    it = dtypes.default_int()
    pos = getitem(*_positions(xa.shape, n, it, idx))      # flat positions x[idx] reads
    shape = aval(pos).shape
    k = int(np.prod(shape, dtype=np.int64))
    v = convert(values, xa.dtype) if aval(values).dtype != xa.dtype else values
    v = reshape(broadcast_to(v, shape), (k,))
    where_ = reshape(pos, (k, 1))

    if xa.dtype == dtypes.bool_:        # scatter-add counts for bools
        v = convert(v, it)

    def scatter(upd, dt):
        flat = ix.scatter_add_p.bind(zeros((n,), dt), where_, upd, update_window_dims=(),
                                     inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
        return reshape(flat, xa.shape)
    ones = broadcast_to(convert(1, it), (k,))
    return scatter(v, aval(v).dtype), scatter(ones, it)


def _positions(shape, n, it, idx):
    """(the flat position of each element of an array of `shape`, an index into it)
    such that indexing gives the positions `idx` names. An integer-array index out of
    bounds names position n, which the scatter drops (as jax drops such updates): the
    positions get one more slice along that axis, holding n, for it to point at."""
    entries = _classify_index(shape, idx)
    pos = reshape(iota(it, n), shape)
    dim = 0
    for k, e in enumerate(entries):
        if e is None:
            continue
        if not (isinstance(e, slice) or isinstance(e, (int, np.integer))):
            m = shape[dim]
            if isinstance(e, np.ndarray):
                e = np.where((e >= -m) & (e < m), np.mod(e, max(m, 1)), m).astype(e.dtype)
            else:
                e = where(logical_and(greater_equal(e, -m), less(e, m)),
                          where(less(e, 0), add(e, m), e), m)
            extra = full(shape[:dim] + (1,) + shape[dim + 1:], n, it)
            pos = concatenate([pos, extra], dim)
            entries = entries[:k] + [e] + entries[k + 1:]
        dim += 1
    return pos, tuple(entries)


def _mean(placed, count, dt):
    """placed / count where count > 0 (the mean of repeated writes), in x's dtype."""
    c = where(greater(count, 0), count, 1)
    if dtypes.is_float(dt):
        return convert(divide(placed, convert(c, dt)), dt)
    return floor_divide(placed, convert(c, dt))
