"""Manual parallelism: the shard_map region op (its collectives: ops/collectives.py).
"""
from __future__ import annotations

from math import prod

from ..trace.core import Primitive
from ..ir.primitive import NO_FACTOR_RULE, PropKind
from ..errors import ShardcError
from ..lower.emit import sharding_per_value, tensor_type
from ..ir.rules import Edge
from ..ir.sharding import Sharding
from .blocks import local_shape


# ---------------------------------------------------------------- shard_map

def all_manual(params) -> tuple:
    """The axes manual in a shard_map's body: its enclosing ones' (if nested), its own."""
    return tuple(params.get("outer_manual_axes", ())) + tuple(params["manual_axes"])


def _shard_map_shape(*avals, in_specs, out_specs, manual_axes, mesh, check_vma, regions,
                     outer_manual_axes=()):
    """The body takes each operand's per-device block (operands past in_specs are values
    the body closed over, replicated) and yields per-device blocks of the results; in a
    nested shard_map the operands are already blocks over `outer_manual_axes`."""
    (body,) = regions
    if set(outer_manual_axes) & set(manual_axes):
        raise ShardcError(f"shard_map: manual axes {manual_axes} overlap the enclosing "
                          f"shard_map's {outer_manual_axes}")
    if len(body.args) != len(avals) or len(in_specs) > len(avals):
        raise ShardcError(f"shard_map: {len(avals)} operands, {len(in_specs)} in_specs and "
                          f"{len(body.args)} block arguments do not match")
    for i, (a, arg) in enumerate(zip(avals, body.args)):
        spec = in_specs[i] if i < len(in_specs) else Sharding.replicated(a.ndim)
        if spec.rank != a.ndim:
            raise ShardcError(f"shard_map: in_spec {spec} of operand {i} ({a}) has rank "
                              f"{spec.rank}")
        want = a.update(shape=local_shape(a.shape, spec, mesh.sizes, f"shard_map operand {i}"))
        if arg.bare() != want.bare():     # (the types' shardings are the type rule's)
            raise ShardcError(f"shard_map: block argument {i} is {arg}, but operand {i} ({a}) "
                              f"with in_spec {spec} is {want} per device")
    if len(body.results) != len(out_specs):
        raise ShardcError(f"shard_map: the body yields {len(body.results)} values for "
                          f"{len(out_specs)} out_specs")
    outs = []
    for i, (r, spec) in enumerate(zip(body.results, out_specs)):
        if spec.rank != r.ndim:
            raise ShardcError(f"shard_map: out_spec {spec} of result {i} ({r}) has rank "
                              f"{spec.rank}")
        outs.append(r.update(shape=tuple(n * prod(mesh.sizes[a] for a in axes)
                                         for n, axes in zip(r.shape, spec.dims))))
    return tuple(outs)


def _shard_map_lower(ctx, *operands, in_specs, out_specs, manual_axes, mesh, check_vma,
                     outer_manual_axes=()):
    op = ctx.ir_op
    region = op.regions[0]
    low = ctx.lowering
    names = {}
    args = []
    for v in region.inputs:
        n = low.fresh()
        names[id(v)] = n
        low.types[n] = tensor_type(v.aval)
        args.append(f"{n}: {tensor_type(v.aval)}")
    saved, low.manual = low.manual, all_manual(dict(manual_axes=manual_axes,
                                                     outer_manual_axes=outer_manual_axes))
    try:
        inner = low.body(region, names, ctx.indent + "    ")
    finally:
        low.manual = saved
    rets = [names[id(v)] if not hasattr(v, "value") else None for v in region.outputs]
    ret_types = [tensor_type(v.aval) for v in region.outputs]
    in_sh = [_with_manual(spec, v.sharding) for spec, v in zip(in_specs, region.inputs)]
    # Manual axes come from out_specs, never from the propagated outer sharding: a
    # sharding_group (e.g. a gradient tied to its replicated primal) may have dropped them.
    out_sh = [_with_manual(spec, _free(v.sharding, manual_axes))
              for spec, v in zip(out_specs, op.outputs)]
    props = {"in_shardings": sharding_per_value(in_sh),
             "manual_axes": "#sdy<manual_axes{" + ", ".join(f'"{a}"' for a in manual_axes) + "}>",
             "out_shardings": sharding_per_value(out_sh)}
    body = (f"{{\n{ctx.indent}  ^bb0({', '.join(args)}):\n" + "\n".join(inner) + "\n"
            f'{ctx.indent}    "sdy.return"({", ".join(rets)}) : ({", ".join(ret_types)}) -> ()\n'
            f"{ctx.indent}}}")
    return ctx.op("sdy.manual_computation", list(operands),
                  [tensor_type(a) for a in ctx.in_avals],
                  [tensor_type(a) for a in ctx.out_avals], props, sharding=False,
                  regions=[body])


def _with_manual(spec: Sharding, local: Sharding) -> Sharding:
    """A manual_computation boundary sharding: manual axes major, then free ones; the
    spec's unreduced axes (out_specs=P(..., unreduced=...): each device's block is a
    summand of the result) and reduced ones, as jax's."""
    return Sharding([tuple(m) + tuple(f) for m, f in zip(spec.dims, local.dims)], None,
                    spec.unreduced, spec.reduced)


def _free(sh: Sharding, manual_axes) -> Sharding:
    """`sh` without the manual axes (the free part of a boundary sharding)."""
    return Sharding([tuple(a for a in d if a not in manual_axes) for d in sh.dims], sh.open)


def _shard_map_source(op):
    from ..propagate.engine import Source
    return Source("shard_map", "shard_map out_specs", op.loc)


def _shard_map_constraints(op):
    """shard_map's in_specs constrain its operands (free axes left open, unless all
    axes are manual)."""
    from ..propagate.engine import Source
    src = Source("shard_map", "shard_map in_specs", op.loc)
    full = len(all_manual(op.params)) == len(op.params["mesh"].names)
    return [(v, s if full else Sharding(s.dims, [True] * s.rank), src)
            for v, s in zip(op.inputs, op.params["in_specs"])]


shard_map_p = Primitive("shard_map", shape_rule=_shard_map_shape, lower=_shard_map_lower,
                        sharding_rule=NO_FACTOR_RULE, prop_kind=PropKind.NONE,
                        multiple_results=True, num_regions=1)
shard_map_p.source_of = _shard_map_source
shard_map_p.operand_constraints = _shard_map_constraints


def _shard_map_data_flow(op):
    """Operands to block arguments, region results to results: one sharding over the
    free (non-manual) axes; the specs place the manual ones."""
    manual = all_manual(op.params)
    full = len(manual) == len(op.params["mesh"].names)
    region = op.regions[0]
    in_specs = op.params["in_specs"]
    in_specs = in_specs + (None,) * (len(op.inputs) - len(in_specs))   # replicated
    return ([Edge(o, i, manual, sp, op.loc, full)
             for o, i, sp in zip(op.inputs, region.inputs, in_specs)] +
            [Edge(o, i, manual, sp, op.loc)
             for o, i, sp in zip(op.outputs, region.outputs, op.params["out_specs"])])


shard_map_p.data_flow = _shard_map_data_flow


# ---------------------------------------------------------------- gradient
# shard_map's transpose is a shard_map of the body's VJP (the forward is recomputed
# inside it).

def _shard_map_vjp(ctx, cts, *args, **params):
    """A shard_map of the body's VJP (manual_region, which imports this module)."""
    from .manual_region import shard_map_vjp
    return shard_map_vjp(ctx, cts, *args, **params)


shard_map_p.vjp = _shard_map_vjp
