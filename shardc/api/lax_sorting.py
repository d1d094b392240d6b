"""shardc.lax's sorting, dynamic slicing and cumulative functions (jax.lax's names)."""
from __future__ import annotations

import operator

import numpy as np

from ..errors import ShardcError, ShardcTypeError, wrap_public
from ..ir import dtypes
from ..ir.program import Aval, Lit
from ..ops import cumulative as cum
from ..ops import dynamic as dyn
from ..ops import lax as L
from ..ops import reduce as red
from ..ops import sort as srt
from ..ops.common import check_axis
from ..trace import core
from .numpy._util import aval, convert


def _array(name, x):
    """x as an operand: Python scalars become weakly typed literals."""
    if isinstance(x, (list, tuple)) or x is None or isinstance(x, str):
        raise ShardcTypeError(f"{name} requires array arguments; got {type(x).__name__}")
    if L.is_py_scalar(x):
        a = aval(x)
        return L.full((), x, a.dtype, a.weak)
    return x


def _static_int(name, what, v):
    try:
        return operator.index(v)
    except TypeError:
        raise ShardcTypeError(f"{name}: {what} must be a static int, got {v!r}") from None


# ---------------------------------------------------------------- sort, top_k

def sort(operand, dimension=-1, is_stable=True, num_keys=1):
    """Sort along `dimension`; several operands sort together by the first `num_keys`
    (lexicographically), as jax.lax.sort (NaNs last, -0.0 equal to 0.0)."""
    single = not isinstance(operand, (list, tuple))
    ops = [_array("sort", x) for x in ([operand] if single else operand)]
    if not ops:
        raise ShardcError("sort needs at least one operand")
    nd = aval(ops[0]).ndim
    if nd == 0:
        raise ShardcError("sort needs operands of rank >= 1, got a scalar")
    dim = check_axis("sort", dimension, nd)
    num_keys = _static_int("sort", "num_keys", num_keys)
    outs = srt.sort_p.bind(*ops, dimension=dim, is_stable=bool(is_stable), num_keys=num_keys)
    return outs[0] if single else tuple(outs)


def sort_key_val(keys, values, dimension=-1, is_stable=True):
    k, v = sort((keys, values), dimension=dimension, is_stable=is_stable, num_keys=1)
    return k, v


def top_k(operand, k, *, axis=-1):
    """The k largest entries along `axis` (the last by default) and their indices."""
    x = _array("top_k", operand)
    a = aval(x)
    if a.ndim == 0:
        raise ShardcError("top_k needs an operand of rank >= 1, got a scalar")
    k = _static_int("top_k", "k", k)
    if k < 0:
        raise ShardcError(f"top_k: k must be non-negative, got {k}")
    ax = check_axis("top_k", axis, a.ndim)
    if ax != a.ndim - 1:
        from ..ops.batching import move_dim
        v, i = srt.top_k_p.bind(move_dim(x, ax, -1), k=k)
        return move_dim(v, -1, ax), move_dim(i, -1, ax)
    v, i = srt.top_k_p.bind(x, k=k)
    return v, i


def _approx(is_max, operand, k, reduction_dimension, recall_target,
            reduction_input_size_override, aggregate_to_topk):
    name = "approx_max_k" if is_max else "approx_min_k"
    x = _array(name, operand)
    a = aval(x)
    if a.ndim == 0:
        raise ShardcError(f"{name} needs an operand of rank >= 1, got a scalar")
    d = check_axis(name, reduction_dimension, a.ndim)
    k = _static_int(name, "k", k)
    if not aggregate_to_topk:
        raise ShardcError(f"{name}: aggregate_to_topk=False (XLA's partial reduction, whose "
                          "result size is XLA's ApproxTopKReductionOutputSize) is not "
                          "supported by shardc; leave it True")
    v, i = srt.approx_top_k_p.bind(
        x, k=k, reduction_dimension=d, is_max_k=is_max, recall_target=float(recall_target),
        aggregate_to_topk=True, reduction_input_size_override=int(reduction_input_size_override))
    return v, i


def approx_max_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
    return _approx(True, operand, k, reduction_dimension, recall_target,
                   reduction_input_size_override, aggregate_to_topk)


def approx_min_k(operand, k, reduction_dimension=-1, recall_target=0.95,
                 reduction_input_size_override=-1, aggregate_to_topk=True):
    return _approx(False, operand, k, reduction_dimension, recall_target,
                   reduction_input_size_override, aggregate_to_topk)


# ---------------------------------------------------------------- dynamic slices

def _start_indices(name, x_aval, start_indices, allow_negative_indices):
    """jax's _dynamic_slice_indices: negative starts count from the end; one dtype."""
    if core.is_tracer(start_indices) or isinstance(start_indices, np.ndarray) or \
            hasattr(start_indices, "shape") and not isinstance(start_indices, (list, tuple)):
        sa = aval(start_indices)
        if sa.ndim != 1:
            raise ShardcError(f"{name}: start_indices must be a sequence or a 1-d array, "
                              f"got {sa}")
        start_indices = [L.reshape(L.slice(start_indices, (i,), (i + 1,)), ())
                         for i in range(sa.shape[0])]
    idx = list(start_indices)
    if len(idx) != x_aval.ndim:
        raise ShardcError(f"{name}: {len(idx)} start indices for an operand of rank "
                          f"{x_aval.ndim}; give one per dim")
    neg = allow_negative_indices
    neg = [bool(neg)] * len(idx) if isinstance(neg, bool) else list(neg)
    arrays = [i for i in idx if not L.is_py_scalar(i) and not isinstance(i, np.integer)]
    for i in arrays:
        a = aval(i)
        if a.ndim or not dtypes.is_int(a.dtype):
            raise ShardcError(f"{name}: start indices must be integer scalars, got {a}")
    # unsigned starts are never negative, as jax's: kept when they all share one dtype,
    # else cut to the dim (the op clamps there anyway) so the common dtype holds them
    # (and the static starts fit it)
    static = {}
    for k, (i, n) in enumerate(zip(idx, x_aval.shape)):
        if L.is_py_scalar(i) or isinstance(i, np.integer):
            if isinstance(i, bool) or isinstance(i, float):
                raise ShardcError(f"{name}: start indices must be integers, got {i!r}")
            unsigned = isinstance(i, np.unsignedinteger)
            i = int(i)
            static[k] = min(i, n) if unsigned else i + n if i < 0 else i
    kinds = {aval(i).dtype for i in arrays}
    dt = kinds.pop() if len(kinds) == 1 and not dtypes.is_signed(aval(arrays[0]).dtype) \
        and all(0 <= i <= np.iinfo(aval(arrays[0]).dtype).max for i in static.values()) \
        else dtypes.int64 if any(aval(i).dtype == dtypes.int64 for i in arrays) \
        else dtypes.int32
    out = []
    for k, (i, n, allow) in enumerate(zip(idx, x_aval.shape, neg)):
        if k in static:
            out.append(Lit(core._scalar(static[k], dt), Aval((), dt, True)))  # weak, as jax's
            continue
        it = aval(i).dtype
        if not dtypes.is_signed(it):
            if it != dt and np.iinfo(it).max > np.iinfo(dt).max:
                i = L.min(i, L.full((), n, it))
            out.append(convert(i, dt))
            continue
        i = convert(i, dt)
        if allow:
            i = L.select(L.lt(i, 0), L.add(i, n), i)
        out.append(i)
    return out


def dynamic_slice(operand, start_indices, slice_sizes, *, allow_negative_indices=True):
    x = _array("dynamic_slice", operand)
    a = aval(x)
    sizes = tuple(_static_int("dynamic_slice", "slice_sizes", s) for s in slice_sizes)
    idx = _start_indices("dynamic_slice", a, start_indices, allow_negative_indices)
    if core.current_builder() is not None and all(isinstance(i, Lit) for i in idx) and \
            len(sizes) == a.ndim and \
            all(0 <= s <= n for s, n in zip(sizes, a.shape)):
        # static starts under jit: a slice (XLA folds it so before partitioning, and a
        # slice's sliced dims may stay sharded), clamped as dynamic_slice clamps; eagerly
        # jax dispatches the op with its starts as operands, as here
        starts = [min(max(int(i.value), 0), n - s) for i, n, s in zip(idx, a.shape, sizes)]
        return L.slice(x, starts, [st + s for st, s in zip(starts, sizes)])
    return dyn.dynamic_slice_p.bind(x, *idx, slice_sizes=sizes)


def dynamic_slice_in_dim(operand, start_index, slice_size, axis=0, *,
                         allow_negative_indices=True):
    a = aval(operand)
    axis = check_axis("dynamic_slice_in_dim", axis, a.ndim)
    starts = [0] * a.ndim
    starts[axis] = start_index
    sizes = list(a.shape)
    sizes[axis] = slice_size
    neg = [False] * a.ndim
    neg[axis] = allow_negative_indices
    return dynamic_slice(operand, starts, sizes, allow_negative_indices=neg)


def dynamic_index_in_dim(operand, index, axis=0, keepdims=True, *,
                         allow_negative_indices=True):
    out = dynamic_slice_in_dim(operand, index, 1, axis,
                               allow_negative_indices=allow_negative_indices)
    if keepdims:
        return out
    a = aval(out)
    axis = check_axis("dynamic_index_in_dim", axis, a.ndim)
    return L.reshape(out, tuple(n for d, n in enumerate(a.shape) if d != axis))


def dynamic_update_slice(operand, update, start_indices, *, allow_negative_indices=True):
    x, u = _array("dynamic_update_slice", operand), _array("dynamic_update_slice", update)
    a, ua = aval(x), aval(u)
    if ua.dtype != a.dtype:
        raise ShardcError(f"dynamic_update_slice: update {ua} must have the operand's dtype "
                          f"{a.dtype} (lax does not promote); convert it first")
    idx = _start_indices("dynamic_update_slice", a, start_indices, allow_negative_indices)
    return dyn.dynamic_update_slice_p.bind(x, u, *idx)


def dynamic_update_slice_in_dim(operand, update, start_index, axis, *,
                                allow_negative_indices=True):
    a = aval(operand)
    axis = check_axis("dynamic_update_slice_in_dim", axis, a.ndim)
    starts = [0] * a.ndim
    starts[axis] = start_index
    neg = [False] * a.ndim
    neg[axis] = allow_negative_indices
    return dynamic_update_slice(operand, update, starts, allow_negative_indices=neg)


def dynamic_update_index_in_dim(operand, update, index, axis, *, allow_negative_indices=True):
    a = aval(operand)
    axis = check_axis("dynamic_update_index_in_dim", axis, a.ndim)
    u = _array("dynamic_update_index_in_dim", update)
    ua = aval(u)
    if ua.ndim == a.ndim - 1:
        u = L.reshape(u, (*ua.shape[:axis], 1, *ua.shape[axis:]))
    return dynamic_update_slice_in_dim(operand, u, index, axis,
                                       allow_negative_indices=allow_negative_indices)


# ---------------------------------------------------------------- cumulative

def _cum(prim, name):
    def f(operand, axis=0, reverse=False):
        x = _array(name, operand)
        a = aval(x)
        if a.ndim == 0:
            raise ShardcError(f"{name} needs an operand of rank >= 1, got a scalar")
        ax = check_axis(name, axis, a.ndim)
        return prim.bind(x, axis=ax, reverse=bool(reverse))
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"jax.lax.{name}: the running {name[3:]} along `axis`."
    return f


cumsum = _cum(red.cumsum_p, "cumsum")
cumprod = _cum(cum.cumprod_p, "cumprod")
cummax = _cum(cum.cummax_p, "cummax")
cummin = _cum(cum.cummin_p, "cummin")
cumlogsumexp = _cum(cum.cumlogsumexp_p, "cumlogsumexp")

__all__ = ["sort", "sort_key_val", "top_k", "approx_max_k", "approx_min_k", "dynamic_slice",
           "dynamic_slice_in_dim", "dynamic_index_in_dim", "dynamic_update_slice",
           "dynamic_update_slice_in_dim", "dynamic_update_index_in_dim", "cumsum", "cumprod",
           "cummax", "cummin", "cumlogsumexp"]

wrap_public(globals())
