"""jax's checks of gather's and scatter's dimension numbers, so a malformed one is a
clear TypeError at the user's line (as jax's shape rules raise) rather than an XLA
compile failure or an index error in a sharding rule."""
from __future__ import annotations

from ..errors import ShardcTypeError


def _dims(op, what, dims, bound, bound_what, sort=True):
    dims = tuple(dims)
    if sort and list(dims) != sorted(dims):
        raise ShardcTypeError(f"{what} in {op} op must be sorted; got {dims}.")
    if len(set(dims)) != len(dims):
        raise ShardcTypeError(f"{what} in {op} op must not repeat; got {dims}.")
    for d in dims:
        if not 0 <= d < bound:
            raise ShardcTypeError(f"Invalid {what} set in {op} op; valid range is "
                                  f"[0, {bound}) ({bound_what}); got: {d}.")


def _index_count(op, idx, index_vector_dim):
    if not 0 <= index_vector_dim <= idx.ndim:
        raise ShardcTypeError(f"{op} index_vector_dim {index_vector_dim} must be in the "
                              f"range [0, {idx.ndim}] for indices of shape {idx.shape}.")
    return idx.shape[index_vector_dim] if index_vector_dim < idx.ndim else 1


def check_gather(x, idx, *, offset_dims, collapsed_slice_dims, start_index_map,
                 index_vector_dim, slice_sizes, operand_batching_dims=(),
                 start_indices_batching_dims=()):
    n = _index_count("Gather", idx, index_vector_dim)
    out_rank = len(offset_dims) + idx.ndim - (1 if index_vector_dim < idx.ndim else 0)
    _dims("Gather", "offset_dims", offset_dims, out_rank, "the output's rank")
    _dims("Gather", "collapsed_slice_dims", collapsed_slice_dims, x.ndim, "the operand's rank")
    _dims("Gather", "operand_batching_dims", operand_batching_dims, x.ndim,
          "the operand's rank")
    _dims("Gather", "start_index_map", start_index_map, x.ndim, "the operand's rank",
          sort=False)
    if len(start_index_map) != n:
        raise ShardcTypeError(
            f"Gather op has {len(start_index_map)} elements in start_index_map and the "
            f"bound of dimension index_vector_dim={index_vector_dim} of indices is {n}. "
            "These two numbers must be equal.")
    if len(slice_sizes) != x.ndim:
        raise ShardcTypeError(f"Gather op must have one slice size for every input "
                              f"dimension; got: len(slice_sizes)={len(slice_sizes)}, "
                              f"input_shape.rank={x.ndim}")
    for d, (s, m) in enumerate(zip(slice_sizes, x.shape)):
        if not 0 <= s <= m:
            raise ShardcTypeError(f"Slice size at index {d} in gather op is out of range, "
                                  f"must be within [0, {m} + 1), got {s}.")
    for d in (*collapsed_slice_dims, *operand_batching_dims):
        if slice_sizes[d] > 1:
            raise ShardcTypeError(f"Gather op can only collapse slice dims with bound 1 or "
                                  f"0, but bound is {slice_sizes[d]} for index {d} at "
                                  "position of collapsed_slice_dims or operand_batching_dims.")
    if len(offset_dims) + len(collapsed_slice_dims) + len(operand_batching_dims) != x.ndim:
        raise ShardcTypeError(
            "All components of the offset index in a gather op must either be a offset "
            "dimension or explicitly collapsed/batching; got len(offset_dims)="
            f"{len(offset_dims)}, collapsed_slice_dims={tuple(collapsed_slice_dims)}, "
            f"operand_batching_dims={tuple(operand_batching_dims)}, operand rank={x.ndim}.")


def check_scatter(op, x, idx, upd, *, update_window_dims, inserted_window_dims,
                  scatter_dims_to_operand_dims, index_vector_dim, operand_batching_dims=(),
                  scatter_indices_batching_dims=()):
    n = _index_count(op, idx, index_vector_dim)
    _dims(op, "update_window_dims", update_window_dims, upd.ndim, "the updates' rank")
    _dims(op, "inserted_window_dims", inserted_window_dims, x.ndim, "the operand's rank")
    _dims(op, "operand_batching_dims", operand_batching_dims, x.ndim, "the operand's rank")
    _dims(op, "scatter_dims_to_operand_dims", scatter_dims_to_operand_dims, x.ndim,
          "the operand's rank", sort=False)
    if len(scatter_dims_to_operand_dims) != n:
        raise ShardcTypeError(
            f"Scatter op has {len(scatter_dims_to_operand_dims)} elements in "
            f"scatter_dims_to_operand_dims and the bound of dimension index_vector_dim="
            f"{index_vector_dim} of indices is {n}. These two numbers must be equal.")
    window = len(update_window_dims) + len(inserted_window_dims) + len(operand_batching_dims)
    if window != x.ndim:
        raise ShardcTypeError(
            f"Scatter op has window of size {window}; doesn't match operand of rank "
            f"{x.ndim} (update_window_dims {tuple(update_window_dims)}, "
            f"inserted_window_dims {tuple(inserted_window_dims)}, operand_batching_dims "
            f"{tuple(operand_batching_dims)}).")
    scatter_rank = idx.ndim - (1 if index_vector_dim < idx.ndim else 0)
    if upd.ndim != len(update_window_dims) + scatter_rank:
        raise ShardcTypeError(f"Updates tensor must be of rank "
                              f"{len(update_window_dims) + scatter_rank}; got {upd.ndim}.")
    full = [d for d in range(x.ndim)
            if d not in inserted_window_dims and d not in operand_batching_dims]
    for w, d in zip(update_window_dims, full):
        if upd.shape[w] > x.shape[d]:
            raise ShardcTypeError(
                "Bounds of the window dimensions of updates must not exceed the bounds of "
                "the corresponding dimensions of operand. For dimension "
                f"{w}, updates bound is {upd.shape[w]}, operand bound is {x.shape[d]}.")
