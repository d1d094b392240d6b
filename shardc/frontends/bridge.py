"""jax code inside a shardc trace.

shardc's tracers are jax tracers (trace.core.Tracer subclasses jax.core.Tracer) whose
trace is `ShardcTrace`. While shardc traces a function, `ShardcTrace` is jax's current
trace, so every primitive jax binds — jax.numpy, jax.lax, jax.nn, jax.random, flax,
optax, a jax.jit function — on shardc's tracers or on constants comes here and becomes
shardc ops (`translate`). Functions jax passes with a primitive (custom_jvp/custom_vjp)
are first traced by jax's own tracer to a jaxpr, whose equations are translated one by
one; so are the jaxprs in a primitive's params (jit, scan, while, cond, remat).
This package is the one place in shardc that calls jax's tracer.
"""
from __future__ import annotations

import os

import jax
from jax._src import config
from jax._src import core as jcore
from jax._src import source_info_util

from ..ir.program import Lit
from ..trace import core
from . import translate


class ShardcTrace(jcore.Trace):
    """The jax trace of shardc's tracers: each primitive becomes shardc ops."""

    def __init__(self):
        super().__init__()
        self.requires_low = True

    def process_primitive(self, primitive, tracers, params, /):
        if any(_is_float0(t) for t in tracers):
            return _float0_result(primitive, tracers, params)
        out = translate.apply(primitive, list(tracers), params)
        if primitive.multiple_results:
            return [_for_jax(o) for o in out]
        return _for_jax(out)

    def process_call(self, call_primitive, f, tracers, params, /):
        # closed_call, core_call: inline. jax binds with the eval trace current (its
        # take_current_trace), so the body's primitives come here only with this one
        with jcore.set_current_trace(self):
            return f.call_wrapped(*tracers)

    def process_custom_jvp_call(self, primitive, fun, jvp, tracers, /, *, symbolic_zeros):
        return _through_jaxpr(lambda *xs: primitive.bind(
            *xs, subfuns=(fun, jvp), symbolic_zeros=symbolic_zeros), tracers)

    def process_custom_vjp_call(self, primitive, fun, fwd, bwd, tracers, /, *, out_trees,
                                symbolic_zeros):
        # jax runs either `fun` or `fwd` of one call, never both (their output trees
        # share a store): trace fwd alone, its outputs after the residuals are fun's
        from jax._src.interpreters import partial_eval as pe
        from .rules_control import custom_vjp_of
        tracers = list(tracers)
        fwd_ = pe._interleave_fun(fwd, tuple([True] * len(tracers)))
        jaxpr, _, consts = pe.trace_to_jaxpr_dynamic(
            fwd_, [jcore.typeof(t) for t in tracers])
        return custom_vjp_of([], tracers, lambda xs: translate.eval_jaxpr(
            jaxpr, consts, list(xs)), bwd, out_trees)

    def process_shard_map(self, primitive, fun, tracers, **params):
        from .rules_manual import process_shard_map
        return process_shard_map(primitive, fun, list(tracers), params)

    def process_map(self, map_primitive, f, tracers, params, /):
        raise translate.unsupported(map_primitive.name, "use shardc.pmap or shard_map")

    def stage_value(self, val):
        # lifts a constant into the trace: jnp.asarray(2) is a tracer under a trace (a
        # jax literal such as TypedInt has no .ndim, which jax code then reads)
        return translate.staged(val)

    def cur_qdd(self, x):
        return None


TRACE = ShardcTrace()


def _is_float0(x):
    return getattr(x, "dtype", None) == jax.dtypes.float0


def _float0_result(primitive, tracers, params):
    """A primitive on float0 values (the tangent type of integers, which holds no data:
    jax.grad(allow_int=True) broadcasts and adds them) gives zeros of its result type,
    as NumPy float0 arrays, which is how jax.jit returns them."""
    import numpy as np
    out, _ = primitive.abstract_eval(*[jcore.typeof(t) for t in tracers], **params)
    outs = out if primitive.multiple_results else [out]
    zeros = [np.zeros(a.shape, a.dtype) for a in outs]
    if any(z.dtype != jax.dtypes.float0 for z in zeros):
        raise translate.unsupported(primitive.name, "on float0 values, with a result of "
                                    "another dtype")
    return zeros if primitive.multiple_results else zeros[0]


def _for_jax(x):
    # a translated jaxpr's literal result (a jit whose output is a constant) is a
    # shardc literal, which jax cannot take as an argument of its next primitive
    return core.literal_tracer(x) if type(x) is Lit else x


def _through_jaxpr(bind, tracers):
    """Bind a primitive that takes functions under jax's tracer (one equation holding
    their jaxprs) and translate that equation."""
    structs = [jax_struct(t) for t in tracers]
    closed = jax.make_jaxpr(bind)(*structs)
    return translate.eval_jaxpr(closed.jaxpr, closed.consts, list(tracers))


def jax_struct(x):
    a = jcore.typeof(x)
    return jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=getattr(a, "weak_type", False))


# ---------------------------------------------------------------- shardc's tracers as jax's

_AVALS: dict = {}


def jax_aval(t):
    """The jax type of shardc tracer `t`: a ShapedArray; with its sharding in explicit
    mode (as jax.typeof)."""
    a = t.value.aval
    if a.ts is not None:
        from ..api.explicit import typeof
        return typeof(t)
    if t.builder.host and t.value in t.builder.host:     # in pinned host memory
        return jcore.ShapedArray(a.shape, a.dtype, weak_type=a.weak,
                                 memory_space=jcore.MemorySpace.Host)
    hit = _AVALS.get(a)
    if hit is None:
        if len(_AVALS) > 50_000:
            _AVALS.clear()
        hit = _AVALS[a] = jcore.ShapedArray(a.shape, a.dtype, weak_type=a.weak)
    return hit


class _Enter:
    """jax's current trace is shardc's; in a shard_map body jax's axis environment also
    names its manual axes, so jax.lax collectives (whose Python code reads axis sizes
    there) work in shardc.shard_map bodies too."""

    def __init__(self):
        from ..ops.manual_region import manual_ctx
        ctx = manual_ctx()
        self.ctxs = [jcore.set_current_trace(TRACE)]
        if ctx is not None:
            self.ctxs.append(jcore.extend_axis_env_nd(
                [(a, ctx.mesh.sizes[a]) for a in ctx.axes]))

    def __enter__(self):
        for c in self.ctxs:
            c.__enter__()

    def __exit__(self, *exc):
        for c in reversed(self.ctxs):
            c.__exit__(*exc)


_enter = _Enter


def _folding():
    return config.eager_constant_folding.value


def _leave():
    return jcore.set_current_trace(jcore.eval_trace)


def install():
    core.JAX_BRIDGE.update(jax_aval=jax_aval, jax_trace=TRACE, enter=_enter,
                           folding=_folding, leave=_leave)
    # jax's own errors and source locations skip shardc's frames, as they skip jax's
    source_info_util.register_exclusion(os.path.dirname(os.path.dirname(__file__)))


__all__ = ["ShardcTrace", "TRACE", "install", "jax_aval"]
