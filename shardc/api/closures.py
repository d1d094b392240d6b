"""jax.closure_convert and jax.custom_gradient.

closure_convert traces a function once, on arguments of the example's types, into a
region of the current trace; what it closes over from the trace (traced values, which
a custom derivative's rules could not otherwise see) becomes explicit extra arguments.
custom_gradient builds on it: the gradient function the user's function returns is
closure-converted inside custom_vjp's forward pass, its captured values passed to the
backward pass as residuals (as jax's, which keeps them as a jaxpr's consts).
"""
from __future__ import annotations

import functools
import inspect

from ..errors import ArgumentError
from ..ops.region import placement_of, trace_region
from ..trace import core
from ..transforms.ad import custom_vjp, eval_ops
from ..trace import pytree as _tree


def closure_convert(fun, *example_args):
    """jax.closure_convert: (converted, consts), where `converted(*args, *consts)` is
    `fun(*args)` for arguments of the example's pytree structure and types, and
    `consts` are the traced values `fun` reads from its closure (none outside a
    trace: concrete values cannot carry a derivative)."""
    leaves, in_tree = _tree.tree_flatten(example_args)
    if core.current_builder() is None:
        return _check_tree(fun, in_tree), []
    avals = [core.aval_of(x) for x in leaves]

    def body(*ts):
        out = fun(*_tree.tree_unflatten(in_tree, list(ts)))
        out_leaves, out_tree = _tree.tree_flatten(out)
        return out_leaves, out_tree
    region, consts, out_tree = trace_region(avals, body, getattr(fun, "__name__", "closure"),
                                            *placement_of(leaves))
    n = len(consts)

    def converted(*args_and_consts):
        args, cs = args_and_consts[:len(args_and_consts) - n], args_and_consts[
            len(args_and_consts) - n:]
        flat, tree = _tree.tree_flatten(tuple(args))
        if tree != in_tree:
            raise ArgumentError("The inputs to the closure produced by closure_convert must "
                                "have the same Pytree structure as the example arguments "
                                f"passed when closure_convert was called. Expected "
                                f"{in_tree}, but got {tree}")
        return _tree.tree_unflatten(out_tree, eval_ops(region, flat + list(cs)))
    return converted, list(consts)


def _check_tree(fun, in_tree):
    """Outside a trace: `fun` itself (no consts), with the structure check."""
    @functools.wraps(fun)
    def converted(*args):
        if _tree.tree_structure(tuple(args)) != in_tree:
            raise ArgumentError("The inputs to the closure produced by closure_convert must "
                                "have the same Pytree structure as the example arguments "
                                "passed when closure_convert was called")
        return fun(*args)
    return converted


def custom_gradient(fun):
    """jax.custom_gradient: `fun(*args)` returns `(output, vjp)`, where `vjp(ct)` gives
    the cotangents of `args` (a single one bare). The result is a function of `args`
    whose gradient is that `vjp`."""
    sig = _signature(fun)

    def positional(args, kwargs):
        if not kwargs:
            return args
        if sig is None:
            raise ArgumentError("custom_gradient: keyword arguments need a function whose "
                                "signature Python can read")
        bound = sig.bind(*args, **kwargs)
        return bound.args + tuple(bound.kwargs.values()) if bound.kwargs else bound.args

    def primal(*args):
        ans, _ = fun(*args)
        return ans

    def fwd(*args):
        ans, rule = fun(*args)
        conv, consts = closure_convert(rule, ans)
        return ans, (_Static(conv), consts)

    def bwd(res, g):
        conv, consts = res
        cts = conv.fn(g, *consts)
        return (cts,) if _tree.treedef_is_leaf(_tree.tree_structure(cts)) else cts

    wrapped = custom_vjp(primal)
    wrapped.defvjp(fwd, bwd)

    @functools.wraps(fun)
    def call(*args, **kwargs):
        return wrapped(*positional(args, kwargs))
    return call


class _Static:
    """A residual that is not an array (the converted gradient function): a pytree leaf
    custom_vjp keeps as it is."""
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn


def _signature(fun):
    try:
        return inspect.signature(fun)
    except (TypeError, ValueError):
        return None
