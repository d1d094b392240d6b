"""custom_vjp_call: a call with a user-defined VJP, as an op owning its forward region.

The region is the traced `fwd`; it yields the call's outputs and then the residuals
(those that are traced values), and the op's results are the region's results. The
residuals are results too, so the gradient rule hands them to the user's `bwd` without
recomputing `fwd`; the backward pass is traced before any pass runs, so dead-code
elimination then drops the residuals it did not use. Lowering inlines the region.
`bwd` and the pytree bookkeeping are one opaque param.
"""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError, ShardcError
from ..ir import dtypes
from ..ir.primitive import NO_FACTOR_RULE, PropKind
from ..trace import core
from ..trace.core import Primitive
from . import lax as L
from .region import bind_region, drop_results, identity_flow, lower_inline
from ..trace import pytree as _tree


class CustomVjpRule:
    """The param saying how to differentiate one custom_vjp call (jax keeps `bwd` as a
    param of custom_vjp_call as well): the function, how the call's operands map back
    to its arguments, and the residuals that are not traced values."""
    __slots__ = ("fn", "arg_tree", "arg_static", "traced", "out_tree", "res_tree",
                 "res_static", "level")

    def __init__(self, fn, arg_tree, arg_static, traced, out_tree, res_tree, res_static):
        self.fn, self.arg_tree, self.arg_static, self.traced = fn, arg_tree, arg_static, traced
        self.out_tree, self.res_tree, self.res_static = out_tree, res_tree, res_static
        self.level = None    # the differentiation whose rule this is (transforms.ad)

    def fresh(self):
        """A copy, not yet claimed by any differentiation."""
        return CustomVjpRule(self.fn, self.arg_tree, self.arg_static, self.traced,
                             self.out_tree, self.res_tree, self.res_static)

    def __repr__(self):
        bwd = self.fn.bwd
        return f"<{getattr(bwd, '__name__', type(bwd).__name__)}>"


def _shape(*avals, bwd, num_out, regions):
    (body,) = regions
    if tuple(body.args) != tuple(avals):
        raise ShardcError(f"custom_vjp_call: operands {list(avals)} do not match the region's "
                          f"block arguments {list(body.args)}")
    if not 0 <= num_out <= len(body.results):
        raise ShardcError(f"custom_vjp_call: num_out={num_out} but the region yields "
                          f"{len(body.results)} values")
    return tuple(body.results)


custom_vjp_call_p = Primitive("custom_vjp_call", shape_rule=_shape, lower=lower_inline,
                              sharding_rule=NO_FACTOR_RULE, prop_kind=PropKind.NONE,
                              multiple_results=True, num_regions=1)
custom_vjp_call_p.data_flow = identity_flow


def _vjp(ctx, cts, *ins, bwd, num_out):
    """The user's bwd on the residuals (results of the op) and the outputs' cotangents;
    values the region closed over (operands past the arguments') get none. Cotangents
    of residuals (grad of grad: the backward pass used them) flow back through the
    region by ordinary AD of fwd, recomputed (as jax differentiates fwd)."""
    if len(ctx.outs) - num_out != sum(s is _TRACED for s in bwd.res_static):
        raise ShardcError("internal: differentiating a custom_vjp_call whose residuals "
                          "dead-code elimination dropped", ctx.op.loc)
    if bwd.level is None:       # (in a region's body: the first to differentiate it)
        bwd.level = ctx.level
    if bwd.level is not None and bwd.level is not ctx.level:
        # an outer differentiation (grad of grad): fwd's ops, as ordinary ones
        in_cts = [None] * len(ins)
        _through_fwd(ctx, cts, ins, [k for k, c in enumerate(cts) if c is not None], in_cts)
        return in_cts
    n = len(bwd.traced)
    for k in range(n, len(ins)):
        if (ctx.active is None or ctx.active[k]) and dtypes.is_inexact(L.aval(ins[k]).dtype):
            raise ShardcError(
                "Detected differentiation of a custom_vjp function with respect to a "
                "closed-over value. That isn't supported because the custom VJP rule only "
                "specifies how to differentiate the custom_vjp function with respect to "
                "explicit input parameters. Pass the closed-over value into the custom_vjp "
                "function as an argument, and adapt the custom_vjp fwd and bwd rules.",
                ctx.op.loc)
    fn = bwd.fn
    leaves = list(bwd.arg_static)
    for i, t in zip(bwd.traced, ins):
        leaves[i] = t
    args = _tree.tree_unflatten(bwd.arg_tree, leaves)
    res = iter(ctx.outs[num_out:])
    res = _tree.tree_unflatten(bwd.res_tree, [next(res) if s is _TRACED else s
                                              for s in bwd.res_static])
    # bwd sees zeros for outputs nothing differentiates, as jax's
    avals = [v.aval for v in ctx.op.outputs]
    out_cts = [c if c is not None or not dtypes.is_inexact(a.dtype) else
               L.zeros(a.shape, a.dtype) for c, a in zip(cts[:num_out], avals)]
    ct = _tree.tree_unflatten(bwd.out_tree, out_cts)
    nondiff = fn.nondiff_argnums
    got = fn.bwd(*[args[i] for i in nondiff], res, ct)
    if not isinstance(got, tuple):
        raise ShardcError("custom_vjp bwd must return a tuple with one cotangent per "
                          "differentiable argument", ctx.op.loc)
    diff = [i for i in range(len(args)) if i not in nondiff]
    if len(got) != len(diff):
        raise ShardcError(f"custom_vjp bwd returned {len(got)} cotangents for "
                          f"{len(diff)} arguments", ctx.op.loc)
    starts, n = [], 0
    for a in args:
        starts.append(n)
        n += len(_tree.tree_leaves(a))
    leaf_ct = [None] * n
    for i, g in zip(diff, got):
        k = len(_tree.tree_leaves(args[i]))
        gl = _with_zeros(g, args[i])
        if gl is None or len(gl) != k:
            raise ShardcError(
                f"custom_vjp bwd: the cotangent of argument {diff.index(i)} has the "
                f"structure {_tree.tree_structure(g, is_leaf=_is_none)}, but the argument "
                f"has {_tree.tree_structure(args[i])} (None stands for zeros of a leaf or "
                "subtree)", ctx.op.loc)
        for a, c in zip(_tree.tree_leaves(args[i]), gl):
            if c is not None and np.shape(a) != np.shape(c):
                raise ArgumentError(
                    "Custom VJP bwd rule must produce an output with the same type as the "
                    f"args tuple of the primal function, but at output[{diff.index(i)}] the "
                    f"bwd rule produced an output of shape {np.shape(c)} corresponding to "
                    f"an input of shape {np.shape(a)}, so the shapes do not match",
                    ctx.op.loc)
        leaf_ct[starts[i]:starts[i] + k] = gl
    in_cts = [leaf_ct[i] for i in bwd.traced] + [None] * (len(ins) - len(bwd.traced))
    res = [k for k in range(num_out, len(cts)) if cts[k] is not None]
    if res:
        _through_fwd(ctx, cts, ins, res, in_cts)
    return in_cts


def _is_none(v):
    return v is None


def _with_zeros(g, arg):
    """The cotangent g of a pytree argument as one entry per leaf of `arg` (None for a
    zero), where a None in g stands for a whole leaf or subtree (jax's rule); None if
    the structures differ."""
    if g is None:
        return [None] * len(_tree.tree_leaves(arg))
    try:
        subs = _tree.flatten_up_to(_tree.tree_structure(g, is_leaf=_is_none), arg)
    except (ValueError, TypeError):
        return None
    out = []
    for c, sub in zip(_tree.tree_leaves(g, is_leaf=_is_none), subs):
        out += [None] * len(_tree.tree_leaves(sub)) if c is None else [c]
    return out


def _through_fwd(ctx, cts, ins, res, in_cts):
    """Add to in_cts the cotangents of the operands from those of residuals `res`."""
    region = ctx.op.regions[0]
    diff = [i for i, x in enumerate(ins)
            if core.is_tracer(x) and dtypes.is_inexact(x.value.aval.dtype)]
    if not diff:
        return

    def fwd(*ws):
        full = list(ins)
        for i, w in zip(diff, ws):
            full[i] = w
        outs = ctx.eval_ops(region, full)
        return tuple(outs[k] for k in res)
    _, _, fn = ctx.trace_vjp(fwd, tuple(ins[i] for i in diff))
    for i, g in zip(diff, fn(tuple(cts[k] for k in res))):
        in_cts[i] = g if in_cts[i] is None else L.add(in_cts[i], L.convert_element_type(
            g, L.aval(in_cts[i]).dtype))


_TRACED = object()     # a residual leaf that is a result of the op
custom_vjp_call_p.vjp = _vjp
_vjp.keeps_none = True     # tells residuals nothing differentiates from zero ones


# residuals nothing uses: the backward pass is traced before any pass runs, so what it
# did not use it never will
custom_vjp_call_p.drop_results = drop_results(lambda op: op.params["num_out"])


def _claim(op, level):
    rule = op.params["bwd"]
    if rule.level is None:
        rule.level = level


custom_vjp_call_p.claim = _claim


# ---------------------------------------------------------------- batching (vmap)

class _BatchedBwd:
    """A custom_vjp's bwd for its batched call: the user's bwd, traced on one example's
    types and batched as the call's operands, residuals and cotangents are (every
    result of the batched call is batched, so the residuals and cotangents all are)."""

    def __init__(self, fn, rule: CustomVjpRule, batched, ctx):
        self.fn, self.ctx = fn, ctx
        self.nondiff_argnums = fn.nondiff_argnums
        n = len(rule.arg_static)
        where = _tree.tree_unflatten(rule.arg_tree, list(range(n)))
        flag = {i: batched[k] for k, i in enumerate(rule.traced)}
        # per leaf of the nondiff args: batched or not
        self.nondiff_flags = [flag.get(i, False) for a in self.nondiff_argnums
                              for i in _tree.tree_leaves(where[a])]
        # per leaf of the differentiable args: a cotangent of an unbatched one is summed
        self.diff_flags = [[flag.get(i, False) for i in _tree.tree_leaves(where[a])]
                           for a in range(len(where)) if a not in self.nondiff_argnums]
        self.res_flags = [s is _TRACED for s in rule.res_static]

    def bwd(self, *args):
        from .region import placement_of, trace_region
        ctx = self.ctx
        nondiff, res, ct = args[:-2], args[-2], args[-1]
        leaves, tree = _tree.tree_flatten((nondiff, res, ct))
        n_nd, n_res = len(self.nondiff_flags), len(self.res_flags)
        flags = self.nondiff_flags + self.res_flags + [True] * (len(leaves) - n_nd - n_res)
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
            nd, r, c = _tree.tree_unflatten(tree, full)
            got = self.fn.bwd(*nd, r, c)
            flat, t = _tree.tree_flatten(got, is_leaf=lambda v: v is None)
            shape.append((t, [v is None for v in flat]))
            return [v for v in flat if v is not None], None
        region, caps, _ = trace_region(avals, per_example, "bwd",
                                       *placement_of([leaves[i] for i in dyn]))
        outs, _ = ctx.batch_region(region, [leaves[i] for i in dyn] + caps,
                                   [flags[i] for i in dyn] + [False] * len(caps),
                                   force=[True] * len(region.outputs))
        t, nones = shape[0]
        it = iter(outs)
        got = _tree.tree_unflatten(t, [None if n else next(it) for n in nones])
        if not isinstance(got, tuple) or len(got) != len(self.diff_flags):
            return got      # the call's rule reports the mismatch
        out = []
        for g, flags in zip(got, self.diff_flags):
            leaves, gt = _tree.tree_flatten(g, is_leaf=lambda v: v is None)
            if len(leaves) == len(flags):
                leaves = [v if v is None or b else L.reduce_sum(v, (0,))
                          for v, b in zip(leaves, flags)]
            out.append(_tree.tree_unflatten(gt, leaves))
        return tuple(out)


def _batch(ctx, args, batched, *, bwd, num_out):
    """vmap: the forward region batched (all its results, so the residuals and the
    cotangents bwd gets are batched), with a bwd that is the user's, batched."""
    (r,) = ctx.op.regions
    rule = bwd.fresh()
    rule.fn = _BatchedBwd(bwd.fn, bwd, batched, ctx)
    rule.level = bwd.level      # (a batched first-order gradient stays claimed)
    n = len(args)

    def body(*xs):
        flags = list(batched) + [False] * (len(xs) - n)
        return ctx.batch_region(r, list(xs), flags, force=[True] * len(r.outputs))[0], None
    outs, _ = bind_region(custom_vjp_call_p, body, list(args), {"bwd": rule, "num_out": num_out},
                          ctx.op.loc, r.name)
    return outs, [True] * len(outs)


custom_vjp_call_p.batch = _batch
