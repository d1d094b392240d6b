"""shardc.lax: lower-level ops and sharding constraints, as jax.lax."""
from __future__ import annotations

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from ..trace import core, types
from ..ir import dtypes
from ..errors import (ArgumentError, ShardcError, ShardcTypeError, ShardingTypeError,
                      api_boundary, wrap_public)
from .numpy._util import aval, canonical_dtype, convert
from ..ops import elementwise as ew
from ..ops import powers as pw
from ..ops import linalg as _dot_ops
from ..ops import reduce as red
from ..ops import shape as shp
from ..ops.special import sharding_constraint_p
from .explicit import _spec, takes_out_sharding
from ..ir.sharding import MeshShape, Sharding, axis_name, from_spec
from ..transforms.ad import stop_gradient  # noqa: F401
from .assoc_scan import associative_scan  # noqa: F401
from .collectives import (all_gather, all_to_all, axis_index, axis_size, pmax, pmean,  # noqa: F401
                          pbroadcast, pcast, pmin, ppermute, pswapaxes, psum,
                          psum_scatter, pvary, ragged_all_to_all)
from ..trace import pytree as _tree
from ..ir.program import Lit


def _constraint_leaf(x, s, reshard=False):
    from ..runtime.meshes import as_jax_sharding
    b = core.current_builder()
    if b is not None and not core.is_tracer(x):
        # a NumPy array in a trace: a constant of it, constrained (and typed) there
        v = b.to_value(x)
        x = x if type(v) is Lit else core.Tracer(b, v)
    if not core.is_tracer(x):
        if isinstance(s, PartitionSpec):
            from ..runtime.meshes import named_in_context
            s = named_in_context(s, "with_sharding_constraint outside jit")
        s = as_jax_sharding(s)
        if not reshard and isinstance(s, NamedSharding):
            explicit, asserting = _eager_explicit(s.mesh)
            if explicit:
                shape = MeshShape.of(s.mesh)
                sh = from_spec(s.spec, np.ndim(x), shape, "with_sharding_constraint")
                if _under_types(x, sh, explicit, asserting) is None:
                    return x
        if isinstance(s, NamedSharding) and PartitionSpec.UNCONSTRAINED in s.spec.partitions:
            s = _keep_unconstrained(x, s)
        if reshard and isinstance(s, NamedSharding) and (s.spec.unreduced or _partial(x)):
            return _reshard_program()(x, s)
        return jax.device_put(x, s)
    b = core.current_builder()
    s = as_jax_sharding(s, b.meshes.info.mesh)
    mesh = b.meshes.adopt(s.mesh if isinstance(s, NamedSharding) else None)
    if isinstance(s, PartitionSpec) and mesh.mesh is None:
        raise ShardcError("with_sharding_constraint with a bare PartitionSpec needs a mesh: "
                          "pass NamedSharding(mesh, spec), use `with shardc.set_mesh(mesh):`, "
                          "or give the function an argument sharded on the mesh")
    if isinstance(s, NamedSharding):
        spec = s.spec
    elif isinstance(s, PartitionSpec):
        spec = s
    else:
        raise ShardcError(f"with_sharding_constraint needs a NamedSharding or PartitionSpec, "
                          f"got {type(s).__name__}")
    sh = from_spec(spec, x.ndim, mesh.shape, "with_sharding_constraint")
    explicit = types.explicit_axes_of(b)
    if reshard and explicit:
        _check_divides(spec, sh, x, mesh.shape, explicit)
        if sh.unreduced and _made_by_a_dot(b, x):
            # (a dot's out_sharding=: unreduced names the axes its contraction leaves
            # partial, as jax's; other values are resharded to partial sums)
            types.check_partial_sums(b, x.value, sh.unreduced,
                                     "out_sharding with unreduced axes")
    if not reshard:
        if explicit:
            sh = _under_types(x, sh, explicit, explicit >= frozenset(mesh.shape.names))
            if sh is None:
                return x
    elif not explicit >= frozenset(mesh.shape.names) - _manual_axes() and \
            x.ndim and all(axis_name(a) in explicit for a in sh.axes()):
        # a reshard (an op's out_sharding=) on a mesh with Auto axes fixes the explicit
        # axes only: open, so propagation may still use the Auto axes (jax lowers it
        # with every dim unspecified; with no Explicit axis, it fixes nothing); prepare
        # keeps the other explicit axes off it.
        # (Manual axes, inside a partial shard_map, are neither: with only those beside
        # the explicit ones, the reshard fixes every free axis.)
        sh = Sharding(sh.dims, [True] * x.ndim, sh.unreduced, sh.reduced)
    out = sharding_constraint_p.bind(x, sharding=sh, **({"reshard": True} if reshard else {}))
    out.value.sharding = sh
    return out


def _partial(x):
    sh = getattr(x, "sharding", None)
    return isinstance(sh, NamedSharding) and bool(sh.spec.unreduced)


_RESHARD = []


def _reshard_program():
    """A jitted reshard: partial sums (an unreduced array, or a reshard to one) are no
    layout device_put can move; the program reduces or splits them (as jax's reshard)."""
    if not _RESHARD:
        from .jit import jit
        _RESHARD.append(jit(lambda v, s: _constraint_leaf(v, s, reshard=True),
                            static_argnums=1))
    return _RESHARD[0]


def _made_by_a_dot(b, x):
    """Whether `x` is a dot's result, or a layout change of one (einsum's transpose)."""
    from ..ir.primitive import Trait
    v = x.value
    for _ in range(4):
        op = types.producer(b, v)
        if op is None or op.prim.traits & Trait.CONTRACTION:
            return op is not None
        if not op.prim.traits & Trait.FUSED or not op.inputs or type(op.inputs[0]) is Lit:
            return False
        v = op.inputs[0]
    return False


def _manual_axes():
    from ..ops.manual_region import manual_ctx
    mc = manual_ctx()
    return frozenset(mc.axes) if mc is not None else frozenset()


def _check_divides(spec, sh, x, mesh, explicit):
    """An explicit type's sharding splits each dim evenly over its Explicit axes (jax's
    check, at the reshard or out_sharding= that asks for it rather than at the op that
    meets it; Auto axes may split unevenly, XLA pads them)."""
    for d, size in enumerate(x.shape):
        n = 1
        for a in sh.dims[d]:
            if axis_name(a) in explicit:
                n *= mesh.axis_size(a)
        if size % n:
            raise ArgumentError(
                f"Sharding spec {tuple(spec)} implies that array axis {d} is partitioned "
                f"{n} times, but does not evenly divide the dimension size {size}.")


def _eager_explicit(mesh):
    """Outside a trace: (the constraint mesh's Explicit axes, whether it asserts: as
    jax's, when every axis of the context mesh is Explicit)."""
    ctx = jax.sharding.get_abstract_mesh()
    explicit = frozenset(n for n, t in zip(mesh.axis_names, mesh.axis_types)
                         if t == jax.sharding.AxisType.Explicit)
    return explicit, not ctx.empty and all(t == jax.sharding.AxisType.Explicit
                                           for t in ctx.axis_types)


def _keep_unconstrained(x, s):
    """Outside a trace an unconstrained dim keeps the array's own sharding."""
    have = getattr(getattr(x, "sharding", None), "spec", None)
    have = tuple(have.partitions) if have is not None else ()
    want = s.spec.partitions
    have += (None,) * (len(want) - len(have))
    return NamedSharding(s.mesh, PartitionSpec(
        *[h if e is PartitionSpec.UNCONSTRAINED else e for e, h in zip(want, have)],
        unreduced=s.spec.unreduced, reduced=s.spec.reduced))


def _eager_type(x):
    spec = getattr(getattr(x, "sharding", None), "spec", None)
    if spec is None:
        return None
    return Sharding([() if e is None else (e,) if isinstance(e, str) else tuple(e)
                     for e in tuple(spec) + (None,) * (np.ndim(x) - len(spec))])


def _under_types(x, sh, explicit, asserting):
    """jax's with_sharding_constraint where types hold shardings. `asserting` (every
    axis of the context mesh Explicit): an assert that x's type already has that
    sharding (None: x as is); otherwise it may name Auto axes only, and constrains
    them after the axes x's type puts on each dim (the type stays)."""
    ts = aval(x).ts if core.is_tracer(x) else _eager_type(x)
    dims = ts.dims if ts is not None else ((),) * x.ndim
    opens = sh.open or (False,) * sh.rank
    if asserting:
        if any(not o and tuple(d) != tuple(t) for d, o, t in zip(sh.dims, opens, dims)):
            raise ShardingTypeError(
                "with_sharding_constraint acts as an assert when all axes of the mesh are "
                f"Explicit: the array's sharding {_spec(ts, x.ndim)} is not the one given, "
                f"{_spec(sh, x.ndim)}. Use shardc.sharding.reshard (jax.sharding.reshard) "
                "to move the array to the sharding you want")
        return None
    named = sorted({a for a in sh.axes() if a in explicit})
    if named:
        raise ArgumentError(
            f"with_sharding_constraint may only name Auto mesh axes; {_spec(sh, x.ndim)} "
            f"names the Explicit {', '.join(named)}. To change an array's type use "
            "shardc.sharding.reshard (jax.sharding.reshard)")
    return Sharding([tuple(t) + tuple(d) for t, d in zip(dims, sh.dims)], sh.open,
                    sh.unreduced, sh.reduced)


@api_boundary
def with_sharding_constraint(x, shardings):
    """Pin the sharding of `x` (a pytree) at this point of the program.

    Inside shardc.jit this is a source for propagation that is never overridden;
    outside it, it moves the arrays (device_put)."""
    from .jit_args import _broadcast_prefix
    leaves, tree = _tree.tree_flatten(x)
    flat = _broadcast_prefix(shardings, x, "with_sharding_constraint")
    out = [xx if s is None else _constraint_leaf(xx, s) for xx, s in zip(leaves, flat)]
    return _tree.tree_unflatten(tree, out)


def _dot_rank(dt):
    """XLA's HigherPrecisionType order (shape_inference.cc), which jax's dot follows."""
    r = dtypes.real_dtype(dt) if dtypes.is_complex(dt) else dt
    fl = dtypes.is_float(r)
    return (dtypes.is_complex(dt), dtypes.finfo(r).maxexp if fl else -1,
            dtypes.finfo(r).nmant if fl else -1, dtypes.bit_width(r),
            not (dtypes.is_int(r) and not dtypes.is_signed(r)))


def _mixed_dot_operands(lhs, rhs, preferred=None):
    """Operands of two dtypes, as jax's dot_general takes them: both become the
    result's dtype (preferred_element_type if given, else the more precise of the two),
    as jax's lowering converts them on CPU and GPU (int8 x uint8 -> int32 multiplies
    int32s: neither operand wraps into the other's type)."""
    a, b = aval(lhs).dtype, aval(rhs).dtype
    if a == b:
        return lhs, rhs
    ra, rb = _dot_rank(a), _dot_rank(b)
    if ra == rb:
        raise ShardcTypeError(f"lax.dot_general argument type error: {a}, {b}")
    out = preferred if preferred is not None else a if ra > rb else b
    return convert(lhs, out), convert(rhs, out)


@takes_out_sharding
def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None):
    from .precision import canonical_precision
    (lc, rc), (lb, rb) = dimension_numbers
    pref = None if preferred_element_type is None else canonical_dtype(preferred_element_type)
    lhs, rhs = _mixed_dot_operands(lhs, rhs, pref)
    extra = {} if pref is None else {"preferred_element_type": pref}
    prec = canonical_precision(precision)
    if prec is not None:
        extra["precision"] = prec
    return _dot_ops.dot_general_p.bind(
        lhs, rhs, contracting=(tuple(lc), tuple(rc)), batch=(tuple(lb), tuple(rb)), **extra)


def broadcast_in_dim(operand, shape, broadcast_dimensions):
    return shp.broadcast_in_dim_p.bind(operand, shape=tuple(shape),
                                       broadcast_dimensions=tuple(broadcast_dimensions))


def reshape(operand, new_sizes):
    return shp.reshape_p.bind(operand, shape=tuple(new_sizes))


def transpose(operand, permutation):
    return shp.transpose_p.bind(operand, permutation=tuple(permutation))


def slice(operand, start_indices, limit_indices, strides=None):
    extra = {"strides": tuple(strides)} if strides else {}
    return shp.slice_p.bind(operand, start_indices=tuple(start_indices),
                            limit_indices=tuple(limit_indices), **extra)


def concatenate(operands, dimension):
    return shp.concatenate_p.bind(*operands, dimension=dimension)


def pad(operand, padding_value, padding_config):
    pv = convert(padding_value, aval(operand).dtype, aval(padding_value).weak)
    return shp.pad_p.bind(operand, pv,
                          padding_config=tuple(tuple(c) for c in padding_config))


def iota(dtype, size):
    return shp.iota_p.bind(dtype=canonical_dtype(dtype), shape=(size,), dimension=0)


@takes_out_sharding
def broadcasted_iota(dtype, shape, dimension):
    return shp.iota_p.bind(dtype=canonical_dtype(dtype), shape=tuple(shape),
                           dimension=dimension)


def convert_element_type(operand, new_dtype):
    return convert(operand, canonical_dtype(new_dtype))


def select(pred, on_true, on_false):
    return ew.select_p.bind(pred, on_true, on_false)


def reduce_sum(operand, axes):
    return red.reduce_sum_p.bind(operand, axes=tuple(axes))


def reduce_max(operand, axes):
    return red.reduce_max_p.bind(operand, axes=tuple(axes))


def rsqrt(x):
    return ew.rsqrt_p.bind(x)


def erf(x):
    return ew.erf_p.bind(x)


def logistic(x):
    return ew.logistic_p.bind(x)


def integer_pow(x, y):
    return pw.integer_pow_p.bind(x, y=y)


def _binary(p):
    def f(x, y):
        return p.bind(x, y)
    return f


add, sub, mul, div = (_binary(p) for p in (ew.add_p, ew.sub_p, ew.mul_p, ew.div_p))
max, min = _binary(ew.max_p), _binary(ew.min_p)
_ = dtypes


from .lax_extra import (FftType, bitcast_convert_type, cbrt, clz, complex,  # noqa: E402,F401
                        conj, exp2, fft, imag, nextafter, population_count, real,
                        reduce_precision)
from .control import cond, fori_loop, map, scan, switch, while_loop  # noqa: E402,F401


def optimization_barrier(operand):
    """The operand (a pytree), which XLA may not move computations across (as jax's)."""
    from ..ops.remat import optimization_barrier_p
    leaves, tree = _tree.tree_flatten(operand)
    if core.current_builder() is None or not leaves:
        return operand
    return _tree.tree_unflatten(tree, list(optimization_barrier_p.bind(*leaves)))
from .lax_sorting import (approx_max_k, approx_min_k, cumlogsumexp, cummax, cummin,  # noqa: E402,F401,E501
                          cumprod, cumsum, dynamic_index_in_dim, dynamic_slice,
                          dynamic_slice_in_dim, dynamic_update_index_in_dim, dynamic_update_slice,
                          dynamic_update_slice_in_dim, sort, sort_key_val, top_k)
from . import lax_linalg as linalg  # noqa: E402,F401
from .conv import (ConvDimensionNumbers, conv, conv_dimension_numbers,  # noqa: E402,F401
                   conv_general_dilated, conv_transpose, conv_with_general_padding,
                   ConvGeneralDilatedDimensionNumbers, conv_general_dilated_patches,
                   conv_general_permutations, conv_general_shape_tuple, conv_shape_tuple,
                   conv_transpose_shape_tuple, conv_general_dilated_local)
from .lax_ops import *  # noqa: E402,F401,F403  (issue 16: the rest of jax.lax's functions)
from .lax_reduce import *  # noqa: E402,F401,F403
from .lax_gather import *  # noqa: E402,F401,F403
from .lax_special import *  # noqa: E402,F401,F403
from .lax_window import reduce_window  # noqa: E402,F401
from .random._keyops import LAX as _KEY_FUNCTIONS, on_keys as _on_keys  # noqa: E402
_on_keys(globals(), _KEY_FUNCTIONS)
wrap_public(globals())
from .lax_solve import custom_linear_solve, custom_root  # noqa: E402,F401
from .lax_ragged import RaggedDotDimensionNumbers, ragged_dot, ragged_dot_general  # noqa: E402,F401
from .lax_scaled import scaled_dot  # noqa: E402,F401
