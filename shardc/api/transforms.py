"""eval_shape, ShapeDtypeStruct and linearize, as jax's, built on shardc's own jit and
jvp; custom_jvp (shardc.transforms.custom_jvp) and the Jacobians (api/jacobian.py) are
re-exported here for shardc/__init__."""
from __future__ import annotations

from jax import ShapeDtypeStruct

from ..ir import dtypes
from ..errors import ShardcError, ShardcTypeError, api_boundary
from ..trace import core
from ..transforms.custom_jvp import custom_jvp
from .jacobian import hessian, jacfwd, jacrev
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


def _aval_str(a):
    return f"{a.dtype}{list(a.shape)}".replace(" ", "")


class _Linearized:
    """The f_jvp of linearize: a linear function of tangents shaped like the primals."""

    def __init__(self, fun, primals, in_tree, in_avals):
        self._fun, self._primals, self._tree, self._avals = fun, primals, in_tree, in_avals
        self._jitted = None

    @api_boundary
    def __call__(self, *tangents):
        from .grad import jvp
        leaves, tree = _tree.tree_flatten(tangents)
        if tree != self._tree:
            raise ShardcTypeError(f"expected {self._tree}, got {tree}")
        for p, t in zip(self._avals, leaves):
            ta = core.aval_of(t)
            if ta.shape != p.shape or (dtypes.is_float(p.dtype) and ta.dtype != p.dtype):
                raise ShardcError(
                    "linearized function called on tangent values inconsistent with the "
                    f"original primal values:\nGot tangent aval {_aval_str(ta)} for primal "
                    f"aval {_aval_str(p)} but expected {_aval_str(p)}.")
        if core.current_builder() is not None:
            return jvp(self._fun, self._primals, tangents)[1]
        if self._jitted is None:
            from .jit import internal_jit
            fun = self._fun
            self._jitted = internal_jit(lambda p, t: jvp(fun, p, t)[1],
                                        f"linearize({getattr(fun, '__name__', 'fun')})")
        return self._jitted(self._primals, tangents)

    def __repr__(self):
        return f"<linearized {getattr(self._fun, '__name__', 'function')}>"


@api_boundary
def linearize(fun, *primals, has_aux=False):
    """(fun(*primals), f_jvp) [+ aux], f_jvp(*tangents) the JVP of fun at primals, as
    jax.linearize. f_jvp re-runs the forward pass with the tangents (one compiled
    program outside a trace) rather than keeping linearization residuals."""
    if not callable(fun):
        raise ShardcTypeError(f"linearize expects a callable, got {fun!r}")
    if has_aux:
        out, aux = _call_aux(fun, primals)

        def f(*p):
            return fun(*p)[0]
    else:
        f, aux = fun, None
        if core.current_builder() is None:
            from .jit import internal_jit
            out = internal_jit(lambda *p: fun(*p),
                               f"linearize({getattr(fun, '__name__', 'fun')})")(*primals)
        else:
            out = fun(*primals)
    leaves, tree = _tree.tree_flatten(primals)
    lin = _Linearized(f, primals, tree, [core.aval_of(x) for x in leaves])
    return (out, lin, aux) if has_aux else (out, lin)


def _call_aux(fun, primals):
    def checked(*p):
        got = fun(*p)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            raise ShardcError("has_aux=True needs the function to return (output, aux)")
        return tuple(got)
    if core.current_builder() is None:
        from .jit import internal_jit
        return internal_jit(checked, getattr(fun, "__name__", "fun"))(*primals)
    return checked(*primals)


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
