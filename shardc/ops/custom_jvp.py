"""custom_jvp_call: a call with a user-defined JVP, as an op owning its primal region.

The region is the traced function itself, so propagation and lowering see its ops
(lowering inlines it). The user's rule is one opaque param. Forward mode applies the
rule; reverse mode (grad, vjp) uses its transpose, as jax's linearize-then-transpose:
the rule's tangent output is linear in the tangents, so the cotangents of the inputs
are the VJP of that output with respect to the tangents, traced by ordinary AD over
the rule's ops. Those ops are ordinary IR, so grad of grad differentiates the rule.
"""
from __future__ import annotations

import jax
import numpy as np
from jax.core import ShapedArray
from jax.custom_derivatives import SymbolicZero

from ..errors import ShardcError, ShardcTypeError
from ..ir import dtypes
from ..ir.primitive import NO_FACTOR_RULE, PropKind
from ..ir.program import Lit
from ..trace import core
from ..trace.core import Primitive
from . import lax as L
from .region import identity_flow, lower_inline
from ..trace import pytree as _tree


class CustomJvpRule:
    """The param saying how to differentiate one custom_jvp call: the function object,
    the pytree of its arguments (a list), their leaves that are not operands (None
    where they are), the operand index of each traced leaf, and the output tree."""
    __slots__ = ("fn", "arg_tree", "static", "traced", "out_tree", "leaf_arg", "level")

    def __init__(self, fn, arg_tree, static, traced, out_tree, leaf_arg):
        self.fn, self.arg_tree, self.static, self.traced = fn, arg_tree, static, traced
        self.out_tree, self.leaf_arg = out_tree, leaf_arg    # leaf -> its argument
        # the differentiation that applies the rule (transforms.ad._claim); an outer
        # one differentiates the rule's primal computation as ordinary ops, as jax's
        self.level = None

    def __repr__(self):
        jvp = self.fn.jvp
        return f"<{getattr(jvp, '__name__', type(jvp).__name__)}>"

    def leaves(self, ins):
        leaves = list(self.static)
        for i, t in zip(self.traced, ins):
            leaves[i] = t
        return leaves


def _shape(*avals, jvp, regions):
    (body,) = regions
    if tuple(body.args) != tuple(avals):
        raise ShardcError(f"custom_jvp_call: operands {list(avals)} do not match the region's "
                          f"block arguments {list(body.args)}")
    return tuple(body.results)


custom_jvp_call_p = Primitive("custom_jvp_call", shape_rule=_shape, lower=lower_inline,
                              sharding_rule=NO_FACTOR_RULE, prop_kind=PropKind.NONE,
                              multiple_results=True, num_regions=1)
custom_jvp_call_p.data_flow = identity_flow


def _float(x):
    return dtypes.is_inexact(core.aval_of(x).dtype)    # complex values have tangents too


def _zero_tangent(x, symbolic):
    """The tangent of a value nothing differentiates: zeros, float0 for non-floats (as
    jax passes to a rule without symbolic zeros), or a SymbolicZero (with them)."""
    if symbolic:
        a = core.aval_of(x)
        return SymbolicZero(ShapedArray(a.shape, a.dtype, weak_type=a.weak).to_tangent_aval())
    if core.is_tracer(x) or isinstance(x, (np.ndarray, np.generic, jax.Array, Lit)):
        a = core.aval_of(x)     # (a Lit: a literal operand of a translated jaxpr)
        if dtypes.is_inexact(a.dtype):
            return L.zeros(a.shape, a.dtype)
        return np.zeros(a.shape, jax.dtypes.float0)
    if isinstance(x, float):
        return 0.0
    return np.zeros(np.shape(x), jax.dtypes.float0)


def apply_rule(rule, loc, ins, tangents, out_avals):
    """The user's rule on the call's operands `ins` with tangents (None: zero) per
    operand: (primal outputs, tangent outputs), flat, checked as jax checks them."""
    fn = rule.fn
    leaves = rule.leaves(ins)
    tans = [None] * len(leaves)
    for i, t in zip(rule.traced, tangents):
        tans[i] = t
    nondiff = fn.nondiff_argnums
    tans = [t if t is not None or rule.leaf_arg[i] in nondiff else
            _zero_tangent(x, fn.symbolic_zeros) for i, (t, x) in enumerate(zip(tans, leaves))]
    args = _tree.tree_unflatten(rule.arg_tree, leaves)
    tan_args = _tree.tree_unflatten(rule.arg_tree, tans)
    diff = [i for i in range(len(args)) if i not in nondiff]
    got = fn.jvp(*[args[i] for i in nondiff], tuple(args[i] for i in diff),
                 tuple(tan_args[i] for i in diff))
    return check_rule_output(fn, got, rule.out_tree, out_avals, loc)


def _name(f):
    return getattr(f, "__name__", type(f).__name__)


def check_rule_output(fn, got, out_tree, out_avals, loc):
    jname, pname = _name(fn.jvp), _name(fn.fun)
    if not isinstance(got, (list, tuple)) or len(got) != 2:
        raise ShardcTypeError(f"Custom JVP rule {jname} for function {pname} must produce a "
                              "pair (list or tuple of length two) representing primal and "
                              f"tangent outputs, but got {got}.", loc)
    p, t = got
    p_leaves, p_tree = _tree.tree_flatten(p)
    t_leaves, t_tree = _tree.tree_flatten(t)
    if p_tree != t_tree:
        raise ShardcTypeError(f"Custom JVP rule {jname} for function {pname} must produce "
                              "primal and tangent outputs with equal container (pytree) "
                              f"structures, but got {p_tree} and {t_tree} respectively.", loc)
    if p_tree != out_tree:
        raise ShardcTypeError(f"Custom JVP rule {jname} for function {pname} must produce a "
                              "primal output of the same container (pytree) structure as the "
                              f"output of {pname}: got {p_tree}, expected {out_tree}.", loc)
    for k, (pl, tl, want) in enumerate(zip(p_leaves, t_leaves, out_avals)):
        if isinstance(tl, SymbolicZero):    # (a rule with symbolic zeros may return them)
            tl = t_leaves[k] = L.zeros(tl.aval.shape, tl.aval.dtype) \
                if tl.aval.dtype != jax.dtypes.float0 else L.zeros(want.shape, want.dtype)
        pa = core.aval_of(pl)
        if pa.shape != want.shape or pa.dtype != want.dtype:
            raise ShardcTypeError(
                f"Custom JVP rule {jname} for function {pname} must produce a primal output "
                f"with the shapes/dtypes of {pname}'s output: got {pa.strong()}, expected "
                f"{want.strong()}.", loc)
        if not dtypes.is_inexact(want.dtype):
            t_leaves[k] = None     # (jax's float0: no tangent)
            continue
        ta = core.aval_of(tl)
        if ta.shape != want.shape or ta.dtype != want.dtype:
            raise ShardcTypeError(
                "Custom JVP rule must produce primal and tangent outputs with corresponding "
                f"shapes and dtypes. Expected {want.strong()} (tangent type of "
                f"{want.strong()}) but got {ta.strong()}.", loc)
    return p_leaves, t_leaves


def _check_closure(ctx, ins, rule):
    """A value the function closes over is an operand past its arguments: jax's rule
    says nothing about how to differentiate it."""
    n = len(rule.traced)
    for k in range(n, len(ins)):
        if (ctx.active is None or ctx.active[k]) and _float(ins[k]):
            raise ShardcError(
                f"Detected differentiation of a custom_jvp function ({_name(rule.fn.fun)}) "
                "with respect to a closed-over value. That isn't supported because the custom "
                "JVP rule only specifies how to differentiate the custom_jvp function with "
                "respect to explicit input parameters. Pass the value as an argument "
                "instead.", ctx.op.loc)


def _vjp(ctx, cts, *ins, jvp):
    """The transpose of the rule's tangent map: the VJP, with respect to the tangents,
    of the rule's tangent output (linear in the tangents, so at any point); operands
    of nondiff arguments and non-floats get none."""
    rule = jvp
    if rule.level is None:
        rule.level = ctx.level
    if rule.level is not None and rule.level is not ctx.level:
        return _through_rule_primal(ctx, cts, ins, rule)
    _check_closure(ctx, ins, rule)
    n = len(rule.traced)
    nondiff = rule.fn.nondiff_argnums
    wrt = [k for k, i in enumerate(rule.traced)
           if rule.leaf_arg[i] not in nondiff and _float(ins[k])
           and (ctx.active is None or ctx.active[k])]
    in_cts = [None] * len(ins)
    live = [k for k, c in enumerate(cts) if c is not None]
    if not wrt or not live:
        return in_cts
    avals = [v.aval for v in ctx.op.outputs]

    def tangent_map(*ts):
        tangents = [None] * n
        for k, t in zip(wrt, ts):
            tangents[k] = t
        _, t_out = apply_rule(rule, ctx.op.loc, list(ins[:n]), tangents, avals)
        return [t_out[k] for k in live]    # (float outputs only: others get no ct)
    # (at tangents equal to the primals: any point does, and these vary over a
    # shard_map's manual axes as the primals do)
    _, _, fn = ctx.trace_vjp(tangent_map, tuple(ins[k] for k in wrt))
    got = fn([L.convert_element_type(cts[k], avals[k].dtype) for k in live])
    for k, g in zip(wrt, got):
        in_cts[k] = g
    return in_cts


def _through_rule_primal(ctx, cts, ins, rule):
    """An outer differentiation (grad of grad): jax's inner one computed the outputs by
    the rule, so this one differentiates the rule's primal outputs as ordinary ops (a
    straight-through round(x) has derivative 0 here)."""
    n = len(rule.traced)
    in_cts = [None] * len(ins)
    nondiff = rule.fn.nondiff_argnums       # (constants to every level, as jax's)
    wrt = [k for k, i in enumerate(rule.traced)
           if rule.leaf_arg[i] not in nondiff and _float(ins[k])
           and (ctx.active is None or ctx.active[k])]
    live = [k for k, c in enumerate(cts) if c is not None]
    if not live:
        return in_cts
    # the rule reads what the function closes over from its Python closure, not the
    # operands: its derivative there is not this trace's to take
    _check_closure(ctx, ins, rule)
    if not wrt:
        return in_cts
    avals = [v.aval for v in ctx.op.outputs]

    def primal(*ws):
        full = list(ins[:n])
        for k, w in zip(wrt, ws):
            full[k] = w
        p_out, _ = apply_rule(rule, ctx.op.loc, full, [None] * n, avals)
        return [p_out[k] for k in live]
    _, _, fn = ctx.trace_vjp(primal, tuple(ins[k] for k in wrt))
    for k, g in zip(wrt, fn([cts[k] for k in live])):
        in_cts[k] = g
    return in_cts


def _claim(op, level):
    rule = op.params["jvp"]
    if rule.level is None:
        rule.level = level


_vjp.keeps_none = True
custom_jvp_call_p.vjp = _vjp
custom_jvp_call_p.claim = _claim


def _jvp(ctx, primals, tangents, *, jvp):
    """Forward mode (the primal function holds a while loop): the user's rule itself."""
    n = len(jvp.traced)
    if any(t is not None and _float(p) for p, t in zip(primals[n:], tangents[n:])):
        raise ShardcError(f"Detected differentiation of a custom_jvp function "
                          f"({_name(jvp.fn.fun)}) with respect to a closed-over value.",
                          ctx.op.loc)
    return apply_rule(jvp, ctx.op.loc, list(primals[:n]), list(tangents[:n]),
                      [v.aval for v in ctx.op.outputs])


custom_jvp_call_p.jvp = _jvp


# ---------------------------------------------------------------- batching (vmap)

class _BatchedJvp:
    """A custom_jvp's rule for its batched call: the user's rule, traced on one
    example's types and batched as the call's operands are (a tangent as its primal);
    all it returns is batched, as all the batched call's results are."""

    def __init__(self, fn, rule: CustomJvpRule, batched, ctx):
        self.fn, self.ctx = fn, ctx
        self.fun, self.nondiff_argnums = fn.fun, fn.nondiff_argnums
        self.symbolic_zeros = fn.symbolic_zeros
        where = _tree.tree_unflatten(rule.arg_tree, list(range(len(rule.static))))
        flag = {i: batched[k] for k, i in enumerate(rule.traced)}
        self.nondiff_flags = [flag.get(i, False) for a in self.nondiff_argnums
                              for i in _tree.tree_leaves(where[a])]
        self.diff_flags = [flag.get(i, False) for a in range(len(where))
                           if a not in self.nondiff_argnums
                           for i in _tree.tree_leaves(where[a])]

    def jvp(self, *args):
        from .region import placement_of, trace_region
        nondiff, primals, tangents = args[:-2], args[-2], args[-1]
        leaves, tree = _tree.tree_flatten((nondiff, primals, tangents))
        flags = self.nondiff_flags + self.diff_flags + self.diff_flags
        if len(flags) != len(leaves):
            raise ShardcError("internal: a batched custom_jvp rule got arguments of another "
                              "structure than its call's")
        leaves = [_one_example(x) if f and not core.is_tracer(x) else x
                  for x, f in zip(leaves, flags)]
        dyn = [i for i, x in enumerate(leaves) if core.is_tracer(x)]
        avals = []
        for i in dyn:
            a = core.aval_of(leaves[i])
            avals.append(a.update(shape=a.shape[1:]) if flags[i] else a)
        shape = []

        def per_example(*xs):
            full = list(leaves)
            for i, x in zip(dyn, xs):
                full[i] = x
            nd, p, t = _tree.tree_unflatten(tree, full)
            got = self.fn.jvp(*nd, p, t)
            flat, td = _tree.tree_flatten(got)
            flat = [L.zeros(v.aval.shape, v.aval.dtype) if isinstance(v, SymbolicZero) else v
                    for v in flat]
            shape.append(td)
            return flat, None
        region, caps, _ = trace_region(avals, per_example, "jvp",
                                       *placement_of([leaves[i] for i in dyn]))
        outs, _ = self.ctx.batch_region(region, [leaves[i] for i in dyn] + caps,
                                        [flags[i] for i in dyn] + [False] * len(caps),
                                        force=[True] * len(region.outputs))
        return _tree.tree_unflatten(shape[0], list(outs))


def _one_example(x):
    """A batched non-traced tangent (a symbolic or float0 zero) for one example."""
    if isinstance(x, SymbolicZero):
        a = x.aval
        return SymbolicZero(a.update(shape=a.shape[1:]))
    if isinstance(x, np.ndarray):
        return np.zeros(x.shape[1:], x.dtype)
    return x


def _batch(ctx, args, batched, *, jvp):
    """vmap: the primal region batched (all its results), with a rule that is the
    user's, batched."""
    from .region import bind_region
    (r,) = ctx.op.regions
    rule = CustomJvpRule(_BatchedJvp(jvp.fn, jvp, batched, ctx), jvp.arg_tree, jvp.static,
                         jvp.traced, jvp.out_tree, jvp.leaf_arg)
    rule.level = jvp.level
    n = len(args)

    def body(*xs):
        flags = list(batched) + [False] * (len(xs) - n)
        return ctx.batch_region(r, list(xs), flags, force=[True] * len(r.outputs))[0], None
    outs, _ = bind_region(custom_jvp_call_p, body, list(args), {"jvp": rule}, ctx.op.loc,
                          r.name)
    return outs, [True] * len(outs)


custom_jvp_call_p.batch = _batch
