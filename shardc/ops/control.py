"""cond and while: control flow ops owning their bodies as regions (scan is in scan.py).

    %r = cond(%i, %a, %b) {                 // %i: i32[] branch index (already clamped)
    ^(%a: f32[4], %b: f32[4]):              // every branch takes every operand
      ...
      return %x
    ^(%a: f32[4], %b: f32[4]):
      ...
      return %y
    }
    %c = while(%init, %k1, %k2) {cond_nconsts=1, body_nconsts=1} {
    ^(%carry: f32[4], %k1: f32[]):          // the predicate: carries, its consts
      return %p                             // bool[]
    ^(%carry: f32[4], %k2: f32[4]):         // the body: carries, its consts
      return %carry2
    }

Each branch's block arguments, the operands and their results share shardings through
data-flow edges, so the branches agree on the op's result shardings; a while's init,
carry arguments, yielded carries and results share one. Lowered to `stablehlo.case`
and `stablehlo.while`.
"""
from __future__ import annotations

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.primitive import NO_FACTOR_RULE, PropKind, Trait
from ..ir.program import Aval, Lit, Value
from ..ir.rules import Edge, Flow
from ..trace import core
from . import lax as L
from .region import (add_region_op, carried, drop_results, host_of, lookup, reach,
                     region_results, same_type, trace_region, vma_of, widened)

_BOOL = Aval((), dtypes.bool_)


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


# ---------------------------------------------------------------- while

def _while_shape(*avals, cond_nconsts, body_nconsts, regions, masked=False):
    cond, body = regions
    n = len(avals) - cond_nconsts - body_nconsts
    carry = avals[:n]
    ck = avals[n:n + cond_nconsts]
    bk = avals[n + cond_nconsts:]
    if len(cond.args) != n + len(ck) or not all(map(same_type, cond.args, carry + ck)):
        raise ShardcError(f"while: the predicate's block arguments {list(cond.args)} do not "
                          f"match the carries and its consts {list(carry + ck)}")
    if len(cond.results) != 1 or not same_type(cond.results[0], _BOOL):
        raise ShardcError(f"while: the predicate yields {list(cond.results)}, not one bool[]")
    if len(body.args) != n + len(bk) or not all(map(same_type, body.args, carry + bk)):
        raise ShardcError(f"while: the body's block arguments {list(body.args)} do not "
                          f"match the carries and its consts {list(carry + bk)}")
    if len(body.results) != n or not all(map(same_type, body.results, carry)):
        raise ShardcError(f"while: the body yields {list(body.results)}, the carries are "
                          f"{list(carry)}")
    return tuple(body.results)     # the body's weak types, as jax's while


def _while_lower(ctx, *operands, cond_nconsts, body_nconsts, masked=False):
    from ..lower.emit import tensor_type
    op = ctx.ir_op
    cond, body = op.regions
    n = len(operands) - cond_nconsts - body_nconsts
    types = [tensor_type(a) for a in ctx.in_avals]

    def region(r, consts_at, yields_carry):
        def fn(cx, *args):
            names = {id(v): a for v, a in zip(r.inputs[:n], args[:n])}
            names.update({id(v): args[consts_at + j] for j, v in enumerate(r.inputs[n:])})
            cx.lines.extend(cx.lowering.body(r, names, cx.indent))
            outs = region_results(cx, r, names)
            return outs + list(args[n:]) if yields_carry else outs
        return fn
    res = ctx.op("stablehlo.while", list(operands), types, types, sharding=False,
                 regions=[ctx.region(ctx.in_avals, region(cond, n, False)),
                          ctx.region(ctx.in_avals, region(body, n + cond_nconsts, True))])
    return res[:n]


def _while_flow(op):
    cond, body = op.regions
    p = op.params
    n = len(op.inputs) - p["cond_nconsts"] - p["body_nconsts"]
    ins, outs, loc = op.inputs, op.outputs, op.loc
    ck = ins[n:n + p["cond_nconsts"]]
    bk = ins[n + p["cond_nconsts"]:]

    def e(o, i, role):
        return Edge(o, i, loc=loc, role=role)
    return ([e(ins[i], cond.inputs[i], f"carry {i}") for i in range(n)] +
            [e(ins[i], body.inputs[i], f"carry {i}") for i in range(n)] +
            [e(outs[i], body.inputs[i], f"carry {i}") for i in range(n)] +
            [e(outs[i], cond.inputs[i], f"carry {i}") for i in range(n)] +
            [e(outs[i], body.outputs[i], f"carry {i}") for i in range(n)] +
            [e(o, i, f"const {k}") for k, (o, i) in enumerate(zip(ck, cond.inputs[n:]))] +
            [e(o, i, f"const {len(ck) + k}")
             for k, (o, i) in enumerate(zip(bk, body.inputs[n:]))])


while_p = core.Primitive("while", shape_rule=_while_shape, sharding_rule=NO_FACTOR_RULE,
                         lower=_while_lower, prop_kind=PropKind.NONE, multiple_results=True,
                         num_regions=2, traits=Trait.LOOP)
while_p.data_flow = _while_flow


def _while_flows(op):
    """As Shardy's while edges: a carry's result meets its init and its body's yield,
    and holds both regions' block arguments. A constant is a carry the body passes
    through once lowered, which the canonicalizer before Shardy turns back into the
    value itself: its block argument is the operand."""
    cond, body = op.regions
    p = op.params
    n = len(op.inputs) - p["cond_nconsts"] - p["body_nconsts"]
    ins, loc = op.inputs, op.loc
    consts = list(zip(ins[n:], [*cond.inputs[n:], *body.inputs[n:]]))
    return ([Flow(o, (ins[i], body.outputs[i]), (cond.inputs[i], body.inputs[i]), loc,
                  f"carry {i}") for i, o in enumerate(op.outputs)] +
            [Flow(o, (), (i,), loc, f"const {k}") for k, (o, i) in enumerate(consts)])


while_p.flows = _while_flows


def bind_while(cond_fn, body_fn, init, loc=None, masked=False):
    """Trace cond_fn(*carries) -> bool[] and body_fn(*carries) -> carries into a while op
    of the current trace; returns the final carries.

    masked: the body leaves unchanged any carry the predicate stops (a vmapped loop's
    body selects per example), so vmapping the loop again needs no select of its own:
    that select would OR the inner examples' predicates in every iteration."""
    mc = core.current_builder().manual
    avals = [core.aval_of(x) for x in init]
    vmas = [vma_of(x) for x in init] if mc is not None else None
    host = host_of(init)
    while True:
        cond, ck, _ = trace_region(avals, lambda *a: ([cond_fn(*a)], None), "cond", vmas,
                                   host)
        body, bk, _ = trace_region(avals, lambda *a: (list(body_fn(*a)), None), "body",
                                   vmas, host)
        if mc is None or not mc.check_vma:
            break
        # (checked bodies) a carry varies as the body makes it vary and, unless the
        # body passes it through, as the predicate (each device runs its own number of
        # steps): the body is traced again on carries typed so (a psum in it must sum
        # them; unchecked, a psum always sums, and a pvary would psum gradients)
        pred = mc.vma_of(cond.outputs[0])
        grown = [v | mc.vma_of(o) | (frozenset() if o is i else pred)
                 for v, o, i in zip(vmas, body.outputs, body.inputs)]
        if grown == vmas:
            break
        vmas = grown
    out_vmas = None
    if mc is not None and mc.check_vma:
        init = widened(init, vmas, mc.mesh)
        out_vmas = vmas
    elif mc is not None:
        out_vmas = [mc.vma_of(r) for r in body.outputs]
    params = {"cond_nconsts": len(ck), "body_nconsts": len(bk)}
    if masked:
        params["masked"] = True
    out_avals = [r.aval for r in body.outputs]
    return add_region_op(while_p, list(init) + ck + bk, params, [cond, body], out_avals, loc,
                         out_vmas)


def _while_rebind(op, ins, evaluate):
    cond, body = op.regions
    p = op.params
    n = len(ins) - p["cond_nconsts"] - p["body_nconsts"]
    ck, bk = ins[n:n + p["cond_nconsts"]], ins[n + p["cond_nconsts"]:]
    return bind_while(lambda *a: evaluate(cond, list(a) + list(ck))[0],
                      lambda *a: evaluate(body, list(a) + list(bk)), ins[:n], op.loc,
                      p.get("masked", False))


while_p.rebind = _while_rebind


def _while_vjp(ctx, cts, *ins, cond_nconsts, body_nconsts, masked=False):
    """A while loop has no reverse mode, but as jax's (symbolic zeros, forwarded
    loop-invariant carries, dead tangent carries) it needs none when no tangent has to
    go around the loop into a result with a cotangent: then the results' cotangents
    reach only the inits of carries the body passes through unchanged."""
    body = ctx.op.regions[1]
    n = len(ins) - cond_nconsts - body_nconsts
    args, outs = body.inputs, body.outputs
    active = ctx.active or [True] * len(ins)
    consts = {id(args[n + j]) for j in range(body_nconsts) if active[n + cond_nconsts + j]}
    act = carried(body, n, [i for i in range(n) if active[i] and
                            dtypes.is_inexact(args[i].aval.dtype)], consts)
    feeds = [{i for i in range(n) if type(outs[i]) is not Lit and id(outs[i]) in
              reach(body, {id(args[j])})} for j in range(n)]
    need = {i for i in range(n) if cts[i] is not None}
    while True:     # carries whose tangent a result with a cotangent reads
        more = need | {j for j in range(n) if feeds[j] & need}
        if more == need:
            break
        need = more
    if any(outs[i] is not args[i] for i in act & need):
        raise ShardcError(
            "Reverse-mode differentiation does not work for lax.while_loop or "
            "lax.fori_loop with dynamic start/stop values. Try using lax.scan, or using "
            "fori_loop with static start/stop.", ctx.op.loc)
    return [cts[i] if i < n and outs[i] is args[i] else None for i in range(len(ins))]


_while_vjp.keeps_none = True
while_p.vjp = _while_vjp
while_p.reversible = False


def _while_jvp(ctx, primals, tangents, *, cond_nconsts, body_nconsts, masked=False):
    """A while loop over (carries, their tangents); the body's tangents by forward mode."""
    cond, body = ctx.op.regions
    n = len(primals) - cond_nconsts - body_nconsts
    init, ck, bk = primals[:n], primals[n:n + cond_nconsts], primals[n + cond_nconsts:]
    tbk = tangents[n + cond_nconsts:]
    # carries a tangent reaches in some trip (the others stay symbolic zeros, as jax's)
    ft = sorted(carried(body, n, [i for i in range(n) if tangents[i] is not None and
                                  dtypes.is_inexact(core.aval_of(init[i]).dtype)],
                        {id(body.inputs[n + j]) for j, t in enumerate(tbk) if t is not None}))
    t_init = [_fit(tangents[i], init[i]) for i in ft]

    def c_fn(*args):
        return ctx.eval_ops(cond, list(args[:n]) + list(ck))[0]

    def b_fn(*args):
        tc = dict(zip(ft, args[n:]))
        outs, touts = ctx.jvp_region(body, list(args[:n]) + list(bk),
                                     [tc.get(i) for i in range(n)] + list(tbk))
        return list(outs) + [_fit(touts[i], outs[i]) for i in ft]
    # a select's tangent is selected too: a masked body stays masked
    res = bind_while(c_fn, b_fn, list(init) + t_init, ctx.op.loc, masked)
    touts = [None] * n
    for k, i in enumerate(ft):
        touts[i] = res[n + k]
    return res[:n], touts


def _fit(t, like):
    """A tangent t (None: zero) with the dtype of `like`."""
    a = core.aval_of(like)
    if t is None:
        return L.zeros(a.shape, a.dtype)
    return t if core.aval_of(t).dtype == a.dtype else L.convert_element_type(t, a.dtype)


while_p.jvp = _while_jvp


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
