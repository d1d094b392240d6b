"""Batching rules (vmap) of the control-flow ops: cond, while and scan.

A loop's carries are batched if their init is or if the body makes them so: found by
re-deriving the body's batched results until the carries' stop changing (jax's fixed
point). A per-example branch index runs every branch and selects per example; a
per-example loop predicate runs while any example goes on, the others keep their carry.
"""
from __future__ import annotations

from ..trace import core
from . import lax as L
from .batching import bcast, move_dim
from .control import bind_cond, cond_p
from .while_loop import bind_while, while_p
from .reduce import reduce_or_p
from .scan import bind_scan, scan_p


def _per_example(pred, like):
    """A per-example bool (size,) broadcast to the batched shape of `like`."""
    return L.broadcast_in_dim(pred, L.aval(like).shape, (0,))


def _cond_batch(ctx, args, batched):
    index, ops = args[0], list(args[1:])
    bops = list(batched[1:])
    regions = ctx.op.regions
    n = len(ctx.op.outputs)
    if batched[0]:
        # each example takes its own branch: all run, and each result is chosen per example
        outs = [ctx.batch_region(r, ops, bops, force=[True] * n)[0] for r in regions]
        res = list(outs[0])
        for k in range(1, len(regions)):
            pick = L.eq(index, L.lit(k, L.aval(index)))
            res = [L.select(_per_example(pick, o), o, acc) for o, acc in zip(outs[k], res)]
        return res, [True] * n
    out_b = [False] * n
    for r in regions:
        out_b = [a or b for a, b in zip(out_b, ctx.out_batched(r, bops))]
    branches = [lambda *xs, r=r: ctx.batch_region(r, list(xs), bops, force=out_b)[0]
                for r in regions]
    outs = bind_cond(index, branches, ops, ctx.op.loc, [r.name for r in regions])
    return outs, out_b


cond_p.batch = _cond_batch


def _while_batch(ctx, args, batched, *, cond_nconsts, body_nconsts, masked=False):
    n = len(args) - cond_nconsts - body_nconsts
    cond, body = ctx.op.regions
    ck, bk = list(args[n:n + cond_nconsts]), list(args[n + cond_nconsts:])
    ckb, bkb = list(batched[n:n + cond_nconsts]), list(batched[n + cond_nconsts:])
    carry_b = list(batched[:n])
    while True:
        pred_b = ctx.out_batched(cond, carry_b + ckb)[0]
        new = [True] * n if pred_b else \
            [a or b for a, b in zip(carry_b, ctx.out_batched(body, carry_b + bkb))]
        if new == carry_b:
            break
        carry_b = new
    init = [bcast(ctx, x, b) if cb else x for x, b, cb in zip(args[:n], batched, carry_b)]

    def pred(c):
        return ctx.batch_region(cond, list(c) + ck, carry_b + ckb)[0][0]

    def step(c):
        return ctx.batch_region(body, list(c) + bk, carry_b + bkb, force=carry_b)[0]
    if not pred_b:
        return bind_while(lambda *c: pred(c), lambda *c: step(c), init, ctx.op.loc,
                          masked), carry_b
    if masked:
        # an example whose predicate stops is already left alone by the body (it selects
        # by the inner examples' predicates, elementwise): no select, no per-step OR
        return bind_while(lambda *c: reduce_or_p.bind(pred(c), axes=(0,)),
                          lambda *c: step(c), init, ctx.op.loc, True), carry_b

    def body_fn(*c):
        go = pred(c)
        # (a carry the body passes through stays the block argument: what the while's
        # gradient rule reads as loop-invariant)
        return [new if _same(new, old) else L.select(_per_example(go, new), new, old)
                for new, old in zip(step(c), c)]
    outs = bind_while(lambda *c: reduce_or_p.bind(pred(c), axes=(0,)), body_fn, init,
                      ctx.op.loc, True)
    return outs, carry_b


def _same(a, b):
    return a is b or core.is_tracer(a) and core.is_tracer(b) and a.value is b.value


while_p.batch = _while_batch


def _scan_batch(ctx, args, batched, *, num_carry, num_xs, length, reverse, unroll):
    (body,) = ctx.op.regions
    c, x = num_carry, num_carry + num_xs
    consts = list(args[x:])
    xb, kb = list(batched[c:x]), list(batched[x:])
    carry_b = list(batched[:c])
    while True:
        ob = ctx.out_batched(body, carry_b + xb + kb)
        new = [a or b for a, b in zip(carry_b, ob[:c])]
        if new == carry_b:
            break
        carry_b = new
    ys_b = ob[c:]
    init = [bcast(ctx, v, b) if cb else v for v, b, cb in zip(args[:c], batched, carry_b)]
    # the loop runs over dim 0: a batched xs has its mapped dim second inside the loop
    xs = [move_dim(v, 0, 1) if b else v for v, b in zip(args[c:x], xb)]
    slice_b = xb

    def fn(*a):
        outs, _ = ctx.batch_region(body, list(a) + consts, carry_b + slice_b + kb,
                                   force=carry_b + ys_b)
        return outs[:c], outs[c:]
    carry, ys = bind_scan(fn, init, xs, length, reverse, unroll, body.name, ctx.op.loc)
    ys = [move_dim(y, 1, 0) if b else y for y, b in zip(ys, ys_b)]
    return list(carry) + list(ys), carry_b + list(ys_b)


scan_p.batch = _scan_batch
