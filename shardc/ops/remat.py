"""Rematerialization: checkpoint (jax.checkpoint / remat), checkpoint_name and
optimization_barrier.

    %y, %r = checkpoint(%x, %w) {prevent_cse=True, policy=<callback>} {
    ^(%x: f32[8,16], %w: f32[16,16]):
      ...
      return %y, %r          // the outputs, then residuals a gradient asked it to save
    }

The op runs its region inline. Its gradient splits the region's joint forward/backward
program: the values the policy saves become extra results, the backward pass re-runs
the forward ops it did not save, behind an optimization barrier so that XLA does not
merge the recomputation back into the forward pass (prevent_cse, as jax).
"""
from __future__ import annotations

from functools import partial

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.primitive import NO_FACTOR_RULE, PropKind, Trait
from ..ir.rules import RuleBuilder, pointwise
from ..trace import core
from . import lax as L
from .region import lookup, bind_region, drop_results, identity_flow, lower_inline, same_type


def _shape(*avals, prevent_cse, policy, num_out, regions):
    (body,) = regions
    if len(body.args) != len(avals) or not all(map(same_type, body.args, avals)):
        raise ShardcError(f"checkpoint: operands {list(avals)} do not match the region's "
                          f"block arguments {list(body.args)}")
    return tuple(body.results)


checkpoint_p = core.Primitive("checkpoint", shape_rule=_shape, sharding_rule=NO_FACTOR_RULE,
                              lower=lower_inline, prop_kind=PropKind.NONE,
                              multiple_results=True, num_regions=1)
checkpoint_p.data_flow = partial(identity_flow, roles=True)


def _nothing(*_, **__):
    return False


def _vjp(ctx, cts, *ins, prevent_cse, policy, num_out):
    op = ctx.op
    (body,) = op.regions
    n_out = len(op.outputs)
    sp = ctx.split_region(body, [c is not None for c in cts], policy or _nothing, ctx.active)
    index = {id(v): i for i, v in enumerate(sp.inputs)}
    saved = [v for v in sp.saved if id(v) not in index]

    def fwd(*args):
        env = {id(v): a for v, a in zip(sp.inputs, args)}
        ctx.eval_list(sp.fwd, env)
        return [lookup(env, v) for v in sp.outputs] + [_moved(env[id(v)], sp, v, 1)
                                                       for v in saved], None
    cur = core.current_builder()
    new, _ = bind_region(checkpoint_p, fwd, list(ins), op.params, op.loc, body.name)
    fresh = cur.program.ops.pop()      # its region and results move into `op`
    op.regions = fresh.regions
    op.outputs = list(op.outputs) + fresh.outputs[n_out:]
    op.sig = None
    res = new[n_out:]
    if cur is not ctx.builder:
        # the backward pass is traced into a region (a vjp function returned from jit):
        # the residuals are results of `op`, in its trace, which the region captures
        ctx.builder.host.update(v for v in fresh.outputs[n_out:] if v in cur.host)
        res = [core.Tracer(ctx.builder, v) for v in fresh.outputs[n_out:]]
    res = [_moved(r, sp, v, 0) for r, v in zip(res, saved)]   # (offloaded: back)
    read = [i for i, v in enumerate(sp.inputs) if v in set(sp.saved)]
    vals = res + [ins[i] for i in read]
    if prevent_cse and sp.recompute and vals:
        vals = list(optimization_barrier_p.bind(*vals))
    env = {id(v): t for v, t in zip(saved + [sp.inputs[i] for i in read], vals)}
    for v, c in zip(sp.ct_in, cts):
        if v is not None:
            env[id(v)] = c
    env.update(sp.captured)
    ctx.eval_list(sp.recompute + sp.bwd, env)
    out = []
    for v, g in zip(sp.inputs, sp.ct_out):
        g = lookup(env, g)
        if g is None or not dtypes.is_inexact(v.aval.dtype):
            out.append(None)
        elif not core.is_tracer(g):
            out.append(L.full(v.aval.shape, g.value, v.aval.dtype))
        else:
            out.append(g if g.value.aval.dtype == v.aval.dtype else
                       L.convert_element_type(g, v.aval.dtype))
    return out


def _moved(x, sp, v, end):
    """A residual the policy offloads (Offloadable(src, dst)), moved to its `dst` memory
    after the forward pass (end=1) or back to `src` for the backward pass (end=0)."""
    where = sp.offload.get(id(v))
    if where is None:
        return x
    from .memory import kind_of, memory_put_p
    return memory_put_p.bind(x, kind=kind_of(where[end]))


_vjp.keeps_none = True
checkpoint_p.vjp = _vjp


checkpoint_p.drop_results = drop_results(lambda op: op.params["num_out"])


# ---------------------------------------------------------------- checkpoint_name

def _identity_lower(ctx, x, **_):
    if ctx.in_shardings[0] == ctx.out_shardings[0]:
        return x
    from ..lower.emit import sharding_attr, tensor_type
    t = tensor_type(ctx.out_avals[0])
    return ctx.op("sdy.sharding_constraint", [x], [t], [t],
                  {"sharding": sharding_attr(ctx.out_shardings[0])}, sharding=False)


name_p = core.Primitive("name", shape_rule=lambda x, *, name: x, sharding_rule=pointwise,
                        lower=_identity_lower, prop_kind=PropKind.ELEMENTWISE,
                        traits=Trait.ALIAS | Trait.ANNOTATION)
name_p.vjp = lambda ctx, cts, x, *, name: [cts[0]]
name_p.type_partial = ("layout", (0,))     # explicit mode: keeps partial sums


# ---------------------------------------------------------------- optimization_barrier

def _barrier_rule(in_avals, out_avals):
    """Each operand shares its sharding with its own result only."""
    b = RuleBuilder(in_avals, out_avals)
    n = len(in_avals)
    for i, a in enumerate(in_avals):
        for d, size in enumerate(a.shape):
            dims = [d if j == i else None for j in range(n)]
            b.factor(dims, dims, size)
    return b.build()


def _barrier_lower(ctx, *xs):
    from ..lower.emit import tensor_type
    types = [tensor_type(a) for a in ctx.in_avals]
    return ctx.op("stablehlo.optimization_barrier", list(xs), types, types)


optimization_barrier_p = core.Primitive(
    "optimization_barrier", shape_rule=lambda *xs: tuple(xs), sharding_rule=_barrier_rule,
    lower=_barrier_lower, prop_kind=PropKind.NONE, multiple_results=True)
optimization_barrier_p.vjp = lambda ctx, cts, *xs: list(cts)
optimization_barrier_p.type_partial = "each"   # each result keeps its operand's type


def _jvp(ctx, primals, tangents, **params):
    """Forward mode needs no residuals: the region, differentiated inline."""
    return ctx.jvp_region(ctx.op.regions[0], list(primals), list(tangents))


checkpoint_p.jvp = _jvp


def _batch_rules():
    from .batching import region_rule
    checkpoint_p.batch = region_rule(checkpoint_p)
    name_p.batch = lambda ctx, args, batched, *, name: (name_p.bind(args[0], name=name), True)
    optimization_barrier_p.batch = lambda ctx, args, batched: (
        list(optimization_barrier_p.bind(*args)), list(batched))


_batch_rules()
