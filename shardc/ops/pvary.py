"""pvary: a value marked as varying over manual mesh axes (jax's lax.pcast(..., to=
'varying'), once lax.pvary). An identity on values; inside a shard_map body its result
varies over `axes` (Vma.AXES), so out_specs and psum treat it as per-device data.
Its transpose is a psum over `axes`, as jax's: the cotangent of each device's copy of
an invariant value flows back summed."""
from __future__ import annotations

from ..ir.primitive import PropKind, Trait, Vma
from ..ir.rules import pointwise
from ..trace.core import Primitive
from .collectives import psum_p


def _shape(x, *, axes, sizes):
    return x


def _lower(ctx, x, *, axes, sizes):
    return [x]


pvary_p = Primitive("pvary", shape_rule=_shape, sharding_rule=pointwise, lower=_lower,
                    prop_kind=PropKind.ELEMENTWISE, vma=Vma.AXES, traits=Trait.ALIAS)
def pvary_over(x, axes, mesh):
    """`x` marked varying over the manual axes `axes` (any order; named in the mesh's)."""
    order = tuple(a for a in mesh.names if a in axes)
    return pvary_p.bind(x, axes=order, sizes=tuple(mesh.sizes[a] for a in order))


pvary_p.vjp = lambda ctx, cts, x, *, axes, sizes: [psum_p.bind(cts[0], axes=axes,
                                                               sizes=sizes)]
pvary_p.batch = lambda ctx, args, batched, *, axes, sizes: (
    pvary_p.bind(args[0], axes=axes, sizes=sizes), batched[0])
