"""`x.at[idx]` updates whose index names a box: ints (static or traced scalars),
unit-step slices and Nones. The box is read with a slice, combined with the values
and written back with one dynamic_update_slice, as jax's scatter with window dims
does, instead of one scatter index per element (which made a large slice's update a
constant of millions of coordinates: seconds to compile). An int out of bounds names
no element, as in jax: a static one leaves x as is, a traced one writes the box back
unchanged."""
from __future__ import annotations

import numpy as np

from ...trace import core
from ...ir import dtypes
from ..lax_sorting import dynamic_slice, dynamic_update_slice
from ._shapes import broadcast_to, reshape
from ._ufuncs import add, greater_equal, less, logical_and, where
from ._util import aval, convert, index_for_dim

EMPTY = "empty"     # the index names no element


def box(shape, entries):
    """(starts, sizes) per dim of x for the box `entries` names; EMPTY when it names
    no element; None when it is no box (an array index or a strided slice)."""
    starts, sizes = [], []
    dim = 0
    for e in entries:
        if e is None:
            continue
        n = shape[dim]
        if isinstance(e, slice):
            if not all(b is None or _static_int(b) for b in (e.start, e.stop, e.step)):
                return None
            a, b, step = e.indices(n)
            if step != 1:
                return None
            starts.append(a)
            sizes.append(max(b - a, 0))
        elif _static_int(e):
            if not -n <= int(e) < n:
                return EMPTY
            starts.append(int(e) % n)
            sizes.append(1)
        elif core.is_tracer(e) and aval(e).ndim == 0 and dtypes.is_int(aval(e).dtype):
            starts.append(e)
            sizes.append(1)
        else:
            return None
        dim += 1
    return EMPTY if 0 in sizes else (starts, sizes)


def update(x, entries, found, values, combine):
    """x with its box's elements replaced by combine(box's elements, values), the
    values broadcast to x[idx]'s shape and cast to x's dtype."""
    starts, sizes = found
    xa = aval(x)
    shape, dim = [], 0          # x[idx]'s shape
    for e in entries:
        if e is None:
            shape.append(1)
            continue
        if isinstance(e, slice):
            shape.append(sizes[dim])
        dim += 1
    v = convert(values, xa.dtype) if aval(values).dtype != xa.dtype else values
    v = reshape(broadcast_to(v, tuple(shape)), tuple(sizes))
    inside = None
    for k, s in enumerate(starts):
        if not core.is_tracer(s):
            continue
        n = xa.shape[k]
        s = index_for_dim(s, n)
        s = where(less(s, 0), add(s, n), s)
        ok = logical_and(greater_equal(s, 0), less(s, n))
        inside = ok if inside is None else logical_and(inside, ok)
        starts[k] = where(ok, s, 0)
    region = dynamic_slice(x, starts, sizes, allow_negative_indices=False)
    new = combine(region, v)
    if aval(new).dtype != xa.dtype:
        new = convert(new, xa.dtype)
    if inside is not None:      # an out-of-bounds traced int writes the box back as it was
        new = where(inside, new, region)
    return dynamic_update_slice(x, new, starts, allow_negative_indices=False)


def _static_int(e):
    return isinstance(e, (int, np.integer)) and not isinstance(e, (bool, np.bool_))
