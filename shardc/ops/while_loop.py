"""while: a loop op owning its predicate and body as regions.

    %c = while(%init, %k1, %k2) {cond_nconsts=1, body_nconsts=1} {
    ^(%carry: f32[4], %k1: f32[]):          // the predicate: carries, its consts
      return %p                             // bool[]
    ^(%carry: f32[4], %k2: f32[4]):         // the body: carries, its consts
      return %carry2
    }

A while's init, carry arguments, yielded carries and results share one sharding through
a data-flow edge. Lowered to `stablehlo.while`.
"""
from __future__ import annotations

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.primitive import NO_FACTOR_RULE, PropKind, Trait
from ..ir.program import Aval, Lit
from ..ir.rules import Edge, Flow
from ..trace import core
from .control import _fit
from .region import (add_region_op, carried, host_of, reach, region_results,
                     same_type, trace_region, vma_of, widened)

_BOOL = Aval((), dtypes.bool_)


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
            if not yields_carry:
                return outs
            # (constants of partial sums pass through held, or XLA reduces them)
            return outs + [cx.held(a, v, sh) for a, v, sh in
                           zip(args[n:], ctx.in_avals[n:], ctx.in_shardings[n:])]
        return fn
    res = ctx.op("stablehlo.while", list(operands), types, types, sharding=False,
                 carried=ctx.in_shardings,
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


while_p.jvp = _while_jvp
