"""Tracing functions into regions, and the rules region ops share.

A region is a closed Program: what its body uses from outside becomes an extra block
argument, fed by an extra operand of the op (after the ones the caller passes). Inside
a shard_map body, a region shares the body's variance bookkeeping, so collectives in
it are checked as outside.
"""
from __future__ import annotations

from ..errors import user_loc
from ..ir import dtypes
from ..ir.primitive import nondiff
from ..ir.program import Lit
from ..ir.rules import Edge
from ..trace import core


def trace_region(avals, fn, name="region", vmas=None, host=None):
    """Trace fn(*block arguments of types `avals`) into a region of the current trace.

    fn returns (flat outputs, extra). Returns (region, captured outer tracers, extra):
    the captured values are the region's last block arguments, in order. `vmas` gives
    the manual axes each block argument varies over (inside shard_map bodies); `host`,
    whether each is in pinned host memory (ops.memory). The region's meta["host_out"]
    says which of its results are."""
    from .manual_region import body_value
    outer = core.current_builder()
    body = core.Builder(name, parent=outer)
    mc = body.manual = outer.manual
    ins = []
    for i, a in enumerate(avals):
        t = body.new_input(a)
        if mc is not None:
            mc.vma[id(t.value)] = vmas[i] if vmas is not None else frozenset()
        if host is not None and host[i]:
            body.host.add(t.value)
        ins.append(t)
    with core.trace_context(body):
        outs, extra = fn(*ins)
        region = body.program
        region.outputs = [body_value(body, x) for x in outs]
    caps = []
    for t, v in body.captured.values():     # (Builder._capture recorded their variance)
        region.inputs.append(v)
        caps.append(t)
    if body.host:
        region.meta["host_out"] = [v in body.host for v in region.outputs]
    return region, caps, extra


def host_of(xs):
    """Whether each of `xs` (tracers or constants of the current trace) is in pinned
    host memory; None when none is (the common case)."""
    b = core.current_builder()
    if not b.host:
        return None
    return [core.is_tracer(x) and x.builder is b and x.value in b.host for x in xs]


def placement_of(xs):
    """(vmas, host) of trace_region for block arguments standing for `xs` (tracers or
    constants of the current trace): the manual axes each varies over inside a shard_map
    body, and whether each is in pinned host memory (None when it does not apply)."""
    vmas = [vma_of(x) for x in xs] if core.current_builder().manual is not None else None
    return vmas, host_of(xs)


def vma_of(x):
    """The manual axes a value of the current trace varies over (none outside bodies)."""
    b = core.current_builder()
    mc = b.manual
    if mc is None or not core.is_tracer(x):
        return frozenset()
    return mc.vma_of(b.to_value(x))


def widened(xs, vmas, mesh):
    """`xs` each marked varying over the axes of `vmas` it does not vary over yet (loop
    carries typed as their loop makes them vary)."""
    from .pvary import pvary_over
    out = []
    for x, v in zip(xs, vmas):
        more = v - vma_of(x)
        out.append(pvary_over(x, more, mesh) if more else x)
    return out


def add_region_op(prim, operands, params, regions, out_avals, loc=None, out_vmas=None):
    """Append an op owning `regions` to the current trace; returns its result tracers."""
    outer = core.current_builder()
    mc = outer.manual
    if mc is None and core.folds(operands):    # jax.ensure_compile_time_eval, constants
        return list(core.run_region_now(prim, list(operands), params, regions,
                                        list(out_avals), loc or user_loc()))
    vals = outer.add(prim, [outer.to_value(x) for x in operands], params, list(out_avals),
                     loc or user_loc(), regions=regions)
    if mc is not None:
        for i, v in enumerate(vals):
            mc.vma[id(v)] = out_vmas[i] if out_vmas is not None else frozenset()
    return [core.Tracer(outer, v) for v in vals]


def bind_region(prim, f, args, params, loc=None, name="region"):
    """Trace f on fresh block arguments like `args` (tracers or values of the current
    trace) into the one region of a `prim` op of the current trace; f returns
    (flat outputs, extra) and params may be a function of `extra` and the region's
    output count. Values f closes over become extra operands (after `args`). Returns
    (result tracers, extra)."""
    mc = core.current_builder().manual
    region, caps, extra = trace_region([core.aval_of(x) for x in args], f, name,
                                       *placement_of(args))
    if callable(params):
        params = params(extra, len(region.outputs))
    out_vmas = [mc.vma_of(r) for r in region.outputs] if mc is not None else None
    return add_region_op(prim, list(args) + caps, params, [region],
                         [v.aval for v in region.outputs], loc, out_vmas), extra


def region_results(ctx, region, names):
    """The lowered names of what `region` yields (a literal becomes a constant)."""
    return [names[id(v)] if type(v) is not Lit else ctx.constant(v.value, v.aval)
            for v in region.outputs]


def lower_inline(ctx, *operands, **params):
    """A one-region op lowered as its region inlined: its ops emitted in place, block
    arguments named by the operands; the results are the names of what it yields."""
    region = ctx.ir_op.regions[0]
    names = {id(v): n for v, n in zip(region.inputs, operands)}
    ctx.lines.extend(ctx.lowering.body(region, names, ctx.indent))
    return region_results(ctx, region, names)


def identity_flow(op, roles=False):
    """Operands and block arguments, region results and results: one sharding each
    (`roles`: named "operand i" / "result i" for explanations)."""
    (r,) = op.regions
    return ([Edge(o, i, (), None, op.loc, role=f"operand {k}" if roles else None)
             for k, (o, i) in enumerate(zip(op.inputs, r.inputs))] +
            [Edge(o, i, (), None, op.loc, role=f"result {k}" if roles else None)
             for k, (o, i) in enumerate(zip(op.outputs, r.outputs))])


def lookup(env, v):
    """The tracer (or literal) standing for value `v` of a split region (see
    transforms.partial), None for None."""
    if v is None or type(v) is Lit:
        return v
    return env[id(v)]


def same_type(a, b) -> bool:
    """Equal shape and dtype (weak types may differ, as jax lets carries do)."""
    return a.shape == b.shape and a.dtype == b.dtype


def drop_results(keep_first):
    """A Primitive.drop_results rule: results nothing reads are dropped with what the
    regions yield for them (and dead-code elimination then drops the ops computing
    those), all but the first keep_first(op)."""
    def drop(op, live):
        n = keep_first(op)
        keep = [i for i, v in enumerate(op.outputs) if i < n or v in live]
        if len(keep) < len(op.outputs):
            for r in op.regions:
                r.outputs = [r.outputs[i] for i in keep]
            op.outputs = [op.outputs[i] for i in keep]
            op.sig = None
    return drop


def reach(region, seeds):
    """Ids of the values of `region` that depend differentiably on the values in `seeds`
    (ids): through ops with a gradient, to inexact results."""
    live = set(seeds)
    for op in region.ops:
        if op.prim.vjp is not nondiff and any(
                type(v) is not Lit and id(v) in live for v in op.inputs):
            live.update(id(v) for v in op.outputs if dtypes.is_inexact(v.aval.dtype))
    return live


def carried(body, n, active, seeds):
    """The first `n` carries of a loop `body` a tangent reaches in some trip: those in
    `active`, and those the body yields from one of them or from `seeds` (ids)."""
    args, outs = body.inputs, body.outputs
    act = set(active)
    while True:
        live = reach(body, seeds | {id(args[i]) for i in act})
        more = act | {i for i in range(n) if type(outs[i]) is not Lit and id(outs[i]) in live}
        if more == act:
            return act
        act = more
