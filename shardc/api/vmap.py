"""vmap: a function mapped over an axis of its arguments, as jax.vmap.

The function is traced once on one example's types into a region, and the region is
re-traced batched (shardc.transforms.batch) in the current trace; outside any trace the
whole vmapped function runs under shardc.jit, as grad does.
"""
from __future__ import annotations

import functools
import operator

import numpy as np

from ..errors import ArgumentError, ShardcTypeError, api_boundary
from ..ir import dtypes
from ..ops import batching
from ..ops.batching import bcast, move_dim
from ..ops.region import placement_of, trace_region
from ..trace import core, types
from ..transforms.batch import batch_program, make_ctx
from ..trace import pytree as _tree


def _axes_leaves(axes, tree, what):
    """One axis (int or None) per leaf of `tree`, from the pytree prefix `axes`."""
    out = []
    is_leaf = lambda x: x is None   # noqa: E731

    def go(p, t):
        if p is None or isinstance(p, int):
            if p is not None and not isinstance(p, bool):
                p = operator.index(p)
            out.extend([p] * len(_tree.tree_leaves(t)))
            return
        pl, pt = _tree.tree_flatten(p, is_leaf=is_leaf)
        if len(pl) == 1 and pl[0] is p:
            raise ShardcTypeError(f"vmap {what} must be an int, None, or a (nested) tuple or "
                                  f"list of those, got {p!r}")
        try:
            subs = pt.flatten_up_to(t)
        except (ValueError, TypeError):
            raise ArgumentError(f"vmap {what} specification must be a tree prefix of the "
                              f"corresponding value, got specification {axes!r} for value "
                              f"tree {_tree.tree_structure(tree)}.") from None
        for pp, tt in zip(pl, subs):
            go(pp, tt)
    if isinstance(axes, list) and what == "in_axes":
        axes = tuple(axes)   # jax treats a list of in_axes as a tuple
    go(axes, tree)
    return out


def _mapped_size(leaves, axes, axis_size):
    sizes = {}
    for i, (x, ax) in enumerate(zip(leaves, axes)):
        if ax is None:
            continue
        shape = core.aval_of(x).shape if _is_array(x) else ()
        if not -len(shape) <= ax < len(shape) or not shape:
            raise ArgumentError(f"vmap was requested to map its argument along axis {ax}, "
                              f"which implies that its rank should be at least {max(ax + 1, -ax)}"
                              f", but is only {len(shape)} (its shape is {shape})")
        sizes.setdefault(shape[ax % len(shape)], []).append(i)
    if axis_size is not None:
        sizes.setdefault(operator.index(axis_size), [])
    if not sizes:
        raise ArgumentError("vmap must have at least one non-None value in in_axes "
                          "(or be given axis_size)")
    if len(sizes) > 1:
        raise ArgumentError("vmap got inconsistent sizes for array axes to be mapped: "
                          + "; ".join(f"arguments {v} have size {k}" for k, v in sizes.items()))
    return next(iter(sizes))


def _is_array(x):
    return core.is_tracer(x) or hasattr(x, "shape") or isinstance(x, (int, float, bool))


def _spmd_axes(spmd_axis_name):
    if spmd_axis_name is None:
        return None
    return (spmd_axis_name,) if isinstance(spmd_axis_name, str) else tuple(spmd_axis_name)


@api_boundary
def vmap(fun, in_axes=0, out_axes=0, axis_name=None, axis_size=None, spmd_axis_name=None):
    """`fun` mapped over axis `in_axes` of its arguments, results stacked at `out_axes`
    (as jax.vmap). `axis_name` names the mapped axis for collectives inside (psum,
    axis_index, ...); `spmd_axis_name` shards the mapped dim over those mesh axes
    wherever `fun` constrains shardings."""
    if not callable(fun):
        raise ShardcTypeError(f"vmap requires a callable, got {fun!r}")
    if isinstance(in_axes, list):
        in_axes = tuple(in_axes)
    spmd = _spmd_axes(spmd_axis_name)

    @functools.wraps(fun)
    @api_boundary
    def vmapped(*args, **kwargs):
        if core.current_builder() is None:
            return _under_jit(vmapped, in_axes, args, kwargs)
        return _vmap_traced(fun, in_axes, out_axes, axis_name, axis_size, spmd, args, kwargs)
    vmapped.__wrapped_vmap__ = fun
    return vmapped


def _py_scalar(x):
    return type(x) in (bool, int, float, complex)


def _under_jit(vmapped, in_axes, args, kwargs):
    from .grad import _is_arraylike
    from .jit import internal_jit
    try:
        axes = iter(_axes_leaves((in_axes, 0), (args, kwargs), "in_axes"))
    except (ArgumentError, ShardcTypeError):
        axes = None     # _vmap_traced raises it, naming the user's line
    static = []
    for i, a in enumerate(args):
        leaves = _tree.tree_leaves(a)
        unmapped = axes is not None and [next(axes) for _ in leaves].count(None) == len(leaves)
        # unmapped Python scalars reach the function as they are (jax's vmap passes
        # unmapped values through), so int(n) or jnp.ones(n) work on them
        if not all(map(_is_arraylike, leaves)) or (unmapped and leaves and
                                                    all(map(_py_scalar, leaves))):
            static.append(i)
    static = tuple(static)
    cache = vmapped.__dict__.setdefault("_jitted", {})
    j = cache.get(static)
    if j is None:
        name = f"vmap({getattr(vmapped.__wrapped_vmap__, '__name__', 'fun')})"
        j = cache[static] = internal_jit(vmapped, name, retrace=True,
                                          static_argnums=static)
    return j(*args, **kwargs)


def _explicit_mesh_axis(leaves, axes):
    """Explicit mode: the mesh axes the mapped dims are sharded over in their types
    (jax's explicit_mesh_axis), which then shard every mapped dim the vmapped function
    makes, as spmd_axis_name would; the mapped inputs must agree, and no unmapped one
    may be sharded over them (jax's checks)."""
    b = core.current_builder()
    if b is None or not types.explicit_axes_of(b):
        return None
    spec, seen = None, False
    for x, ax in zip(leaves, axes):
        if ax is None or not _is_array(x):
            continue
        ts = core.aval_of(x).ts
        got = ts.dims[ax % len(ts.dims)] if ts is not None else ()
        if seen and got != spec:
            raise ArgumentError(f"Mapped away dimension of inputs passed to vmap should be "
                                f"sharded the same. Got inconsistent axis specs: {spec} vs "
                                f"{got}")
        spec, seen = got, True
    if not spec:
        return None
    for x, ax in zip(leaves, axes):
        ts = core.aval_of(x).ts if ax is None and _is_array(x) else None
        if ts is not None and set(spec) & set(ts.axes()):
            raise ArgumentError(f"Unmapped values passed to vmap cannot be sharded along "
                                f"the mesh axis you are vmapping over. Got type: "
                                f"{core.aval_of(x)}, in_axes: None and vmapped mesh axis: "
                                f"{spec}")
    return tuple(spec)


def _vmap_traced(fun, in_axes, out_axes, axis_name, axis_size, spmd, args, kwargs):
    leaves, tree = _tree.tree_flatten((args, kwargs))
    if isinstance(in_axes, tuple) and len(in_axes) != len(args):
        raise ArgumentError(f"vmap in_axes must be an int, None, or a tuple of entries "
                          f"corresponding to the positional arguments passed to the function, "
                          f"but got len(in_axes)={len(in_axes)}, len(args)={len(args)}")
    axes = _axes_leaves((in_axes, 0), (args, kwargs), "in_axes")
    size = _mapped_size(leaves, axes, axis_size)
    ins, batched, avals = [], [], []
    for x, ax in zip(leaves, axes):
        if ax is None:
            ins.append(x)
            batched.append(False)
            avals.append(core.aval_of(x) if _is_array(x) and not _py_scalar(x) else None)
            continue
        if not core.is_tracer(x):
            from .numpy import asarray
            x = asarray(x)
        a = core.aval_of(x)
        x = move_dim(x, ax, 0)
        ins.append(x)
        batched.append(True)
        avals.append(types.without_dim(a, ax % a.ndim))
    # unmapped non-array leaves (functions, flags) and Python scalars pass as they are
    dyn = [i for i, a in enumerate(avals) if a is not None]
    out_tree = []

    def flat_fun(*xs):
        full = list(leaves)
        for i, x in zip(dyn, xs):
            full[i] = x
        a, k = _tree.tree_unflatten(tree, full)
        out = fun(*a, **k)
        outs, t = _tree.tree_flatten(out)
        out_tree.append((t, out))
        for o in outs:
            if not _is_array(o):
                raise ShardcTypeError(f"vmap: the function returned a "
                                      f"{type(o).__name__}, not an array")
        # float0 results (integers' tangents) hold no data: stacked outside the program
        return [o for o in outs if not dtypes.is_float0(o)], None
    if axis_name is not None:
        batching.AXES.stack.append((axis_name, size))
    try:
        region, caps, _ = trace_region([avals[i] for i in dyn], flat_fun, "vmapped",
                                       *placement_of([ins[i] for i in dyn]))
    finally:
        if axis_name is not None:
            batching.AXES.stack.pop()
    ctx = make_ctx(size, axis_name, spmd or _explicit_mesh_axis(leaves, axes))
    outs, obs = batch_program(region, [ins[i] for i in dyn] + caps,
                              [batched[i] for i in dyn] + [False] * len(caps), ctx)
    t, raw = out_tree[0]
    oaxes = _axes_leaves(out_axes, raw, "out_axes")
    res = []
    traced = iter(zip(outs, obs))
    for r, ax in zip(_tree.tree_leaves(raw), oaxes):
        if dtypes.is_float0(r):
            shape = list(np.shape(r))
            if ax is not None:
                shape.insert(ax % (len(shape) + 1), size)
            res.append(np.zeros(shape, dtypes.FLOAT0))
            continue
        o, b = next(traced)
        if ax is None:
            if b:
                raise ArgumentError("vmap has mapped output but out_axes is None")
            res.append(o)
            continue
        o = bcast(ctx, o, b)
        nd = core.aval_of(o).ndim
        if not -nd <= ax < nd:
            raise ValueError(f"axis {ax} is out of bounds for array of dimension {nd}")
        res.append(move_dim(o, 0, ax))
    return _tree.tree_unflatten(t, res)
