"""custom_jvp: a function with a user-defined JVP rule, as jax.custom_jvp.

Under a trace a call is one `custom_jvp_call` op (shardc.ops.custom_jvp) whose region is
the function itself; its gradient rules apply the user's rule (forward mode) or its
transpose (reverse mode). Outside any trace the function simply runs.
"""
from __future__ import annotations

import functools
import inspect

from ..errors import ShardcTypeError, api_boundary
from ..trace import core
from ..trace import pytree as _tree


class custom_jvp:
    """Set up a function with a custom JVP rule: `f.defjvp(rule)` where
    rule(*nondiff_args, primals, tangents) -> (primal_out, tangent_out), or
    `f.defjvps(*per_argument_rules)`."""

    def __init__(self, fun, nondiff_argnums=(), nondiff_argnames=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = nondiff_nums(fun, nondiff_argnums, nondiff_argnames)
        self.jvp = None
        self.symbolic_zeros = False

    def __getattr__(self, name):
        return forward_attr(self, name)

    def defjvp(self, jvp, symbolic_zeros=False):
        """symbolic_zeros: the rule gets a jax.custom_derivatives.SymbolicZero for the
        tangent of each input nothing differentiates (and may return them)."""
        self.jvp = jvp
        self.symbolic_zeros = bool(symbolic_zeros)
        return jvp

    def defjvps(self, *jvps):
        if self.nondiff_argnums:
            raise ShardcTypeError("Can't use ``defjvps`` with ``nondiff_argnums``.")

        def jvp(primals, tangents):
            out = self(*primals)
            parts = [r(t, out, *primals) for t, r in zip(tangents, jvps) if r is not None]
            if not parts:
                from ..ops import lax as L
                return out, _tree.tree_map(
                    lambda o: L.zeros(core.aval_of(o).shape, core.aval_of(o).dtype), out)
            total = parts[0]
            for p in parts[1:]:
                total = _tree.tree_map(lambda a, b: a + b, total, p)
            return out, total
        self.defjvp(jvp)

    @api_boundary
    def __call__(self, *args, **kwargs):
        from ..ops.custom_jvp import CustomJvpRule, custom_jvp_call_p
        from ..ops.region import bind_region
        if self.jvp is None:
            raise AttributeError("No JVP defined for custom_jvp function "
                                 f"{getattr(self.fun, '__name__', self.fun)} using defjvp.")
        args = resolve_kwargs(self.fun, args, kwargs, "custom_jvp")
        b = core.current_builder()
        if b is None:
            return self.fun(*args)
        leaves, arg_tree = _tree.tree_flatten(list(args))
        leaf_arg = tuple(i for i, a in enumerate(args) for _ in _tree.tree_leaves(a))
        traced = tuple(i for i, x in enumerate(leaves) if core.is_tracer(x))
        static = tuple(None if core.is_tracer(x) else x for x in leaves)

        def region(*ts):
            full = list(static)
            for i, t in zip(traced, ts):
                full[i] = t
            out = self.fun(*_tree.tree_unflatten(arg_tree, full))
            flat, out_tree = _tree.tree_flatten(out)
            return flat, out_tree

        def params(out_tree, n):
            return {"jvp": CustomJvpRule(self, arg_tree, static, traced, out_tree, leaf_arg)}
        outs, out_tree = bind_region(custom_jvp_call_p, region, [leaves[i] for i in traced],
                                     params, name=getattr(self.fun, "__name__", "custom_jvp"))
        return _tree.tree_unflatten(out_tree, outs)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)


def nondiff_nums(fun, nums, names):
    """The positions of a custom_jvp/custom_vjp function's nondiff arguments, given by
    position and by name (as jax's infer_argnums_and_argnames)."""
    nums = {nums} if isinstance(nums, int) else set(nums)
    if names:
        names = {names} if isinstance(names, str) else set(names)
        nums |= {i for i, p in enumerate(inspect.signature(fun).parameters.values())
                 if p.kind == p.POSITIONAL_OR_KEYWORD and p.name in names}
    return tuple(sorted(nums))


def resolve_kwargs(fun, args, kwargs, kind):
    """Positional arguments of a call of the `kind`-decorated `fun`, defaults filled in
    (as jax's resolve_kwargs)."""
    named = getattr(fun, "__name__", fun)
    if isinstance(fun, functools.partial):    # (an opaque signature, as jax's)
        fun = lambda *a, **k: None   # noqa: E731
    try:
        bound = inspect.signature(fun).bind(*args, **kwargs)
    except ValueError:      # (no signature: a builtin)
        if kwargs:
            raise
        return args
    except TypeError as e:
        raise ShardcTypeError(
            f"The input arguments to the {kind}-decorated function {named} could not be "
            f"resolved to positional-only arguments. Binding failed with the error:\n{e}"
        ) from e
    bound.apply_defaults()
    passed = [k for k in bound.kwargs if k in kwargs]
    if passed:
        raise ShardcTypeError("The following keyword arguments could not be resolved "
                              f"to positions: {', '.join(passed)}")
    return bound.args


def forward_attr(self, name):
    """A custom_* wrapper's other attributes are the wrapped function's (jax's
    forward_attr): a decorator stacked on another one reaches its def_vmap / defvjp."""
    fun = self.__dict__.get("fun")
    if fun is None or name.startswith("__"):
        raise AttributeError(name)
    return getattr(fun, name)
