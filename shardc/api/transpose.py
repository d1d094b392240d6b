"""linear_transpose, as jax's: the transpose of a linear function, by shardc's backward
pass with a check that the function is linear (shardc.transforms.linear)."""
from __future__ import annotations

import jax
import numpy as np

from ..errors import ShardcNotImplementedError, ShardcTypeError, api_boundary
from ..ir import dtypes
from ..trace import core
from ..ops import lax as L
from ..trace import pytree as _tree


def _aval(x):
    """(shape, canonical dtype) of a primal or cotangent: arrays, tracers, scalars,
    ShapeDtypeStructs."""
    if core.is_tracer(x) or not hasattr(x, "dtype"):
        a = core.aval_of(x)
        return tuple(a.shape), a.dtype
    return tuple(np.shape(x)), dtypes.canonicalize(np.dtype(x.dtype))


def _out_avals(fun, primals):
    """fun's output tree and (shape, dtype) per leaf, traced and not run."""
    if core.current_builder() is None:
        from .transforms import eval_shape
        out = eval_shape(fun, *primals)
        leaves, tree = _tree.tree_flatten(out)
        return tree, [_aval(o) for o in leaves]
    from .grad import _scratch
    leaves, tree = _tree.tree_flatten(primals)
    args = [L.zeros(*_aval(x)) if isinstance(x, jax.ShapeDtypeStruct) else x for x in leaves]
    region, _, out_tree = _scratch(fun, args, tree)
    return out_tree, [(tuple(v.aval.shape), v.aval.dtype) for v in region.outputs]


def _names(avals):
    return [np.dtype(d) for _, d in avals]


@api_boundary
def linear_transpose(fun, *primals, reduce_axes=()):
    """The transpose of the linear function `fun`, as jax.linear_transpose: `primals`
    give only the inputs' shapes and dtypes (arrays or ShapeDtypeStructs). The result,
    called with a cotangent shaped like fun's output, returns a tuple of cotangents
    shaped like `primals`. An affine fun is transposed as its linear part (as jax's);
    a non-linear one is an error naming the op that makes it so."""
    if reduce_axes:
        raise ShardcNotImplementedError("reduce_axes argument to transpose is deprecated")
    if not callable(fun):
        raise ShardcTypeError(f"linear_transpose expects a callable, got {fun!r}")
    name = getattr(fun, "__name__", "fun")
    leaves, in_tree = _tree.tree_flatten(primals)
    in_avals = [_aval(x) for x in leaves]
    # a Python scalar primal is weakly typed, as jax's (so is its cotangent)
    weak = [not hasattr(x, "dtype") and core.aval_of(x).weak for x in leaves]
    out_tree, out_avals = _out_avals(fun, primals)
    kinds = [d for _, d in in_avals + out_avals]
    if not (all(dtypes.is_inexact(d) for d in kinds) or all(dtypes.is_int(d) for d in kinds)):
        raise ShardcTypeError(
            "linear_transpose only supports [float or complex] -> [float or complex], and "
            f"integer -> integer functions, but got {_names(in_avals)} -> "
            f"{_names(out_avals)}.")

    def body(cts):
        from ..transforms.ad import _traced_vjp
        xs = [L.full(s, 0, d, w) for (s, d), w in zip(in_avals, weak)]

        def flat(*p):
            return _tree.tree_leaves(fun(*_tree.tree_unflatten(in_tree, list(p))))
        _, _, vjp_fn = _traced_vjp(flat, tuple(xs), linear=name)
        cts = [L.convert_element_type(c, d) if core.aval_of(c).dtype != d else c
               for c, (_, d) in zip(cts, out_avals)]
        return _tree.tree_unflatten(in_tree, list(vjp_fn(cts)))

    jitted = []

    @api_boundary
    def transposed(out_cotangent):
        cts, ct_tree = _tree.tree_flatten(out_cotangent)
        if ct_tree != out_tree:
            raise ShardcTypeError("cotangent tree does not match function output, expected "
                                  f"{out_tree} but got {ct_tree}")
        got = [_aval(c) for c in cts]
        if got != out_avals:
            raise ShardcTypeError(
                "cotangent type does not match function output, expected "
                f"{_show(out_avals)} but got {_show(got)}")
        if core.current_builder() is not None:
            return body(cts)
        if not jitted:
            from .jit import internal_jit
            jitted.append(internal_jit(body, f"linear_transpose({name})"))
        return jitted[0](cts)
    return _tree.Partial(transposed)


def _show(avals):
    return "(" + ", ".join(f"{np.dtype(d).name}{list(s)}" for s, d in avals) + ")"
