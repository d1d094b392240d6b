"""xmap: the named-axis map of jax's experimental maps (which jax removed), on vmap.

`in_axes` names dims of the arguments (`['batch', 'features']` names dims 0 and 1 of
an argument, `{1: 'batch'}` dim 1, `[..., 'batch']` the last); `out_axes` places names in the
results. A name the results carry (it is in `out_axes`) is mapped: the function sees
the arguments without that dim, collectives over the name (psum(x, 'batch')) work, and
the results get it back where `out_axes` says. A name only the arguments carry stays a
positional dim of them (`xmap(lambda x: x.sum(), in_axes=['batch', 'features'],
out_axes=['batch'])` sums each example's features). `axis_resources` shards named dims
over mesh axes (the mesh in context, `with mesh:` or `shardc.set_mesh`), arguments and
results, and for mapped names wherever the function constrains shardings
(vmap's spmd_axis_name).
"""
from __future__ import annotations

import functools

from jax.sharding import PartitionSpec

from ..errors import ShardcError, ShardcTypeError, api_boundary
from ..ops import lax as L
from ..ops.batching import move_dim
from ..trace import core
from .vmap import vmap
from ..trace import pytree as _tree


def _spec_leaf(x):
    return isinstance(x, dict) or (isinstance(x, list) and all(
        isinstance(a, str) or a is Ellipsis for a in x))


def _names(spec, ndim, what):
    """{dim: name} of one argument or result of rank `ndim`."""
    if isinstance(spec, dict):
        out = {}
        for d, n in spec.items():
            if not -ndim <= d < ndim:
                raise ShardcError(f"xmap {what}: dim {d} out of range for rank {ndim}")
            out[d % ndim] = n
        return out
    out = {}
    cut = spec.index(Ellipsis) if Ellipsis in spec else len(spec)
    for d, n in enumerate(spec[:cut]):
        out[d] = n
    tail = spec[cut + 1:]
    for k, n in enumerate(tail):      # names after `...` count from the last dim
        out[ndim - len(tail) + k] = n
    if len(out) > ndim or (tail and ndim - len(tail) < cut):
        raise ShardcError(f"xmap {what}: {spec} names {len(out)} dims of a rank-{ndim} value")
    return out


def _expand(axes, tree, what):
    """One spec per leaf of `tree` from the pytree prefix `axes` (specs are leaves)."""
    out = []

    def go(p, t):
        if _spec_leaf(p):
            out.extend([p] * len(_tree.tree_leaves(t)))
            return
        pl, pt = _tree.tree_flatten(p, is_leaf=_spec_leaf)
        try:
            subs = pt.flatten_up_to(t)
        except (ValueError, TypeError):
            raise ShardcError(f"xmap {what} must be a tree prefix of the values, got {axes!r}") \
                from None
        for pp, tt in zip(pl, subs):
            go(pp, tt)
    go(axes, tree)
    return out


def _resource_spec(names, ndim, resources):
    spec = [None] * ndim
    for d, n in names.items():
        spec[d] = resources.get(n)
    return PartitionSpec(*spec)


@api_boundary
def xmap(fun, in_axes, out_axes, *, axis_names=(), axis_sizes=None, axis_resources=None,
         backend=None):
    """`fun` mapped over the named dims its results carry (see the module's doc)."""
    if not callable(fun):
        raise ShardcTypeError(f"xmap requires a callable, got {fun!r}")
    sizes = dict(axis_sizes or {})
    resources = dict(axis_resources or {})

    @functools.wraps(fun)
    @api_boundary
    def xmapped(*args):
        if core.current_builder() is None:
            from .jit import internal_jit
            return internal_jit(xmapped, f"xmap({getattr(fun, '__name__', 'fun')})",
                                retrace=True)(*args)
        return _xmap_traced(fun, in_axes, out_axes, sizes, resources, args)
    return xmapped


def _xmap_traced(fun, in_axes, out_axes, sizes, resources, args):
    from .lax import with_sharding_constraint
    leaves, tree = _tree.tree_flatten(args)
    # one spec for all arguments, or a tuple (or list) of them, one per argument
    if _spec_leaf(in_axes):
        prefix = (in_axes,) * len(args)
    else:
        prefix = tuple(in_axes)
    specs = _expand(prefix, args, "in_axes")
    in_names = [_names(s, core.aval_of(x).ndim, "in_axes") for s, x in zip(specs, leaves)]
    out_all = set()
    for s in _tree.tree_leaves(out_axes, is_leaf=_spec_leaf):
        out_all.update(_spec_names(s))
    order = []
    for names in in_names:
        for n in names.values():
            if n in out_all and n not in order:
                order.append(n)
    order += sorted(n for n in out_all if n not in order)
    for n in order:
        dims = {core.aval_of(x).shape[d] for x, names in zip(leaves, in_names)
                for d, m in names.items() if m == n}
        if n in sizes:
            dims.add(sizes[n])
        if len(dims) != 1:
            raise ShardcError(f"xmap: named axis {n!r} has sizes {sorted(dims)}" if dims else
                              f"xmap: named axis {n!r} appears only in out_axes; give its "
                              "size in axis_sizes")
        sizes[n] = dims.pop()
    # arguments sharded as axis_resources says, mapped dims moved to the front
    fronted = []
    for x, names in zip(leaves, in_names):
        a = core.aval_of(x)
        if resources and names:
            x = with_sharding_constraint(x, _resource_spec(names, a.ndim, resources))
        mapped = [d for n in order for d, m in names.items() if m == n]
        for k, d in enumerate(mapped):
            x = move_dim(x, d, k) if core.is_tracer(x) else x
        fronted.append(x)
    masks = [[n in names.values() for n in order] for names in in_names]
    out_tree = []

    def inner(*xs):
        out = fun(*_tree.tree_unflatten(tree, list(xs)))
        out_tree.append(out)
        return out
    f = inner
    for level in reversed(range(len(order))):
        n = order[level]
        ax = tuple(0 if m[level] else None for m in masks)
        f = _level(f, n, ax, sizes[n], resources.get(n), out_axes)
    flat = _tree.tree_leaves(f(*fronted))
    out_specs = _expand(out_axes, out_tree[0], "out_axes")
    res = []
    for y, s in zip(flat, out_specs):
        names = _spec_names(s)
        k = len(names)
        rank = core.aval_of(y).ndim
        pos = _names(s, rank, "out_axes")
        # y's first k dims are its names in `order`'s order: move each where out_axes says
        front = [n for n in order if n in names]
        dest = {n: d for d, n in pos.items()}
        perm = [None] * rank
        for i, n in enumerate(front):
            perm[dest[n]] = i
        rest = iter(range(k, rank))
        perm = [p if p is not None else next(rest) for p in perm]
        y = L.transpose(y, tuple(perm)) if perm != list(range(rank)) else y
        if resources:
            y = with_sharding_constraint(y, _resource_spec(pos, rank, resources))
        res.append(y)
    return _tree.tree_unflatten(_tree.tree_structure(out_tree[0]), res)


def _spec_names(s):
    return [n for n in (s.values() if isinstance(s, dict) else s) if n is not Ellipsis]


def _level(f, name, in_ax, size, resource, out_axes):
    """One vmap of the nest: over `name`; a result is mapped where its out_axes spec
    names it (else it must not vary along it, as jax's xmap)."""
    outs = _tree.tree_map(lambda s: 0 if name in _spec_names(s) else None, out_axes,
                          is_leaf=_spec_leaf)
    return vmap(f, in_axes=in_ax, out_axes=outs, axis_name=name, axis_size=size,
                spmd_axis_name=resource)
