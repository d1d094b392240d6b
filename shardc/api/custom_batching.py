"""jax.custom_batching: functions with a user-defined vmap rule.

Under a trace a call of a `custom_vmap` function is one `custom_vmap_call` op
(shardc.ops.custom_vmap) whose region is the function; its param, a `_Rule`, calls the
user's rule when vmap batches the op, and builds the rule's JVP when forward mode
differentiates it (as jax's custom_vmap_jvp). Outside any trace the function runs.
"""
from __future__ import annotations

import functools

from ..errors import ArgumentError, ShardcError, api_boundary
from ..trace import core
from ..transforms.custom_jvp import forward_attr, resolve_kwargs
from ..trace import pytree as _tree


class custom_vmap:
    """Customize how `jax.vmap` (shardc.vmap) batches a function, as
    jax.custom_batching.custom_vmap: `f.def_vmap(rule)` where
    rule(axis_size, in_batched, *args) -> (out, out_batched); a batched argument has
    its mapped dim first, `in_batched` and `out_batched` are pytrees of bools."""

    def __init__(self, fun):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.vmap_rule = None

    def __getattr__(self, name):
        return forward_attr(self, name)

    def def_vmap(self, vmap_rule):
        self.vmap_rule = vmap_rule
        return vmap_rule

    @api_boundary
    def __call__(self, *args, **kwargs):
        from ..ops.custom_vmap import custom_vmap_call_p
        from ..ops.region import bind_region
        args = resolve_kwargs(self.fun, args, kwargs, "custom_vmap")
        if not self.vmap_rule:
            raise AttributeError("No batching rule defined for custom_vmap function "
                                 f"{_name(self.fun)} using def_vmap.")
        if core.current_builder() is None:
            return self.fun(*args)
        leaves, arg_tree = _tree.tree_flatten(tuple(args))
        traced = tuple(i for i, x in enumerate(leaves) if core.is_tracer(x))
        static = tuple(None if core.is_tracer(x) else x for x in leaves)

        def region(*ts):
            full = list(static)
            for i, t in zip(traced, ts):
                full[i] = t
            flat, out_tree = _tree.tree_flatten(self.fun(*_tree.tree_unflatten(arg_tree, full)))
            return flat, out_tree

        def params(out_tree, n):
            return {"rule": _Rule(self, arg_tree, static, traced, out_tree)}
        outs, out_tree = bind_region(custom_vmap_call_p, region, [leaves[i] for i in traced],
                                     params, name=_name(self.fun))
        return _tree.tree_unflatten(out_tree, outs)

    def __get__(self, obj, objtype=None):
        return self if obj is None else functools.partial(self, obj)


def _name(f):
    return getattr(f, "__name__", type(f).__name__)


class _Rule:
    """The `rule` param of a custom_vmap_call: the user's rule and the pytrees around
    the op's operands (the traced leaves of the arguments, then captured values) and
    results."""
    __slots__ = ("fn", "arg_tree", "static", "traced", "out_tree")

    def __init__(self, fn, arg_tree, static, traced, out_tree):
        self.fn, self.arg_tree, self.static, self.traced = fn, arg_tree, static, traced
        self.out_tree = out_tree

    @property
    def num_args(self):
        return len(self.traced)

    def apply(self, size, flags, operands):
        """The user's rule on the batched operands: (flat outputs, which are batched)."""
        leaves, batched = list(self.static), [False] * len(self.static)
        for i, x, b in zip(self.traced, operands, flags):
            leaves[i], batched[i] = x, bool(b)
        args = _tree.tree_unflatten(self.arg_tree, leaves)
        in_batched = list(_tree.collapse(_tree.tree_unflatten(self.arg_tree, batched)))
        rule = self.fn.vmap_rule
        got = rule(size, in_batched, *args)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            raise ShardcError(f"custom_vmap rule {_name(rule)} must return a pair "
                              f"(outputs, out_batched), got {type(got).__name__}")
        out, out_batched = got
        flat, flat_b = flat_outputs(rule, self.out_tree, out, out_batched)
        from .numpy import asarray
        return [o if core.is_tracer(o) else asarray(o) for o in flat], flat_b

    def jvp(self, n, floats, float_out, closure_tangent):
        return _JvpRule(self, n, floats, float_out, closure_tangent)

    def __repr__(self):
        return f"<{_name(self.fn.fun)}>"


def flat_outputs(rule, out_tree, out, out_batched):
    """A rule's (out, out_batched) flattened, their structures checked as jax's."""
    flat, tree = _tree.tree_flatten(out)
    flat_b, tree_b = _tree.tree_flatten(out_batched)
    if tree != tree_b:
        raise ArgumentError(
            "structure of output value and output batching specification returned by "
            f"custom vmap rule ({_name(rule)}) do not match.\nOutput values: {tree}\n"
            f"Batching spec: {tree_b}")
    if tree != out_tree:
        raise ArgumentError(
            f"structure of output returned by custom vmap rule ({_name(rule)}) does not "
            f"match that of original custom-vmapped function.\nOriginal output: {out_tree}"
            f"\nRule output: {tree}")
    return flat, [bool(b) for b in flat_b]


class _JvpRule:
    """The rule of a custom_vmap_call's JVP (operands: the n primal operands, then the
    tangents of those at `floats`; results: the outputs, then the tangents of those at
    `float_out`): the JVP of the user's rule, primals and tangents batched alike."""
    __slots__ = ("inner", "n", "floats", "float_out", "closure_tangent")

    def __init__(self, inner, n, floats, float_out, closure_tangent):
        self.inner, self.n, self.floats = inner, n, floats
        self.float_out, self.closure_tangent = float_out, closure_tangent

    @property
    def num_args(self):
        return self.n + len(self.floats)

    def apply(self, size, flags, operands):
        from .grad import jvp
        from .numpy import broadcast_to
        if self.closure_tangent:
            raise ShardcError(
                f"custom_vmap function {self.inner!r} closes over a value being "
                "differentiated; its vmap rule cannot carry that tangent: pass the value "
                "as an argument")
        k = self.inner.num_args
        ps, ts = list(operands[:self.n]), list(operands[self.n:])
        pb, tb = list(flags[:self.n]), list(flags[self.n:])
        pairs = [(j, i) for j, i in enumerate(self.floats) if i < k]
        for j, i in pairs:         # a primal and its tangent batched alike
            if pb[i] != tb[j]:
                if pb[i]:
                    ts[j], tb[j] = broadcast_to(ts[j], (size, *ts[j].shape)), True
                else:
                    ps[i], pb[i] = broadcast_to(ps[i], (size, *ps[i].shape)), True
        got_b = []

        def primal(*xs):
            full = ps[:k]
            for (_, i), x in zip(pairs, xs):
                full[i] = x
            outs, ob = self.inner.apply(size, pb[:k], full)
            got_b[:] = ob
            return outs
        outs, touts = jvp(primal, tuple(ps[i] for _, i in pairs),
                          tuple(ts[j] for j, _ in pairs))
        return (list(outs) + [touts[j] for j in self.float_out],
                list(got_b) + [got_b[j] for j in self.float_out])

    def jvp(self, n, floats, float_out, closure_tangent):
        return _JvpRule(self, n, floats, float_out, closure_tangent)

    def __repr__(self):
        return f"<jvp{self.inner!r}>"


def sequential_vmap(f):
    """A custom_vmap whose rule maps `f` over the batch in a loop (lax.map), as
    jax.custom_batching.sequential_vmap: for functions with no batched form."""
    f = custom_vmap(f)

    @f.def_vmap
    def rule(axis_size, in_batched, *args):
        from .control import map as lax_map
        leaves, tree = _tree.tree_flatten(list(args))
        flags = _tree.tree_leaves(in_batched)
        mapped = [x for x, b in zip(leaves, flags) if b]

        def one(xs):
            it = iter(xs)
            return f(*_tree.tree_unflatten(tree, [next(it) if b else x
                                                  for x, b in zip(leaves, flags)]))
        out = lax_map(one, mapped)
        return out, _tree.tree_map(lambda _: True, out)
    return f


__all__ = ["custom_vmap", "sequential_vmap"]
