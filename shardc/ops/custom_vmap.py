"""custom_vmap_call: a call with a user-defined batching rule, as an op owning its body.

The region is the traced function; the operands are its traced arguments, then the
values it closes over. Unbatched, the region is the call (lowering inlines it). vmap
applies the user's rule instead of batching the region: `rule` is the op's opaque param
that knows how to call it (shardc.api.custom_batching) and how to differentiate it.
As in jax, there is no reverse mode (the gradient comes from an enclosing custom_vjp);
forward mode differentiates the body, and under vmap the rule's own JVP.
"""
from __future__ import annotations

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.primitive import NO_FACTOR_RULE, PropKind
from ..trace import core
from ..trace.core import Primitive
from .control import _fit
from .region import bind_region, identity_flow, lower_inline


def _shape(*avals, rule, regions):
    (body,) = regions
    if tuple(body.args) != tuple(avals):
        raise ShardcError(f"custom_vmap_call: operands {list(avals)} do not match the "
                          f"region's block arguments {list(body.args)}")
    return tuple(body.results)


custom_vmap_call_p = Primitive("custom_vmap_call", shape_rule=_shape, lower=lower_inline,
                               sharding_rule=NO_FACTOR_RULE, prop_kind=PropKind.NONE,
                               multiple_results=True, num_regions=1)
custom_vmap_call_p.data_flow = identity_flow


def _vjp(ctx, cts, *ins, rule):
    raise ShardcError(
        f"custom_vmap function {rule!r} does not support reverse-mode differentiation "
        "(as in jax): wrap it in shardc.custom_vjp to give it a gradient, or use jvp",
        ctx.op.loc)


custom_vmap_call_p.vjp = _vjp
custom_vmap_call_p.reversible = False


def _jvp(ctx, primals, tangents, *, rule):
    """A custom_vmap_call of the body's JVP (primals, then the tangents of the float
    operands), whose batching rule is the JVP of the user's rule."""
    (r,) = ctx.op.regions
    n = len(primals)
    fl = [i for i in range(n) if dtypes.is_inexact(core.aval_of(primals[i]).dtype)]
    t_in = [_fit(tangents[i], primals[i]) for i in fl]
    float_out = []

    def body(*xs):
        tmap = dict(zip(fl, xs[n:n + len(fl)]))
        outs, touts = ctx.jvp_region(r, list(xs[:n]) + list(xs[n + len(fl):]),
                                     [tmap.get(i) for i in range(n)] +
                                     [None] * (len(xs) - n - len(fl)))
        float_out[:] = [j for j, o in enumerate(outs)
                        if dtypes.is_inexact(core.aval_of(o).dtype)]
        return list(outs) + [_fit(touts[j], outs[j]) for j in float_out], None
    m = len(ctx.op.outputs)
    # a closed-over value's tangent: the user's rule does not see the value, so its JVP
    # could not carry that tangent (an error if this call is batched, not a wrong value)
    closure_t = any(tangents[i] is not None for i in range(rule.num_args, n))
    outs, _ = bind_region(custom_vmap_call_p, body, list(primals) + t_in,
                          lambda *_: {"rule": rule.jvp(n, fl, list(float_out), closure_t)},
                          ctx.op.loc, r.name)
    touts = [None] * m
    for k, j in enumerate(float_out):
        touts[j] = outs[m + k]
    return outs[:m], touts


custom_vmap_call_p.jvp = _jvp


def _batch(ctx, args, batched, *, rule):
    """vmap: the user's rule on the batched operands (mapped dim first)."""
    n = rule.num_args
    if any(batched[n:]):
        raise ShardcError(
            f"custom_vmap function {rule!r} closes over a value that vmap batches; pass it "
            "as an argument, so that its rule sees it batched", ctx.op.loc)
    outs, out_batched = rule.apply(ctx.size, list(batched[:n]), list(args[:n]))
    for k, (o, b, v) in enumerate(zip(outs, out_batched, ctx.op.outputs)):
        shape = core.aval_of(o).shape
        want = (ctx.size, *v.aval.shape) if b else v.aval.shape
        if shape != want:
            raise ShardcError(
                f"custom_vmap rule {rule!r}: output {k} has shape {shape}, but the function's "
                f"output has shape {v.aval.shape}"
                + (f" and the rule says it is batched (axis size {ctx.size})" if b else
                   " and the rule says it is not batched"), ctx.op.loc)
    return outs, out_batched


custom_vmap_call_p.batch = _batch


def _rebind(op, ins, evaluate):
    (r,) = op.regions
    outs, _ = bind_region(custom_vmap_call_p, lambda *xs: (evaluate(r, xs), None), ins,
                          op.params, op.loc, r.name)
    return outs


custom_vmap_call_p.rebind = _rebind
