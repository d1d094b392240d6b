"""shardc.scipy.ndimage: map_coordinates, as jax.scipy.ndimage's: per dimension the
nearest (order 0) or two bracketing (order 1) grid indices with their weights, the
indices folded into range by the boundary mode, and the weighted gathers summed over
every combination of corners."""
from __future__ import annotations

import functools
import itertools
import operator

import numpy as np

from ..errors import ArgumentError, ShardcNotImplementedError, wrap_public
from ..ir import dtypes
from . import numpy as snp
from .lax_ops import round as lax_round
from .numpy._util import aval

__all__ = ["map_coordinates"]


def _mirror(index, size):
    s = size - 1        # a triangular wave of half-period s, on integers
    return snp.abs((index + s) % (2 * s) - s)


def _reflect(index, size):
    return snp.floor_divide(_mirror(2 * index + 1, 2 * size + 1) - 1, 2)


_FIXERS = {
    "constant": lambda index, size: index,
    "nearest": lambda index, size: snp.clip(index, 0, size - 1),
    "wrap": lambda index, size: index % size,
    "mirror": _mirror,
    "reflect": _reflect,
}


def _round_half_away(a):
    return a if dtypes.is_int(aval(a).dtype) else lax_round(a)


def _nearest(coord):
    dt = np.dtype(aval(coord).dtype)
    return [(snp.astype(_round_half_away(coord), np.int32), dt.type(1))]


def _linear(coord):
    lower = snp.floor(coord)
    upper_w = coord - lower
    index = snp.astype(lower, np.int32)
    return [(index, 1 - upper_w), (index + 1, upper_w)]


def map_coordinates(input, coordinates, order, mode="constant", cval=0.0):
    """`input` interpolated at `coordinates` (one array per dimension), as
    jax.scipy.ndimage.map_coordinates: order 0 (nearest) or 1 (linear); mode one of
    constant, nearest, wrap, mirror, reflect (jax's 'wrap' and 'constant' are SciPy's
    'grid-wrap' and 'grid-constant')."""
    arr = snp.asarray(input)
    coords = [snp.asarray(c) for c in coordinates]
    cval = snp.asarray(cval, aval(arr).dtype)
    shape = aval(arr).shape
    if len(coords) != len(shape):
        raise ArgumentError("coordinates must be a sequence of length input.ndim, but "
                         f"{len(coords)} != {len(shape)}")
    fixer = _FIXERS.get(mode)
    if fixer is None:
        raise ShardcNotImplementedError(
            f"jax.scipy.ndimage.map_coordinates does not yet support mode {mode}. Currently "
            f"supported modes are {set(_FIXERS)}.")
    if order == 0:
        nodes_of = _nearest
    elif order == 1:
        nodes_of = _linear
    else:
        raise ShardcNotImplementedError(
            "jax.scipy.ndimage.map_coordinates currently requires order<=1")
    per_dim = []
    for coord, size in zip(coords, shape):
        per_dim.append([(fixer(i, size),
                         (0 <= i) & (i < size) if mode == "constant" else True, w)
                        for i, w in nodes_of(coord)])
    terms = []
    for corner in itertools.product(*per_dim):
        idx, valid, weights = zip(*corner)
        val = arr[tuple(idx)]
        if not all(v is True for v in valid):
            val = snp.where(functools.reduce(operator.and_, valid), val, cval)
        terms.append(functools.reduce(operator.mul, weights) * val)
    result = sum(terms[1:], terms[0])
    if dtypes.is_int(aval(arr).dtype):
        result = _round_half_away(result)
    return snp.astype(result, aval(arr).dtype)


wrap_public(globals())
