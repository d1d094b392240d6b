"""pmap: map a function over the leading axis of its arguments, one slice per device.

A thin layer over shard_map on a 1-D mesh (as JAX itself now implements pmap); the
body sees each slice without the mapped axis and may use collectives by axis_name.
"""
from __future__ import annotations

import functools

import jax
import numpy as np
from jax.sharding import PartitionSpec

from ..errors import ShardcError, api_boundary
from .numpy._util import aval
from ..trace import pytree as _tree


def _prefix(spec, tree, what):
    is_leaf = lambda x: x is None or isinstance(x, int)  # noqa: E731
    out = []
    leaves_spec, spec_tree = _tree.tree_flatten(spec, is_leaf=is_leaf)
    if spec_tree.num_leaves == 1 and is_leaf(spec):
        return [spec] * len(_tree.tree_leaves(tree))
    try:
        subs = spec_tree.flatten_up_to(tree)
    except (ValueError, TypeError) as e:
        raise ShardcError(f"pmap {what} does not match the arguments: {e}") from None
    for s, t in zip(leaves_spec, subs):
        out += [s] * len(_tree.tree_leaves(t))
    return out


def pmap(f=None, axis_name=None, *, in_axes=0, out_axes=0, devices=None):
    """As jax.pmap: `f` runs once per device on slices along each argument's `in_axes`."""
    if f is None:
        return functools.partial(pmap, axis_name=axis_name, in_axes=in_axes,
                                 out_axes=out_axes, devices=devices)
    name = axis_name if axis_name is not None else "_pmap"
    cache = {}

    @functools.wraps(f)
    @api_boundary
    def wrapped(*args, **kwargs):
        if kwargs:
            raise ShardcError(f"pmap: pass arguments positionally (got keyword arguments "
                              f"{sorted(kwargs)}), so in_axes can say how each is mapped")
        leaves, in_tree = _tree.tree_flatten(args)
        axes = _prefix(tuple(in_axes) if isinstance(in_axes, list) else in_axes, tuple(args),
                       "in_axes")
        sizes = {aval(x).shape[a % aval(x).ndim] for x, a in zip(leaves, axes) if a is not None}
        if len(sizes) != 1:
            raise ShardcError(f"pmap: mapped axes must all have one size, got {sorted(sizes)}")
        n = sizes.pop()
        devs = list(devices) if devices is not None else jax.devices()
        if n > len(devs):
            raise ShardcError(f"pmap: the mapped axis has size {n} but only {len(devs)} "
                              "devices are available")
        key = (in_tree, tuple(axes), tuple(aval(x).ndim for x in leaves), n)
        fn = cache.get(key)
        if fn is None:
            fn = cache[key] = _build(f, name, axes, [aval(x).ndim for x in leaves], in_tree,
                                     out_axes, devs[:n])
        return fn(*_tree.tree_unflatten(in_tree, leaves))
    return wrapped


def _spec_for_axis(a, name):
    if a is None:
        return PartitionSpec()
    if a < 0:
        raise ShardcError("pmap: negative out_axes are not supported; count from the front")
    return PartitionSpec(*([None] * a + [name]))


def _build(f, name, axes, ndims, in_tree, out_axes, devs):
    from . import numpy as snp
    from .jit import internal_jit
    from .shard_map import shard_map
    mesh = jax.sharding.Mesh(np.array(devs), (name,))
    flat_specs = [PartitionSpec() if a is None else PartitionSpec(*([None] * (a % nd) + [name]))
                  for a, nd in zip(axes, ndims)]
    specs = tuple(_tree.tree_unflatten(in_tree, flat_specs))
    out_specs = _tree.tree_map(lambda a: _spec_for_axis(a, name), out_axes,
                               is_leaf=lambda x: x is None or isinstance(x, int))

    def body(*blocks):
        leaves = _tree.tree_leaves(blocks)
        xs = [b if a is None else snp.squeeze(b, a % nd) for b, a, nd in zip(leaves, axes, ndims)]
        out = f(*_tree.tree_unflatten(in_tree, xs))
        oaxes = _prefix(out_axes, out, "out_axes")
        leaves, tree = _tree.tree_flatten(out)
        ys = [y if a is None else snp.expand_dims(y, a) for y, a in zip(leaves, oaxes)]
        return _tree.tree_unflatten(tree, ys)
    return internal_jit(shard_map(body, mesh=mesh, in_specs=specs, out_specs=out_specs,
                                  check_vma=False), f"pmap({getattr(f, '__name__', 'fun')})")
