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
from ..ir.primitive import NO_FACTOR_RULE, PropKind, Trait
from ..ir.program import Aval, Lit, Value
from ..ir.rules import Edge, Flow
from ..ir.sharding import Sharding
from ..trace import core, types
from . import lax as L
from .callback import has_ordered_call
from .region import (add_region_op, carried, drop_results, host_of, lookup, same_type,
                     trace_region, vma_of, widened)

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
    # as jax's scan: the results' weak types are the body's outputs' (a weak init whose
    # body output is strong gives a strong carry; ys stay weak if the body's are)
    return tuple(res[:c]) + tuple(r.update(shape=(length, *r.shape)) for r in res[c:])


def _data_flow(op):
    (r,) = op.regions
    p = op.params
    c, x, _ = _split(len(op.inputs), p["num_carry"], p["num_xs"])
    ins, outs, loc = op.inputs, op.outputs, op.loc

    def e(o, i, role, stacked=False):
        return Edge(o, i, loc=loc, stacked=stacked, role=role)
    return ([e(ins[i], r.inputs[i], f"carry {i}") for i in range(c)] +
            [e(outs[i], r.inputs[i], f"carry {i}") for i in range(c)] +
            [e(outs[i], r.outputs[i], f"carry {i}") for i in range(c)] +
            [e(ins[i], r.inputs[i], f"xs {i - c}", True) for i in range(c, x)] +
            [e(ins[i], r.inputs[i], f"const {i - x}") for i in range(x, len(ins))] +
            [e(outs[i], r.outputs[i], f"ys {i - c}", True) for i in range(c, len(outs))])


def _lower(ctx, *operands, num_carry, num_xs, length, reverse, unroll):
    """A while loop of length // unroll trips running `unroll` steps each, then one of
    the remaining steps (as jax's unrolled scan)."""
    c = num_carry
    ys_avals, ys_sh = ctx.out_avals[c:], ctx.out_shardings[c:]
    ys = [ctx.constant(0, a, sh) for a, sh in zip(ys_avals, ys_sh)]
    u = max(1, min(int(unroll), length)) if length else 1
    if u > 1 and has_ordered_call(ctx.ir_op):
        # the steps unrolled into one trip share no token: an ordered callback of one
        # could run before the step before it had made its own call
        u = 1
    trips, rem = divmod(length, u)
    state = (list(operands[:c]), ys)
    if trips:
        state = _loop(ctx, operands, state, 0, trips, u, length, reverse)
    if rem:
        state = _loop(ctx, operands, state, trips * u, rem, 1, length, reverse)
    carries, ys = state
    # (not pinned: as every op's, the results' shardings are Shardy's to settle; pinning
    # a gradient's residual stacks made XLA gather a weight per step of the backward loop)
    return carries + ys


def _loop(ctx, operands, state, start, trips, u, length, reverse):
    """One stablehlo.while: `trips` trips of `u` steps, step k = start + trip * u + j
    (counted from the end if reverse); returns the (carries, ys) after it."""
    from ..lower.emit import tensor_type
    op = ctx.ir_op
    (body,) = op.regions
    p = op.params
    c, x, n = _split(len(operands), p["num_carry"], p["num_xs"])
    repl0 = Sharding.replicated(0)
    carries, ys = state
    ys_avals, ys_sh = ctx.out_avals[c:], ctx.out_shardings[c:]
    ny = len(ys)
    i0 = ctx.constant(0, _I32, repl0)
    carried = [i0, *carries, *ys, *operands[c:]]
    avals = [_I32, *ctx.in_avals[:c], *ys_avals, *ctx.in_avals[c:]]
    types = [tensor_type(a) for a in avals]
    ti = types[0]

    def scalar(cx, name, a, b):
        return cx.op(name, [a, b], [ti, ti], [ti], sharding=[repl0])[0]

    def cond(cx, i, *_):
        lim = cx.constant(trips, _I32, repl0)
        return [cx.op("stablehlo.compare", [i, lim], [ti] * 2,
                      [tensor_type(Aval((), dtypes.bool_))],
                      {"comparison_direction": "#stablehlo<comparison_direction LT>"},
                      [repl0])[0]]

    def step(cx, i, *args):
        carries, ys = list(args[:c]), list(args[c:c + ny])
        xs, consts = args[c + ny:c + ny + x - c], args[c + ny + x - c:]
        zero = cx.constant(0, _I32, repl0)
        base = scalar(cx, "stablehlo.multiply", i, cx.constant(u, _I32, repl0)) \
            if u > 1 else i
        for j in range(u):
            k = start + j
            idx = scalar(cx, "stablehlo.add", base, cx.constant(k, _I32, repl0)) if k else base
            if reverse:
                idx = scalar(cx, "stablehlo.subtract", cx.constant(length - 1, _I32, repl0),
                             idx)
            carries, ys = _step(cx, body, c, x, carries, ys, xs, consts, idx, zero,
                                ctx.in_avals, ys_avals, ys_sh)
        nxt = scalar(cx, "stablehlo.add", i, cx.constant(1, _I32, repl0))
        # (xs and constants of partial sums pass through held, or XLA reduces them)
        rest = [cx.held(r, a, sh) for r, a, sh in
                zip([*xs, *consts], ctx.in_avals[c:], ctx.in_shardings[c:])]
        return [nxt, *carries, *ys, *rest]

    # (XLA rejects a sharding on the while op itself: Shardy takes it from the operands
    # and the annotated body)
    res = ctx.op("stablehlo.while", carried, types, types, sharding=False,
                 carried=[repl0, *ctx.in_shardings[:c], *ys_sh, *ctx.in_shardings[c:]],
                 regions=[ctx.region(avals, cond), ctx.region(avals, step)])
    return res[1:1 + c], res[1 + c:1 + c + ny]


def _step(cx, body, c, x, carries, ys, xs, consts, idx, zero, in_avals, ys_avals, ys_sh):
    """The body once, on step `idx`: slices of the xs in, slices of the ys written."""
    from ..lower.emit import tensor_type
    ti = tensor_type(_I32)
    names = {}
    for v, a in zip(body.inputs[:c], carries):
        names[id(v)] = cx.carry_in(a, v.aval, v.sharding)
    for v, a, big in zip(body.inputs[c:x], xs, in_avals[c:x]):
        one = big.update(shape=(1, *big.shape[1:]))
        sh = v.sharding
        sl = cx.op("stablehlo.dynamic_slice", [a, idx] + [zero] * (big.ndim - 1),
                   [tensor_type(big)] + [ti] * big.ndim, [tensor_type(one)],
                   {"slice_sizes": f"array<i64: {', '.join(map(str, one.shape))}>"},
                   [_stacked(sh)])[0]
        sl = cx.held(sl, one, _stacked(sh))
        names[id(v)] = cx.held(cx.op("stablehlo.reshape", [sl], [tensor_type(one)],
                                       [tensor_type(v.aval)], sharding=[sh])[0], v.aval, sh)
    for v, a in zip(body.inputs[x:], consts):
        names[id(v)] = a
    cx.lines.extend(cx.lowering.body(body, names, cx.indent))
    outs = [names[id(v)] for v in body.outputs]
    new_ys = []
    for buf, y, yv, big, sh in zip(ys, outs[c:], body.outputs[c:], ys_avals, ys_sh):
        one = big.update(shape=(1, *big.shape[1:]))
        up = cx.op("stablehlo.reshape", [y], [tensor_type(yv.aval)], [tensor_type(one)],
                   sharding=[_stacked(yv.sharding)])[0]
        up = cx.held(up, one, _stacked(yv.sharding))
        new_ys.append(cx.held(cx.op("stablehlo.dynamic_update_slice",
                                      [buf, up, idx] + [zero] * (big.ndim - 1),
                                      [tensor_type(big), tensor_type(one)] + [ti] * big.ndim,
                                      [tensor_type(big)], sharding=[sh])[0], big, sh))
    # (a carry of partial sums goes round held: an untyped value a gradient rule yields
    # into it has no unreduced axes of its own, XLA reduces it, and each trip summed
    # the whole value again)
    return [cx.held(o, v.aval, v.sharding) for o, v in zip(outs[:c], body.inputs)], new_ys


def _stacked(sh):
    """`sh` with a leading unsplit dim: a step's slice of the xs or ys, whose partial
    sums stay partial sums (or XLA reduces a y before writing it into partial sums)."""
    return Sharding(((),) + tuple(sh.dims), None, sh.unreduced, sh.reduced)


scan_p = core.Primitive("scan", shape_rule=_shape, sharding_rule=NO_FACTOR_RULE,
                        lower=_lower, prop_kind=PropKind.NONE, multiple_results=True,
                        num_regions=1, traits=Trait.LOOP)
scan_p.data_flow = _data_flow


def _flows(op):
    """As Shardy's edges of the while a scan lowers to: a carry's result meets its init
    and the body's yield and holds the block argument; a constant's block argument is
    the constant itself, as for while (xs and ys keep their stacked Edges)."""
    (r,) = op.regions
    c, x, _ = _split(len(op.inputs), op.params["num_carry"], op.params["num_xs"])
    ins, outs, loc = op.inputs, op.outputs, op.loc
    return ([Flow(outs[i], (ins[i], r.outputs[i]), (r.inputs[i],), loc, f"carry {i}")
             for i in range(c)] +
            [Flow(ins[i], (), (r.inputs[i],), loc, f"const {i - x}")
             for i in range(x, len(ins))])


scan_p.flows = _flows


def bind_scan(fn, init, xs, length, reverse=False, unroll=1, name="body", loc=None):
    """Trace fn(*carries, *x slices) -> (carries, ys) into a scan op of the current trace;
    returns (final carries, stacked ys) as tracers. What fn closes over becomes consts."""
    mc = core.current_builder().manual
    init_avals = [core.aval_of(v) for v in init]
    x_avals = [core.aval_of(v) for v in xs]
    slices = [types.without_dim(a, 0) for a in x_avals]
    vmas = [vma_of(v) for v in list(init) + list(xs)] if mc is not None else None

    def body(*args):
        carry, ys = fn(*args)
        return list(carry) + list(ys), len(carry)
    nc = len(init)
    while True:
        region, caps, _ = trace_region(init_avals + slices, body, name, vmas,
                                       host_of(list(init) + list(xs)))
        if mc is None or not mc.check_vma:
            break
        # (checked bodies) a carry the body makes vary is typed varying from the start,
        # and the body traced again (a psum in it must sum the carries, not scale one)
        grown = [v | mc.vma_of(o) for v, o in zip(vmas[:nc], region.outputs[:nc])]
        if grown == vmas[:nc]:
            break
        vmas = grown + vmas[nc:]
    if mc is not None and mc.check_vma:
        init = widened(init, vmas[:nc], mc.mesh)
    params = {"num_carry": nc, "num_xs": len(xs), "length": length, "reverse": reverse,
              "unroll": unroll}
    res = region.outputs
    if length == 0:
        # no step runs: XLA rejects the body's slices of zero-length xs
        carry = [x if r.aval.weak or not core.aval_of(x).weak else
                 L.convert_element_type(x, r.aval.dtype) for x, r in zip(init, res)]
        return carry, [L.zeros((0, *r.aval.shape), r.aval.dtype) for r in res[nc:]]
    # As jax's scan, values the body passes through are forwarded: a ys that is the step's
    # slice of an xs is that xs, a carry the body returns unchanged is its init. (They
    # keep their own shardings then, a scanned dim's included.)
    slot = {id(v): k for k, v in enumerate(region.inputs[:nc + len(xs)])}
    fwd = {m: slot[id(r)] - nc for m, r in enumerate(res[nc:])
           if slot.get(id(r), -1) >= nc}
    region.outputs = res = res[:nc] + [r for m, r in enumerate(res[nc:]) if m not in fwd]
    # the results' weak types are the body's outputs' (as _shape)
    out_avals = [r.aval for r in res[:nc]] + [r.aval.update(shape=(length, *r.aval.shape))
                                              for r in res[nc:]]
    out_vmas = [mc.vma_of(r) for r in res] if mc is not None else None
    outs = add_region_op(scan_p, list(init) + list(xs) + caps, params, [region], out_avals,
                         loc, out_vmas)
    carry = [init[i] if res[i] is region.inputs[i] and res[i].aval == init_avals[i]
             else outs[i] for i in range(nc)]
    ys, rest = [], iter(outs[nc:])
    for m in range(len(fwd) + len(outs) - nc):
        ys.append(xs[fwd[m]] if m in fwd else next(rest))
    return carry, ys


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


# stacked ys nothing reads are dropped, with the body ops computing them
scan_p.drop_results = drop_results(lambda op: op.params["num_carry"])


# ---------------------------------------------------------------- gradient

def _is_float(a):
    return dtypes.is_inexact(a.dtype)


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
    # a carry is active if a tangent reaches it in some step; xs and consts as their
    # operands are
    active = None
    if ctx.active is not None:
        seeds = {id(body.inputs[i]) for i in range(c, n) if ctx.active[i]}
        act = carried(body, c, [i for i in range(c) if ctx.active[i]], seeds)
        active = [i in act for i in range(c)] + list(ctx.active[c:])
    sp = ctx.split_region(body, mask, active=active)
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
    ctx.eval_list([o for o in sp.fwd if o.outputs and id(o.outputs[0]) in invariant
                   and any(id(r) in needed for r in o.outputs)], outer_env)
    fc = [i for i in range(c) if _is_float(sp.inputs[i].aval)]
    fk = [i for i in range(x, n) if _is_float(sp.inputs[i].aval)]
    fx = [i for i in range(c, x) if _is_float(sp.inputs[i].aval)]
    ys_ct = [i for i in range(c, n_out) if sp.ct_in[i] is not None]
    xs_read = [v for v in sp.saved if kind.get(id(v), ("f",))[0] == "x"]

    def zeros(i):
        a = core.aval_of(ins[i])
        return L.zeros(a.shape, a.dtype)
    init = [cts[i] if cts[i] is not None else zeros(i) for i in fc] + [zeros(i) for i in fk]
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
        env.update(sp.captured)
        ctx.eval_list(sp.recompute + sp.bwd, env)
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
    return L.convert_element_type(g, a.dtype) if g.value.aval.dtype != a.dtype else g


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
    new = [Value(r.aval.update(shape=(p["length"], *r.aval.shape)))      # as _shape
           for r in region.outputs[n_out:]]
    op.regions = (region,)
    op.outputs = list(op.outputs) + new
    op.sig = None
    if mc is not None:
        for v, r in zip(new, region.outputs[n_out:]):
            mc.vma[id(v)] = mc.vma_of(r)
    return [core.Tracer(ctx.builder, v) for v in new]


scan_p.vjp = _vjp


def _jvp(ctx, primals, tangents, *, num_carry, num_xs, length, reverse, unroll):
    """A scan over (carries, their tangents) and (xs, their tangents), yielding the ys'
    tangents too; the body's by forward mode (for bodies holding a while loop)."""
    from .control import _fit
    (body,) = ctx.op.regions
    c, x, n = _split(len(primals), num_carry, num_xs)
    flt = [dtypes.is_inexact(core.aval_of(p).dtype) for p in primals]
    fc = [i for i in range(c) if flt[i]]
    fx = [i for i in range(c, x) if flt[i] and tangents[i] is not None]
    consts, tk = list(primals[x:]), list(tangents[x:])
    nf = []

    def step(*args):
        a = iter(args)
        carries = [next(a) for _ in range(c)]
        tcs = dict((i, next(a)) for i in fc)
        xsl = [next(a) for _ in range(c, x)]
        txs = dict((i, next(a)) for i in fx)
        outs, touts = ctx.jvp_region(body, carries + xsl + consts,
                                     [tcs.get(i) for i in range(c)] +
                                     [txs.get(i) for i in range(c, x)] + tk)
        if not nf:
            nf.extend(j for j in range(c, len(outs))
                      if dtypes.is_inexact(core.aval_of(outs[j]).dtype))
        return (list(outs[:c]) + [_fit(touts[i], outs[i]) for i in fc],
                list(outs[c:]) + [_fit(touts[j], outs[j]) for j in nf])
    init = list(primals[:c]) + [_fit(tangents[i], primals[i]) for i in fc]
    xs = list(primals[c:x]) + [tangents[i] for i in fx]
    carry, ys = bind_scan(step, init, xs, length, reverse, unroll, body.name, ctx.op.loc)
    ny = len(ctx.op.outputs) - c
    outs = carry[:c] + ys[:ny]
    touts = [None] * len(outs)
    for k, i in enumerate(fc):
        touts[i] = carry[c + k]
    for k, j in enumerate(nf):
        touts[j] = ys[ny + k]
    return outs, touts


scan_p.jvp = _jvp
