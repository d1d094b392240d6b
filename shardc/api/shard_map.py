"""shard_map: write the per-device program and its communication yourself.

The body is traced with device-local shapes into a region of one `shard_map` op;
propagation treats its boundary as fixed shardings and lowering emits
`sdy.manual_computation`. While tracing, every value records the manual mesh axes
it varies over (JAX's "vma"), so out_specs that claim replication are checked.
"""
from __future__ import annotations

import functools

from jax.sharding import AbstractMesh, AxisType, Mesh, NamedSharding, PartitionSpec

from ..trace import core
from ..errors import (ArgumentError, ShardcError, ShardcNotImplementedError, ShardcTypeError,
                      api_boundary, user_loc)
from ..runtime.meshes import current_mesh, get_abstract_mesh
from . import explicit as _explicit
from ..ops.manual_region import (add_shard_map, block_input, body_value as _body_value,
                                 manual_ctx, open_body)
from ..ir.program import Lit
from ..ir.sharding import Sharding, from_spec
from ..trace import pytree as _tree


def _specs_for(specs, tree_obj, what):
    from .jit_args import _broadcast_prefix
    return _broadcast_prefix(specs, tree_obj, what)


def _spec_sharding(spec, aval, mesh_shape, manual, what):
    if spec is None:
        spec = PartitionSpec()
    if not isinstance(spec, PartitionSpec):
        raise ShardcError(f"{what}: expected a PartitionSpec, got {type(spec).__name__}")
    sh = from_spec(spec, aval.ndim, mesh_shape, what)
    around = manual_ctx()
    if (sh.unreduced or sh.reduced) and _partly_manual(mesh_shape, manual, around):
        raise ShardcNotImplementedError(
            f"{what}: unreduced/reduced can only be passed to in_specs and out_specs when "
            f"shard_map is in full manual mode (as jax). Got mesh axis names "
            f"{mesh_shape.names}, manual axes {sorted(manual)}, spec {spec}")
    for d in sh.dims:
        for a in d:
            if around is not None and a in around.axes:
                raise ShardcError(f"{what}: mesh axis {a!r} is manual already, in the "
                                  "enclosing shard_map; the specs of a nested shard_map name "
                                  f"only the axes it makes manual ({sorted(manual)})")
            if a not in manual:
                raise ShardcError(f"{what}: mesh axis {a!r} is not manual here (axis_names="
                                  f"{sorted(manual)}); specs may only name manual axes")
    return sh.closed()


def _partly_manual(mesh_shape, manual, around) -> bool:
    return bool(set(mesh_shape.names) - set(manual) - set(around.axes if around else ()))


def _check_no_partial_sums(region, mesh_shape, manual):
    """Partial sums (unreduced axes) in a shard_map manual over some axes only: Shardy
    cannot place unreduced axes beside manual ones (XLA aborts the process; jax's
    programs too), so they are refused at the line that makes them."""
    if not _partly_manual(mesh_shape, manual, manual_ctx()):
        return
    _first_partial_sums(region, manual)


def _first_partial_sums(region, manual):
    for op in region.ops:    # (a region's ops first: the line that makes them)
        for r in op.regions:
            _first_partial_sums(r, manual)
        for v in op.outputs:
            ts, sh = v.aval.ts, v.sharding
            axes = (ts.unreduced if ts is not None else ()) or (sh.unreduced if sh else ())
            if axes:
                raise ShardcNotImplementedError(
                    f"partial sums (unreduced over mesh axes {sorted(axes)}, {v.aval}) inside "
                    f"a shard_map manual over {sorted(manual)} only: XLA cannot hold "
                    "unreduced axes beside manual ones. Make the shard_map manual over all "
                    "mesh axes (axis_names), or reduce them where they are made (no "
                    "unreduced= in out_sharding)", op.loc)


def _reduced_values(body, ctx) -> dict:
    """id(value) -> the mesh axes each value of shard_map body `body` is reduced over:
    its block arguments' from in_specs with reduced= (and values it closes over, as
    they are in an enclosing body), kept through every op of the body -- region ops
    (cond, scan, loops, checkpoint) too, which are added whole."""
    red = dict(ctx.reduced)
    for t, v in body.captured.values():
        r = ctx.reduced.get(id(t.value))
        if r:
            red[id(v)] = r
    for op in body.program.ops:
        r = frozenset().union(*(red.get(id(v), ()) for v in op.inputs
                                if not isinstance(v, Lit)))
        if r:
            for v in op.outputs:
                red[id(v)] = r
    return red


class _InferFromArgs:
    """shard_map's default in_specs: read from the arguments' explicit types."""

    def __repr__(self):
        return "shardc.api.shard_map.Infer"


Infer = _InferFromArgs()


def _is_infer(specs):
    # jax's own sentinel (jax._src.shard_map.Infer) is accepted too
    return specs is Infer or type(specs).__name__ == "InferFromArgs"


_NO_SPECS = object()


def shard_map(f=None, /, *args, out_specs=_NO_SPECS, in_specs=Infer, mesh=None,
              axis_names=frozenset(), check_vma=True, check_rep=None):
    """Map `f` over shards of its arguments, as jax.shard_map: inside `f` arrays have
    their device-local shapes and collectives (shardc.lax.psum, ...) communicate.

    The mesh is `mesh=` or the context's (shardc.set_mesh / jax.set_mesh); the older
    positional spelling `shard_map(f, mesh, in_specs, out_specs)` works too. Without
    in_specs, each argument's spec is read from its type (all manual axes Explicit)."""
    if args:    # jax.experimental.shard_map's shard_map(f, mesh, in_specs, out_specs, check_rep)
        if len(args) > 4:
            raise ShardcTypeError(f"shard_map takes at most 5 positional arguments (f, mesh, "
                                  f"in_specs, out_specs, check_rep), got {1 + len(args)}")
        kw = {"mesh": mesh, "in_specs": in_specs, "out_specs": out_specs,
              "check_rep": check_rep}
        default = {"mesh": None, "in_specs": Infer, "out_specs": _NO_SPECS, "check_rep": None}
        for k, v in zip(kw, args):
            if kw[k] is not default[k]:
                raise ShardcTypeError(f"shard_map got {k} both positionally and by keyword")
            kw[k] = v
        mesh, in_specs, out_specs, check_rep = kw.values()
    if out_specs is _NO_SPECS:
        raise ShardcTypeError("shard_map() missing required keyword argument 'out_specs'")
    if f is None:
        return functools.partial(shard_map, out_specs=out_specs, in_specs=in_specs, mesh=mesh,
                                 axis_names=axis_names, check_vma=check_vma,
                                 check_rep=check_rep)
    if not callable(f):
        raise ShardcTypeError(f"shard_map requires a callable for its first argument, but got "
                              f"{f} of type {type(f).__name__}")
    if check_rep is not None:
        check_vma = check_rep
    if isinstance(axis_names, str):
        axis_names = (axis_names,)
    axis_names = frozenset(axis_names or ())

    compiled = {}     # called outside a trace: compiled once, cached per signature
    has_static = not _is_infer(in_specs) and any(
        s is None for s in _tree.tree_leaves(in_specs, is_leaf=lambda s: s is None))

    @functools.wraps(f)
    @api_boundary
    def wrapped(*args):
        if core.current_builder() is None:
            # inferred in_specs are read off the arrays here, before jit traces them
            if has_static:
                out = _call_with_static(wrapped, in_specs, args, compiled)
                if out is not _NO_SPECS:
                    return out
            specs = _concrete_in_specs(mesh, axis_names, args) if _is_infer(in_specs) else None
            key = None if specs is None else (_tree.tree_structure(args), tuple(specs))
            fn = compiled.get(key)
            if fn is None:
                from .jit import internal_jit
                fn = compiled[key] = internal_jit(wrapped if key is None else shard_map(
                    f, out_specs=out_specs, in_specs=_tree.tree_unflatten(key[0], specs),
                    mesh=mesh, axis_names=axis_names, check_vma=check_vma), _name(f),
                    retrace=True)
            return fn(*args)
        m = _resolve_mesh(mesh)
        manual = _manual_axes(m, axis_names)
        around = manual_ctx()
        if around is not None:      # nested: the axes still automatic among them
            manual = tuple(a for a in manual if a not in around.axes)
        _check_infer(m, manual, in_specs)
        return _trace_shard_map(f, m, in_specs, out_specs, manual, check_vma, args)
    return wrapped


def _call_with_static(wrapped, in_specs, args, compiled):
    """A call outside any trace whose in_specs hold None leaves: those arguments (any
    Python object, as jax's static inputs) are closed over by the compiled function,
    which is cached per their values when they hash (_NO_SPECS: there are none)."""
    flat = _specs_for(in_specs if not isinstance(in_specs, list) else tuple(in_specs),
                      tuple(args), "shard_map in_specs")
    leaves, tree = _tree.tree_flatten(args)
    static = tuple((i, x) for i, (x, s) in enumerate(zip(leaves, flat)) if s is None)
    if not static:
        return _NO_SPECS
    dyn = [x for x, s in zip(leaves, flat) if s is not None]

    def run(*d):
        it, st = iter(d), dict(static)
        return wrapped(*_tree.tree_unflatten(
            tree, [st[i] if i in st else next(it) for i in range(len(leaves))]))
    from .jit import internal_jit
    try:
        key = ("static", tree, static)
        hash(key)
    except TypeError:
        return internal_jit(run, _name(wrapped), retrace=True)(*dyn)
    fn = compiled.get(key)
    if fn is None:
        fn = compiled[key] = internal_jit(run, _name(wrapped), retrace=True)
    return fn(*dyn)


def _name(f):
    return f"shard_map({getattr(f, '__name__', 'fun')})"


def _concrete_in_specs(mesh, axis_names, args):
    """Inferred in_specs of a call outside any trace, one per leaf of `args`."""
    m = _resolve_mesh(mesh)
    manual = _manual_axes(m, axis_names)
    _check_infer(m, manual, Infer)
    return [_inferred_spec(x, m, manual, i) for i, x in enumerate(_tree.tree_leaves(args))]


def _padded(spec, ndim):
    parts = tuple(spec.partitions)
    return parts + (None,) * (ndim - len(parts)), spec.unreduced, spec.reduced


def _check_specs_match_types(mesh, manual, leaves, specs):
    """On an all-Explicit mesh, manual over every axis, in_specs must be the arguments'
    types (as jax: shard_map does not reshard; jax.reshard does)."""
    typeof = getattr(_explicit, "typeof", None)
    if typeof is None or set(manual) != set(mesh.axis_names) or \
            not all(t == AxisType.Explicit for t in mesh.axis_types):
        return
    for x, spec in zip(leaves, specs):
        if not isinstance(spec, PartitionSpec) or not core.is_tracer(x):
            continue
        t = typeof(x)
        have = t.sharding.spec
        if _padded(spec, t.ndim) != _padded(have, t.ndim):
            raise ArgumentError(
                f"in_specs passed to shard_map: {spec} does "
                f"not match the specs of the input: {have} for arg: {t}. `in_specs` is an "
                "optional argument so you can omit specifying it and shard_map will infer "
                "the in_specs from the arguments. If you want to reshard your inputs, you "
                "can use `shardc.reshard` on the arguments and then pass those args to "
                "shard_map.")


def _resolve_mesh(mesh):
    """The concrete mesh of a call: `mesh=`, else the context's (set_mesh, or an
    abstract mesh matching the program's)."""
    ctx = current_mesh()
    if mesh is not None and ctx is not None and isinstance(mesh, (Mesh, AbstractMesh)) and \
            mesh.abstract_mesh != ctx.abstract_mesh:
        raise ArgumentError(f"shard_map: the context mesh {ctx} (set_mesh) differs from the mesh "
                            f"passed to shard_map {mesh}; pass the context's mesh or none")
    if mesh is None:
        mesh = ctx
        if mesh is None and manual_ctx() is not None:
            mesh = core.current_builder().meshes.info.mesh   # nested: the enclosing one's
        if mesh is None:
            am = get_abstract_mesh()
            if am.empty:
                raise ArgumentError(
                    "shard_map has no mesh: none was passed and the context mesh is empty. "
                    "Call `shardc.set_mesh(mesh)` (or `jax.set_mesh(mesh)`) first, use "
                    "`with shardc.set_mesh(mesh):`, or pass `mesh=shardc.make_mesh(...)`")
            mesh = am
    if isinstance(mesh, AbstractMesh):
        if mesh.empty:
            raise ArgumentError(f"shard_map requires a non-empty mesh. Got {mesh}")
        b = core.current_builder()
        prog = b.meshes.info.mesh if b is not None else None
        if prog is None or prog.abstract_mesh != mesh:
            raise ArgumentError(
                f"shard_map over the abstract mesh {mesh} needs the devices it stands for: "
                "pass a concrete Mesh, call `shardc.set_mesh(mesh)`, or give the program "
                "arguments sharded on that mesh")
        mesh = prog
    if not isinstance(mesh, Mesh):
        raise ShardcTypeError(f"shard_map requires a `jax.sharding.Mesh` or a "
                              f"`jax.sharding.AbstractMesh` instance for its second argument, "
                              f"but got {mesh} of type {type(mesh).__name__}")
    return mesh


def _manual_axes(mesh, axis_names):
    unknown = set(axis_names) - set(mesh.axis_names)
    if unknown:
        raise ArgumentError(f"shard_map: axis_names {sorted(unknown)} are not axes of the "
                            f"mesh {list(mesh.axis_names)}")
    if not axis_names:
        return tuple(mesh.axis_names)
    return tuple(a for a in mesh.axis_names if a in axis_names)


def _axis_type(mesh, a):
    return dict(zip(mesh.axis_names, mesh.axis_types))[a]


def _check_infer(mesh, manual, in_specs):
    if not _is_infer(in_specs):
        return
    if not all(_axis_type(mesh, a) == AxisType.Explicit for a in manual):
        types = ", ".join(str(_axis_type(mesh, a)) for a in manual)
        raise ShardcTypeError(
            "shard_map in_specs argument must be a pytree of `jax.sharding.PartitionSpec` "
            f"instances, but it was `None` when axis_names={frozenset(manual)} are of type "
            f"{types}: pass in_specs=, or make those mesh axes Explicit "
            "(make_mesh(..., axis_types=(AxisType.Explicit, ...)))")


def _inferred_spec(x, mesh, manual, i):
    """The in_spec of argument leaf `x` read from its type: its sharding's spec on the
    manual axes (jax's _manual_spec)."""
    spec = None
    if core.is_tracer(x):
        typeof = getattr(_explicit, "typeof", None)
        if typeof is not None:
            spec = typeof(x).sharding.spec
        elif isinstance(getattr(x.value, "sharding", None), Sharding):
            spec = x.value.sharding.to_spec()   # a program input's, or a constrained value's
        else:
            raise ShardcError(f"shard_map cannot infer the in_spec of argument {i} (a value "
                              "computed in this trace); pass in_specs=")
    elif isinstance(getattr(x, "sharding", None), NamedSharding):
        if x.sharding.mesh.abstract_mesh != mesh.abstract_mesh:
            raise ArgumentError(f"shard_map argument {i} is sharded on the mesh "
                                f"{x.sharding.mesh}, not the shard_map's mesh {mesh}")
        spec = x.sharding.spec
    if spec is None:
        return PartitionSpec()
    out = []
    for s in spec:
        if isinstance(s, tuple):
            kept = [a if a in manual else None for a in s]
            while kept and kept[-1] is None:
                kept.pop()
            if None in kept:
                raise ArgumentError(f"shard_map: invalid spec {spec} of argument {i} for the "
                                    f"manual axes {manual}")
            out.append(tuple(kept) if kept else None)
        else:
            out.append(s if s in manual else None)
    return PartitionSpec(*out)


def _trace_shard_map(f, mesh, in_specs, out_specs, manual, check_vma, args):
    outer = core.current_builder()
    loc = user_loc()
    mshape = outer.meshes.adopt(mesh).shape
    leaves, in_tree = _tree.tree_flatten(args)
    if _is_infer(in_specs):
        flat_specs = [_inferred_spec(x, mesh, manual, i) for i, x in enumerate(leaves)]
    else:
        flat_specs = _specs_for(in_specs if not isinstance(in_specs, list)
                                else tuple(in_specs), tuple(args), "shard_map in_specs")
        _check_specs_match_types(mesh, manual, leaves, flat_specs)
    body = open_body(f"{getattr(f, '__name__', 'body')}", mshape, manual, check_vma)
    ctx = body.manual
    static = {i: x for i, (x, spec) in enumerate(zip(leaves, flat_specs)) if spec is None}
    in_vals, in_sh, body_args = [], [], []
    for i, (x, spec) in enumerate(zip(leaves, flat_specs)):
        if i in static:     # in_specs None: passed to f as it is (jax's static inputs)
            body_args.append(x)
            continue
        aval = core.aval_of(x)
        sh = _spec_sharding(spec, aval, mshape, manual, f"shard_map in_specs for argument {i}")
        body_args.append(block_input(
            body, x, sh, f"shard_map argument {i} ({aval}) with in_spec {spec}"))
        in_sh.append(sh)
        in_vals.append(x)
    with core.trace_context(body):
        out = f(*_tree.tree_unflatten(in_tree, body_args))
    out_leaves, out_tree = _tree.tree_flatten(out)
    region = body.program
    region.outputs = [_body_value(body, x) for x in out_leaves]
    flat_out = _specs_for(out_specs, out, "shard_map out_specs")
    reduced = _reduced_values(body, ctx)
    out_sh = []
    for i, (v, spec) in enumerate(zip(region.outputs, flat_out)):
        sh = _spec_sharding(spec, v.aval, mshape, manual, f"shard_map out_specs for output {i}")
        red = reduced.get(id(v), frozenset())
        if check_vma and set(sh.reduced) - red:     # (jax checks them with check_vma only)
            raise ArgumentError(
                f"shard_map out_specs[{i}] is {spec}, but output {i} is reduced over mesh "
                f"axes {sorted(red)} only: out_specs name the reduced axes present on the "
                "output (as jax: 'should be equal to the reduced present on the out_aval'), "
                "those of in_specs with reduced= it is computed from", loc)
        if check_vma:
            # (an unreduced axis may vary: each device's value is a summand, as jax's)
            claimed = set(manual) - {a for d in sh.dims for a in d} - set(sh.unreduced)
            varies = ctx.vma_of(v) & claimed
            if varies:
                raise ShardcError(
                    f"shard_map out_specs[{i}] is {spec}, which says output {i} is the same on "
                    f"every device along mesh axes {sorted(varies)}, but it varies along them. "
                    "Reduce it first (shardc.lax.psum / pmean / pmax), name the axes in "
                    "out_specs, or pass check_vma=False", loc)
            same = set(sh.unreduced) - ctx.vma_of(v)
            if same:
                raise ShardcError(
                    f"shard_map out_specs[{i}] is {spec}, whose unreduced axes say each device "
                    f"along mesh axes {sorted(same)} holds a summand of output {i}, but it is "
                    "the same on every device along them (its sum would be a multiple of "
                    "it; jax: vary_unreduced_cast only accepts inputs that are varying). Return "
                    "the per-device partial sums (no psum), or drop the axes from unreduced",
                    loc)
        out_sh.append(sh)
    _check_no_partial_sums(region, mshape, manual)
    results = add_shard_map(body, in_vals, in_sh, out_sh, loc)
    return _tree.tree_unflatten(out_tree, results)


def smap(f=None, /, *, in_axes=Infer, out_axes, axis_name):
    """shard_map over the one mesh axis `axis_name`, mapping argument dims `in_axes`
    (an int, None, or a tuple per positional argument; default: read from the types,
    with the axis Explicit) and result dims `out_axes`, as jax.smap."""
    if f is None:
        return lambda g: smap(g, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)
    if isinstance(axis_name, (list, tuple)):
        raise ShardcTypeError(f"smap axis_name should be a `str` or a `Hashable`, but got "
                              f"{axis_name}")
    infer = _is_infer(in_axes)
    if in_axes is not None and not infer and not isinstance(in_axes, (int, tuple)):
        raise ShardcTypeError(
            "smap in_axes must be an int, None, jax.sharding.Infer, or a tuple of entries "
            f"corresponding to the positional arguments passed to the function, but got "
            f"{in_axes}.")
    if not infer and not all(isinstance(a, int) for a in _tree.tree_leaves(in_axes)):
        raise ShardcTypeError("smap in_axes must be an int, None, jax.sharding.Infer, or "
                              f"(nested) container with those types as leaves, but got {in_axes}.")
    if not all(isinstance(a, int) for a in _tree.tree_leaves(out_axes)):
        raise ShardcTypeError("smap out_axes must be an int, None, or (nested) container "
                              f"with those types as leaves, but got {out_axes}.")

    def spec(axis):
        return PartitionSpec() if axis is None else PartitionSpec(*[None] * axis, axis_name)
    is_none = lambda x: x is None   # noqa: E731
    in_specs = in_axes if infer else _tree.tree_map(spec, in_axes, is_leaf=is_none)
    mapped = shard_map(f, in_specs=in_specs, out_specs=_tree.tree_map(
        spec, out_axes, is_leaf=is_none), axis_names={axis_name}, check_vma=True)

    @functools.wraps(f)
    def call(*args):
        if infer:
            m = _resolve_mesh(None)
            if axis_name in m.axis_names and _axis_type(m, axis_name) != AxisType.Explicit:
                raise ShardcTypeError(
                    f"in_axes was not specified when axis_name={frozenset({axis_name})} was "
                    f"of type {_axis_type(m, axis_name)}: pass in_axes=, or make the axis "
                    "Explicit")
        return mapped(*args)
    return call
