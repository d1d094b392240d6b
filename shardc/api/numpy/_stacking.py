"""Stacking and splitting in shardc.numpy, composed as jax.numpy composes them: block
column_stack dstack concat unstack hsplit vsplit dsplit atleast_3d."""
from __future__ import annotations

import numpy as np

from ...errors import ShardcError
from ...ops.common import check_axis
from ._creation import asarray
from ._indexing import getitem
from ._shapes import concatenate, reshape, split, transpose
from ._util import aval, check_arraylike


def _atleast_nd(x, n):
    s = aval(x).shape
    return x if len(s) >= n else reshape(x, (1,) * (n - len(s)) + s)


def block(arrays):
    def rec(xs):
        if isinstance(xs, tuple):
            raise ShardcError(f"shardc.numpy.block does not allow tuples, got {xs}")
        if isinstance(xs, list):
            if not xs:
                raise ShardcError("shardc.numpy.block does not allow empty list arguments")
            parts, depths = zip(*[rec(x) for x in xs])
            if any(d != depths[0] for d in depths[1:]):
                raise ShardcError("Mismatched list depths in shardc.numpy.block")
            rank = max(depths[0], max(aval(x).ndim for x in parts))
            return concatenate([_atleast_nd(x, rank) for x in parts], -depths[0]), \
                depths[0] + 1
        return asarray(xs), 1
    return rec(arrays)[0]


def _seq(name, tup):
    if not isinstance(tup, (list, tuple)):
        return [getitem(tup, i) for i in range(aval(tup).shape[0])]
    check_arraylike(name, *tup)
    return [asarray(t) for t in tup]


def column_stack(tup):
    arrs = _seq("column_stack", tup)
    arrs = [transpose(_atleast_nd(a, 2)) if aval(a).ndim < 2 else a for a in arrs]
    return concatenate(arrs, axis=1)


def atleast_3d(*arys):
    check_arraylike("atleast_3d", *arys)
    if len(arys) != 1:
        return [atleast_3d(a) for a in arys]
    a = asarray(arys[0])
    s = aval(a).shape
    if len(s) == 0:
        return reshape(a, (1, 1, 1))
    if len(s) == 1:
        return reshape(a, (1, s[0], 1))
    if len(s) == 2:
        return reshape(a, s + (1,))
    return a


def dstack(tup, dtype=None):
    return concatenate([atleast_3d(a) for a in _seq("dstack", tup)], axis=2, dtype=dtype)


def concat(arrays, /, *, axis=0):
    return concatenate(arrays, axis=axis)


def unstack(x, /, *, axis=0):
    check_arraylike("unstack", x)
    nd = aval(x).ndim
    if nd == 0:
        raise ShardcError("Unstack requires arrays with rank > 0, however a scalar array "
                          "was passed.")
    axis = check_axis("unstack", axis, nd)
    return tuple(reshape(p, aval(p).shape[:axis] + aval(p).shape[axis + 1:])
                 for p in split(x, aval(x).shape[axis], axis)) if aval(x).shape[axis] else ()


def _nsplit(name, ary, ios, axis, min_nd):
    check_arraylike(name, ary)
    if aval(ary).ndim < min_nd:
        raise ShardcError(f"{name} only works on arrays of {min_nd} or more dimensions")
    from ._shapes import array_split
    if isinstance(ios, int):
        return split(ary, ios, axis)
    return array_split(ary, [int(i) for i in np.asarray(ios).reshape(-1)], axis)


def hsplit(ary, indices_or_sections):
    axis = 0 if aval(ary).ndim == 1 else 1
    return _nsplit("hsplit", ary, indices_or_sections, axis, 1)


def vsplit(ary, indices_or_sections):
    return _nsplit("vsplit", ary, indices_or_sections, 0, 2)


def dsplit(ary, indices_or_sections):
    return _nsplit("dsplit", ary, indices_or_sections, 2, 3)
