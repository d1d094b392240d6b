"""`x.at[idx].set(v)` and friends on traced arrays: functional index updates, as jax's.

An index that names a box (ints, traced scalars, unit-step slices) is updated with a
slice and a dynamic_update_slice (_at_box.py). One of unit-step slices and integer arrays
is one scatter into x, its sliced dims the update's window dims, as jax's (_at_window.py;
a promise_in_bounds add of ints too, whose gradient reads a dropped update clamped).
Otherwise (_at_scatter.py):
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
from ...errors import ShardcTypeError
from ._creation import full_like, zeros
from ._indexing import _classify_shape
from ._indexing import _is_scalar_bool, _scalar_bools, getitem
from ._shapes import reshape
from ._ufuncs import (add, divide, greater, power, subtract, where)
from ._util import aval, default_fill, convert, result_type
from ._methods import _has_foreign
from ..explicit import apply_out_sharding
from ...transforms.ct_type import retype
from ._at_window import structured
from ._at_scatter import (_boxed, _scatter_into, _clamp, _oob, _oob_mask, _unique, _placed,
    _replaced)


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
        return out if ts is None else retype(out, ts, b, primal=True)
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
        if "mode" in kwargs:
            kwargs["mode"] = _mode(kwargs["mode"])
        idx = self.index if isinstance(self.index, tuple) else (self.index,)
        if any(_is_scalar_bool(e) for e in idx):
            # as x[True]: a new dim of size 1 (0 for False), indexed whole, then dropped
            x, idx = _scalar_bools(self.array, idx)
            out = getattr(_IndexUpdateRef(x, idx), name)(*args, **kwargs)
            return out if name == "get" else reshape(out, aval(self.array).shape)
        return method(self, *args, **kwargs)
    return run


# jax's GatherScatterMode names: "drop" is "fill"; one_hot reads and writes as the default
_MODES = {"clip": "clip", "fill": "fill", "drop": "fill", "promise_in_bounds":
          "promise_in_bounds", "fill_or_drop": "fill", "one_hot": None}


def _numeric(name, x, values):
    """jax's error for adding or multiplying bools (a bool array with a number is
    combined in the promoted dtype and cast back, as jax's)."""
    if result_type(x, values)[0] == dtypes.bool_:
        raise ShardcTypeError(f"{name} does not accept dtype bool at position 0. Accepted "
                              "dtypes at position 0 are subtypes of integer, floating, "
                              "complexfloating.")


def _mode(mode):
    if mode is None:
        return None
    key = str(getattr(mode, "name", mode)).lower()
    if key not in _MODES:
        raise ValueError(f'Unknown gather mode "{mode}"')
    return _MODES[key]


class _IndexUpdateRef:
    __slots__ = ("array", "index", "jax_at")

    def __init__(self, array, index, jax_at=None):
        self.array, self.index, self.jax_at = array, index, jax_at

    @_foreign_aware
    @_with_out_sharding
    def get(self, *, mode=None, fill_value=None, **_):
        """x[idx] with jax's out-of-bound rules: indices past either end are clamped
        (mode None or "promise_in_bounds": read as x[idx], whose gradient drops them;
        "clip": both ways) or read `fill_value` (mode "fill"; by default NaN, the lowest
        signed or highest unsigned int, True)."""
        x = self.array
        xa = aval(x)
        entries = _classify_shape(xa.shape, self.index)
        if mode not in ("clip", "fill"):
            return getitem(x, self.index)
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
        out = structured(x, self.index, values, "set")
        if out is not None:
            return out
        xa = aval(x)
        entries = _classify_shape(xa.shape, self.index)
        if any(core.is_tracer(e) for e in entries):
            return _replaced(x, entries, values)
        placed, count, _ = _placed(x, self.index, values, last_only=True)
        new = greater(placed, 0) if xa.dtype == dtypes.bool_ else placed
        return where(greater(count, 0), new, x)

    def _promoted(self, name, values, mode=None):
        """As jax: an update whose dtype x's cannot hold exactly (0.5 into ints, ints
        into bools, f32 into bf16) is combined in the promoted dtype, then cast back."""
        x = self.array
        xa = aval(x)
        pt = result_type(x, values)[0]
        if pt == xa.dtype:
            return None
        new = getattr(_IndexUpdateRef(convert(x, pt), self.index), name)(values, mode=mode)
        return convert(new, xa.dtype, xa.weak)

    @_foreign_aware
    @_typed_update
    def add(self, values, *, mode=None, **_):
        if mode == "clip":
            return self._moded(mode).add(values)
        x = self.array
        _numeric("add", x, values)
        promoted = self._promoted("add", values, mode)
        if promoted is not None:
            return promoted
        if mode == "promise_in_bounds":     # (its gradient reads a dropped update clamped)
            out = structured(x, self.index, values, "add", mode)
            if out is not None:
                return out
        boxed = _boxed(x, self.index, values, add)
        if boxed is not None:
            return boxed
        out = structured(x, self.index, values, "add")
        if out is not None:
            return out
        return add(x, _placed(x, self.index, values)[0])

    @_foreign_aware
    @_typed_update
    def subtract(self, values, *, mode=None, **_):
        if mode == "clip":
            return self._moded(mode).subtract(values)
        promoted = self._promoted("subtract", values, mode)
        if promoted is not None:
            return promoted
        _numeric("sub", self.array, values)
        if mode == "promise_in_bounds":
            out = structured(self.array, self.index, values, "sub", mode)
            if out is not None:
                return out
        boxed = _boxed(self.array, self.index, values, subtract)
        if boxed is not None:
            return boxed
        out = structured(self.array, self.index, values, "sub")
        if out is not None:
            return out
        return subtract(self.array, _placed(self.array, self.index, values)[0])

    @_foreign_aware
    @_typed_update
    def multiply(self, values, *, mode=None, **_):
        if mode == "clip":
            return self._moded(mode).multiply(values)
        _numeric("mul", self.array, values)
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
        if not _unique(entries, aval(x).shape):
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
        out = structured(x, self.index, values, kind)
        return _scatter_into(x, self.index, values, kind) if out is None else out
