"""jax's gather, scatter and reduce_window primitives.

jax 0.10's gathers and scatters may carry batching dims (take_along_axis, vmapped
indexing): they become ordinary index columns (an iota per batching dim), which is what
XLA does when it expands them. reduce_window and the window selections of a max
pool's gradient are shardc.api.lax_window's.
"""
from __future__ import annotations

from ..api import lax_gather as G
from ..api import lax_window as W
from ..trace import core
from .translate import _bind, rule, unsupported


def _with_batch_columns(idx, operand_batching_dims, index_batching_dims):
    """Index columns for the batching dims: idx[..., k] = position along dim k."""
    ia = core.aval_of(idx)
    batch_shape = ia.shape[:-1]
    cols = [idx]
    for d in index_batching_dims:
        iota = _bind("iota", dtype=ia.dtype, shape=batch_shape + (1,), dimension=d)
        cols.append(iota)
    if len(cols) == 1:
        return idx
    return _bind("concatenate", *cols, dimension=ia.ndim - 1)


def _along_axis(x, idx, window, collapsed, smap, obd, ibd):
    """The axis of a take_along_axis-shaped gather/scatter (every other dim a batching
    dim of operand and indices alike), or None. shardc has it as one op (gather_along),
    whose factor rule keeps the batch dims' shardings, as jax's does."""
    xa, ia = core.aval_of(x), core.aval_of(idx)
    if window or len(collapsed) != 1 or tuple(smap) != tuple(collapsed) or \
            ia.ndim != xa.ndim + 1 or ia.shape[-1] != 1:
        return None
    axis = collapsed[0]
    others = tuple(d for d in range(xa.ndim) if d != axis)
    if tuple(obd) != others or tuple(ibd) != others or \
            any(ia.shape[d] != xa.shape[d] for d in others):
        return None
    return axis


_MODES = {"FILL_OR_DROP": "fill", "CLIP": "clip", "PROMISE_IN_BOUNDS": "promise_in_bounds",
          None: "fill"}


@rule("gather")
def _gather(x, idx, *, dimension_numbers, slice_sizes, indices_are_sorted=False,
            unique_indices=False, mode=None, fill_value=None):
    dn = dimension_numbers
    axis = _along_axis(x, idx, dn.offset_dims, dn.collapsed_slice_dims, dn.start_index_map,
                       dn.operand_batching_dims, dn.start_indices_batching_dims)
    if axis is not None:
        from ..api.numpy._sorting import take_along_axis
        i = _bind("reshape", idx, shape=core.aval_of(idx).shape[:-1])
        return take_along_axis(x, i, axis, mode=_MODES[_mode_name(mode)],
                               fill_value=fill_value, wrap_negative_indices=False)
    obd, sbd = tuple(dn.operand_batching_dims), tuple(dn.start_indices_batching_dims)
    collapsed, smap = tuple(dn.collapsed_slice_dims), tuple(dn.start_index_map)
    if obd:
        idx = _with_batch_columns(idx, obd, sbd)
        collapsed, smap = tuple(sorted(collapsed + obd)), smap + obd
    dn2 = G.GatherDimensionNumbers(offset_dims=tuple(dn.offset_dims),
                                   collapsed_slice_dims=collapsed, start_index_map=smap)
    return G.gather(x, idx, dn2, tuple(slice_sizes), unique_indices=unique_indices,
                    indices_are_sorted=indices_are_sorted, mode=_mode_name(mode),
                    fill_value=fill_value)


def _mode_name(mode):
    return None if mode is None else getattr(mode, "name", mode)


def _scatter_dn(idx, dn):
    obd, sbd = tuple(dn.operand_batching_dims), tuple(dn.scatter_indices_batching_dims)
    inserted, smap = tuple(dn.inserted_window_dims), tuple(dn.scatter_dims_to_operand_dims)
    if obd:
        idx = _with_batch_columns(idx, obd, sbd)
        inserted, smap = tuple(sorted(inserted + obd)), smap + obd
    return idx, G.ScatterDimensionNumbers(update_window_dims=tuple(dn.update_window_dims),
                                          inserted_window_dims=inserted,
                                          scatter_dims_to_operand_dims=smap)


def _scatter_rule(fn):
    def run(x, idx, upd, *, dimension_numbers, indices_are_sorted=False,
            unique_indices=False, mode=None, update_jaxpr=None, update_consts=()):
        if fn is G.scatter and update_jaxpr is not None:   # (a plain scatter has none)
            raise unsupported("scatter", "with an update function, as lax.scatter_apply "
                              "binds it: use x.at[idx].apply")
        d = dimension_numbers
        axis = _along_axis(x, idx, d.update_window_dims, d.inserted_window_dims,
                           d.scatter_dims_to_operand_dims, d.operand_batching_dims,
                           d.scatter_indices_batching_dims) if fn is G.scatter_add else None
        if axis is not None:     # take_along_axis's transpose
            i = _bind("reshape", idx, shape=core.aval_of(idx).shape[:-1])
            if _MODES[_mode_name(mode)] != "fill":    # the op drops out-of-range ones
                n = core.aval_of(x).shape[axis]
                from ..api.lax_ops import clamp
                dt = core.aval_of(i).dtype
                i = clamp(_lit(0, dt), i, _lit(n - 1, dt))
            return _bind("scatter_add_along", x, i, upd, axis=axis)
        idx, dn = _scatter_dn(idx, dimension_numbers)
        return fn(x, idx, upd, dn, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=_mode_name(mode))
    return run


rule("scatter-add", "scatter_add")(_scatter_rule(G.scatter_add))
rule("scatter-sub", "scatter_sub")(_scatter_rule(G.scatter_sub))
rule("scatter")(_scatter_rule(G.scatter))


rule("scatter-mul", "scatter_mul")(_scatter_rule(G.scatter_mul))
rule("scatter-min", "scatter_min")(_scatter_rule(G.scatter_min))
rule("scatter-max", "scatter_max")(_scatter_rule(G.scatter_max))


# ---------------------------------------------------------------- windows

@rule("reduce_window")
def _reduce_window(*args, jaxpr, consts, window_dimensions, window_strides, padding,
                   base_dilation, window_dilation):
    """lax.reduce_window with any reducer: its scalar jaxpr applied elementwise to the
    accumulated and the next window slices."""
    from .translate import eval_jaxpr
    n = len(args) // 2
    return W.fold_with_init(list(args[:n]), list(args[n:]),
                            lambda acc, part: eval_jaxpr(jaxpr, consts, [*acc, *part]),
                            window_dimensions, window_strides, padding, base_dilation,
                            window_dilation)


rule("reduce_window_sum")(W.reduce_window_sum)
rule("reduce_window_max")(W.reduce_window_max)
rule("reduce_window_min")(W.reduce_window_min)


@rule("select_and_gather_add")
def _select_and_gather_add(tangents, operand, *, select_prim, window_dimensions,
                           window_strides, padding, base_dilation, window_dilation):
    return W.select_and_gather_add(tangents, operand, select_prim, window_dimensions,
                                   window_strides, padding, base_dilation, window_dilation)


@rule("select_and_scatter_add")
def _select_and_scatter_add(source, operand, *, select_prim, window_dimensions,
                            window_strides, padding):
    return W.select_and_scatter_add(source, operand, select_prim, window_dimensions,
                                    window_strides, padding)


def _lit(v, dt):
    from ..ir.program import Aval, Lit
    return Lit(core._scalar(v, dt), Aval((), dt, False))
