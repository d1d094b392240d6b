"""jax's gather, scatter and reduce_window primitives.

jax 0.10's gathers and scatters may carry batching dims (take_along_axis, vmapped
indexing), which shardc.lax's gather and scatters take. reduce_window and the window
selections of a max pool's gradient are shardc.api.lax_window's.
"""
from __future__ import annotations

from ..api import lax_gather as G
from ..api import lax_window as W
from ..trace import core
from .translate import _bind, rule, unsupported


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
    return G.gather(x, idx, dn, tuple(slice_sizes), unique_indices=unique_indices,
                    indices_are_sorted=indices_are_sorted, mode=_mode_name(mode),
                    fill_value=fill_value)


def _mode_name(mode):
    return None if mode is None else getattr(mode, "name", mode)


def _scatter_rule(fn):
    def run(x, idx, upd, *, dimension_numbers, indices_are_sorted=False,
            unique_indices=False, mode=None, update_jaxpr=None, update_consts=()):
        if fn is G.scatter and update_jaxpr is not None:   # (a plain scatter has none)
            return _scatter_apply(x, idx, upd, dimension_numbers, update_jaxpr,
                                  update_consts, unique_indices, mode)
        d = dimension_numbers
        axis = _along_axis(x, idx, d.update_window_dims, d.inserted_window_dims,
                           d.scatter_dims_to_operand_dims, d.operand_batching_dims,
                           d.scatter_indices_batching_dims) if fn is G.scatter_add else None
        if axis is not None:     # take_along_axis's transpose
            i = _bind("reshape", idx, shape=core.aval_of(idx).shape[:-1])
            if _MODES[_mode_name(mode)] == "clip":    # the op drops out-of-range ones
                n = core.aval_of(x).shape[axis]
                from ..api.lax_ops import clamp
                dt = core.aval_of(i).dtype
                i = clamp(_lit(0, dt), i, _lit(n - 1, dt))
            return _bind("scatter_add_along", x, i, upd, axis=axis)
        return fn(x, idx, upd, dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=_mode_name(mode))
    return run


def _scatter_apply(x, idx, upd, dn, update_jaxpr, update_consts, unique_indices, mode):
    """lax.scatter_apply's scatter: its update function reads the old value only."""
    from .translate import eval_jaxpr
    old, new = update_jaxpr.invars
    if any(new is v for e in update_jaxpr.eqns for v in e.invars) or \
            any(new is v for v in update_jaxpr.outvars):
        raise unsupported("scatter", "with an update function of the update value (jax's "
                          "scatter_apply's reads the old value only)")

    def func(v):
        return eval_jaxpr(update_jaxpr, update_consts, [v, v])[0]
    return G.scatter_apply(x, idx, func, dn, update_shape=core.aval_of(upd).shape,
                           unique_indices=unique_indices, mode=_mode_name(mode))


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
