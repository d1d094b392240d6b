"""eval_shape, ShapeDtypeStruct and linearize, as jax's, built on shardc's own jit and
jvp; custom_jvp (shardc.transforms.custom_jvp) and the Jacobians (api/jacobian.py) are
re-exported here for shardc/__init__."""
from __future__ import annotations

import jax
import numpy as np
from jax import ShapeDtypeStruct

from ..ir import dtypes
from ..errors import ArgumentError, ShardcError, ShardcTypeError, api_boundary
from ..ops.region import placement_of
from ..trace import core
from ..transforms.custom_jvp import custom_jvp
from .jacobian import hessian, jacfwd, jacrev
from .vjp_fn import VJP, Float0Fill
from ..trace import pytree as _tree

__all__ = ["ShapeDtypeStruct", "custom_jvp", "eval_shape", "hessian", "jacfwd", "jacrev",
           "linearize"]


@api_boundary
def eval_shape(fun, *args, **kwargs):
    """The shapes, dtypes and weak types of fun(*args, **kwargs) as ShapeDtypeStructs,
    by tracing it (nothing is compiled or run); arguments may be ShapeDtypeStructs.
    As jax's on a mesh of Auto axes, the results carry no sharding."""
    if not callable(fun):
        raise ShardcTypeError(f"eval_shape expects a callable, got {fun!r}")
    from .jit import jit
    traced = jit(fun).trace(*args, **kwargs)
    prog = traced._program
    return _tree.tree_unflatten(traced.out_tree, [
        ShapeDtypeStruct(v.aval.shape, v.aval.dtype, weak_type=v.aval.weak)
        for v in prog.outputs])


def _aval_str(dtype, shape):
    name = "float0" if dtype == jax.dtypes.float0 else np.dtype(dtype).name
    return f"{name}{list(shape)}".replace(" ", "")


@_tree.register_pytree_node_class
class _Linearized:
    """The f_jvp of linearize: a linear function of tangents shaped like the primals. As
    jax's (a Partial), it is a pytree, so a jit may return it: its leaves are what the
    tangent computation reads (the primals, values fun closes over), and it runs as a
    VJP object runs its backward pass (api/vjp_fn.py), here the jvp of fun on its
    tangents. Integer primals take float0 tangents, passed on as zeros."""

    def __init__(self, pullback, in_tree, in_avals):
        self._pb, self._tree, self._avals = pullback, in_tree, in_avals

    @api_boundary
    def __call__(self, *tangents):
        from .grad import _dtype_shape
        leaves, tree = _tree.tree_flatten(tangents)
        if tree != self._tree:
            raise ShardcTypeError(f"expected {self._tree}, got {tree}")
        for p, t in zip(self._avals, leaves):
            want = p.dtype if dtypes.is_inexact(p.dtype) else jax.dtypes.float0
            td, ts = _dtype_shape(t)
            if tuple(ts) != tuple(p.shape) or td != want:
                raise ArgumentError(
                    "linearized function called on tangent values inconsistent with the "
                    f"original primal values:\nGot tangent aval {_aval_str(td, ts)} for primal "
                    f"aval {_aval_str(p.dtype, p.shape)} but expected "
                    f"{_aval_str(want, p.shape)}.")
        return self._pb(tuple(t for t, p in zip(leaves, self._avals)
                              if dtypes.is_inexact(p.dtype)))

    def tree_flatten(self):
        leaves, aux = self._pb.tree_flatten()
        return leaves, (aux, self._tree, tuple(self._avals))

    @classmethod
    def tree_unflatten(cls, aux, leaves):
        pb_aux, tree, avals = aux
        return cls(VJP.tree_unflatten(pb_aux, leaves), tree, list(avals))

    def __repr__(self):
        return "<linearized function>"


def _linearized(f, primals, out):
    """The f_jvp of f at `primals` (tracers of the current trace), whose output is `out`:
    f's jvp on the float primals' tangents gives the float outputs' tangents; integer
    ones get float0 (Float0Fill)."""
    leaves, tree = _tree.tree_flatten(primals)
    avals = [core.aval_of(x) for x in leaves]
    fl = [k for k, a in enumerate(avals) if dtypes.is_inexact(a.dtype)]
    out_leaves, out_tree = _tree.tree_flatten(out)
    odiff = tuple(k for k, o in enumerate(out_leaves)
                  if dtypes.is_inexact(core.aval_of(o).dtype))

    def tangents_out(ts):
        from .grad import jvp
        full = [np.zeros(a.shape, jax.dtypes.float0) for a in avals]
        for k, t in zip(fl, ts):
            full[k] = t
        t_out = _tree.tree_leaves(jvp(f, primals, _tree.tree_unflatten(tree, full))[1])
        return tuple(t_out[k] for k in odiff)
    fill = Float0Fill(out_tree, odiff, tuple(tuple(core.aval_of(o).shape)
                                             for o in out_leaves))
    f_leaves = [leaves[k] for k in fl]
    pb = VJP(tangents_out, core.current_builder(), _tree.tree_structure(tuple(f_leaves)),
             [avals[k] for k in fl], fill=fill)
    pb._placement = placement_of(f_leaves)      # the tangents vary as the primals do
    return _Linearized(pb, tree, avals)


@api_boundary
def linearize(fun, *primals, has_aux=False):
    """(fun(*primals), f_jvp) [+ aux], f_jvp(*tangents) the JVP of fun at primals, as
    jax.linearize. f_jvp re-runs the forward pass with the tangents (one compiled
    program outside a trace): its leaves are the primals and the values fun closes
    over, not jax's linearization residuals."""
    if not callable(fun):
        raise ShardcTypeError(f"linearize expects a callable, got {fun!r}")
    if core.current_builder() is None:      # f_jvp leaves the jit as a pytree
        from .jit import internal_jit
        return internal_jit(lambda *p: linearize(fun, *p, has_aux=has_aux),
                            f"linearize({getattr(fun, '__name__', 'fun')})",
                            retrace=True)(*primals)
    if has_aux:
        out, aux = _call_aux(fun, primals)

        def f(*p):
            return fun(*p)[0]
    else:
        f, aux = fun, None
        out = fun(*primals)
    lin = _linearized(f, primals, out)
    return (out, lin, aux) if has_aux else (out, lin)


def _call_aux(fun, primals):
    got = fun(*primals)
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        raise ShardcError("has_aux=True needs the function to return (output, aux)")
    return tuple(got)


def fwd_and_bwd(fun, argnums, has_aux=False, jitted=True):
    """(fwd, bwd) as jax.fwd_and_bwd: fwd(*args) is vjp(fun) at the `argnums` arguments,
    (out, residuals[, aux]); bwd(residuals, ct) their cotangents. Jitted (the default),
    each compiles once and the residuals are arrays passed between them."""
    from .grad import _argnums, vjp
    if not callable(fun):
        raise ShardcTypeError(f"Expected a callable value, got {fun!r}")

    def fwd(*args):
        single, nums = _argnums(argnums, len(args))

        def partial(*dyn):
            full = list(args)
            for i, d in zip(nums, dyn):
                full[i] = d
            return fun(*full)
        return vjp(partial, *[args[i] for i in nums], has_aux=has_aux)

    def bwd(f_vjp, outgrad):
        g = f_vjp(outgrad)
        return g[0] if isinstance(argnums, int) else g
    if jitted:
        from .jit import jit
        fwd, bwd = jit(fwd), jit(bwd)
    return fwd, bwd
