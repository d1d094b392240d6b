"""Ops about data and shardings themselves: constants, sharding constraints, inspection."""
from __future__ import annotations

import numpy as np

from ..trace.core import Primitive
from ..ir.primitive import PropKind, Trait
from ..errors import ShardcError
from ..ir.program import Aval, Lit
from ..lower.emit import dense, sharding_attr, tensor_type
from ..ir.rules import Group, no_rule, pointwise


def _const_shape(*, value, weak_type=False):
    return Aval(value.shape, value.dtype, weak_type)


def _lower_const(ctx, *, value, weak_type=False):
    aval = ctx.out_avals[0]
    return ctx.op("stablehlo.constant", [], [], [tensor_type(aval)],
                  {"value": dense(value, aval)})


constant_p = Primitive("constant", shape_rule=_const_shape, sharding_rule=no_rule,
                       lower=_lower_const, prop_kind=PropKind.NONE, traits=Trait.CONSTANT)
# a scalar constant is known to the folds of its users (passes.fold_constants)
constant_p.fold = lambda op, consts, defs: [Lit(
    np.asarray(op.params["value"]).item(), op.outputs[0].aval)] if np.ndim(
    op.params["value"]) == 0 else None


# with_sharding_constraint: the result's sharding is fixed to `sharding` (open dims, `?`,
# are left to propagation); propagation treats it as a source. `auto`: the sharding
# search (shardc.AUTO) put it there to fix its choice (auto/solution.py), not the user.
def _constraint_shape(x, *, sharding, reshard=False, auto=False):
    if sharding.rank != x.ndim:
        raise ShardcError(f"with_sharding_constraint: sharding {sharding} has rank "
                          f"{sharding.rank} but the array is {x}")
    return x


def _lower_constraint(ctx, x, *, sharding, reshard=False, auto=False):
    t = tensor_type(ctx.out_avals[0])
    sh = sharding if ctx.lowering.sources_only else ctx.out_shardings[0]
    (r,) = ctx.op("sdy.sharding_constraint", [x], [t], [t],
                  {"sharding": sharding_attr(sh)}, sharding=False)
    return r


def _constraint_source(op):
    from ..propagate.engine import Source
    if op.params.get("auto"):
        from ..propagate.explain import SEARCH
        return Source("constraint", SEARCH, op.loc)
    return Source("constraint", "reshard" if op.params.get("reshard") else
                  "with_sharding_constraint", op.loc)


def _constraint_type(in_avals, out_avals, mesh, explicit, *, sharding, reshard=False,
                     auto=False):
    """Explicit mode: the constrained value's type is the constraint on explicit axes."""
    from ..trace.types import restrict
    return [restrict(sharding, explicit, out_avals[0].ndim)]


sharding_constraint_p = Primitive("sharding_constraint", shape_rule=_constraint_shape,
                                  sharding_rule=pointwise, lower=_lower_constraint,
                                  prop_kind=PropKind.ELEMENTWISE,
                                  traits=Trait.SHARDED_RESULTS | Trait.ALIAS | Trait.ANNOTATION)
sharding_constraint_p.source_of = _constraint_source
sharding_constraint_p.type_rule = _constraint_type
sharding_constraint_p.operand_constraints = \
    lambda op: [(op.inputs[0], op.outputs[0].sharding, None)]


# inspect_sharding: identity whose callback gets the decided sharding after propagation.
def _lower_inspect(ctx, x, *, callback):
    if ctx.in_shardings[0] == ctx.out_shardings[0]:
        return x
    t = tensor_type(ctx.out_avals[0])
    (r,) = ctx.op("sdy.sharding_constraint", [x], [t], [t],
                  {"sharding": sharding_attr(ctx.out_shardings[0])}, sharding=False)
    return r


inspect_sharding_p = Primitive("inspect_sharding", shape_rule=lambda x, *, callback: x,
                               sharding_rule=pointwise, lower=_lower_inspect,
                               prop_kind=PropKind.ELEMENTWISE, traits=Trait.EFFECTFUL)


def _inspect_callback(op, mesh):
    if op.params.get("callback") is not None:
        op.params["callback"](mesh.named(op.outputs[0].sharding))


inspect_sharding_p.after_propagation = _inspect_callback
_ = np


# ---------------------------------------------------------------- gradients

def _vjps():
    from ..ir.primitive import nondiff
    from ..ir.sharding import Sharding
    constant_p.vjp = nondiff

    def constraint_vjp(ctx, cts, x, *, sharding, **kw):
        """The cotangent keeps the constraint; a reshard's in explicit mode goes back to
        its operand's type instead (which backward() gives each cotangent), as jax's
        transpose of reshard: a reduced value's partial-sum cotangent is reduce-scattered
        straight to the operand's sharding."""
        if kw.get("reshard") and ctx.op.inputs[0].aval.ts is not None:
            return [cts[0]]
        # (explicit mode: the cotangent of partial sums is whole and vice versa, as
        # to_ct_aval: a reshard to P(unreduced=...) in a gradient, differentiated again)
        sharding = Sharding(sharding.dims, sharding.open, sharding.reduced,
                            sharding.unreduced)
        out = sharding_constraint_p.bind(cts[0], sharding=sharding, **kw)
        out.value.sharding = sharding
        return [out]
    sharding_constraint_p.vjp = constraint_vjp
    inspect_sharding_p.vjp = lambda ctx, cts, x, *, callback: [cts[0]]


_vjps()


# sharding_group: values with the same group id get one sharding (Shardy's sharding
# groups; shard_alike and gradients use them). No results; kept by DCE.
def _group_shape(x, *, group_id):
    return []


sharding_group_p = Primitive("sharding_group", shape_rule=_group_shape, sharding_rule=no_rule,
                             lower=lambda ctx, x, *, group_id: [], multiple_results=True,
                             prop_kind=PropKind.NONE,
                             traits=Trait.EFFECTFUL | Trait.SHARDING_GROUP)
sharding_group_p.vjp = lambda ctx, cts, x, *, group_id: [None]
sharding_group_p.type_partial = ("layout", (0,))  # explicit mode: no result to type
sharding_group_p.data_flow = lambda op: [Group(op.params["group_id"], op.inputs[0])]


def _batch_rules():
    """vmap. A constraint's mapped dim is sharded over `spmd_axis_name`, or without one
    left to propagation (jax's unconstrained dim: a batch dim that came in sharded
    stays so); inspection sees the batched value."""
    from ..ir.sharding import Sharding
    from .batching import no_operands

    def constraint_batch(ctx, args, batched, *, sharding, **kw):
        lead = tuple(ctx.spmd_axis_name or ())
        # (its unreduced and reduced axes too: a dim sharded on one is no partial sum)
        used = set(sharding.axes()) | set(sharding.unreduced) | set(sharding.reduced)
        if used & set(lead):
            raise ShardcError(f"vmap: spmd_axis_name {ctx.spmd_axis_name} is already used "
                              f"by the sharding constraint {sharding} inside the vmapped "
                              "function; a mesh axis can shard only one dim")
        rest = sharding.open or (False,) * len(sharding.dims)
        opened = None if sharding.open is None and lead else (not lead, *rest)
        sh = Sharding((lead, *sharding.dims), opened, sharding.unreduced, sharding.reduced)
        out = sharding_constraint_p.bind(args[0], sharding=sh, **kw)
        out.value.sharding = sh
        return out, True
    sharding_constraint_p.batch = constraint_batch
    inspect_sharding_p.batch = lambda ctx, args, batched, *, callback: (
        inspect_sharding_p.bind(args[0], callback=callback), True)
    # a batched value has a rank the group's others lack: it leaves the group
    sharding_group_p.batch = lambda ctx, args, batched, *, group_id: ([], [])
    constant_p.batch = no_operands


_batch_rules()
