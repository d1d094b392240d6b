"""pmap: map a function over the leading axis of its arguments, one slice per device.

A layer over shard_map on a 1-D mesh (as JAX itself now implements pmap); the body sees
each slice without the mapped axis and may use collectives by axis_name. As jax's:
static_broadcasted_argnums are compile-time constants, arguments passed by keyword are
mapped over their leading axis, donate_argnums donate buffers, axis_size checks the
mapped size, backend picks the devices, and `.lower(*args)` gives the lowered program.
"""
from __future__ import annotations

import functools
import operator

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from ..errors import ArgumentError, ShardcError, ShardcTypeError, api_boundary
from .numpy._util import aval
from ..trace import pytree as _tree


def _is_axis(x):
    return x is None or isinstance(x, int)


def _prefix(spec, tree, what):
    """One axis (int or None) per leaf of `tree`, `spec` a pytree prefix of it."""
    leaves_spec, spec_tree = _tree.tree_flatten(spec, is_leaf=_is_axis)
    if spec_tree.num_leaves == 1 and _is_axis(spec):
        return [spec] * len(_tree.tree_leaves(tree))
    try:
        subs = spec_tree.flatten_up_to(tree)
    except (ValueError, TypeError) as e:
        raise ArgumentError(f"pmap {what} must be a tree prefix of the arguments passed "
                            f"positionally: {e}") from None
    out = []
    for s, t in zip(leaves_spec, subs):
        out += [s] * len(_tree.tree_leaves(t))
    return out


def _index_tuple(x, what):
    try:
        return (operator.index(x),)
    except TypeError:
        pass
    try:
        return tuple(operator.index(i) for i in x)
    except TypeError:
        raise ShardcTypeError(f"pmap {what} must be an int or a collection of ints, got "
                              f"{x!r}") from None


def pmap(fun=None, axis_name=None, *, in_axes=0, out_axes=0, static_broadcasted_argnums=(),
         devices=None, backend=None, axis_size=None, donate_argnums=()):
    """As jax.pmap: `fun` runs once per device on slices along each argument's `in_axes`."""
    kw = dict(axis_name=axis_name, in_axes=in_axes, out_axes=out_axes, devices=devices,
              static_broadcasted_argnums=static_broadcasted_argnums, backend=backend,
              axis_size=axis_size, donate_argnums=donate_argnums)
    if fun is None:
        return functools.partial(pmap, **kw)
    if not callable(fun):
        raise ShardcTypeError(f"Expected a callable value, got {fun!r}")
    if devices is not None and not list(devices):
        raise ArgumentError("'devices' argument to pmap must be non-empty, or None.")
    for what, axes in (("in_axes", in_axes), ("out_axes", out_axes)):
        if isinstance(axes, list):
            axes = tuple(axes)
        if not all(type(a) is int for a in _tree.tree_leaves(axes)):
            raise ShardcTypeError(f"pmap {what} must be an int, None, or (nested) container "
                                  f"with those types as leaves, but got {axes}.")
    in_axes = tuple(in_axes) if isinstance(in_axes, list) else in_axes
    static = _index_tuple(static_broadcasted_argnums, "static_broadcasted_argnums")
    donate = _index_tuple(donate_argnums, "donate_argnums")
    name = axis_name if axis_name is not None else "_pmap"
    cache = {}

    def prepare(args, kwargs):
        """(the compiled shard_map, its flat arguments) for one call."""
        if static and max(static) >= len(args):
            raise ArgumentError(
                f"pmapped function has static_broadcasted_argnums={static} but was called "
                f"with only {len(args)} positional argument{'s' if len(args) != 1 else ''}. "
                "All static broadcasted arguments must be passed positionally.")
        consts = tuple(args[i] for i in static)
        try:
            hash(consts)
        except TypeError as e:
            raise ArgumentError(f"pmap: static_broadcasted_argnums must be hashable: {e}") \
                from None
        dyn = [i for i in range(len(args)) if i not in static]
        dyn_args = tuple(args[i] for i in dyn)
        dyn_axes = tuple(in_axes[i] for i in dyn) if static and isinstance(in_axes, tuple) \
            else in_axes
        leaves, tree = _tree.tree_flatten((dyn_args, kwargs))
        axes = _prefix(dyn_axes, dyn_args, "in_axes") + \
            [0] * len(_tree.tree_leaves(kwargs))      # keyword arguments: axis 0, as jax
        for x, a in zip(leaves, axes):
            if a is not None and not -aval(x).ndim <= a < aval(x).ndim:
                raise ArgumentError(f"pmap: in_axes {a} is out of bounds for an argument of "
                                    f"shape {aval(x).shape} (rank {aval(x).ndim})")
        mapped = [aval(x).shape[a] for x, a in zip(leaves, axes) if a is not None]
        if 0 in mapped:
            raise ArgumentError("pmap: the mapped axis has size 0; pmap needs at least one "
                                "device's worth of data")
        if not mapped:
            raise ArgumentError("pmap requires at least one argument with a mapped axis.")
        if len(set(mapped)) != 1:
            raise ArgumentError(f"pmap got inconsistent sizes for array axes to be mapped: "
                                f"{sorted(set(mapped))}")
        n = mapped[0]
        if axis_size is not None and axis_size != n:
            raise ArgumentError(f"Specified axis_size {axis_size} doesn't match received "
                                f"axis_size {n}.")
        devs = list(devices) if devices is not None else jax.devices(backend)
        if n > len(devs):
            raise ArgumentError(f"pmap: the mapped axis has size {n} but only {len(devs)} "
                                "devices are available")
        devs = devs[:n] if devices is None else devs
        if len(devs) != n:
            raise ArgumentError(f"pmap: the mapped axis has size {n} but `devices` names "
                                f"{len(devs)} devices")
        ndims = tuple(aval(x).ndim for x in leaves)
        key = (consts, tree, tuple(axes), ndims, tuple(d.id for d in devs))
        fn = cache.get(key)
        if fn is None:
            n_pos = len(_tree.tree_leaves(dyn_args))
            flat_donate = _donated(donate, static, dyn_args, n_pos)

            def call(*a, **k):
                full = list(a)
                for i, c in zip(static, consts):
                    full.insert(i, c)
                return fun(*full, **k)
            fn = cache[key] = _build(call, name, axes, ndims, tree, out_axes, devs,
                                     flat_donate, getattr(fun, "__name__", "fun"))
        return fn, leaves

    @functools.wraps(fun)
    @api_boundary
    def wrapped(*args, **kwargs):
        fn, leaves = prepare(args, kwargs)
        return fn(*leaves)

    @api_boundary
    def lower(*args, **kwargs):
        fn, leaves = prepare(args, kwargs)
        return fn.lower(*leaves)
    wrapped.lower = lower
    return wrapped


def _donated(donate, static, dyn_args, n_pos):
    """The flat argument indices donate_argnums names (counted over all positional
    arguments, static ones included; keyword arguments are never donated, as jax's)."""
    out = []
    start = 0
    dyn = [i for i in range(len(dyn_args) + len(static)) if i not in static]
    for i, a in zip(dyn, dyn_args):
        k = len(_tree.tree_leaves(a))
        if i in donate:
            out += range(start, start + k)
        start += k
    return tuple(j for j in out if j < n_pos)


def _spec_for_axis(a, name):
    if a is None:
        return PartitionSpec()
    if a < 0:
        raise ShardcError("pmap: negative out_axes are not supported; count from the front")
    return PartitionSpec(*([None] * a + [name]))


def _build(f, name, axes, ndims, tree, out_axes, devs, donate, label):
    """jit(shard_map) of f over flat arguments (the leaves of (args, kwargs))."""
    from . import numpy as snp
    from .jit import internal_jit
    from .shard_map import shard_map
    mesh = jax.sharding.Mesh(np.array(devs), (name,))
    specs = tuple(PartitionSpec() if a is None else PartitionSpec(*([None] * (a % nd) + [name]))
                  for a, nd in zip(axes, ndims))
    out_specs = _tree.tree_map(lambda a: _spec_for_axis(a, name), out_axes,
                               is_leaf=_is_axis)

    def body(*blocks):
        xs = [b if a is None else snp.squeeze(b, a % nd)
              for b, a, nd in zip(blocks, axes, ndims)]
        args, kwargs = _tree.tree_unflatten(tree, xs)
        out = f(*args, **kwargs)
        oaxes = _prefix(out_axes, out, "out_axes")
        leaves, otree = _tree.tree_flatten(out)
        ys = [y if a is None else snp.expand_dims(y, a) for y, a in zip(leaves, oaxes)]
        return _tree.tree_unflatten(otree, ys)
    # in_shardings as jax's: an argument placed elsewhere is copied, and a donated one
    # then donates the copy, not the caller's array
    return internal_jit(shard_map(body, mesh=mesh, in_specs=specs, out_specs=out_specs,
                                  check_vma=False),
                        f"pmap({label})", donate_argnums=donate,
                        in_shardings=tuple(NamedSharding(mesh, s) for s in specs))
