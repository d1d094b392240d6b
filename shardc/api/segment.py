"""jax.ops's segment reductions (segment_sum / _prod / _max / _min): `data`'s rows
combined into `num_segments` rows by their `segment_ids`, as one scatter.

As jax's, one lax scatter with data's trailing dims as its window; the ids are not
normalized as `x.at[ids]`'s are: a negative id is out of bounds, so it is dropped (or,
with mode="clip", clamped to segment 0)."""
from __future__ import annotations

import operator

import numpy as np

from . import numpy as snp
from ..errors import (ArgumentError, ShardcError, ShardcNotImplementedError, ShardcTypeError,
                      wrap_public)
from ..ir import dtypes
from ..trace import core
from . import lax_gather
from .explicit import apply_out_sharding
from .numpy._util import aval, check_arraylike

__all__ = ["segment_sum", "segment_prod", "segment_max", "segment_min"]


def _identity(kind, dtype):
    """The value of a segment no id names (jax's: -inf / +inf for max / min of floats
    and complex numbers, the extreme ints, False / True)."""
    if kind == "add":
        return 0
    if kind == "mul":
        return 1
    if dtype == dtypes.bool_:
        return kind == "min"
    if dtypes.is_int(dtype):
        info = np.iinfo(dtype)
        return info.max if kind == "min" else info.min
    return np.inf if kind == "min" else -np.inf


def _num_segments(name, ids, num_segments):
    if num_segments is None:
        if core.is_tracer(ids):
            raise ShardcError(
                f"{name}: without num_segments, the result's length is max(segment_ids) + 1, "
                "which is not known while tracing; pass a static num_segments=")
        num_segments = int(np.max(np.asarray(ids))) + 1
    if core.is_tracer(num_segments):
        raise ShardcError(f"{name}: num_segments must be a static int, not a traced value")
    try:
        num_segments = operator.index(num_segments)
    except TypeError:
        raise ArgumentError(f"{name}: num_segments must be an int, got "
                            f"{num_segments!r}") from None
    if num_segments < 0:
        raise ArgumentError("num_segments must be non-negative.")
    return num_segments


def _segment(name, kind, reducer, data, segment_ids, num_segments, indices_are_sorted,
             unique_indices, bucket_size, mode, out_sharding):
    check_arraylike(name, data, segment_ids)
    data, ids = snp.asarray(data), snp.asarray(segment_ids)
    n = _num_segments(name, ids, num_segments)
    da, ia = aval(data), aval(ids)
    if not dtypes.is_int(ia.dtype):
        raise ShardcTypeError(f"{name}: segment_ids must be integers, got {ia.dtype}")
    if ia.ndim != 1 or da.ndim < 1 or da.shape[0] != ia.shape[0]:
        raise ArgumentError(f"{name}: data's leading dim must match the 1-d segment_ids; "
                            f"got data {da.shape} and segment_ids {ia.shape}")
    if da.dtype == dtypes.bool_ and kind in ("add", "mul"):     # (jax's scatter refuses)
        raise ShardcTypeError(f"{name} of booleans: convert data to an integer dtype first")
    scatter = getattr(lax_gather, f"scatter_{kind}")
    rest = da.shape[1:]
    window = tuple(range(1, da.ndim))
    kw = dict(indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
              mode=mode)
    fill = _identity(kind, da.dtype)
    if bucket_size is None:
        # the trailing dims are a window: their sharding passes from data to the result
        dn = lax_gather.ScatterDimensionNumbers(window, (0,), (0,))
        out = scatter(snp.full((n,) + rest, fill, da.dtype), ids[:, None], data, dn, **kw)
        return apply_out_sharding(out, out_sharding)
    if out_sharding is not None:
        raise ShardcNotImplementedError(f"{name}: out_sharding with bucket_size")
    # per bucket of bucket_size rows, then the buckets combined (for accuracy, as jax)
    buckets = -(-ia.shape[0] // bucket_size)
    rows = snp.arange(ia.shape[0], dtype=ia.dtype) // bucket_size
    dn = lax_gather.ScatterDimensionNumbers(window, (0, 1), (0, 1))
    out = scatter(snp.full((buckets, n) + rest, fill, da.dtype),
                  snp.stack([rows, ids], axis=1), data, dn, **kw)
    return snp.astype(reducer(out, axis=0), da.dtype)


def segment_sum(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """The sum of `data`'s rows in each segment (0 for a segment with none)."""
    return _segment("segment_sum", "add", snp.sum, data, segment_ids, num_segments,
                    indices_are_sorted, unique_indices, bucket_size, mode, out_sharding)


def segment_prod(data, segment_ids, num_segments=None, indices_are_sorted=False,
                 unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """The product of `data`'s rows in each segment (1 for a segment with none)."""
    return _segment("segment_prod", "mul", snp.prod, data, segment_ids, num_segments,
                    indices_are_sorted, unique_indices, bucket_size, mode, out_sharding)


def segment_max(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """The maximum of `data`'s rows in each segment (the dtype's lowest for none)."""
    return _segment("segment_max", "max", snp.max, data, segment_ids, num_segments,
                    indices_are_sorted, unique_indices, bucket_size, mode, out_sharding)


def segment_min(data, segment_ids, num_segments=None, indices_are_sorted=False,
                unique_indices=False, bucket_size=None, mode=None, out_sharding=None):
    """The minimum of `data`'s rows in each segment (the dtype's highest for none)."""
    return _segment("segment_min", "min", snp.min, data, segment_ids, num_segments,
                    indices_are_sorted, unique_indices, bucket_size, mode, out_sharding)


wrap_public(globals())
