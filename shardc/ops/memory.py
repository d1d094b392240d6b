"""memory_put: a value moved to another memory of its devices (jax.device_put to a
sharding with a memory kind, or to jax.memory.Space, inside jit; a remat policy's
offloaded residual). `kind` is "device" or "pinned_host".

Values on the host are tracked per trace (trace.core's `Builder.host`): an op with a
host operand of rank > 0 has host results, as jax's memory-space types give (scalars
and constants take the memory of what they meet); a region's block arguments are where
its operands are, and a region op's results where its body yields them.

On GPUs and TPUs the move is XLA's `annotate_device_placement` custom call, as jax
lowers it; XLA:CPU has one memory, where jax lowers it to nothing and so does this
(the program's meta names the platform it is compiled for).
"""
from __future__ import annotations

from ..ir.primitive import PropKind, Trait
from ..ir.rules import pointwise
from ..lower.emit import tensor_type
from ..trace import core
from .remat import _identity_lower

def kind_of(memory_kind) -> str:
    """jax's memory kind (a string, None, or a jax.memory.Space) as device or pinned_host:
    only pinned host memory is a memory space of its own in jax's types."""
    name = getattr(memory_kind, "name", memory_kind)
    return "pinned_host" if name in ("pinned_host", "Host") else "device"


def _lower(ctx, x, *, kind):
    if ctx.lowering.program.meta.get("platform", "cpu") == "cpu":
        return _identity_lower(ctx, x)
    t = tensor_type(ctx.out_avals[0])
    return ctx.op("stablehlo.custom_call", [x], [t], [t],
                  {"api_version": "1 : i32", "call_target_name": '"annotate_device_placement"',
                   "has_side_effect": "true"},
                  attrs={"mhlo.frontend_attributes": f'{{_xla_buffer_placement = "{kind}"}}'})


memory_put_p = core.Primitive("memory_put", shape_rule=lambda x, *, kind: x,
                              sharding_rule=pointwise, lower=_lower,
                              prop_kind=PropKind.ELEMENTWISE, traits=Trait.ALIAS)
memory_put_p.memory = lambda params: params["kind"]     # (read by Builder.add)


def _vjp(ctx, cts, x, *, kind):
    """The cotangent goes back to the operand's memory (jax's transpose of device_put)."""
    src = "pinned_host" if ctx.op.inputs[0] in ctx.builder.host else "device"
    return [memory_put_p.bind(cts[0], kind=src)]


memory_put_p.vjp = _vjp
memory_put_p.batch = lambda ctx, args, batched, **params: (
    memory_put_p.bind(args[0], **params), batched[0])
