"""Explicit sharding's API (jax.sharding's): typeof, reshard, `out_sharding=`, auto_axes
and explicit_axes.

On a mesh with Explicit axes a value's type carries its sharding on them (trace/types.py
computes it op by op). `reshard(x, spec)` gives `x` a new sharding -- inside a trace a
sharding constraint that also sets the value's type; outside one it moves the arrays.
`auto_axes` / `explicit_axes` trace part of a function with some axes' type changed.
"""
from __future__ import annotations

import functools

import jax
from jax.sharding import AxisType, NamedSharding, PartitionSpec

from ..errors import ArgumentError, ShardcError, api_boundary
from ..trace import core, types
from ..trace import pytree as _tree


def apply_out_sharding(x, out_sharding, what="out_sharding", check=True):
    """`x` resharded to `out_sharding` (a NamedSharding or PartitionSpec; None keeps x):
    what an op's `out_sharding=` does to its result. `check`: refuse Auto and Manual
    axes, as jax does for a user's out_sharding= and reshard (device= and device_put,
    and shardc's own uses, constrain those too)."""
    if out_sharding is None:
        return x
    if check:
        _check_explicit_only(out_sharding, what)
    from .lax import _constraint_leaf
    return _constraint_leaf(x, out_sharding, reshard=True)


@api_boundary
def reshard(xs, out_shardings):
    """Reshard each leaf of `xs` to the matching (prefix) leaf of `out_shardings`
    (jax.sharding.reshard): its type's sharding becomes that one."""
    from .jit_args import _broadcast_prefix
    leaves, tree = _tree.tree_flatten(xs)
    flat = _broadcast_prefix(out_shardings, xs, "reshard")
    out = []
    for x, s in zip(leaves, flat):
        if s is None:
            raise ShardcError("reshard needs a sharding for every value (a NamedSharding or "
                              "a PartitionSpec under set_mesh); got None")
        out.append(apply_out_sharding(x, s, "reshard"))
    return _tree.tree_unflatten(tree, out)


def _check_explicit_only(s, what):
    """jax's canonicalize_sharding: an out_sharding= or reshard names Explicit axes only;
    an Auto or Manual one (on the sharding's mesh, or where this traces: auto_axes,
    shard_map) is an error, not a constraint."""
    spec = getattr(s, "spec", s)
    if not isinstance(spec, PartitionSpec):
        return
    kinds = {}
    if isinstance(s, NamedSharding):
        kinds.update(zip(s.mesh.axis_names, s.mesh.axis_types))
    b = core.current_builder()
    if b is not None:
        here = _axis_types(b)[1]
    else:
        am = jax.sharding.get_abstract_mesh()
        here = {} if am.empty else dict(zip(am.axis_names, am.axis_types))
    for n, t in here.items():
        if t != AxisType.Explicit or n not in kinds:
            kinds[n] = t
    named = [a for p in spec.partitions if p is not None and p is not PartitionSpec.UNCONSTRAINED
             for a in (p if isinstance(p, tuple) else (p,))]
    for a in [*named, *sorted(spec.unreduced), *sorted(spec.reduced)]:
        kind = kinds.get(a)
        if kind in (AxisType.Auto, AxisType.Manual):
            fix = ("inside shard_map it is manual: name only the other axes" if
                   kind == AxisType.Manual else "constrain Auto axes with "
                   "with_sharding_constraint, or make the axis Explicit (the mesh's "
                   "axis_types=, or explicit_axes)")
            raise ArgumentError(
                f"{spec} passed to {what} names the axis {a!r}, which is {kind.name} "
                f"here: out_sharding= and reshard take Explicit axes only, as in jax; "
                f"{fix}")


def _axis_types(b):
    """(jax Mesh or None, {axis: AxisType}) where `b` traces now."""
    slot = b.meshes
    mesh = slot.info.mesh if slot is not None else None
    if mesh is None:
        return None, {}
    explicit = types.explicit_axes_of(b)
    manual = set()
    bb = b
    while bb is not None:
        if bb.manual is not None:
            manual |= set(bb.manual.axes)
        bb = bb.parent
    kinds = {}
    for n in mesh.axis_names:
        kinds[n] = AxisType.Manual if n in manual else \
            AxisType.Explicit if n in explicit else AxisType.Auto
    return mesh, kinds


def abstract_mesh_now():
    """The abstract mesh of the innermost trace, with its axis types as they are there
    (auto_axes, explicit_axes and shard_map change them); None outside traces."""
    b = core.current_builder()
    if b is None:
        return None
    mesh, kinds = _axis_types(b)
    if mesh is None:
        return jax.sharding.AbstractMesh((), ())
    return mesh.abstract_mesh.update_axis_types(kinds)


def _spec(ts, rank):
    if ts is None:
        return PartitionSpec(*([None] * rank))
    return PartitionSpec(*[None if not d else d[0] if len(d) == 1 else tuple(d)
                           for d in ts.dims], unreduced=frozenset(ts.unreduced),
                         reduced=frozenset(ts.reduced))


def typeof(x):
    """The type of `x` as jax.typeof gives it: shape, dtype, weak type and, on Explicit
    mesh axes, its sharding (`f32[8@X,16]`); `.sharding` is a NamedSharding."""
    if not core.is_tracer(x):
        return jax.typeof(x)
    b = core.current_builder() or x.builder
    aval = x.value.aval
    am = abstract_mesh_now()
    ts = aval.ts
    if ts is not None:
        explicit = types.explicit_axes_of(b)
        ts = types.restrict(ts, explicit, aval.ndim)
    sharding = NamedSharding(am, _spec(ts, aval.ndim))
    extra = {}
    if b.manual is not None and x.builder is b:    # the manual axes it varies over
        vma = frozenset(b.manual.vma_of(x.value))
        if vma:
            extra["manual_axis_type"] = jax.sharding.ManualAxisType(varying=vma)
    return jax.core.ShapedArray(aval.shape, aval.dtype, weak_type=aval.weak,
                                sharding=sharding, **extra)


def cotangent_type_mismatch(ct, aval):
    """Explicit mode: (got, want) type strings where cotangent `ct` has a sharding type
    other than that of the cotangent of an output of type `aval` (its unreduced and
    reduced axes swapped: jax's to_ct_aval), as jax's vjp refuses it; None when it fits
    or has no mesh to compare (a NumPy array), as jax's check passes those."""
    got = typeof(ct)
    mesh = got.sharding.mesh
    if aval.ts is None or mesh.empty or AxisType.Explicit not in mesh.axis_types:
        return None
    explicit = {a for a, t in zip(mesh.axis_names, mesh.axis_types) if t == AxisType.Explicit}
    ts = types.restrict(aval.ts, explicit, aval.ndim)
    ct_ts = type(ts)(ts.dims, None, ts.reduced, ts.unreduced) if ts is not None else None
    want = _spec(ct_ts, aval.ndim)
    if _norm(got.sharding.spec, aval.ndim) == _norm(want, aval.ndim):
        return None
    out = jax.core.ShapedArray(aval.shape, aval.dtype,
                               sharding=NamedSharding(mesh, _spec(ts, aval.ndim)))
    return (got.str_short(), jax.core.ShapedArray(
        aval.shape, aval.dtype, sharding=NamedSharding(mesh, want)).str_short(),
        out.str_short())


def _norm(spec, rank):
    parts = [() if p is None else (p,) if isinstance(p, str) else tuple(p)
             for p in spec.partitions]
    return (parts + [()] * (rank - len(parts)), frozenset(spec.unreduced),
            frozenset(spec.reduced))


def _mesh_axes(axes, what):
    b = core.current_builder()
    mesh = b.meshes.info.mesh if b is not None and b.meshes is not None else None
    if mesh is None:
        from ..runtime.meshes import current_mesh
        mesh = current_mesh()
    if mesh is None:
        raise ShardcError(f"{what} needs a mesh: use shardc.set_mesh(mesh) (or pass "
                          "arrays sharded on one)")
    if axes is None:
        return tuple(mesh.axis_names)
    axes = (axes,) if isinstance(axes, str) else tuple(axes)
    bad = [a for a in axes if a not in mesh.axis_names]
    if bad:
        raise ShardcError(f"{what}: {bad} are not axes of the mesh {mesh.axis_names}")
    return axes


def auto_axes(f=None, /, *, axes=None, out_sharding=None):
    """`f` traced with mesh `axes` (default: all) Auto: their shardings leave the types,
    and the compiler chooses them; its results get `out_sharding` (jax's auto_axes)."""
    if f is None:
        return lambda g: auto_axes(g, axes=axes, out_sharding=out_sharding)

    @functools.wraps(f)
    @api_boundary
    def call(*args, **kwargs):
        out_sh = _given_or_kwarg(out_sharding, kwargs, "out_sharding")
        names = _mesh_axes(axes, "auto_axes")

        if core.current_builder() is None:     # outside a trace it runs now, as jax's
            xs = _on_mesh(args, None, AxisType.Auto, names)
            with _abstract_context(AxisType.Auto, names):
                out = f(*xs, **kwargs)
            return reshard(out, out_sh)

        def run(args, kwargs):
            with types.axis_mode("auto", names):
                out = f(*args, **kwargs)
            return reshard(out, out_sh)
        return run(args, kwargs)
    return call


def explicit_axes(f=None, /, *, axes=None, in_sharding=None):
    """`f` traced with mesh `axes` (default: all) Explicit, its arguments resharded to
    `in_sharding` first (jax's explicit_axes); results leave with their shardings."""
    if f is None:
        return lambda g: explicit_axes(g, axes=axes, in_sharding=in_sharding)

    @functools.wraps(f)
    @api_boundary
    def call(*args, **kwargs):
        in_sh = _given_or_kwarg(in_sharding, kwargs, "in_sharding")
        names = _mesh_axes(axes, "explicit_axes")

        if core.current_builder() is None:     # outside a trace it runs now, as jax's
            xs = _on_mesh(args, in_sh, AxisType.Explicit, names)
            with _abstract_context(AxisType.Explicit, names):
                out = f(*xs, **kwargs)
            return _on_mesh(out, None, None, names)

        def run(args, kwargs):
            with types.axis_mode("explicit", names):
                xs = reshard(args, in_sh)
                out = f(*xs, **kwargs)
                leaves, tree = _tree.tree_flatten(out)
                specs = [typeof(o).sharding.spec if core.is_tracer(o) else None
                         for o in leaves]
            # (Auto axes too, but a replicated result is left open, as jax's reshard)
            pinned = [o if s is None else apply_out_sharding(
                      o, NamedSharding(_mesh_of(), s), "explicit_axes", check=False)
                      for o, s in zip(leaves, specs)]
            return _tree.tree_unflatten(tree, pinned)
        return run(args, kwargs)
    return call


def _given_or_kwarg(given, kwargs, name):
    """A sharding given when decorating, else at the call (jax takes either)."""
    if given is not None:
        return given
    if name not in kwargs:
        raise TypeError(f"Missing required keyword argument: '{name}'")
    return kwargs.pop(name)


def _on_mesh(xs, specs, kind, names):
    """Concrete arrays `xs` moved to the context mesh with `names` made `kind` (None:
    back to the context mesh itself), each to its spec in `specs` (None: its own)."""
    from ..runtime.meshes import current_mesh
    from .jit_args import _broadcast_prefix
    mesh = current_mesh()
    leaves, tree = _tree.tree_flatten(xs)
    if mesh is None:
        mesh = next((x.sharding.mesh for x in leaves if isinstance(x, jax.Array) and
                     isinstance(x.sharding, NamedSharding)), None)
    if mesh is None:
        raise ShardcError("auto_axes / explicit_axes need a mesh: use shardc.set_mesh(mesh)")
    target = mesh
    if kind is not None:
        target = jax.sharding.Mesh(mesh.devices, mesh.axis_names, axis_types=tuple(
            kind if n in names else t for n, t in zip(mesh.axis_names, mesh.axis_types)))
    flat = _broadcast_prefix(specs, xs, "in_sharding") if specs is not None else \
        [None] * len(leaves)
    out = []
    for x, s in zip(leaves, flat):
        if isinstance(s, NamedSharding):
            s = s.spec
        if s is None:
            s = x.sharding.spec if isinstance(getattr(x, "sharding", None), NamedSharding) \
                else PartitionSpec()
        out.append(jax.device_put(x, NamedSharding(target, s)))
    return _tree.tree_unflatten(tree, out)


def _abstract_context(kind, names):
    """jax's abstract-mesh context with `names` made `kind` (what get_abstract_mesh
    reports inside an eager auto_axes / explicit_axes, as in jax)."""
    from ..runtime.meshes import current_mesh
    mesh = current_mesh()
    if mesh is None:
        import contextlib
        return contextlib.nullcontext()
    am = mesh.abstract_mesh.update_axis_types({n: kind for n in names})
    return jax.sharding.use_abstract_mesh(am)


def _mesh_of():
    b = core.current_builder()
    return b.meshes.info.mesh


__all__ = ["apply_out_sharding", "auto_axes", "explicit_axes", "reshard", "typeof",
           "abstract_mesh_now"]


def takes_out_sharding(fn):
    """`fn` with jax's keyword `out_sharding=`: the result's sharding (and, in explicit
    mode, its type); while `fn` traces, a result type that would be ambiguous is left
    for it to set."""
    import inspect

    @functools.wraps(fn)
    def wrapped(*args, out_sharding=None, **kwargs):
        if out_sharding is None:
            return fn(*args, **kwargs)
        with types.lenient():     # the result's type comes from out_sharding
            out = fn(*args, **kwargs)
        return apply_out_sharding(out, out_sharding)
    try:
        sig = inspect.signature(fn)
        if "out_sharding" not in sig.parameters:
            params = list(sig.parameters.values())
            extra = inspect.Parameter("out_sharding", inspect.Parameter.KEYWORD_ONLY,
                                      default=None)
            at = next((i for i, p in enumerate(params)
                       if p.kind is inspect.Parameter.VAR_KEYWORD), len(params))
            params.insert(at, extra)
            wrapped.__signature__ = sig.replace(parameters=params)
    except (TypeError, ValueError):
        pass
    return api_boundary(wrapped)     # (wrap_public skips wrapped functions)
