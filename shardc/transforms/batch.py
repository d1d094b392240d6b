"""Batching (shardc.vmap): a traced per-example program re-traced on batched operands.

The walk goes over the program's ops in order, each value either batched (its mapped
dim first) or not. An op none of whose operands is batched, and which names no vmapped
axis, is re-traced as it is; any other op goes through its primitive's batching rule
(`prim.batch`, registered with the op's other rules; the vocabulary is
shardc.ops.batching). Ops with regions batch their regions through `ctx.batch_region`.
"""
from __future__ import annotations

import contextlib

from ..errors import ShardcError
from ..ir.program import Lit
from ..ops.batching import BatchCtx, bcast
from ..trace import core, types


def batch_program(program, args, batched, ctx: BatchCtx):
    """Re-trace `program` in the current builder on `args` (batched ones with the
    mapped dim first); returns (outputs, which outputs are batched)."""
    env = {id(v): (a, b) for v, a, b in zip(program.inputs, args, batched)}
    bld = core.current_builder()
    explicit = bld is not None and bool(types.explicit_axes_of(bld))
    partial = {}    # explicit mode: re-traced values that are a gradient's partial sums
    for op in program.ops:
        ins, bs = [], []
        for v in op.inputs:
            if type(v) is Lit:
                ins.append(v)
                bs.append(False)
            else:
                a, b = env[id(v)]
                ins.append(a)
                bs.append(b)
        # an op traced untyped in explicit mode (an update's inner ops, say, whose
        # result the update then types) is re-traced untyped
        ranked = [v for v in op.outputs if v.aval.shape]     # (rank 0 carries no type)
        untyped = explicit and ranked and all(v.aval.ts is None for v in ranked)
        first = len(bld.program.ops) if bld is not None else 0
        with types.lenient() if untyped else contextlib.nullcontext():
            if any(bs) or _names_axis(op, ctx):
                outs, obs = _apply_rule(op, ins, bs, ctx)
            else:
                outs, obs = _unbatched(op, ins), [False] * len(op.outputs)
        if explicit and untyped:
            _mark_partial(op, ins, bld.program.ops[first:], partial)
        for v, o, b in zip(op.outputs, outs, obs):
            if v.sharding is not None and op.prim.source_of is not None and not b:
                o.value.sharding = v.sharding
            env[id(v)] = (o, b)
    outs = []
    for v in program.outputs:
        outs.append((v, False) if type(v) is Lit else env[id(v)])
    return [o for o, _ in outs], [b for _, b in outs]


def _mark_partial(op, ins, new_ops, partial):
    """Explicit mode: an untyped op of a gradient rule whose operands were partial sums
    (ur_rules.mark_cotangent_ops gave them unreduced shardings), re-traced: its new ops
    are typed so again (a broadcast of an unbatched cotangent too), or XLA would reduce
    the partial sums, which the gradient's retyping then counts once per device."""
    from ..trace.ur_rules import mark_cotangent_ops
    found = False
    for v, a in zip(op.inputs, ins):
        if type(v) is Lit or type(a) is Lit:
            continue
        u = v.sharding.unreduced if v.sharding is not None and v.aval.ts is None else ()
        if u and core.is_tracer(a):
            partial.setdefault(id(a.value), frozenset(u))
        t = a.value.aval.ts if core.is_tracer(a) else None
        found = found or id(getattr(a, "value", None)) in partial or \
            bool(t is not None and t.unreduced)
    if found:
        mark_cotangent_ops(new_ops, partial, set())


def _names_axis(op, ctx):
    axes = op.params.get("axes") if op.params else None
    named = ctx.axis_name is not None and isinstance(axes, tuple) and ctx.axis_name in axes
    if named and ctx.split:
        raise ShardcError(f"{op.prim.name} over the vmapped axis {ctx.axis_name!r} inside a "
                          "shard_map whose manual axes split it (spmd_axis_name): each device "
                          "holds part of the mapped dim; apply it outside the shard_map",
                          op.loc)
    return named


def _unbatched(op, ins):
    if op.regions:
        from .ad import rebind_op
        return rebind_op(op, ins)
    out = op.prim.bind(*ins, **op.params)
    return out if op.prim.multiple_results else [out]


def _apply_rule(op, ins, bs, ctx):
    rule = op.prim.batch
    if rule is None:
        raise ShardcError(f"vmap: {op.prim.name} has no batching rule", op.loc)
    saved, ctx.op = ctx.op, op
    try:
        outs, obs = rule(ctx, ins, tuple(bs), **op.params)
    finally:
        ctx.op = saved
    if op.prim.multiple_results:
        return list(outs), list(obs)
    return [outs], [obs]


def region_out_batched(region, batched, ctx: BatchCtx):
    """Which outputs of `region` come out batched for operands batched as `batched`:
    the region traced on scratch arguments in a builder that is then dropped."""
    outer = core.current_builder()
    scratch = core.Builder("scratch", parent=outer)
    scratch.manual = outer.manual
    with core.trace_context(scratch):
        args = []
        for v, b in zip(region.inputs, batched):
            a = v.aval
            args.append(scratch.new_input(a.update(shape=(ctx.size, *a.shape)) if b else a))
        _, obs = batch_program(region, args, batched, ctx)
    return obs


def make_ctx(size, axis_name=None, spmd_axis_name=None, split=False):
    """The context of one vmap; `split`: inside a shard_map that splits the mapped dim
    over its devices (each has part of it: a collective over the vmapped axis would
    need the devices too, so naming it is an error)."""
    ctx = BatchCtx(size, axis_name, spmd_axis_name)
    ctx.split = split

    def batch_region(region, args, batched, force=None):
        """Re-trace `region` batched on `args`; `force[i]`: output i must come out
        batched (broadcast if it is not)."""
        outs, obs = batch_program(region, args, batched, ctx)
        if force is not None:
            outs = [bcast(ctx, o, b) if f else o for o, b, f in zip(outs, obs, force)]
            obs = [b or f for b, f in zip(obs, force)]
        return outs, obs
    ctx.batch_region = batch_region
    ctx.out_batched = lambda region, batched: region_out_batched(region, batched, ctx)
    # inside a shard_map whose manual axes split the mapped dim, each device has a part:
    # a collective over the vmapped axis would then need the devices too
    ctx.resized = lambda n: make_ctx(n, axis_name, spmd_axis_name, split=True)
    return ctx
