"""Forward mode through ops that have no reverse mode (while loops).

shardc's jvp is the transpose of its reverse pass, which needs every op's vjp. A while
loop has none (its trip count is unknown when the backward pass is built, as in jax),
so a program with one is walked forwards instead: each maximal run of ops without
such a loop gets its tangents by the transposed reverse pass, as before, and each op
with one applies its `jvp` rule, which carries tangents alongside its primal values
(a while loop over (carry, tangent)). Bodies are walked the same way, recursively.
"""
from __future__ import annotations

from ..ir import dtypes
from ..ir.program import Lit
from ..ops import lax as L
from ..ops.pvary import pvary_over
from ..ops.region import lookup
from ..ops.special import sharding_constraint_p
from ..trace import core


def needs_forward(op) -> bool:
    """Whether the op is, or holds, an op with no reverse mode."""
    if not op.prim.reversible:
        return True
    return any(needs_forward(o) for r in op.regions for o in r.ops)


class JvpCtx:
    """What an op's `jvp` rule sees: its op, and the transform for its bodies."""
    __slots__ = ("op",)

    def __init__(self, op):
        self.op = op

    def jvp_region(self, region, primals, tangents):
        return jvp_region(region, primals, tangents)

    def tangent_of(self, t, out):
        """The tangent t of `out` (None: zero), of out's dtype and type."""
        if t is None:
            return zeros_varying_as(out)
        dt = core.aval_of(out).dtype
        return t if core.aval_of(t).dtype == dt else L.convert_element_type(t, dt)

    def eval_ops(self, region, args):
        from .ad import eval_ops
        return eval_ops(region, args)


def _float(a):
    return dtypes.is_inexact(a.dtype)


def jvp_region(region, primals, tangents):
    """(outputs, output tangents) of `region` (a closed Program) on primals (tracers or
    values) with tangents (tracers or None for zero), traced into the current builder."""
    env = {id(v): p for v, p in zip(region.inputs, primals)}
    tenv = {id(v): t for v, t in zip(region.inputs, tangents) if t is not None}
    ops = region.ops
    seg: list = []
    for k, op in enumerate(ops):
        if needs_forward(op):
            _segment(seg, ops[k:], region.outputs, env, tenv)
            seg = []
            ins = [lookup(env, v) for v in op.inputs]
            tins = [None if isinstance(v, Lit) else tenv.get(id(v)) for v in op.inputs]
            if op.prim.jvp is None:
                from ..errors import ShardcError
                raise ShardcError(f"shardc has no forward-mode rule for {op.prim.name} "
                                  "around a while loop", op.loc)
            outs, touts = op.prim.jvp(JvpCtx(op), ins, tins, **op.params)
            for v, o, t in zip(op.outputs, outs, touts):
                env[id(v)] = o
                if t is not None:
                    tenv[id(v)] = t
        else:
            seg.append(op)
    _segment(seg, [], region.outputs, env, tenv)
    outs = [lookup(env, v) for v in region.outputs]
    touts = [None if isinstance(v, Lit) else tenv.get(id(v)) for v in region.outputs]
    return outs, touts


def _segment(seg, rest, outputs, env, tenv):
    """Primal values and tangents of a run of reverse-differentiable ops."""
    if not seg:
        return
    from .ad import _traced_vjp
    from .partial import eval_list
    defined = {id(v) for op in seg for v in op.outputs}
    reads = []
    seen = set()
    for op in seg:
        for v in op.inputs:
            if not isinstance(v, Lit) and id(v) not in defined and id(v) not in seen:
                seen.add(id(v))
                reads.append(v)
    live = {id(v) for op in rest for v in op.inputs if not isinstance(v, Lit)}
    live |= {id(v) for v in outputs if not isinstance(v, Lit)}
    outs = [v for op in seg for v in op.outputs if id(v) in live]
    diff = [v for v in reads if id(v) in tenv and _float(v.aval)]
    f_outs = [v for v in outs if _float(v.aval)]
    i_outs = [v for v in outs if not _float(v.aval)]

    def g(*ws):
        local = dict(env)
        for v, w in zip(diff, ws):
            local[id(v)] = w
        eval_list(seg, local)
        return [local[id(v)] for v in f_outs], [local[id(v)] for v in i_outs]
    if not diff:
        fo, io = g()
        for v, o in zip(f_outs + i_outs, fo + io):
            env[id(v)] = o
        return
    prim = tuple(env[id(v)] for v in diff)
    fo, io, vjp_fn = _traced_vjp(g, prim, has_aux=True)
    for v, o in zip(f_outs + i_outs, list(fo) + list(io)):
        env[id(v)] = o
    if not f_outs:
        return
    ct0 = [zeros_varying_as(o) for o in fo]
    _, _, transpose = _traced_vjp(lambda c: vjp_fn(c), (ct0,))
    (t_out,) = transpose(tuple(tenv[id(v)] for v in diff))
    for v, t in zip(f_outs, t_out):
        tenv[id(v)] = t


def zeros_varying_as(out):
    """The stand-in cotangent of `out`, of its type: varying over the manual axes `out`
    varies over (an invariant one would meet varying values, and transposing the vjp
    would sum the tangents over those axes: the implicit pvary's transpose is a psum),
    and in explicit mode sharded as its type (the tangents are typed like it)."""
    aval = core.aval_of(out)
    z = L.zeros(aval.shape, aval.dtype)
    if aval.ts is not None and aval.ts.axes():
        z = sharding_constraint_p.bind(z, sharding=aval.ts, reshard=True)
        z.value.sharding = aval.ts
    mc = core.current_builder().manual
    if mc is None or not mc.check_vma or not core.is_tracer(out):
        return z
    vma = mc.vma_of(core.current_builder().to_value(out))
    return pvary_over(z, vma, mc.mesh) if vma else z
