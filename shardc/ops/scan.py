"""scan: a loop over the leading dim of its xs, carrying values from step to step.

    %c, %ys = scan(%init, %xs, %k) {num_carry=1, num_xs=1, length=8, reverse=False, unroll=1} {
    ^(%carry: f32[4], %x: f32[4], %k: f32[4]):   // carries, one slice of each xs, consts
      ...
      return %carry2, %y                         // carries, then one slice of each ys
    }

The body's block arguments are the carries, a slice of each xs and the values it closes
over (consts); it yields the carries and a slice of each ys, stacked into the results.
Shardings flow through data-flow edges: init, carry argument, yielded carry and result
carry share one; xs and ys share theirs with their slices except the stacked dim.
Lowered to `stablehlo.while` over (counter, carries, ys buffers, xs, consts).
The gradient (reverse scan over saved residuals) is the split of the body's joint
forward/backward program (transforms.partial).
"""
from __future__ import annotations

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.primitive import NO_FACTOR_RULE, PropKind
from ..ir.program import Aval, Lit, Value
from ..ir.rules import Edge
from ..ir.sharding import Sharding
from ..trace import core
from . import lax as L
from .region import lookup, add_region_op, reshard, same_type, trace_region, vma_of

_I32 = Aval((), dtypes.int32)


def _split(n, num_carry, num_xs):
    return num_carry, num_carry + num_xs, n


def _shape(*avals, num_carry, num_xs, length, reverse, unroll, regions):
    (body,) = regions
    c, x, _ = _split(len(avals), num_carry, num_xs)
    for a in avals[c:x]:
        if not a.shape or a.shape[0] != length:
            raise ShardcError(f"scan: xs operand {a} does not have leading dim {length}")
    want = list(avals[:c]) + [a.update(shape=a.shape[1:]) for a in avals[c:x]] + \
        list(avals[x:])
    if len(body.args) != len(want) or not all(map(same_type, body.args, want)):
        raise ShardcError(f"scan: block arguments {list(body.args)} do not match the "
                          f"carries, xs slices and consts {want}")
    res = body.results
    if len(res) < c or not all(map(same_type, res[:c], avals[:c])):
        raise ShardcError(f"scan: the body yields {list(res)}, whose first {c} (the "
                          f"carries) must have the types of {list(avals[:c])}")
    return tuple(avals[:c]) + tuple(r.update(shape=(length, *r.shape))   # weak stays, as jax
                                    for r in res[c:])


def _data_flow(op):
    (r,) = op.regions
    p = op.params
    c, x, _ = _split(len(op.inputs), p["num_carry"], p["num_xs"])
    ins, outs, loc = op.inputs, op.outputs, op.loc
    return ([Edge(ins[i], r.inputs[i], loc=loc) for i in range(c)] +
            [Edge(outs[i], r.inputs[i], loc=loc) for i in range(c)] +
            [Edge(outs[i], r.outputs[i], loc=loc) for i in range(c)] +
            [Edge(ins[i], r.inputs[i], loc=loc, stacked=True) for i in range(c, x)] +
            [Edge(ins[i], r.inputs[i], loc=loc) for i in range(x, len(ins))] +
            [Edge(outs[i], r.outputs[i], loc=loc, stacked=True)
             for i in range(c, len(outs))])


def _lower(ctx, *operands, num_carry, num_xs, length, reverse, unroll):
    from ..lower.emit import tensor_type
    op = ctx.ir_op
    (body,) = op.regions
    c, x, n = _split(len(operands), num_carry, num_xs)
    repl0 = Sharding.replicated(0)
    ys_avals = ctx.out_avals[c:]
    ys_sh = ctx.out_shardings[c:]
    ys0 = [ctx.constant(0, a, sh) for a, sh in zip(ys_avals, ys_sh)]
    i0 = ctx.constant(0, _I32, repl0)
    carried = [i0, *operands[:c], *ys0, *operands[c:]]
    avals = [_I32, *ctx.in_avals[:c], *ys_avals, *ctx.in_avals[c:]]
    types = [tensor_type(a) for a in avals]
    ny = len(ys_avals)

    def cond(cx, i, *_):
        lim = cx.constant(length, _I32, repl0)
        return [cx.op("stablehlo.compare", [i, lim], [types[0]] * 2,
                      [tensor_type(Aval((), dtypes.bool_))],
                      {"comparison_direction": "#stablehlo<comparison_direction LT>"},
                      [repl0])[0]]

    def step(cx, i, *args):
        carries, ys, xs, consts = (args[:c], args[c:c + ny], args[c + ny:c + ny + x - c],
                                   args[c + ny + x - c:])
        idx = i
        if reverse:
            last = cx.constant(length - 1, _I32, repl0)
            idx = cx.op("stablehlo.subtract", [last, i], [types[0]] * 2, [types[0]],
                        sharding=[repl0])[0]
        zero = cx.constant(0, _I32, repl0)
        names = {}
        for v, a in zip(body.inputs[:c], carries):
            names[id(v)] = a
        for v, a, big in zip(body.inputs[c:x], xs, ctx.in_avals[c:x]):
            one = big.update(shape=(1, *big.shape[1:]))
            sh = v.sharding
            sl = cx.op("stablehlo.dynamic_slice", [a, idx] + [zero] * (big.ndim - 1),
                       [tensor_type(big)] + [types[0]] * big.ndim, [tensor_type(one)],
                       {"slice_sizes": f"array<i64: {', '.join(map(str, one.shape))}>"},
                       [Sharding(((),) + tuple(sh.dims))])[0]
            names[id(v)] = cx.op("stablehlo.reshape", [sl], [tensor_type(one)],
                                 [tensor_type(v.aval)], sharding=[sh])[0]
        for v, a in zip(body.inputs[x:], consts):
            names[id(v)] = a
        cx.lines.extend(cx.lowering.body(body, names, cx.indent))
        outs = [names[id(v)] for v in body.outputs]
        new_ys = []
        for buf, y, yv, big, sh in zip(ys, outs[c:], body.outputs[c:], ys_avals, ys_sh):
            one = big.update(shape=(1, *big.shape[1:]))
            up = cx.op("stablehlo.reshape", [y], [tensor_type(yv.aval)], [tensor_type(one)],
                       sharding=[Sharding(((),) + tuple(yv.sharding.dims))])[0]
            new_ys.append(cx.op("stablehlo.dynamic_update_slice",
                                [buf, up, idx] + [zero] * (big.ndim - 1),
                                [tensor_type(big), tensor_type(one)] + [types[0]] * big.ndim,
                                [tensor_type(big)], sharding=[sh])[0])
        one = cx.constant(1, _I32, repl0)
        nxt = cx.op("stablehlo.add", [i, one], [types[0]] * 2, [types[0]], sharding=[repl0])[0]
        return [nxt, *outs[:c], *new_ys, *xs, *consts]

    # (XLA rejects a sharding on the while op itself: Shardy takes it from the operands
    # and the annotated body, and the results are pinned to the decided shardings)
    res = ctx.op("stablehlo.while", carried, types, types, sharding=False,
                 regions=[ctx.region(avals, cond), ctx.region(avals, step)])
    return [reshard(ctx, r, a, sh) for r, a, sh in
            zip(res[1:1 + c + ny], ctx.out_avals, ctx.out_shardings)]


scan_p = core.Primitive("scan", shape_rule=_shape, sharding_rule=NO_FACTOR_RULE,
                        lower=_lower, prop_kind=PropKind.NONE, multiple_results=True,
                        num_regions=1)
scan_p.data_flow = _data_flow


def bind_scan(fn, init, xs, length, reverse=False, unroll=1, name="body", loc=None):
    """Trace fn(*carries, *x slices) -> (carries, ys) into a scan op of the current trace;
    returns (final carries, stacked ys) as tracers. What fn closes over becomes consts."""
    mc = core.current_builder().manual
    init_avals = [core.aval_of(v) for v in init]
    x_avals = [core.aval_of(v) for v in xs]
    slices = [a.update(shape=a.shape[1:]) for a in x_avals]
    vmas = [vma_of(v) for v in list(init) + list(xs)] if mc is not None else None

    def body(*args):
        carry, ys = fn(*args)
        return list(carry) + list(ys), len(carry)
    region, caps, _ = trace_region(init_avals + slices, body, name, vmas)
    nc = len(init)
    params = {"num_carry": nc, "num_xs": len(xs), "length": length, "reverse": reverse,
              "unroll": unroll}
    res = region.outputs
    if length == 0:
        # no iteration: the init, and empty ys (a loop over zero-size buffers is no
        # valid HLO: its slices and updates are larger than the buffers)
        return list(init), [L.zeros((0, *r.aval.shape), r.aval.dtype) for r in res[nc:]]
    out_avals = init_avals + [r.aval.update(shape=(length, *r.aval.shape)) for r in res[nc:]]
    out_vmas = [mc.vma_of(r) for r in res] if mc is not None else None
    outs = add_region_op(scan_p, list(init) + list(xs) + caps, params, [region], out_avals,
                         loc, out_vmas)
    return outs[:nc], outs[nc:]


def _rebind(op, ins, evaluate):
    (r,) = op.regions
    p = op.params
    c, x, _ = _split(len(ins), p["num_carry"], p["num_xs"])
    consts = ins[x:]

    def fn(*args):
        outs = evaluate(r, list(args) + list(consts))
        return outs[:c], outs[c:]
    carry, ys = bind_scan(fn, ins[:c], ins[c:x], p["length"], p["reverse"], p["unroll"],
                          r.name, op.loc)
    return carry + ys


scan_p.rebind = _rebind


def _drop_results(op, live):
    """Stacked ys nothing reads are dropped, with the body ops computing them."""
    c = op.params["num_carry"]
    keep = [i for i, v in enumerate(op.outputs) if i < c or v in live]
    if len(keep) < len(op.outputs):
        (r,) = op.regions
        r.outputs = [r.outputs[i] for i in keep]
        op.outputs = [op.outputs[i] for i in keep]
        op.sig = None


scan_p.drop_results = _drop_results


# ---------------------------------------------------------------- gradient

def _is_float(a):
    return dtypes.is_float(a.dtype)


def _vjp(ctx, cts, *ins, num_carry, num_xs, length, reverse, unroll):
    """A reverse scan over the residuals the forward scan now also stacks.

    The forward op is rebuilt in place to yield, per step, the values the body's
    backward part reads (carries included); xs and consts it reads are taken from the
    operands, and values computed from consts alone are computed once, outside."""
    op = ctx.op
    (body,) = op.regions
    c, x, n = _split(len(ins), num_carry, num_xs)
    n_out = len(op.outputs)
    mask = [True] * c + [cts[i] is not None for i in range(c, n_out)]
    sp = ctx.split_region(body, mask)
    kind = {id(v): ("c" if i < c else "x" if i < x else "k", i)
            for i, v in enumerate(sp.inputs)}
    invariant = _invariant(sp, kind)
    stacked = [v for v in sp.saved if kind.get(id(v), ("f",))[0] in "cf"
               and id(v) not in invariant]
    hoisted = [v for v in sp.saved if id(v) in invariant]
    # the forward scan, rebuilt to stack the residuals too
    res = _restack(ctx, op, sp, stacked, n_out)
    # loop-invariant residuals, once, from the consts
    outer_env = {id(sp.inputs[i]): ins[i] for i in range(x, n)}
    needed = _ancestors(sp, hoisted)
    ctx.eval_list([o for o in sp.fwd if id(o.outputs[0]) in invariant
                   and any(id(r) in needed for r in o.outputs)], outer_env)
    fc = [i for i in range(c) if _is_float(sp.inputs[i].aval)]
    fk = [i for i in range(x, n) if _is_float(sp.inputs[i].aval)]
    fx = [i for i in range(c, x) if _is_float(sp.inputs[i].aval)]
    ys_ct = [i for i in range(c, n_out) if sp.ct_in[i] is not None]
    xs_read = [v for v in sp.saved if kind.get(id(v), ("f",))[0] == "x"]
    init = [cts[i] if cts[i] is not None else L.zeros(ins[i].aval.shape, ins[i].aval.dtype)
            for i in fc] + [L.zeros(ins[i].aval.shape, ins[i].aval.dtype) for i in fk]
    bxs = [cts[i] for i in ys_ct] + res + [ins[kind[id(v)][1]] for v in xs_read]

    def step(*args):
        env = {}
        a = iter(args)
        for i in fc:
            env[id(sp.ct_in[i])] = next(a)
        acc = [next(a) for _ in fk]
        for i in ys_ct:
            env[id(sp.ct_in[i])] = next(a)
        for v in stacked + xs_read:
            env[id(v)] = next(a)
        for v in sp.saved:
            if id(v) not in env:   # consts and loop invariants: closed over
                env[id(v)] = outer_env[id(v)] if id(v) in outer_env else \
                    ins[kind[id(v)][1]]
        for i in range(c, n_out):
            if sp.ct_in[i] is not None and id(sp.ct_in[i]) not in env:
                env[id(sp.ct_in[i])] = L.zeros(sp.ct_in[i].aval.shape, sp.ct_in[i].aval.dtype)
        ctx.eval_list(sp.bwd, env)
        g = [_ct(env, sp, i) for i in range(n)]
        carry = [g[i] for i in fc] + [L.add(s, g[i]) for s, i in zip(acc, fk)]
        return carry, [g[i] for i in fx]
    carry, ys = bind_scan(step, init, bxs, length, not reverse, unroll, body.name + "_bwd",
                          op.loc)
    out = [None] * n
    for i, g in zip(fc + fk, carry):
        out[i] = g
    for i, g in zip(fx, ys):
        out[i] = g
    return out


_vjp.keeps_none = True


def _ct(env, sp, i):
    g = sp.ct_out[i]
    a = sp.inputs[i].aval
    if g is None:
        return L.zeros(a.shape, a.dtype)
    g = lookup(env, g)
    if not core.is_tracer(g):
        return L.full(a.shape, g.value, a.dtype)
    return L.convert_element_type(g, a.dtype) if g.aval.dtype != a.dtype else g


def _invariant(sp, kind):
    """Forward values computed from consts alone (ops without regions or effects)."""
    inv = {id(v) for v in sp.inputs if kind[id(v)][0] == "k"}
    for o in sp.fwd:
        if o.regions or o.prim.effectful or not o.outputs:
            continue
        if all(type(v) is Lit or id(v) in inv for v in o.inputs):
            inv.update(id(v) for v in o.outputs)
    return {i for i in inv if i not in {id(v) for v in sp.inputs}}


def _ancestors(sp, vals):
    producer = {id(v): o for o in sp.fwd for v in o.outputs}
    seen, stack = set(), [v for v in vals]
    while stack:
        v = stack.pop()
        if id(v) in seen or id(v) not in producer:
            continue
        seen.add(id(v))
        stack.extend(u for u in producer[id(v)].inputs if type(u) is not Lit)
    return seen


def _restack(ctx, op, sp, stacked, n_out):
    """Rebuild the forward scan `op` in place from the split's forward part, yielding
    `stacked` too; returns tracers of the new stacked results."""
    (body,) = op.regions
    p = op.params

    def fn(*args):
        env = {id(v): a for v, a in zip(sp.inputs, args)}
        ctx.eval_list(sp.fwd, env)
        outs = [lookup(env, v) for v in sp.outputs] + [env[id(v)] for v in stacked]
        return outs, None
    mc = ctx.builder.manual
    vmas = [mc.vma_of(v) for v in body.inputs] if mc is not None else None
    region, caps, _ = trace_region([v.aval for v in body.inputs], fn, body.name, vmas)
    if caps:
        raise ShardcError("internal: a scan body's forward part reads a value from outside",
                          op.loc)
    new = [Value(r.aval.update(shape=(p["length"], *r.aval.shape)))
           for r in region.outputs[n_out:]]
    op.regions = (region,)
    op.outputs = list(op.outputs) + new
    op.sig = None
    if mc is not None:
        for v, r in zip(new, region.outputs[n_out:]):
            mc.vma[id(v)] = mc.vma_of(r)
    return [core.Tracer(ctx.builder, v) for v in new]


scan_p.vjp = _vjp
