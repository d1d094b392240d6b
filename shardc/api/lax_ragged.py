"""lax.ragged_dot and lax.ragged_dot_general: grouped matrix products (mixture of
experts), as jax computes them on CPU: the ragged operand is expanded to a dense one
with a leading group axis, each group's rows (or contracting columns, or batch
entries) kept and the rest zeroed, then one dot_general. So the values are jax's, the
shardings propagate through ordinary ops, and the gradient is theirs.
"""
from __future__ import annotations

import dataclasses

from ..errors import ShardcError, ShardcTypeError
from ..ir import dtypes
from .lax import broadcast_in_dim, broadcasted_iota, dot_general, select, transpose
from .numpy._util import aval


@dataclasses.dataclass(frozen=True)
class RaggedDotDimensionNumbers:
    """jax.lax.RaggedDotDimensionNumbers: `dot_dimension_numbers` as dot_general's,
    the lhs's one ragged dimension and the rhs's group dimension (none or one)."""
    dot_dimension_numbers: tuple
    lhs_ragged_dimensions: tuple
    rhs_group_dimensions: tuple

    def __init__(self, dot_dimension_numbers, lhs_ragged_dimensions, rhs_group_dimensions):
        object.__setattr__(self, "dot_dimension_numbers",
                           tuple(tuple(map(tuple, t)) for t in dot_dimension_numbers))
        object.__setattr__(self, "lhs_ragged_dimensions", tuple(lhs_ragged_dimensions))
        object.__setattr__(self, "rhs_group_dimensions", tuple(rhs_group_dimensions))


_BASIC = RaggedDotDimensionNumbers((([1], [1]), ([], [])), [0], [0])


def ragged_dot(lhs, rhs, group_sizes, precision=None, preferred_element_type=None,
               group_offset=None, out_sharding=None):
    """lhs [m, k], rhs [g, k, n], group_sizes [g] -> [m, n]: the rows of lhs in
    consecutive groups of the given sizes, group i multiplied by rhs[i] (rows past
    the groups give zeros)."""
    return ragged_dot_general(lhs, rhs, group_sizes, _BASIC, precision,
                              preferred_element_type, group_offset, out_sharding)


def _remaining(n, *taken):
    used = {d for t in taken for d in t}
    return [d for d in range(n) if d not in used]


def _mode(rank, dn):
    if len(dn.lhs_ragged_dimensions) != 1:
        raise ShardcTypeError("ragged_dot_general requires exactly one lhs ragged "
                              f"dimension, got {list(dn.lhs_ragged_dimensions)}")
    (lc, _), (lb, _) = dn.dot_dimension_numbers
    d = dn.lhs_ragged_dimensions[0]
    if d in _remaining(rank, lc, lb):
        return "noncontracting", d
    if d in lc:
        return "contracting", d
    if d in lb:
        return "batch", d
    raise ShardcTypeError(f"lhs_ragged_dim {d} not found in the lhs's dimensions "
                          f"(rank {rank})")


def _prefix(mode, rank, d, batch, contract):
    """The dims of the operand outer to its ragged dim that group_sizes spans."""
    batch, contract = list(batch), list(contract)
    if mode == "noncontracting":
        nc = _remaining(rank, contract, batch)
        return batch + nc[:nc.index(d)]
    if mode == "contracting":
        return batch + contract[:contract.index(d)]
    return batch[:batch.index(d)]


def _dense(x, d, gs, prefix):
    """x with a leading group axis: entry i keeps x where index `d` lies in group i
    (per the `prefix` dims' own group sizes, gs: [*prefix sizes, g]), zeros elsewhere."""
    from .lax_sorting import cumsum
    a = aval(x)
    g = aval(gs).shape[-1]
    shape = (g, *a.shape)
    ends = cumsum(gs, axis=len(prefix))
    starts = ends - gs
    # group axis first, then the prefix dims at their places in x
    where = (0, *(p + 1 for p in prefix))
    perm = (len(prefix), *range(len(prefix)))
    ends = broadcast_in_dim(transpose(ends, perm), shape, where)
    starts = broadcast_in_dim(transpose(starts, perm), shape, where)
    idx = broadcasted_iota(aval(gs).dtype, shape, d + 1)
    mask = (starts <= idx) & (idx < ends)
    xb = broadcast_in_dim(x, shape, tuple(range(1, len(shape))))
    return select(mask, xb, _zeros_like(xb))


def _zeros_like(x):
    from .numpy import zeros_like
    return zeros_like(x)


def ragged_dot_general(lhs, rhs, group_sizes, ragged_dot_dimension_numbers, precision=None,
                       preferred_element_type=None, group_offset=None, out_sharding=None):
    """jax.lax.ragged_dot_general's three modes: the lhs's ragged dim is a
    non-contracting one ([b,m,k], [g,b,k,n] -> [b,m,n]), a contracting one ([b,m,k],
    [b,k,n] -> [g,b,m,n]) or a batch one ([b,m,k], [b,k,n] -> [b,m,n])."""
    if group_offset is not None:
        raise ShardcError("ragged_dot_general: group_offset is not supported (jax's CPU "
                          "and GPU lowerings do not support it either)")
    dn = ragged_dot_dimension_numbers
    la, ra, ga = aval(lhs), aval(rhs), aval(group_sizes)
    if not dtypes.is_int(ga.dtype):
        raise ShardcTypeError("ragged_dot_general requires group_sizes to have an integer "
                              f"dtype, got {ga.dtype}")
    mode, d = _mode(la.ndim, dn)
    (lc, rc), (lb, rb) = dn.dot_dimension_numbers
    prefix = _prefix(mode, la.ndim, d, lb, lc)
    want = tuple(la.shape[i] for i in prefix)
    if ga.ndim == 1:
        group_sizes = broadcast_in_dim(group_sizes, (*want, ga.shape[0]), (len(want),))
    elif tuple(ga.shape[:-1]) != want:
        raise ShardcTypeError(f"ragged_dot_general: group_sizes of shape {ga.shape} must be "
                              f"[g] or {list(want) + ['g']} for these dimension numbers")
    g = ga.shape[-1]
    inc = lambda ds: [x + 1 for x in ds]      # noqa: E731
    dot = lambda a, b, dims: dot_general(      # noqa: E731
        a, b, dims, precision=precision, preferred_element_type=preferred_element_type,
        out_sharding=out_sharding)
    if mode == "noncontracting":
        (gd,) = dn.rhs_group_dimensions or (None,)
        if gd is None or ra.shape[gd] != g:
            raise ShardcTypeError(f"ragged_dot_general: the rhs group dimension must have "
                                  f"the {g} groups of group_sizes (rhs shape {ra.shape}, "
                                  f"group dims {list(dn.rhs_group_dimensions)})")
        return dot(_dense(lhs, d, group_sizes, prefix), rhs,
                   ((inc(lc) + [0], list(rc) + [gd]), (inc(lb), list(rb))))
    if dn.rhs_group_dimensions:
        raise ShardcTypeError("ragged_dot_general: an rhs group dimension is only allowed "
                              "when the lhs's ragged dimension is a non-contracting one")
    if mode == "contracting":
        rd = rc[list(lc).index(d)]
        rprefix = _prefix(mode, ra.ndim, rd, rb, rc)
        return dot(_dense(lhs, d, group_sizes, prefix), _dense(rhs, rd, group_sizes, rprefix),
                   ((inc(lc), inc(rc)), ([0] + inc(lb), [0] + inc(rb))))
    return dot(lhs, rhs, dn.dot_dimension_numbers)


__all__ = ["RaggedDotDimensionNumbers", "ragged_dot", "ragged_dot_general"]
