"""Splitting a region's gradient into a forward and a backward part (partial evaluation).

The gradient rules of ops with bodies (scan, cond, checkpoint) need the backward pass of
a body as a body of its own, fed by values the forward body saves: `split_region` traces
the body and its backward pass into one joint program, then cuts it where the backward
ops begin. The forward values the backward part reads are the residuals; a remat policy
may mark some of them to be recomputed instead, whose ops then move to the backward
part (jax's partial_eval_jaxpr_nounits with a policy).
"""
from __future__ import annotations

from contextlib import nullcontext

from ..errors import Loc, at_loc
from ..ir import dtypes
from ..ir.primitive import PropKind
from ..ir.program import Lit
from ..ops.region import lookup  # noqa: F401  (re-exported)
from ..trace import core, types
from ..trace.core import Tracer
from ..trace.ur_rules import mark_cotangent_ops


class Split:
    """A region's joint forward/backward program, cut in two.

    inputs: the body's block arguments (fresh values); outputs: what it yields (values
    of `fwd` or inputs); ct_in: a cotangent input per output (None where there is
    none); fwd: the forward ops, re-computing the body; recompute: forward ops the
    policy did not save, to be re-run before `bwd`; bwd: the backward ops; ct_out: the
    cotangent of each input (a value, a literal or None); saved: the residuals, values
    of `fwd` or inputs that `recompute` and `bwd` read; offload: {id(saved value):
    (src, dst)} for those the policy saves in another memory; captured: {id(value):
    outer tracer} for values from outside the region the ops read (a custom_vjp's bwd
    closing over one): an env for `bwd` starts from it."""
    __slots__ = ("inputs", "outputs", "ct_in", "fwd", "recompute", "bwd", "ct_out", "saved",
                 "offload", "captured")


def _line(loc):
    """An op's source line without its named scopes (those open now apply)."""
    return loc if loc is None or loc.scope is None else Loc(loc.file, loc.line, loc.lib)


def _untyped(op) -> bool:
    """Whether explicit mode traced `op` untyped (an op whose out_sharding= typed its
    result next, a dot's with unreduced=): re-traced so too, or its type is ambiguous."""
    ranked = [v for v in op.outputs if v.aval.shape]
    return bool(ranked) and all(v.aval.ts is None for v in ranked) and any(
        not isinstance(v, Lit) and v.aval.ts is not None for v in op.inputs)


def eval_list(ops, env):
    """Re-trace `ops` in the current builder, reading operands from `env` ({id(value):
    tracer}), which it extends with their results. Each keeps its source line (a
    recomputed op is the user's op at that line, not the gradient's call)."""
    from .ad import rebind_op
    for op in ops:
        ins = [v if isinstance(v, Lit) else env[id(v)] for v in op.inputs]
        b = core.current_builder()
        first = len(b.program.ops)
        with at_loc(_line(op.loc)), types.lenient() if _untyped(op) else nullcontext():
            if op.regions:
                outs = rebind_op(op, ins)
            else:
                out = op.prim.bind(*ins, **op.params)
                outs = out if op.prim.multiple_results else [out]
        for v, o in zip(op.outputs, outs):
            if v.sharding is not None and op.prim.source_of is not None:
                o.value.sharding = v.sharding
            env[id(v)] = o
        if not op.regions and _marked(op) and all(
                type(o) is Tracer and o.value.aval.ts is None for o in outs):
            # a gradient's partial sums (ad.py): typed so again where its operands still are
            mark_cotangent_ops(b.program.ops[first:], {}, set())
    return env


def _marked(op):
    """Whether the untyped results of `op` were typed partial sums (ur_rules)."""
    return any(v.aval.ts is None and v.sharding is not None and v.sharding.unreduced
               for v in op.outputs)


def split_region(region, ct_mask, policy=None, active=None, level=None):
    """The Split of `region`'s gradient. ct_mask[i]: output i gets a cotangent (only
    float outputs can). policy(prim, *avals, **params) -> bool says which forward ops'
    results may be saved (None: all); the body's inputs always may. active[i]: input i
    depends on what is differentiated (None: all may); ops reading only inactive
    inputs are not differentiated (a while_loop on constants). `level`: the
    differentiation whose rule this is (see ad._claim)."""
    from .ad import backward, eval_ops
    outer = core.current_builder()
    b = core.Builder("joint", parent=outer)
    mc = b.manual = outer.manual
    with core.trace_context(b):
        ins = [b.new_input(v.aval) for v in region.inputs]
        if mc is not None:
            for t, v in zip(ins, region.inputs):
                mc.vma[id(t.value)] = mc.vma_of(v)
        outs = eval_ops(region, ins)
        n_fwd = len(b.program.ops)
        out_vals = [b.to_value(o) for o in outs]
        cts = []
        for v, m in zip(out_vals, ct_mask):
            ct = None
            if m and dtypes.is_inexact(v.aval.dtype):
                ct = Tracer(b, core.Value(v.aval.strong()))
                if mc is not None:
                    mc.vma[id(ct.value)] = mc.vma_of(v) if not isinstance(v, Lit) \
                        else frozenset()
            cts.append(ct)
        in_vals = [t.value for t in ins]
        act = None if active is None else [v for v, a in zip(in_vals, active) if a]
        got = backward(b.program.ops[:n_fwd], b, out_vals, cts, in_vals, level, active=act)
    ops = b.program.ops
    sp = Split()
    sp.inputs, sp.outputs = in_vals, out_vals
    sp.captured = {id(v): t for t, v in b.captured.values()}
    sp.ct_in = [c.value if c is not None else None for c in cts]
    sp.ct_out = [g if g is None or isinstance(g, Lit) else b.to_value(g) for g in got]
    fwd, bwd = ops[:n_fwd], ops[n_fwd:]
    producer = {id(v): op for op in fwd for v in op.outputs}
    needed = _reads(bwd, sp.ct_out, producer, in_vals)
    recompute, saved, sp.offload = _by_policy(needed, producer, policy)
    sp.fwd, sp.bwd, sp.saved = fwd, bwd, saved
    sp.recompute = [op for op in fwd if id(op) in recompute]
    return sp


def _reads(ops, extra, producer, inputs):
    """The forward values (results of `producer`'s ops, or inputs) that `ops` and the
    values `extra` read, in first-use order."""
    fwd_ids = set(producer) | {id(v) for v in inputs}
    seen, out = set(), []
    for v in [x for op in ops for x in op.inputs] + list(extra):
        if v is None or isinstance(v, Lit) or id(v) not in fwd_ids or id(v) in seen:
            continue
        seen.add(id(v))
        out.append(v)
    return out


def _by_policy(needed, producer, policy):
    """Which needed forward values are saved, and which ops must be re-run (by id).
    Without a policy everything is saved but what is cheaper to recompute than to keep
    (a broadcast of a smaller value, a constant): in a scan each residual is stacked
    once per iteration, so saving x/rms's [b, d] broadcast of the [b, 1] rms, or the
    broadcast of a layer's norm gain, costs length * b * d elements for nothing."""
    recompute, saved, seen, offload = set(), [], set(), {}
    stack = list(reversed(needed))
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        op = producer.get(id(v))
        got = None if op is None or policy is None else _decision(policy, op)
        if op is None or (not _cheap(op) if policy is None else got):
            saved.append(v)
            if isinstance(got, tuple):      # saved in another memory: (src, dst)
                offload[id(v)] = got
            continue
        if id(op) not in recompute:
            recompute.add(id(op))
            stack.extend(x for x in reversed(op.inputs) if not isinstance(x, Lit))
    return recompute, saved, offload


def _decision(policy, op):
    """A policy's answer for `op`'s results: saved (True), recomputed (False), or saved
    in another memory ((src, dst) kinds, an Offloadable)."""
    got = policy(op.prim, *[v.aval for v in op.inputs], **op.params)
    if isinstance(got, tuple) and len(got) == 2:
        return (got[0], got[1])
    kind = type(got).__name__       # jax's answers (pe.Saveable, pe.Recompute) as well
    if kind in ("SaveableType", "RecomputeType"):
        return kind == "SaveableType"
    return bool(got) and got != "recompute"


def _cheap(op):
    """An op whose result is cheaper to recompute than to save: a broadcast of a smaller
    operand, or an op reading only literals (a constant)."""
    if op.regions or op.prim.effectful or len(op.outputs) != 1:
        return False
    ins = [v for v in op.inputs if not isinstance(v, Lit)]
    if not ins:
        return True
    return op.prim.prop_kind is PropKind.BROADCAST and \
        ins[0].aval.size < op.outputs[0].aval.size
