"""scatter, scatter_mul, scatter_min, scatter_max: XLA's scatter whose region replaces
the element with the update (jax's scatter: of repeated indices one update wins, the
last on CPU), or multiplies, or takes the min / max of, the operand and every update
(repeated indices included, each update combined in), as jax's scatter-mul / -min / -max.

Dimension numbers, factor rule, lowering and batching are scatter_add's (shardc.ops.
indexing) with another combiner in the region: a sharded update batch dim is a partial
result that XLA's partitioner combines with the same op (a replacing scatter has no
such combination: its update batch dims are gathered first, as XLA's partitioner
does for that region). Gradients are jax's
(jax/_src/lax/slicing.py): the transpose of its scatter-mul JVP for the operand, and
the exact product of the other factors for the updates (which jax defines only for
unique indices, where the two agree); for min / max the transpose of
`_scatter_extremal_jvp`, which shares an element's cotangent equally among the tied
updates (and the operand, if it ties too). An update whose window is out of bounds is
dropped, as XLA's; the lax wrappers clamp such indices and turn the update into the
combiner's identity instead (XLA's dropping differs once partitioned).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..ir.primitive import PropKind
from ..ir.rules import NEED_REPLICATION
from ..trace.core import Primitive
from . import indexing as ix

KINDS = {"scatter": "replace", "scatter_mul": "mul", "scatter_min": "min",
         "scatter_max": "max"}


def _combiner(name):
    rule = ix._scatter_rule if name != "scatter" else partial(
        ix._scatter_rule, batch_kind=NEED_REPLICATION)
    return Primitive(name, shape_rule=partial(ix.scatter_shape, name), sharding_rule=rule,
                     lower=partial(ix._lower_scatter, kind=KINDS[name]),
                     prop_kind=PropKind.NONE)


scatter_p = _combiner("scatter")
scatter_mul_p = _combiner("scatter_mul")
scatter_min_p = _combiner("scatter_min")
scatter_max_p = _combiner("scatter_max")
BY_KIND = {"mul": scatter_mul_p, "min": scatter_min_p, "max": scatter_max_p}


def _rules():
    from . import lax as L      # looked up when a rule runs

    def wants(ctx, i):
        return ctx.active is None or ctx.active[i]

    def drop(ctx, gu, idx, dn):        # (an update out of bounds was dropped)
        return ix.dropped_to_zero(gu, idx, ctx.in_avals[0].shape, **dn)

    def mul_vjp(ctx, cts, x, idx, u, **dn):
        t = cts[0]
        back = partial(ix.window_gather, idx=idx, upd_shape=ctx.in_avals[2].shape, **dn)
        gx = scatter_mul_p.bind(t, idx, u, **dn) if wants(ctx, 0) else None
        gu = None
        if wants(ctx, 2):
            # d out[j] / d u_k = x[j] * (the other updates at j): the product of the
            # nonzero ones, divided by u_k if it is nonzero, and zero when another
            # factor is zero (counted, so zeros need no division)
            nz = L.ne(u, 0)
            one, zero = L.ones_like(u), L.zeros_like(u)
            safe = L.select(nz, u, one)
            prod = back(scatter_mul_p.bind(L.ones_like(x), idx, safe, **dn))
            nzero = back(ix.scatter_add_p.bind(L.zeros_like(x), idx,
                                               L.select(nz, zero, one), **dn))
            others = L.select(nz, L.select(L.eq(nzero, 0), L.div(prod, safe), zero),
                              L.select(L.eq(nzero, 1), prod, zero))
            gu = L.mul(back(L.mul(t, x)), others)
        return [gx, None, None if gu is None else drop(ctx, gu, idx, dn)]
    scatter_mul_p.vjp = mul_vjp

    def extremal_vjp(ctx, cts, x, idx, u, **dn):
        t = cts[0]
        back = partial(ix.window_gather, idx=idx, upd_shape=ctx.in_avals[2].shape, **dn)
        one, zero = L.ones_like(u), L.zeros_like(u)
        out = ctx.out
        won = L.eq(u, back(out))               # the updates that are the result
        kept = L.eq(x, out)                    # the operand is the result too
        # the contenders for each element: the cotangent is shared among them equally
        wins = ix.scatter_add_p.bind(L.zeros_like(x), idx, L.select(won, one, zero), **dn)
        contenders = L.add(wins, L.select(kept, L.ones_like(x), L.zeros_like(x)))
        each = L.div(t, L.max(contenders, 1))
        gx = gu = None
        if wants(ctx, 0):
            # jax's tangent g_x + scatter_add(gather(g_x) * (share - 1) / refs) is, per
            # element, g_x times its share (1 where no update goes)
            refs = ix.scatter_add_p.bind(L.zeros_like(x), idx, one, **dn)
            gx = L.select(L.gt(refs, 0), L.select(kept, each, L.zeros_like(x)), t)
        if wants(ctx, 2):
            gu = drop(ctx, L.select(won, back(each), zero), idx, dn)
        return [gx, None, gu]
    scatter_min_p.vjp = scatter_max_p.vjp = extremal_vjp

    def replace_vjp(ctx, cts, x, idx, u, **dn):
        # jax's _scatter_jvp: which update won each element is found by scattering
        # the updates' ids the same way (the same order, so the same winner)
        t = cts[0]
        ua = ctx.in_avals[2]
        back = partial(ix.window_gather, idx=idx, upd_shape=ua.shape, **dn)
        ids = L.reshape(L.iota(np.dtype(np.int32), (ua.size,), 0), ua.shape)
        won = scatter_p.bind(L.full(ctx.in_avals[0].shape, -1, np.dtype(np.int32)), idx,
                             ids, **dn)
        gx = gu = None
        if wants(ctx, 0):
            gx = L.select(L.ge(won, 0), L.zeros_like(t), t)
        if wants(ctx, 2):
            gu = drop(ctx, L.select(L.eq(back(won), ids), back(t), L.zeros_like(u)), idx,
                      dn)
        return [gx, None, gu]
    scatter_p.vjp = replace_vjp

    for p in (scatter_p, *BY_KIND.values()):
        p.batch = ix.scatter_batch(p)


_rules()
