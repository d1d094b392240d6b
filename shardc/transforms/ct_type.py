"""Explicit mode: a cotangent given the cotangent type of its primal, as jax's typed
transposes give it (core.ShapedArray.to_ct_aval), by the backward pass (ad.py) for
each cotangent it accumulates; and a value computed untyped (x.at[...], tile,
reduce_window's fold) given its own type (primal=True)."""
from __future__ import annotations

from ..ir.sharding import Sharding
from ..trace import types


def retype(c, ts, builder, partial=None, reduced=(), dot=False, primal=False):
    """Explicit mode: cotangent `c` resharded to the cotangent type of a primal typed
    `ts` (jax's to_ct_aval: its unreduced and reduced axes swapped; open dims on a mesh
    with Auto axes, which the compiler still chooses); `partial`, `reduced`: what the
    backward pass knows of its rules' partial sums (ur_rules.mark_cotangent_ops);
    `dot`: `c` is a contraction's cotangent of an operand. `primal`: `c` is a value
    of type `ts` (an op's result traced untyped), not a cotangent."""
    partial = {} if partial is None else partial
    from ..ops.special import sharding_constraint_p
    mesh = builder.meshes.info.shape
    opens = None if len(mesh.explicit) == len(mesh.names) else [True] * len(ts.dims)
    # the cotangent of a value reduced over axes is a partial sum over them (jax's). A
    # whole one (a rule's reduction of partial sums, grad's seed, an op's that keeps
    # no reduced axes) is resharded to partial sums whole, as jax's reshard of its
    # seed (an op typed partial on it counts it once per device); but a contraction
    # must make them itself (jax: "out_sharding's unreduced axes should be equal to
    # the contracting specs")
    axes = frozenset(ts.reduced) if not primal else ()
    if axes and partial.get(id(c.value)) != axes:
        if id(c.value) in reduced or \
                not dot and types.whole_value(builder, c.value, axes):
            sh = Sharding(ts.dims, opens)
            c = sharding_constraint_p.bind(c, sharding=sh, reshard=True)
            c.value.sharding = sh
        else:
            types.check_partial_sums(builder, c.value, axes,
                                     "the gradient of a value reduced over mesh axes")
            types.mark_partial(builder, c.value, axes, partial)
    sh = Sharding(ts.dims, opens, *((ts.unreduced, ts.reduced) if primal else
                                    (ts.reduced, ts.unreduced)))
    out = sharding_constraint_p.bind(c, sharding=sh, reshard=True)
    out.value.sharding = sh
    return out
