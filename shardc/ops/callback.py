"""debug_callback: call a Python function on the host with an op's runtime values.

The op is EFFECTFUL, so dead-code elimination keeps it. An unordered one has no
results. An ordered one returns a bool[] "token" and takes the previous ordered call's
token (and the results of the region ops with ordered calls since) as extra operands
after the user's values: the data dependencies keep them in program order, in and
across regions, as the token jax threads through its program does. It lowers to
the custom call jaxlib's CPU client runs host callbacks with
(`xla_ffi[_partitioned]_python_cpu_callback`); its `index` is the callback's position
in the lowering's list of them (Lowering.host_call), which the runtime turns into the
executable's host-callback table when it compiles.

Where it runs, as jax's: outside shard_map on device 0 only (a maximal sharding: the
operands are gathered, so the callback sees whole values once), or on every device's
shard with `partitioned=True`; inside a shard_map body on every device (its block).
"""
from __future__ import annotations

import jax

from ..errors import ShardcError, user_loc
from ..ir import dtypes
from ..ir.primitive import NO_FACTOR_RULE, PropKind, Trait, nondiff
from ..ir.program import Aval
from ..lower.emit import tensor_type
from ..trace import core
from ..trace.core import Primitive


class HostCallback:
    """The `callback` param: the user's flat function (ops compare it by identity; the
    IR prints it as `<callback>`, which parses as None: text cannot hold a function)."""
    __slots__ = ("fn", "name", "ordered", "nargs", "results", "loc")

    def __init__(self, fn, name, nargs, ordered=False, results=None):
        self.fn, self.name = fn, name
        self.nargs = nargs          # the user's values; operands past them are ordering deps
        self.ordered = ordered      # returns the token (first)
        self.results = results      # the Avals fn returns (pure/io_callback; None: debug)
        self.loc = user_loc()       # where the user made it (its errors are reported there)

    def __call__(self, *args):
        return self.fn(*args)


TOKEN_AVAL = Aval((), dtypes.bool_)


def _shape(*avals, callback, ordered, partitioned, manual):
    return [TOKEN_AVAL] if ordered else []


def _lower(ctx, *xs, callback, ordered, partitioned, manual):
    return lower_call(ctx, xs, callback, ordered, partitioned, manual)


def lower_call(ctx, xs, callback, ordered, partitioned, manual, device=0, side_effect=True):
    """The custom call running `callback` on the host: on logical device `device` of the
    program's mesh outside shard_map (or per shard if `partitioned`), on every device
    inside one."""
    op = ctx.ir_op
    name = op.prim.name
    if not isinstance(callback, HostCallback):
        raise ShardcError(f"{name}: this op has no Python function (it was parsed "
                          "from IR text, which cannot hold one); it cannot be compiled",
                          op.loc)
    if ordered != callback.ordered:
        raise ShardcError(f"internal: {name}'s ordered= differs from its callback's", op.loc)
    if ordered and ctx.mesh.size > 1 and op.prim is debug_callback_p:
        raise ShardcError("debug.print/callback with ordered=True: ordered effects are not "
                          f"supported for more than 1 device (the program runs on "
                          f"{ctx.mesh.size}), as in jax; drop ordered=True", op.loc)
    low = ctx.lowering
    low.next_channel()      # lowered by this rule each time, not from a template
    index = low.host_call(callback)
    where = "_partitioned" if partitioned and not manual else ""
    in_types = [low.types.get(x) or tensor_type(a) for x, a in zip(xs, ctx.in_avals)]
    out_types = [tensor_type(a) for a in ctx.out_avals]
    # jax's: a maximal sharding on one device outside shard_map (partitioned ones run
    # per shard all the same), replicated over no axes inside one (every device)
    if manual:
        per = [f"<mesh<[]>, [{', '.join(['{}'] * a.ndim)}]>" for a in ctx.out_avals] or \
            ["<mesh<[]>, []>"]
    else:
        per = [f"<mesh<[], device_ids=[{device}]>, []>"] * max(1, len(ctx.out_avals))
    sharding = "#sdy.sharding_per_value<[" + ", ".join(per) + "]>"
    props = {"api_version": "4 : i32", "backend_config": f"{{index = {index} : ui64}}",
             "call_target_name": f'"xla_ffi{where}_python_cpu_callback"',
             "has_side_effect": "true" if side_effect else "false",
             # XLA's partitioner of these calls requires layouts (row-major, as jax's)
             "operand_layouts": "[" + ", ".join(_layout(a.ndim) for a in ctx.in_avals) + "]",
             "result_layouts": "[" + ", ".join(_layout(a.ndim) for a in ctx.out_avals) + "]"}
    return ctx.op("stablehlo.custom_call", list(xs), in_types, out_types, props,
                  sharding=False, attrs={"sdy.sharding": sharding})


def _layout(rank) -> str:
    if not rank:
        return "dense<> : tensor<0xindex>"
    return f"dense<{list(range(rank - 1, -1, -1))}> : tensor<{rank}xindex>"


debug_callback_p = Primitive("debug_callback", shape_rule=_shape, sharding_rule=NO_FACTOR_RULE,
                             lower=_lower, prop_kind=PropKind.NONE, multiple_results=True,
                             traits=Trait.EFFECTFUL)
# an effect: no gradient flows through it (the forward pass still runs it, with primals)
debug_callback_p.vjp = nondiff
debug_callback_p.host_call = True      # a HostCallback op (ordered ones thread a token)


def _batch(ctx, args, batched, *, callback, **params):
    """vmap: one call per example, each with that example's values (jax unrolls too);
    ordering operands pass as they are."""
    from . import lax as L
    n = callback.nargs
    if not any(batched[:n]):
        outs = debug_callback_p.bind(*args, callback=callback, **params)
        return outs, [False] * len(outs)
    token = []
    for i in range(ctx.size):
        xs = []
        for x, b in zip(args[:n], batched):
            if b:
                a = L.aval(x)
                x = L.reshape(L.slice(x, (i,) + (0,) * (a.ndim - 1), (i + 1, *a.shape[1:])),
                              a.shape[1:])
            xs.append(x)
        deps = list(args[n:]) if not token else token      # chained, in example order
        token = debug_callback_p.bind(*xs, *deps, callback=callback, **params)
    return token, [False] * len(token)


debug_callback_p.batch = _batch


# ---------------------------------------------------------------- emitting a call

def _manual_ctx(b):
    """The shard_map body (ManualCtx) the builder `b` traces in, if any."""
    while b is not None:
        if getattr(b, "manual", None) is not None:
            return b.manual
        b = b.parent
    return None


def emit_flat(flat, vals, ordered, partitioned, name):
    """Call `flat(*vals)` now (no tracer among vals) or when the traced program runs."""
    b = core.current_builder()
    if b is None and not any(core.is_tracer(v) for v in vals):
        cpu = jax.local_devices(backend="cpu")[0]
        flat(*jax.device_put(vals, cpu))        # now, with host arrays (jax's impl)
        return
    manual = _manual_ctx(b)
    if manual is not None and set(manual.axes) != {n for n, _ in manual.mesh.axes}:
        raise ShardcError(f"{name} inside a shard_map over only some mesh axes "
                          f"({', '.join(manual.axes)}) is not supported yet; make the "
                          "shard_map manual over every axis")
    deps = _ordering_deps(b) if ordered else []
    debug_callback_p.bind(*vals, *deps, callback=HostCallback(flat, name, len(vals),
                                                             bool(ordered)),
                          ordered=bool(ordered), partitioned=bool(partitioned),
                          manual=manual is not None)


def _is_ordered_call(op) -> bool:
    return getattr(op.prim, "host_call", False) and op.params["ordered"]


def has_ordered_call(op) -> bool:
    return any(_is_ordered_call(o) or o.regions and has_ordered_call(o)
               for r in op.regions for o in r.ops)


def _ordering_deps(b) -> list:
    """What an ordered call in builder `b` must come after: the last ordered call's
    token and a result of each region op with ordered calls since (a region op's
    results are ready when its whole region has run), in `b` or, before `b`'s first
    ordered call, in the builders around it (captured: the region op then takes them
    as operands, so its body starts after them)."""
    while b is not None:
        deps = []
        for op in reversed(b.program.ops):
            if _is_ordered_call(op):
                deps.append(core.Tracer(b, op.outputs[0]))
                return deps[::-1]
            if op.regions and op.outputs and has_ordered_call(op):
                v = min(op.outputs, key=lambda v: v.aval.size)
                deps.append(core.Tracer(b, v))
        if deps:
            return deps[::-1]
        b = b.parent
    return []
