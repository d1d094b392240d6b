"""Tracing shard_map bodies: what a body knows (ManualCtx), and shard_map's gradient.

shardc.shard_map (api) and the VJP of the shard_map op both trace a function into the
region of one `shard_map` op; the pieces they share live here, below the frontend.
"""
from __future__ import annotations

from math import prod

import numpy as np

from ..errors import ShardcError, user_loc
from ..ir import dtypes
from ..ir.primitive import Vma
from ..ir.program import Aval, Lit
from ..ir.sharding import MeshShape, Sharding, from_spec
from ..trace import core
from .blocks import local_aval
from .collectives import psum_p
from .manual import shard_map_p


class ManualCtx:
    """What a shard_map body knows: its mesh, manual axes, and each value's variance.

    `own` are the axes this shard_map makes manual; `axes` all the manual ones, those
    of the shard_maps it is nested in (`outer`) first. A nested body shares its outer
    body's variance table, so values it closes over keep theirs."""

    def __init__(self, mesh: MeshShape, axes: tuple, check_vma: bool, outer=None):
        self.mesh = mesh
        self.own = tuple(axes)
        self.outer = tuple(outer.axes) if outer is not None else ()
        self.axes = self.outer + self.own
        self.check_vma = check_vma
        # id(Value) -> frozenset of manual axes it varies over
        self.vma: dict = outer.vma if outer is not None else {}
        # id(Value) -> mesh axes it is reduced over (in_specs=P(..., reduced=...)), kept
        # through every op: out_specs may name only those (as jax's out_aval check)
        self.reduced: dict = outer.reduced if outer is not None else {}

    def vma_of(self, v) -> frozenset:
        if isinstance(v, Lit):
            return frozenset()
        return self.vma.get(id(v), frozenset())

    def record(self, prim, in_vals, outs, params):
        """Variance of an op's results (the hook core.bind calls inside bodies)."""
        ins = frozenset().union(*(self.vma_of(v) for v in in_vals)) if in_vals else frozenset()
        kind = prim.vma
        if kind is Vma.REMOVE:
            out = ins - set(params["axes"])
        elif kind is Vma.AXES:
            out = ins | set(params["axes"])
        else:
            out = ins
        for v in outs:
            self.vma[id(v)] = out
        red = self.reduced
        if red:
            r = frozenset().union(*(red.get(id(v), ()) for v in in_vals if not isinstance(v, Lit)))
            if r:
                for v in outs:
                    red[id(v)] = r

    def check_axes(self, name, axes):
        for a in axes:
            if a not in self.axes:
                raise ShardcError(
                    f"{name}: unknown axis name {a!r}; the enclosing shard_map's manual axes "
                    f"are {list(self.axes)}")


def manual_ctx():
    b = core.current_builder()
    while b is not None:
        if getattr(b, "manual", None) is not None:
            return b.manual
        b = b.parent
    return None


def open_free(sh: Sharding, manual, mesh) -> Sharding | None:
    """A result's sharding before propagation: manual axes fixed, free axes left open."""
    if set(manual) == set(mesh.names):
        return sh
    return Sharding(sh.dims, [True] * sh.rank)


def body_value(b, x):
    """A body result as a Value of the body (a scalar constant gets a constant op)."""
    if core.is_tracer(x) and x.builder is b:
        return x.value
    v = core.constant_value(b, x) if not core.is_tracer(x) else b.to_value(x)
    if isinstance(v, Lit):
        from .special import constant_p
        params = {"value": np.asarray(v.value, v.aval.dtype)}
        if v.aval.weak:      # a Python scalar result stays weakly typed, as in jax
            params["weak_type"] = True
        (v,) = b.add(constant_p, [], params, [Aval((), v.aval.dtype, v.aval.weak)],
                     user_loc())
    return v


def global_aval(aval: Aval, sh: Sharding, sizes) -> Aval:
    return aval.update(shape=tuple(n * prod(sizes[a] for a in axes)
                                   for n, axes in zip(aval.shape, sh.dims)))


def open_body(name, mesh: MeshShape, manual, check_vma):
    """A builder for a shard_map body over `manual` axes, nested in the current trace
    (and in the shard_map body it is in, if any)."""
    outer = core.current_builder()
    around = manual_ctx()
    if around is not None and set(around.axes) & set(manual):
        raise ShardcError(f"shard_map over {sorted(manual)} inside a shard_map already manual "
                          f"over {sorted(set(around.axes) & set(manual))}: a nested "
                          "shard_map names other mesh axes", user_loc())
    body = core.Builder(name, parent=outer)
    body.manual = ManualCtx(mesh, manual, check_vma, around)
    return body


def block_input(body, x, sh: Sharding, what="shard_map"):
    """A block argument of `body` for operand `x` with in_spec `sh`: it varies over the
    axes `sh` names and those `x` varies over already (a nested body's)."""
    ctx = body.manual
    t = body.new_input(local_aval(core.aval_of(x), sh, ctx.mesh.sizes, ctx.axes, what))
    before = ctx.vma_of(x.value) if ctx.outer and core.is_tracer(x) else frozenset()
    # (partial sums, in_specs=P(..., unreduced=...): each device holds a summand)
    ctx.vma[id(t.value)] = before | frozenset(ax for d in sh.dims for ax in d) | \
        frozenset(sh.unreduced)
    red = frozenset(sh.reduced) | (ctx.reduced.get(id(x.value), frozenset())
                                   if ctx.outer and core.is_tracer(x) else frozenset())
    if red:
        ctx.reduced[id(t.value)] = red
    if core.is_tracer(x) and x.value in x.builder.host:     # in pinned host memory
        body.host.add(t.value)
    return t


def add_shard_map(body, in_vals, in_sh, out_sh, loc):
    """The shard_map op of the current trace running `body` (traced, its outputs set)
    on `in_vals`; values it closed over become extra, replicated operands. Returns the
    result tracers, which vary over what the body's results vary over but its own
    axes."""
    outer = core.current_builder()
    ctx = body.manual
    region = body.program
    if body.host:       # (ops.memory: which results the body yields in host memory)
        region.meta["host_out"] = [v in body.host for v in region.outputs]
    sizes = ctx.mesh.sizes
    out_avals = [global_aval(v.aval, sh, sizes) for v, sh in zip(region.outputs, out_sh)]
    in_vals, in_sh = list(in_vals), list(in_sh)
    for t, v in body.captured.values():     # (their variance is the capture's)
        region.inputs.append(v)
        in_vals.append(t)
        in_sh.append(Sharding.replicated(v.aval.ndim))
    operands = [outer.to_value(x) for x in in_vals]
    params = {"in_specs": tuple(in_sh), "out_specs": tuple(out_sh), "manual_axes": ctx.own,
              "mesh": ctx.mesh, "check_vma": ctx.check_vma}
    if ctx.outer:
        params["outer_manual_axes"] = ctx.outer
    vals = outer.add(shard_map_p, operands, params, out_avals, loc, regions=[region])
    for v, r, sh in zip(vals, region.outputs, out_sh):
        v.sharding = open_free(sh, ctx.axes, ctx.mesh)
        if ctx.outer:
            ctx.vma[id(v)] = ctx.vma_of(r) - frozenset(ctx.own)
    return [core.Tracer(outer, v) for v in vals]


def bind_shard_map(f, args, in_sh, out_sh, manual, mesh: MeshShape, check_vma, name="body"):
    """Trace f on the device-local blocks of `args` (tracers) into a shard_map op of the
    current trace with boundary shardings in_sh/out_sh; f returns a flat sequence."""
    body = open_body(name, mesh, manual, check_vma)
    tracers = [block_input(body, x, sh) for x, sh in zip(args, in_sh)]
    with core.trace_context(body):
        outs = f(*tracers)
    body.program.outputs = [body_value(body, x) for x in outs]
    return add_shard_map(body, args, in_sh, out_sh, user_loc())


def _rebind(op, ins, evaluate):
    """A shard_map op again on `ins` (re-tracing a program): its body re-traced by
    `evaluate` in a fresh body with the op's own manual context."""
    region, p = op.regions[0], op.params
    return bind_shard_map(lambda *xs: evaluate(region, xs), ins, p["in_specs"],
                          p["out_specs"], p["manual_axes"], p["mesh"], p["check_vma"],
                          name=region.name)


shard_map_p.rebind = _rebind


# ---------------------------------------------------------------- gradient
# shard_map's transpose is a shard_map of the body's VJP (the forward is recomputed
# inside it); the backward pass lends its own machinery through the VjpCtx.

def _boundary(sh: Sharding, mesh: MeshShape) -> Sharding:
    return from_spec(sh.to_spec(), sh.rank, mesh, "shard_map").closed()


def shard_map_vjp(ctx, cts, *args, in_specs, out_specs, manual_axes, mesh, check_vma,
                  outer_manual_axes=()):
    from . import lax as L
    region = ctx.op.regions[0]
    n = len(args)
    # the operands to differentiate: floats that depend on what is differentiated (a
    # custom_vjp in the body may close over the others, constants of this gradient)
    floats = [dtypes.is_inexact(a.dtype) and (ctx.active is None or ctx.active[i])
              for i, a in enumerate(ctx.in_avals)]
    out_float = [dtypes.is_inexact(v.aval.dtype) for v in region.outputs]

    def bwd(*blocks):
        prims, cts_in = blocks[:n], list(blocks[n:])
        it = iter(cts_in)
        cts_full = tuple(_scaled(next(it), spec) if f else L.zeros(v.aval.shape, v.aval.dtype)
                         for f, v, spec in zip(out_float, region.outputs, out_specs))
        diff = [i for i in range(n) if floats[i]]

        def fwd(*ws):
            full = list(prims)
            for i, w in zip(diff, ws):
                full[i] = w
            return tuple(ctx.eval_ops(region, full))
        _, _, fn = ctx.trace_vjp(fwd, tuple(prims[i] for i in diff))
        grads = fn(cts_full)
        mc = manual_ctx()
        out = []
        for i, g in zip(diff, grads):
            # (an operand of partial sums: each summand's gradient is the whole one)
            named = {a for d in in_specs[i].dims for a in d} | set(in_specs[i].unreduced)
            # (unchecked, every manual axis it does not name: as jax's transpose)
            # (only its own axes: a nested body's values vary over the outer ones too)
            vary = tuple(sorted((mc.vma_of(g.value) if check_vma else set(manual_axes))
                                & set(manual_axes) - named))
            # the gradient of a replicated input sums the per-device ones (a psum)
            out.append(psum_p.bind(g, axes=vary, sizes=tuple(mesh.sizes[a] for a in vary))
                       if vary else g)
        return tuple(out)

    def _scaled(ct, spec):
        """Unchecked (check_vma=False), psum transposes to psum, so the cotangent of an
        output replicated over manual axes is split evenly among them (as jax's)."""
        if check_vma:
            return ct
        named = {a for d in spec.dims for a in d}
        n = prod(mesh.sizes[a] for a in manual_axes if a not in named)
        return ct if n == 1 else L.div(ct, L.full((), n, L.aval(ct).dtype))
    # (the cotangent of partial sums is whole on each device: jax's to_ct_spec)
    in_sh = [_boundary(s, mesh) for s in in_specs] + \
        [Sharding(_boundary(s, mesh).dims) for s, f in zip(out_specs, out_float) if f]
    diff_sh = [Sharding(_boundary(s, mesh).dims) for s, f in zip(in_specs, floats) if f]
    grads = iter(bind_shard_map(bwd, [*args, *[c for c, f in zip(cts, out_float) if f]],
                                in_sh, diff_sh, manual_axes, mesh, check_vma, name="bwd"))
    return [next(grads) if f else None for f in floats]


# ---------------------------------------------------------------- forward mode

def shard_map_jvp(ctx, primals, tangents, *, in_specs, out_specs, manual_axes, mesh,
                  check_vma, outer_manual_axes=()):
    """Forward mode (for a body with a while loop, which has no reverse mode): a
    shard_map of the body's forward pass, each tangent split as its primal is."""
    region = ctx.op.regions[0]
    n, m = len(primals), len(region.outputs)
    specs = list(in_specs) + [Sharding.replicated(v.aval.ndim)
                              for v in ctx.op.inputs[len(in_specs):]]
    have = [i for i, t in enumerate(tangents) if t is not None]
    floats = [j for j, v in enumerate(region.outputs) if dtypes.is_inexact(v.aval.dtype)]

    def body(*xs):
        tans = [None] * n
        for i, t in zip(have, xs[n:]):
            tans[i] = t
        outs, touts = ctx.jvp_region(region, list(xs[:n]), tans)
        return list(outs) + [ctx.tangent_of(touts[j], outs[j]) for j in floats]
    res = bind_shard_map(body, [*primals, *(tangents[i] for i in have)],
                         specs + [specs[i] for i in have],
                         list(out_specs) + [out_specs[j] for j in floats], manual_axes,
                         mesh, check_vma, name=region.name)
    touts = [None] * m
    for k, j in enumerate(floats):
        touts[j] = res[m + k]
    return res[:m], touts


shard_map_p.jvp = shard_map_jvp


# ---------------------------------------------------------------- batching (vmap)

def shard_map_batch(ctx, args, batched, *, in_specs, out_specs, manual_axes, mesh,
                    check_vma, outer_manual_axes=()):
    """vmap of a shard_map: the body batched; a batched operand's or result's mapped dim
    is split over the manual axes among `spmd_axis_name` (jax's spmd_axis_name), else
    whole on every device."""
    from math import prod
    region = ctx.op.regions[0]
    lead = tuple(a for a in (ctx.spmd_axis_name or ()) if a in manual_axes)
    n = prod(mesh.sizes[a] for a in lead)
    if ctx.size % n:
        raise ShardcError(f"vmap: the mapped size {ctx.size} does not divide over "
                          f"spmd_axis_name {lead} (size {n}) of the shard_map inside",
                          ctx.op.loc)
    body = ctx if not lead else ctx.resized(ctx.size // n)
    specs = list(in_specs) + [Sharding.replicated(v.aval.ndim)
                              for v in ctx.op.inputs[len(in_specs):]]
    in_sh = [_led(lead, s) if b else s for s, b in zip(specs, batched)]
    out_b = body.out_batched(region, list(batched))
    out_sh = [_led(lead, s) if b else s for s, b in zip(out_specs, out_b)]
    outs = bind_shard_map(lambda *xs: body.batch_region(region, list(xs), list(batched),
                                                        force=out_b)[0],
                          list(args), in_sh, out_sh, manual_axes, mesh, check_vma,
                          name=region.name)
    return outs, out_b


def _led(lead, s):
    return Sharding((lead, *s.dims), None, s.unreduced, s.reduced)


shard_map_p.batch = shard_map_batch
