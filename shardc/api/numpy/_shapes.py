"""Shape manipulation of shardc.numpy: reshape, transpose, concatenate, split, pad, ..."""
from __future__ import annotations

import math

import numpy as np

from ...ir import dtypes
from ...errors import ArgumentError, ShardcError, ShardcTypeError
from ...ops import shape as shp
from ..explicit import takes_out_sharding
from ...ops.common import check_axis, norm_axes
from ._util import aval, broadcast_shapes, check_arraylike, convert, promote_dtypes
from ._util import broadcast_to as _broadcast_to
from ._pad import pad  # noqa: F401  (jnp.pad, here with the other shape functions)


def _ints(name, xs):
    try:
        return tuple(int(operator_index(x)) for x in xs)
    except TypeError:
        raise ShardcError(f"{name}: sizes must be static Python ints, got {xs}") from None


def operator_index(x):
    return _index(x)


_index = __import__("operator").index


@takes_out_sharding
def reshape(a, shape=None, order="C", *, newshape=None, copy=None):
    check_arraylike("reshape", a)
    shape = newshape if shape is None else shape
    if order == "F":    # column-major: the reversed dims reshaped, reversed back (jax's)
        x = transpose(a, None)
        out = reshape(x, tuple(shape)[::-1] if not isinstance(shape, int) else shape)
        return transpose(out, None)
    if order != "C":
        raise ShardcError(f"reshape: order={order!r} is not supported; use 'C' or 'F' (as "
                          "jax.numpy)")
    if isinstance(shape, int) or type(shape) not in (tuple, list) and np.ndim(shape) == 0:
        shape = (shape,)
    shape = list(_ints("reshape", shape))
    x = aval(a)
    if shape.count(-1) > 1:
        raise ShardcError("reshape: can only specify one unknown dimension (-1)")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or x.size % known:
            raise ArgumentError(f"cannot reshape an array of shape {x.shape} into shape "
                                f"{tuple(shape)}")
        shape[shape.index(-1)] = x.size // known
    shape = tuple(shape)
    if math.prod(shape) != x.size or min(shape, default=0) < 0:
        raise ArgumentError(f"cannot reshape an array of shape {x.shape} ({x.size} "
                            f"elements) into shape {shape}")
    if shape == x.shape:
        return a
    return shp.reshape_p.bind(a, shape=shape)


@takes_out_sharding
def ravel(a, order="C"):
    return reshape(a, (-1,), order)


def transpose(a, axes=None):
    check_arraylike("transpose", a)
    n = aval(a).ndim
    if axes is None:
        perm = tuple(range(n))[::-1]
    else:
        perm = tuple(check_axis("transpose", ax, n) for ax in axes)
        if sorted(perm) != list(range(n)):
            raise ShardcTypeError(f"transpose: axes {tuple(axes)} are not a permutation of "
                                  f"the {n} axes")
    if perm == tuple(range(n)):
        return a
    return shp.transpose_p.bind(a, permutation=perm)


def permute_dims(a, axes=None):
    return transpose(a, axes)


def swapaxes(a, axis1, axis2):
    n = aval(a).ndim
    perm = list(range(n))
    i, j = check_axis("swapaxes", axis1, n), check_axis("swapaxes", axis2, n)
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(a, perm)


def moveaxis(a, source, destination):
    n = aval(a).ndim
    src = norm_axes("moveaxis", source, n)
    dst = norm_axes("moveaxis", destination, n)
    if len(src) != len(dst):
        raise ShardcError("moveaxis: source and destination need the same number of axes")
    order = [d for d in range(n) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(a, order)


def expand_dims(a, axis):
    """Insert size-1 axes (a broadcast_in_dim, as lax.expand_dims)."""
    check_arraylike("expand_dims", a)
    x = aval(a)
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    n = x.ndim + len(axes)
    axes = sorted(check_axis("expand_dims", ax, n) for ax in axes)
    if len(set(axes)) != len(axes):
        raise ShardcError(f"expand_dims: repeated axis in {axis}")
    shape, it = [], iter(x.shape)
    for d in range(n):
        shape.append(1 if d in axes else next(it))
    kept = tuple(d for d in range(n) if d not in axes)
    return shp.broadcast_in_dim_p.bind(a, shape=tuple(shape), broadcast_dimensions=kept)


def squeeze(a, axis=None):
    check_arraylike("squeeze", a)
    x = aval(a)
    if axis is None:
        axes = tuple(d for d, n in enumerate(x.shape) if n == 1)
    else:
        axes = norm_axes("squeeze", axis, x.ndim)
        for d in axes:
            if x.shape[d] != 1:
                raise ArgumentError(f"cannot select an axis to squeeze out which has size "
                                    f"not equal to one (axis {d} of shape {x.shape})")
    if not axes:
        return a
    return shp.reshape_p.bind(a, shape=tuple(n for d, n in enumerate(x.shape) if d not in axes))


@takes_out_sharding
def broadcast_to(array, shape):
    check_arraylike("broadcast_to", array)
    if isinstance(shape, int):
        shape = (shape,)
    return _broadcast_to(array, _ints("broadcast_to", shape))


def broadcast_arrays(*args):
    shape = broadcast_shapes("broadcast_arrays", *(aval(a).shape for a in args))
    return [_broadcast_to(a, shape) for a in args]


def concatenate(arrays, axis=0, dtype=None):
    arrays = list(arrays)
    if not arrays:
        raise ShardcError("need at least one array to concatenate")
    check_arraylike("concatenate", *arrays)
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    arrays = promote_dtypes(*arrays)
    if dtype is not None:
        from ._util import canonical_dtype
        arrays = [convert(a, canonical_dtype(dtype)) for a in arrays]
    n = aval(arrays[0]).ndim
    if n == 0:
        raise ShardcError("zero-dimensional arrays cannot be concatenated")
    ax = check_axis("concatenate", axis, n)
    if len(arrays) == 1:
        return arrays[0]
    return shp.concatenate_p.bind(*arrays, dimension=ax)


def stack(arrays, axis=0, out=None, dtype=None):
    if out is not None:
        raise ShardcError("The 'out' argument to shardc.numpy.stack is not supported.")
    arrays = list(arrays)
    if not arrays:
        raise ShardcError("need at least one array to stack")
    shapes = {aval(a).shape for a in arrays}
    if len(shapes) > 1:
        raise ArgumentError(f"all input arrays must have the same shape, got "
                            f"{sorted(shapes)}")
    n = aval(arrays[0]).ndim + 1
    ax = check_axis("stack", axis, n)
    return concatenate([expand_dims(a, ax) for a in arrays], ax, dtype)


def vstack(tup, dtype=None):
    return concatenate([a if aval(a).ndim >= 2 else reshape(a, (1, -1)) for a in tup], 0,
                       dtype)


def hstack(tup, dtype=None):
    arrays = [reshape(a, (1,)) if aval(a).ndim == 0 else a for a in tup]   # atleast_1d
    return concatenate(arrays, 0 if aval(arrays[0]).ndim == 1 else 1, dtype)


def split(ary, indices_or_sections, axis=0):
    """Split into pieces along `axis` (static sections or indices), with slices."""
    check_arraylike("split", ary)
    x = aval(ary)
    ax = check_axis("split", axis, x.ndim)
    n = x.shape[ax]
    if isinstance(indices_or_sections, int):
        if indices_or_sections <= 0 or n % indices_or_sections:
            raise ArgumentError(f"array split does not result in an equal division: axis "
                                f"of size {n} into {indices_or_sections} sections")
        step = n // indices_or_sections
        cuts = [step * i for i in range(1, indices_or_sections)]
    else:
        cuts = list(_ints("split", indices_or_sections))
    bounds = [0] + cuts + [n]
    sizes = [hi - lo for lo, hi in zip(bounds[:-1], bounds[1:])]
    if any(k < 0 for k in sizes):
        raise ShardcError(f"split: the indices {cuts} give negative piece sizes {sizes} for an "
                          f"axis of size {n}; give increasing indices between 0 and {n} (as "
                          "jax.numpy, negative indices are not counted from the end)")
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        start = [0] * x.ndim
        limit = list(x.shape)
        start[ax], limit[ax] = lo, hi
        out.append(shp.slice_p.bind(ary, start_indices=tuple(start), limit_indices=tuple(limit)))
    return out


def array_split(ary, indices_or_sections, axis=0):
    x = aval(ary)
    n = x.shape[check_axis("array_split", axis, x.ndim)]
    if isinstance(indices_or_sections, int):
        k = indices_or_sections
        sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
        cuts = list(np.cumsum(sizes)[:-1])
        return split(ary, [int(c) for c in cuts], axis)
    return split(ary, indices_or_sections, axis)


def flip(m, axis=None):
    check_arraylike("flip", m)
    axes = norm_axes("flip", axis, aval(m).ndim)
    if not axes:
        return m
    return shp.rev_p.bind(m, dimensions=tuple(sorted(axes)))


def atleast_1d(x):
    return x if aval(x).ndim >= 1 else reshape(x, (1,))


def atleast_2d(x):
    n = aval(x).ndim
    return x if n >= 2 else reshape(x, (1,) * (2 - n) + aval(x).shape)


_ = dtypes
