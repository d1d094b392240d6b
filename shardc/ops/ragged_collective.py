"""ragged_all_to_all as XLA's op, for GPUs and TPUs: shape, lowering, gradient and
batching. XLA:CPU has no ragged all-to-all, so there shardc.lax builds it from a dense
all_to_all instead (shardc.api.collectives) and this op is never bound.

Operands: operand (N, ...), output (M, ...), then input_offsets, send_sizes,
output_offsets and recv_sizes, int32 of length K (a multiple of the group size).
"""
from __future__ import annotations

from ..ir import dtypes
from ..ir.primitive import NO_FACTOR_RULE, PropKind, Vma
from ..lower.emit import tensor_type
from ..trace.core import Primitive
from .collectives import all_to_all_p
from .device_groups import channel, device_groups, groups_attr
from .elementwise import and_p
from .reduce import reduce_or_p


def _shape(operand, output, *metadata, axes, sizes):
    return output.strong() if output.weak else output


def _lower(ctx, *ins, axes, sizes):
    """jax's lowering: XLA's `ragged_all_to_all` custom call, its replica groups and
    channel in the backend config (api_version 4: a dictionary)."""
    groups = device_groups(ctx.mesh, axes)
    handle = channel(ctx).split("handle = ")[1].split(",")[0]
    config = f"{{channel_id = {handle} : i64, replica_groups = {groups_attr(groups)}}}"
    return ctx.op("stablehlo.custom_call", list(ins), [tensor_type(a) for a in ctx.in_avals],
                  [tensor_type(ctx.out_avals[0])],
                  {"api_version": "4 : i32", "backend_config": config,
                   "call_target_name": '"ragged_all_to_all"'})


# as jax's: no sharding rule (Shardy knows nothing of this custom call), and the result
# varies over the axes
ragged_all_to_all_p = Primitive("ragged_all_to_all", shape_rule=_shape,
                                sharding_rule=NO_FACTOR_RULE, lower=_lower,
                                prop_kind=PropKind.NONE, vma=Vma.AXES)


def _native(axes, sizes):
    return lambda *args: ragged_all_to_all_p.bind(*args, axes=axes, sizes=sizes)


def transpose(ct, operand_aval, input_offsets, send_sizes, output_offsets, recv_sizes,
              axes, sizes, ragged):
    """jax's transpose of ragged_all_to_all: the cotangent's received rows go back to
    where they came from (a ragged_all_to_all the other way, `ragged`), and the output's
    cotangent is the cotangent but on the rows something was written to."""
    from . import lax as L

    def swap(v):
        return all_to_all_p.bind(v, axes=axes, sizes=sizes, split_axis=0, concat_axis=0)
    back_offsets, back_inputs = swap(output_offsets), swap(input_offsets)
    zeros = L.zeros(operand_aval.shape, L.aval(ct).dtype)
    operand_ct = ragged(ct, zeros, back_offsets, recv_sizes, back_inputs, send_sizes)
    ca = L.aval(ct)
    m, k = ca.shape[0], L.aval(recv_sizes).shape[0]
    rows = L.iota(dtypes.int32, (m, k), dimension=0)
    start = L.broadcast_in_dim(back_offsets, (m, k), (1,))
    end = L.add(start, L.broadcast_in_dim(recv_sizes, (m, k), (1,)))
    written = reduce_or_p.bind(and_p.bind(L.ge(rows, start), L.lt(rows, end)), axes=(1,))
    written = L.broadcast_in_dim(written, ca.shape, (0,))
    return operand_ct, L.select(written, L.zeros_like(ct), ct)


def merge_batch(size, operand, output, metadata, ragged):
    """jax's batching over mesh axes: `size` exchanges (operand and output with the
    batch dim first, metadata (size, K)) as one, each example's slices next to each
    other on the way out and its rows at its own block of the operand and output."""
    from . import lax as L
    oa, ua = L.aval(operand), L.aval(output)
    n, m = oa.shape[1], ua.shape[1]
    k = L.aval(metadata[0]).shape[1]
    cols = []
    for i, v in enumerate(metadata):
        v = L.transpose(v, (1, 0))                                  # (K, size)
        if i in (0, 2):         # offsets move to the example's block
            block = L.mul(L.iota(dtypes.int32, (k, size), dimension=1),
                          L.full((k, size), n if i == 0 else m, dtypes.int32))
            v = L.add(v, block)
        cols.append(L.reshape(v, (k * size,)))
    out = ragged(L.reshape(operand, (size * n,) + oa.shape[2:]),
                 L.reshape(output, (size * m,) + ua.shape[2:]), *cols)
    return L.reshape(out, (size, m) + ua.shape[2:])


def _rules():
    from ..errors import ShardcError
    from . import lax as L
    from .batching import bcast

    def vjp(ctx, cts, operand, output, *metadata, axes, sizes):
        op_ct, out_ct = transpose(cts[0], ctx.in_avals[0], *metadata, axes, sizes,
                                  _native(axes, sizes))
        return [op_ct, out_ct] + [None] * 4
    ragged_all_to_all_p.vjp = vjp

    def batch(ctx, args, batched, *, axes, sizes):
        if ctx.axis_name in axes:
            raise ShardcError(f"ragged_all_to_all over the vmapped axis {ctx.axis_name!r} "
                              "after tracing: call it under shardc.vmap(axis_name=...)",
                              ctx.op.loc)
        operand, output = (bcast(ctx, x, b) for x, b in zip(args[:2], batched[:2]))
        metadata = [L.convert_element_type(bcast(ctx, v, b), dtypes.int32)
                    for v, b in zip(args[2:], batched[2:])]
        return merge_batch(ctx.size, operand, output, metadata, _native(axes, sizes)), True
    ragged_all_to_all_p.batch = batch


_rules()
