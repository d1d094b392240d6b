"""jax's shard_map and its collectives, and platform_dependent.

jax's `shard_map` primitive (an equation in a jaxpr, or bound on shardc's tracers through
`process_shard_map`) becomes shardc's own shard_map op over the translated body, with
jax's mesh, specs, manual axes and check_vma; inside it, jax's collectives become
shardc's primitives of the same meaning. jax has already typed the body (its variance,
the pvary it inserts, the check of out_specs), so the collectives bind shardc's raw
primitives with exactly jax's axes: psum over an axis is an all-reduce, never rescaled.
"""
from __future__ import annotations

import jax
import numpy as np
from jax._src import core as jcore

from ..errors import ShardcError
from ..api.random._keys import KeyArray
from ..ir.program import Lit
from ..ir.sharding import from_spec
from ..ops import collectives as m
from ..ops import pvary as pv
from ..trace import core
from .translate import eval_jaxpr, rule, unsupported

# ---------------------------------------------------------------- shard_map


def process_shard_map(prim, fun, tracers, params):
    """jax.shard_map called on shardc's values (ShardcTrace.process_shard_map): jax
    traces the body to one shard_map equation (its own typing and checks), which is
    translated; the result is the FlatTree jax's shard_map expects."""
    from .bridge import jax_struct
    box = []

    def run(*xs):
        ft = prim.bind(*xs, subfuns=(fun,), **params)
        box.append(ft)
        return list(ft.vals)
    closed = jax.make_jaxpr(run)(*[jax_struct(t) for t in tracers])
    outs = eval_jaxpr(closed.jaxpr, closed.consts, list(tracers))
    return box[0].update(outs)


def _sharding(spec, ndim, mesh, what):
    if spec is None:
        raise unsupported("shard_map", f"{what} is None (a static argument) in a jaxpr")
    if getattr(spec, "unreduced", None) or getattr(spec, "reduced", None):
        raise unsupported("shard_map", f"{what} {spec} has unreduced or reduced axes")
    return from_spec(spec, ndim, mesh, what).closed()


@rule("shard_map")
def _shard_map(*args, mesh, in_specs, out_specs, jaxpr, check_vma, newly_manual_axes,
               **_params):
    """shardc's shard_map op over the body jaxpr: same mesh, specs, manual axes."""
    from ..api.shard_map import _resolve_mesh
    from ..ops.manual_region import bind_shard_map, manual_ctx
    b = core.current_builder()
    if manual_ctx() is not None:    # nested: jax's mesh is the outer one's, axes Manual
        concrete = b.meshes.info.mesh
        if tuple(concrete.axis_names) != tuple(mesh.axis_names) or \
                tuple(concrete.axis_sizes) != tuple(mesh.axis_sizes):
            raise ShardcError(f"a jax shard_map over the mesh {mesh} inside a shard_map over "
                              f"{concrete}: a nested shard_map runs on its enclosing mesh")
    else:
        concrete = _resolve_mesh(mesh)
    shape = b.meshes.adopt(concrete).shape
    manual = tuple(a for a in concrete.axis_names if a in newly_manual_axes)
    if isinstance(jaxpr, jcore.ClosedJaxpr):
        body, consts = jaxpr.jaxpr, jaxpr.consts
    else:
        body, consts = jaxpr, ()
    # typed PRNG keys cross the boundary as their uint32 data (one more, whole dim)
    key_in = [_key_impl(v.aval) for v in body.invars]
    key_out = [_key_impl(v.aval) for v in body.outvars]
    in_sh = [_sharding(s, v.aval.ndim + bool(k), shape, f"shard_map in_specs[{i}]")
             for i, (s, v, k) in enumerate(zip(in_specs, body.invars, key_in))]
    out_sh = [_sharding(s, v.aval.ndim + bool(k), shape, f"shard_map out_specs[{i}]")
              for i, (s, v, k) in enumerate(zip(out_specs, body.outvars, key_out))]
    args = [x._data if type(x) is KeyArray else _as_tracer(x) for x in args]

    def run(*xs):    # a literal result (a jaxpr Literal) as a constant of its own type
        xs = [KeyArray(x, k) if k else x for x, k in zip(xs, key_in)]
        return [o._data if type(o) is KeyArray else _as_tracer(o) if isinstance(o, Lit)
                else o for o in eval_jaxpr(body, consts, xs)]
    outs = bind_shard_map(run, args, in_sh, out_sh, manual, shape, bool(check_vma),
                          name="shard_map")
    return [KeyArray(o, k) if k else o for o, k in zip(outs, key_out)]


def _key_impl(aval):
    """Our PRNG impl of a key-typed value, None for other values."""
    dt = getattr(aval, "dtype", None)
    if not jax.dtypes.issubdtype(dt, jax.dtypes.prng_key):
        return None
    from ..api.random import _impls
    return _impls.resolve(dt._impl)


def _as_tracer(x):
    if core.is_tracer(x):
        return x
    if isinstance(x, Lit):      # keeps its dtype and weak type
        from ..ops import lax as L
        return L.full((), x.value, x.aval.dtype, weak=x.aval.weak)
    from ..api import numpy as snp
    return snp.asarray(x)


# ---------------------------------------------------------------- collectives

def _axes(name, axis_name, groups=None):
    """The manual context, jax's axis names as a tuple, and their sizes."""
    from ..ops.manual_region import manual_ctx
    if groups is not None:
        raise unsupported(name, f"axis_index_groups={groups!r}; shardc groups a collective by "
                          "mesh axes only")
    axes = tuple(axis_name) if isinstance(axis_name, (tuple, list)) else (axis_name,)
    if any(not isinstance(a, str) for a in axes):
        raise unsupported(name, f"positional axis {axis_name!r} (jax.pmap's)")
    ctx = manual_ctx()
    if ctx is None:
        raise ShardcError(f"jax's `{name}` over axis {axis_name!r} outside a shard_map: "
                          "collectives work inside jax.shard_map or shardc.shard_map bodies")
    ctx.check_axes(name, axes)
    return ctx, axes, tuple(ctx.mesh.sizes[a] for a in axes)


def _operand(ctx, x, axes):
    """A collective's operand, first made varying over the axes it does not vary on
    where variance is checked, as jax does (a no-op on a jax.shard_map body, typed by
    jax already; in a shardc.shard_map body the gradient of psum(w) is then a psum)."""
    x = _as_tracer(x)
    if not ctx.check_vma:
        return x
    vary = ctx.vma_of(x.value)
    return _pvary(x, axes=tuple(a for a in axes if a not in vary))


def on_keys(fn):
    """A data-movement collective on typed keys moves their uint32 data (the key dim
    is last, so jax's dimension numbers stay valid)."""
    def run(x, **params):
        if type(x) is KeyArray:
            return KeyArray(fn(x._data, **params), x.impl)
        return fn(x, **params)
    return run


def _reduction(prim, name):
    def run(x, *, axes, axis_index_groups=None):
        axes = tuple(axes) if isinstance(axes, (tuple, list)) else (axes,)
        # integer axes are array dims (jax.vmap turns a psum over its axis name into
        # one): reduced here, before the collective over the named axes, as jax's
        dims = tuple(a for a in axes if isinstance(a, int))
        if dims:
            from ..api import lax as slax
            x = getattr(slax, _DIM_REDUCER[name])(_as_tracer(x), dims)
            axes = tuple(a for a in axes if not isinstance(a, int))
        if not axes:        # (no axis left: jax's transpose of a psum over dims only)
            return x
        ctx, axes, sizes = _axes(name, axes, axis_index_groups)
        return prim.bind(_operand(ctx, x, axes), axes=axes, sizes=sizes)
    return run


_DIM_REDUCER = {"psum": "reduce_sum", "psum_invariant": "reduce_sum", "pmax": "reduce_max",
                "pmin": "reduce_min"}


RULES_REDUCE = {"psum": m.psum_p, "psum_invariant": m.psum_p, "pmax": m.pmax_p,
                "pmin": m.pmin_p}
for _n, _p in RULES_REDUCE.items():
    rule(_n)(_reduction(_p, _n))


@rule("all_gather")
@on_keys
def _all_gather(x, *, all_gather_dimension, axis_name, axis_size, tiled,
                axis_index_groups=None):
    ctx, axes, sizes = _axes("all_gather", axis_name, axis_index_groups)
    return m.all_gather_p.bind(_operand(ctx, x, axes), axes=axes, sizes=sizes,
                               axis=all_gather_dimension, tiled=tiled)


@rule("reduce_scatter")
def _reduce_scatter(x, *, scatter_dimension, axis_name, axis_size, tiled,
                    axis_index_groups=None):
    ctx, axes, sizes = _axes("psum_scatter", axis_name, axis_index_groups)
    return m.psum_scatter_p.bind(_operand(ctx, x, axes), axes=axes, sizes=sizes,
                                 scatter_dimension=scatter_dimension, tiled=tiled)


@rule("all_to_all")
@on_keys
def _all_to_all(x, *, axis_name, split_axis, concat_axis, tiled=False,
                axis_index_groups=None):
    # jax's primitive always has the tiled shape (all_to_all reshapes around it)
    ctx, axes, sizes = _axes("all_to_all", axis_name, axis_index_groups)
    return m.all_to_all_p.bind(_operand(ctx, x, axes), axes=axes, sizes=sizes,
                               split_axis=split_axis, concat_axis=concat_axis)


@rule("ppermute")
@on_keys
def _ppermute(x, *, axis_name, perm):
    ctx, axes, sizes = _axes("ppermute", axis_name)
    return m.ppermute_p.bind(_operand(ctx, x, axes), axes=axes, sizes=sizes,
                             perm=m.pp_perm(perm, sizes))


@rule("axis_index")
def _axis_index(*, axis_name):
    ctx, axes, sizes = _axes("axis_index", axis_name)
    return m.axis_index_p.bind(axes=axes, sizes=sizes, **_auto(ctx))


@rule("pvary")
@on_keys
def _pvary(x, *, axes):
    """A typing-only op (the value is unchanged; its gradient is a psum): shardc's pvary
    where variance is checked, as jax inserts it only there."""
    ctx, axes, sizes = _axes("pvary", axes)
    if not axes or not ctx.check_vma:
        return x
    return pv.pvary_over(_as_tracer(x), axes, ctx.mesh)


@rule("pbroadcast")
@on_keys
def _pbroadcast(x, *, axis_name, source):
    """shardc.lax.pbroadcast (jax lowers its own only for GPUs)."""
    from ..api.collectives import pbroadcast
    ctx, axes, _ = _axes("pbroadcast", axis_name)
    return pbroadcast(_operand(ctx, x, axes), axes, source)


@rule("ragged_all_to_all")
def _ragged_all_to_all(operand, output, *metadata, axis_name, axis_index_groups=None):
    """shardc.lax.ragged_all_to_all (XLA:CPU has no ragged all-to-all)."""
    from ..api.collectives import ragged_all_to_all
    _, axes, _ = _axes("ragged_all_to_all", axis_name, axis_index_groups)
    return ragged_all_to_all(_as_tracer(operand), _as_tracer(output), *metadata,
                             axis_name=axes)


def _auto(ctx):
    # in a partial-manual body the index is computed where every axis is manual
    auto = tuple(a for a in ctx.mesh.names if a not in ctx.axes)
    return {"auto": auto} if auto else {}


# ---------------------------------------------------------------- platform_dependent

@rule("platform_index")
def _platform_index(*, platforms):
    """jax.lax.platform_dependent's branch index, known at trace time: the branch whose
    platforms include the target, else the default branch (platforms None)."""
    import numpy as np
    from ..runtime.meshes import target_platform
    target = target_platform()
    default = None
    for i, ps in enumerate(platforms):
        if ps is None:
            default = i
        elif target in ps:
            return np.int32(i)
    if default is None:
        raise ShardcError(f"platform_dependent: no branch for the platform {target!r} shardc "
                          f"compiles for (branches: {[p for p in platforms if p]}), and no "
                          "default=; add one")
    return np.int32(default)


@rule("reshard")
def _reshard(x, *, dst_sharding, concrete_mesh=None):
    """jax.sharding.reshard (jax's transpose of shard_map reshards the seed cotangent):
    shardc's reshard to the same spec on the program's mesh. A closed-over array is
    lifted into the trace first (jax's auto_axes reshards its operands to read their
    types in the new mode, as jax's trace stages them); scalars stay as they are."""
    if not core.is_tracer(x):
        if not np.ndim(x):
            return x
        from .translate import staged
        x = staged(x)
    from ..api.explicit import apply_out_sharding
    return apply_out_sharding(x, dst_sharding.spec, "reshard", check=False)
