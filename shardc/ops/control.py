"""cond: a control flow op owning its branches as regions (while is in while_loop.py,
scan in scan.py).

    %r = cond(%i, %a, %b) {                 // %i: i32[] branch index (already clamped)
    ^(%a: f32[4], %b: f32[4]):              // every branch takes every operand
      ...
      return %x
    ^(%a: f32[4], %b: f32[4]):
      ...
      return %y
    }

Each branch's block arguments, the operands and their results share shardings through
data-flow edges, so the branches agree on the op's result shardings. Lowered to
`stablehlo.case`.
"""
from __future__ import annotations

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.primitive import NO_FACTOR_RULE, PropKind, Trait
from ..ir.program import Aval, Value
from ..ir.rules import Edge, Flow
from ..trace import core
from . import lax as L
from .region import (add_region_op, drop_results, host_of, lookup, region_results,
                     same_type, trace_region, vma_of)


# ---------------------------------------------------------------- cond

def _cond_shape(index, *avals, regions):
    if index.shape != () or index.dtype != dtypes.int32:
        raise ShardcError(f"cond: the branch index must be i32[], got {index}")
    first = regions[0].results
    for k, r in enumerate(regions):
        if len(r.args) != len(avals) or not all(map(same_type, r.args, avals)):
            raise ShardcError(f"cond: branch {k}'s block arguments {list(r.args)} do not "
                              f"match the operands {list(avals)}")
        if len(r.results) != len(first) or not all(map(same_type, r.results, first)):
            raise ShardcError(f"cond: branch {k} yields {list(r.results)}, branch 0 "
                              f"{list(first)}")
    return tuple(first)      # branch 0's weak types, as jax's cond


def _cond_lower(ctx, index, *operands):
    from ..lower.emit import tensor_type
    op = ctx.ir_op
    low = ctx.lowering
    bodies = []
    for r in op.regions:
        names = {id(v): n for v, n in zip(r.inputs, operands)}
        saved, ctx.lines, indent = ctx.lines, [], ctx.indent
        ctx.indent = indent + "    "
        # The branches' ops carry no sharding of their own (constraints stay): XLA fails
        # to import an annotated op in a branch that reads a value from outside the case
        # ("tile assignment ... different than the input rank"), and its Shardy sets
        # per-op shardings aside before propagating anyway. (Own templates: theirs lack
        # the shardings.)
        mode, templates = low.sources_only, low.templates
        low.sources_only, low.templates = True, {}
        try:
            ctx.lines.extend(low.body(r, names, ctx.indent))
            rets = region_results(ctx, r, names)
            inner = ctx.lines
        finally:
            ctx.lines, ctx.indent = saved, indent
            low.sources_only, low.templates = mode, templates
        types = [tensor_type(v.aval) for v in r.outputs]
        inner.append(f'{indent}    "stablehlo.return"({", ".join(rets)}) : '
                     f'({", ".join(types)}) -> ()')
        bodies.append("{\n" + "\n".join(inner) + f"\n{indent}}}")
    # (as on a while, XLA misreads a sharding on a case of several results: it pairs a
    # result with the next one's sharding, so Shardy settles them from the branches)
    return ctx.op("stablehlo.case", [index], [tensor_type(ctx.in_avals[0])],
                  [tensor_type(a) for a in ctx.out_avals], regions=bodies,
                  sharding=False if len(ctx.out_avals) > 1 else None)


def _cond_flow(op):
    loc = op.loc
    edges = []
    for r in op.regions:
        edges += [Edge(o, i, loc=loc, role=f"operand {k}")
                  for k, (o, i) in enumerate(zip(op.inputs[1:], r.inputs))]
        edges += [Edge(o, i, loc=loc, role=f"result {k}")
                  for k, (o, i) in enumerate(zip(op.outputs, r.outputs))]
    return edges


cond_p = core.Primitive("cond", shape_rule=_cond_shape, sharding_rule=NO_FACTOR_RULE,
                        lower=_cond_lower, prop_kind=PropKind.NONE, multiple_results=True,
                        num_regions=-1, traits=Trait.BRANCHES)
cond_p.data_flow = _cond_flow


def _cond_flows(op):
    """As Shardy sees the lowered case: a branch's block argument is the operand it
    closes over, and each result meets every branch's yield at once."""
    loc = op.loc
    return ([Flow(o, (), [r.inputs[k] for r in op.regions], loc, f"operand {k}")
             for k, o in enumerate(op.inputs[1:])] +
            [Flow(o, [r.outputs[k] for r in op.regions], (), loc, f"result {k}")
             for k, o in enumerate(op.outputs)])


cond_p.flows = _cond_flows


def bind_cond(index, branches, operands, loc=None, names=None):
    """Trace each branch fn(*operands) -> flat outputs into a cond op of the current
    trace on an i32[] index; values any branch closes over become operands of all."""
    outer = core.current_builder()
    mc = outer.manual
    avals = [core.aval_of(x) for x in operands]
    vmas = [vma_of(x) for x in operands] if mc is not None else None
    traced = []
    for k, fn in enumerate(branches):
        name = names[k] if names else f"branch{k}"
        traced.append(trace_region(avals, lambda *a, fn=fn: (fn(*a), None), name, vmas,
                                   host_of(operands)))
    caps, index_of = [], {}
    for _, cs, _ in traced:
        for t in cs:
            key = id(outer.to_value(t))
            if key not in index_of:
                index_of[key] = len(caps)
                caps.append(t)
    regions = []
    for region, cs, _ in traced:
        own = {id(outer.to_value(t)): v for t, v in zip(cs, region.inputs[len(avals):])}
        extra = []
        for t in caps:
            v = own.get(id(outer.to_value(t)))
            if v is None:
                v = Value(core.aval_of(t))
                if mc is not None:
                    mc.vma[id(v)] = vma_of(t)
            extra.append(v)
        region.inputs = region.inputs[:len(avals)] + extra
        regions.append(region)
    out_avals = list(_cond_shape(_I32, *avals, *[core.aval_of(t) for t in caps],
                                 regions=[_rtype(r) for r in regions]))
    out_vmas = None
    if mc is not None:
        # a result varies as any branch's does, and as the index, which picks the branch
        # on each device, unless every branch passes the same operand through
        chosen = vma_of(index)
        out_vmas = [frozenset().union(*[mc.vma_of(r.outputs[j]) for r in regions]) |
                    (frozenset() if _passed_through(regions, j) else chosen)
                    for j in range(len(out_avals))]
    return add_region_op(cond_p, [index, *operands, *caps], {}, regions, out_avals, loc,
                         out_vmas)


def _passed_through(regions, j):
    """Whether every region returns, as its result j, the same one of its arguments."""
    slots = {next((k for k, v in enumerate(r.inputs) if v is r.outputs[j]), None)
             for r in regions}
    return len(slots) == 1 and None not in slots


_I32 = Aval((), dtypes.int32)


def _rtype(r):
    from ..ir.primitive import RegionType
    return RegionType(tuple(v.aval for v in r.inputs), tuple(v.aval for v in r.outputs))


def _cond_rebind(op, ins, evaluate):
    return bind_cond(ins[0], [lambda *a, r=r: evaluate(r, a) for r in op.regions],
                     ins[1:], op.loc, [r.name for r in op.regions])


cond_p.rebind = _cond_rebind


def _cond_vjp(ctx, cts, index, *ops):
    """A cond on the same index over the branches' backward parts. Each forward branch
    is rebuilt in place to also yield its residuals, and zeros for the other
    branches' (jax's _cond_partial_eval)."""
    op = ctx.op
    n_out = len(op.outputs)
    mask = [c is not None for c in cts]
    active = ctx.active[1:] if ctx.active is not None else None     # (after the index)
    splits = [ctx.split_region(r, mask, active=active) for r in op.regions]
    inputs_of = [{id(v): i for i, v in enumerate(sp.inputs)} for sp in splits]
    # per branch: the residuals it computes (read operands are passed as they are)
    own = [[v for v in sp.saved if id(v) not in ins] for sp, ins in zip(splits, inputs_of)]
    layout = [(k, v) for k, vs in enumerate(own) for v in vs]

    def forward(k):
        sp = splits[k]

        def fn(*args):
            env = {id(v): a for v, a in zip(sp.inputs, args)}
            ctx.eval_list(sp.fwd, env)
            outs = [lookup(env, v) for v in sp.outputs]
            for j, v in layout:
                outs.append(env[id(v)] if j == k else L.zeros(v.aval.shape, v.aval.dtype))
            return outs
        return fn
    new = bind_cond(index, [forward(k) for k in range(len(splits))], ops, op.loc,
                    [r.name for r in op.regions])
    cur = core.current_builder()
    fresh = cur.program.ops.pop()      # its regions and results move into `op`
    op.regions = fresh.regions
    op.outputs = list(op.outputs) + fresh.outputs[n_out:]
    op.sig = None
    res = new[n_out:]
    if cur is ctx.builder:
        op.inputs = fresh.inputs
    else:
        # the backward pass is traced into a region (a vjp function returned from jit):
        # `op` keeps its operands, and its new results are captured from its trace
        if len(fresh.inputs) != len(op.inputs):
            raise ShardcError("internal: a cond's forward part reads a value from outside "
                              "while its gradient is traced into a region", op.loc)
        ctx.builder.host.update(v for v in fresh.outputs[n_out:] if v in cur.host)
        res = [core.Tracer(ctx.builder, v) for v in fresh.outputs[n_out:]]
    floats = [i for i, x in enumerate(ops) if dtypes.is_inexact(core.aval_of(x).dtype)]
    given = [i for i in range(n_out) if splits[0].ct_in[i] is not None]

    def backward(k):
        sp = splits[k]

        def fn(*args):
            a = iter(args)
            env = {id(sp.ct_in[i]): next(a) for i in given}
            for j, v in layout:
                t = next(a)
                if j == k:
                    env[id(v)] = t
            for v in sp.inputs:
                env[id(v)] = next(a)
            env.update(sp.captured)
            ctx.eval_list(sp.recompute + sp.bwd, env)
            out = []
            for i in floats:
                g, av = sp.ct_out[i], sp.inputs[i].aval
                g = lookup(env, g)
                if g is None:
                    g = L.zeros(av.shape, av.dtype)
                elif not core.is_tracer(g):
                    g = L.full(av.shape, g.value, av.dtype)
                elif g.value.aval.dtype != av.dtype:
                    g = L.convert_element_type(g, av.dtype)
                out.append(g)
            return out
        return fn
    got = bind_cond(index, [backward(k) for k in range(len(splits))],
                    [cts[i] for i in given] + res + list(ops), op.loc,
                    [r.name + "_bwd" for r in op.regions])
    out = [None] * (1 + len(ops))
    for i, g in zip(floats, got):
        out[1 + i] = g
    return out


_cond_vjp.keeps_none = True
cond_p.vjp = _cond_vjp


# results nothing reads (residuals of a gradient not taken) are dropped
cond_p.drop_results = drop_results(lambda op: 0)


def _cond_jvp(ctx, primals, tangents):
    """A cond whose branches also yield their outputs' tangents (forward mode)."""
    index, ops, tops = primals[0], primals[1:], tangents[1:]
    nf = []

    def branch(r):
        def fn(*args):
            outs, touts = ctx.jvp_region(r, list(args), list(tops))
            if not nf:
                nf.extend(j for j, o in enumerate(outs) if dtypes.is_inexact(core.aval_of(o).dtype))
            return list(outs) + [_fit(touts[j], outs[j]) for j in nf]
        return fn
    res = bind_cond(index, [branch(r) for r in ctx.op.regions], list(ops), ctx.op.loc,
                    [r.name for r in ctx.op.regions])
    n = len(ctx.op.outputs)
    touts = [None] * n
    for k, j in enumerate(nf):
        touts[j] = res[n + k]
    return res[:n], touts


cond_p.jvp = _cond_jvp


def _fit(t, like):
    """A tangent t (None: zero) with the dtype of `like`."""
    a = core.aval_of(like)
    if t is None:
        return L.zeros(a.shape, a.dtype)
    return t if core.aval_of(t).dtype == a.dtype else L.convert_element_type(t, a.dtype)
