"""Index updates as jax lowers them: an index of unit-step slices and integer arrays (with
ints among them) is one scatter into x whose sliced dims are the update's window dims.
x's sharding and the values' sharding on the sliced dims pass through it, as through
jax's (the flat-position scatter of _at_scatter.py replicates its flat operand), and no
per-element positions are computed (see _at.py)."""
from __future__ import annotations

import numpy as np

from ...trace import core
from ...ir import dtypes
from ._indexing import _classify_shape
from ._shapes import broadcast_to, stack
from ._ufuncs import add, less, minimum, where
from ._util import aval, convert, index_for_dim


def _window(e, n):
    """(start, size) of a slice the scatter takes as one window: whole, or static with
    a unit step and not empty (its start a constant index column); None otherwise."""
    if e == slice(None):
        return 0, n
    if not all(b is None or isinstance(b, (int, np.integer)) for b in (e.start, e.stop,
                                                                       e.step)):
        return None
    a, b, step = e.indices(n)
    return (a, b - a) if step == 1 and b > a else None


def _columns(entries, adv, shape):
    """Each advanced entry as indices into its dim, negatives counted from the end
    (jax's normalization: what stays out of bounds is dropped by the scatter)."""
    it = dtypes.default_int()
    cols = []
    for d in adv:
        e, n = entries[d], shape[d]
        if core.is_tracer(e):
            e = index_for_dim(e, n)     # (n and i + n: not in uint8 / int8)
            if not dtypes.is_signed(aval(e).dtype):    # (no negatives; a huge one must
                e = minimum(e, n)                      # not wrap into range as an int)
            e = e if aval(e).dtype == it else convert(e, it)
            cols.append(where(less(e, 0), add(e, n), e))
        else:
            a = np.asarray(e, np.int64)
            cols.append(np.clip(np.where(a < 0, a + n, a), -1, n).astype(it))
    return cols


def _repeats(cols):
    """Whether static index columns name one element twice."""
    rows = np.stack(np.broadcast_arrays(*cols), axis=-1).reshape(-1, len(cols))
    return np.unique(rows, axis=0).shape[0] != rows.shape[0]


def structured(x, idx, values, kind, mode="fill"):
    """x with `values` combined in at x[idx] by scatter `kind` ("set", "add", "sub",
    "mul", "min", "max"), out-of-bound updates dropped (jax's default mode, and
    "promise_in_bounds", whose add's gradient reads such an update's cotangent clamped,
    as jax's); None when idx is not unit-step slices and integer arrays (or ints alone,
    a box, but for promise_in_bounds), or is a static "set" index naming an element
    twice (whose last write the flat path keeps, as jax does on CPU)."""
    from .. import lax_gather as G
    xa = aval(x)
    if xa.dtype == dtypes.bool_ or not xa.shape:
        return None
    entries = _classify_shape(xa.shape, idx)
    if any(e is None for e in entries):
        return None
    wins = {d: _window(e, xa.shape[d]) for d, e in enumerate(entries) if isinstance(e, slice)}
    if None in wins.values():
        return None
    adv = [d for d, e in enumerate(entries) if not isinstance(e, slice)]
    if mode == "fill" and all(isinstance(entries[d], (int, np.integer)) for d in adv):
        return None     # ints alone name a box (_at_box; promise_in_bounds scatters)
    if not adv:
        return None
    cols = _columns(entries, adv, xa.shape)
    static = not any(core.is_tracer(c) for c in cols)
    if kind == "set" and static and _repeats(cols):
        return None
    b = np.broadcast_shapes(*[np.shape(c) if not core.is_tracer(c) else aval(c).shape
                              for c in cols])
    part = [d for d, (a, n) in wins.items() if n != xa.shape[d]]     # a:b, not whole
    cols += [np.full(b, wins[d][0], dtypes.default_int()) for d in part]
    if static:
        indices = np.stack(np.broadcast_arrays(*cols), axis=-1).reshape(*b, len(cols))
    else:
        indices = stack([broadcast_to(c, b) for c in cols], axis=len(b))
    rest = [d for d in range(xa.ndim) if d not in adv]
    # NumPy's placement of the broadcast index dims: where the advanced entries are
    # when they are adjacent, else first
    at = sum(1 for d in rest if d < adv[0]) if adv == list(range(adv[0], adv[-1] + 1)) \
        else 0
    ushape = [wins[d][1] for d in rest[:at]] + list(b) + [wins[d][1] for d in rest[at:]]
    window = tuple(range(at)) + tuple(range(at + len(b), len(ushape)))
    v = convert(values, xa.dtype) if aval(values).dtype != xa.dtype else values
    dn = G.ScatterDimensionNumbers(update_window_dims=window, inserted_window_dims=tuple(adv),
                                   scatter_dims_to_operand_dims=tuple(adv + part))
    fn = {"set": G.scatter, "add": G.scatter_add, "sub": G.scatter_sub, "mul": G.scatter_mul,
          "min": G.scatter_min, "max": G.scatter_max}[kind]
    return fn(x, indices, broadcast_to(v, tuple(ushape)), dn, mode=mode)
