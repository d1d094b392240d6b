"""Collectives for shard_map bodies (shardc.lax.psum, all_gather, ...), as jax.lax's.

Each takes one mesh axis name or a tuple of them; pytrees are mapped leaf by leaf.
"""
from __future__ import annotations

import numpy as np

from ..trace import core
from ..ir import dtypes
from ..errors import ArgumentError, ShardcError, ShardcTypeError, api_boundary
from .numpy._util import aval
from ..ops import batching
from ..ops import collectives as m
from ..ops import pvary as pv
from ..ops.ragged_collective import ragged_all_to_all_p
from ..runtime.meshes import target_platform
from .shard_map import manual_ctx
from ..trace import pytree as _tree


def _axes(name, axis_name):
    """(the shard_map body's context or None, the axes, their sizes): mesh axes of the
    enclosing shard_map, or axes a vmap names (batched: shardc.ops.collectives' rules)."""
    ctx = manual_ctx()
    axes = (axis_name,) if isinstance(axis_name, str) else tuple(axis_name)
    if len(set(axes)) != len(axes):
        raise ArgumentError(f"{name}: axis_name {axis_name!r} names an axis more than once")
    vsizes = {a: batching.vmap_axis_size(a) for a in axes}
    mesh_axes = tuple(a for a in axes if vsizes[a] is None)
    if mesh_axes:
        if ctx is None:
            raise ShardcError(f"{name}: axis name {axis_name!r} is not bound here; "
                              "collectives work inside shardc.shard_map (or shardc.pmap) "
                              "bodies, or over a shardc.vmap's axis_name")
        ctx.check_axes(name, mesh_axes)
    sizes = tuple(vsizes[a] if vsizes[a] is not None else ctx.mesh.sizes[a] for a in axes)
    return (ctx if mesh_axes else None), axes, sizes


def _map(fn, x):
    return _tree.tree_map(fn, x)


def _reduction(prim, name, x, axis_name, scale_invariant):
    ctx, axes, sizes = _axes(name, axis_name)

    def one(v):
        if not core.is_tracer(v):
            v = _as_tracer(v)
        if ctx is not None and ctx.check_vma:
            vary = ctx.vma_of(v.value)
            live = tuple(a for a in axes if a in vary or a not in ctx.axes)
            dead = [ctx.mesh.sizes[a] for a in axes if a not in vary and a in ctx.axes]
        else:
            live, dead = axes, []
        size = dict(zip(axes, sizes))
        out = prim.bind(v, axes=live, sizes=tuple(size[a] for a in live)) if live else v
        n = 1
        for s in dead:
            n *= s
        if scale_invariant and n != 1:
            from . import numpy as snp
            out = snp.multiply(out, n)
        return out
    return _map(one, x)


def _bool_to_int32(v):
    if aval(v).dtype != np.bool_:
        return v
    if not core.is_tracer(v):
        return np.asarray(v, np.int32)
    from ..ops import lax as L
    return L.convert_element_type(v, np.dtype(np.int32))


def _as_tracer(x):
    from . import numpy as snp
    return snp.asarray(x)


@api_boundary
def psum(x, axis_name):
    """Sum over the devices along `axis_name`; the result is the same on all of them.
    Of values known at trace time (no traced leaf), as jax: each times the axes' size,
    as it is -- `psum(1, "x")` is the Python int size of "x" (`range(psum(1, "x"))`)."""
    x = _map(_bool_to_int32, x)       # as jax's: a psum of booleans counts them
    leaves = _tree.tree_leaves(x)
    if leaves and not any(core.is_tracer(v) for v in leaves):
        _, _, sizes = _axes("psum", axis_name)
        n = 1
        for s in sizes:
            n *= s
        return _map(lambda v: v * n, x)
    return _reduction(m.psum_p, "psum", x, axis_name, scale_invariant=True)


@api_boundary
def pmax(x, axis_name):
    return _reduction(m.pmax_p, "pmax", x, axis_name, scale_invariant=False)


@api_boundary
def pmin(x, axis_name):
    return _reduction(m.pmin_p, "pmin", x, axis_name, scale_invariant=False)


@api_boundary
def pmean(x, axis_name):
    """psum / the number of devices along `axis_name`."""
    from . import numpy as snp
    _, axes, sizes = _axes("pmean", axis_name)
    n = 1
    for s in sizes:
        n *= s
    # true division, as jax's `psum(x) / psum(1)`: integers average to floats, over one
    # device too
    return _map(lambda v: snp.divide(v, n), psum(x, axis_name))


@api_boundary
def all_gather(x, axis_name, *, axis=0, tiled=False):
    """Every device gets the blocks of all devices along `axis_name`, stacked at `axis`
    (or concatenated along it when tiled)."""
    _, axes, sizes = _axes("all_gather", axis_name)

    def one(v):
        a = aval(v)
        ax = _dim(axis, a.ndim + (0 if tiled else 1)) if a.ndim or not tiled else axis
        return m.all_gather_p.bind(_as_tracer(v) if not core.is_tracer(v) else v, axes=axes,
                                   sizes=sizes, axis=ax, tiled=tiled)
    return _map(one, x)


def _dim(axis, ndim):
    """A collective's dimension argument, negative ones counted from the end (jax's
    check: one out of range is an error, not wrapped around)."""
    if not -ndim <= axis < ndim:
        raise ArgumentError(f"axis {axis} is out of bounds for array of dimension {ndim}")
    return axis % ndim


@api_boundary
def psum_scatter(x, axis_name, *, scatter_dimension=0, tiled=False):
    """Sum over `axis_name`, each device keeping its block along `scatter_dimension`."""
    _, axes, sizes = _axes("psum_scatter", axis_name)

    def one(v):
        a = aval(v)
        d = _dim(scatter_dimension, a.ndim)
        return m.psum_scatter_p.bind(v, axes=axes, sizes=sizes, scatter_dimension=d,
                                     tiled=tiled)
    return _map(one, x)


@api_boundary
def all_to_all(x, axis_name, split_axis, concat_axis, *, tiled=False):
    """Split `split_axis` across the devices along `axis_name` and gather their pieces
    along `concat_axis`."""
    from . import numpy as snp
    _, axes, sizes = _axes("all_to_all", axis_name)
    n = 1
    for s in sizes:
        n *= s

    def one(v):
        a = aval(v)
        s, c = _dim(split_axis, a.ndim), _dim(concat_axis, a.ndim)
        if tiled:
            return m.all_to_all_p.bind(v, axes=axes, sizes=sizes, split_axis=s, concat_axis=c)
        if a.shape[s] != n:
            raise ShardcError(f"all_to_all(tiled=False): dimension {s} of {a} must equal the "
                              f"axis size {n}")
        pos = c if c <= s else c + 1
        y = snp.expand_dims(v, pos)
        s2 = s + 1 if c <= s else s
        y = m.all_to_all_p.bind(y, axes=axes, sizes=sizes, split_axis=s2, concat_axis=pos)
        return snp.squeeze(y, s2)
    return _map(one, x)


@api_boundary
def ppermute(x, axis_name, perm):
    """Send each device's block to another along `axis_name`: `perm` is a list of
    (source index, destination index); devices no one sends to get zeros."""
    _, axes, sizes = _axes("ppermute", axis_name)
    perm = m.pp_perm(perm, sizes)
    return _map(lambda v: m.ppermute_p.bind(v, axes=axes, sizes=sizes, perm=perm), x)


@api_boundary
def pbroadcast(x, axis_name, source):
    """Every device gets the block of the device at index `source` along `axis_name`,
    as jax.lax.pbroadcast: a psum of the block masked to that device (jax lowers its
    own only for GPUs); the result varies over the axes x varies over."""
    from ..ops import lax as L
    ctx, axes, sizes = _axes("pbroadcast", axis_name)
    n = int(np.prod(sizes))
    if not 0 <= int(source) < n:
        raise ArgumentError(f"pbroadcast: source {source} is not an index along "
                            f"{axis_name!r} (size {n})")

    def one(v):
        v = v if core.is_tracer(v) else _as_tracer(v)
        vary = ctx.vma_of(v.value) if ctx is not None and ctx.check_vma else ()
        here = L.eq(axis_index(axis_name), int(source))
        out = m.psum_p.bind(L.select(here, v, L.zeros_like(v)), axes=axes, sizes=sizes)
        kept = tuple(a for a in axes if a in vary)
        return pv.pvary_over(out, kept, ctx.mesh) if kept else out
    return _map(one, x)


@api_boundary
def pswapaxes(x, axis_name, axis, *, axis_index_groups=None):
    """Swap the devices along `axis_name` with the array's dim `axis` (whose size is
    the axis size), as jax.lax.pswapaxes: all_to_all(x, axis_name, axis, axis)."""
    if axis_index_groups is not None:
        raise ShardcError("pswapaxes: axis_index_groups is not supported (jax's all_to_all "
                          "supports it only under pmap)")
    return all_to_all(x, axis_name, axis, axis)


@api_boundary
def axis_index(axis_name):
    """This device's index along `axis_name` (row-major over a tuple of axes)."""
    ctx, axes, sizes = _axes("axis_index", axis_name)
    if ctx is None:     # a vmap's axis
        return m.axis_index_p.bind(axes=axes, sizes=sizes)
    auto = tuple(a for a in ctx.mesh.names if a not in ctx.axes)
    # in a partial-manual body the index is computed where every axis is manual
    return m.axis_index_p.bind(axes=axes, sizes=sizes, **({"auto": auto} if auto else {}))


def axis_size(axis_name):
    _, _, sizes = _axes("axis_size", axis_name)
    n = 1
    for s in sizes:
        n *= s
    return n


_PCAST_TO = ("unreduced", "reduced", "varying")


@api_boundary
def pcast(x, axis_name, *, to):
    """Change the manual-axes type of `x` (a pytree) over `axis_name`, as jax.lax.pcast:
    to='varying' makes an invariant value varying (an identity on values whose gradient
    is a psum), so out_specs may name the axes and psum sums its copies."""
    if isinstance(axis_name, (set, frozenset)):
        raise ShardcTypeError(f"{axis_name=} must be a tuple or a str. Got {axis_name}")
    if not axis_name:
        return x
    if to not in _PCAST_TO:
        raise ArgumentError(f"Got unexpected `to` value. Allowed `to` values are: "
                            f"{set(_PCAST_TO)}")
    ctx, axes, sizes = _axes("pcast", axis_name)
    mesh_axes = tuple(a for a in axes if ctx is not None and a in ctx.axes)

    def one(v):
        if not core.is_tracer(v):
            v = _as_tracer(v)
        if ctx is None or not mesh_axes:
            return v            # only vmap axes: nothing to mark
        vary = ctx.vma_of(v.value)
        state = {"varying" if a in vary else "invarying" for a in mesh_axes}
        if len(state) > 1:
            raise ArgumentError(
                "shardc.lax.pcast can only accept axis_name which corresponds to one of "
                f"varying, unreduced, reduced or invarying state of the input. Got input "
                f"type: {v.aval}, axes: {axes} and input state: {state}")
        (frm,) = state
        if to in ("reduced", "unreduced") and (frm, to) in (("invarying", "reduced"),
                                                           ("varying", "unreduced")):
            raise ShardcError(f"pcast to {to!r} is not supported by shardc yet")
        if (frm, to) != ("invarying", "varying"):
            raise ArgumentError(f"Unsupported pcast from={frm}, {to=}")
        if not ctx.check_vma:
            return v            # as jax: without variance checks pvary is a no-op
        return pv.pvary_over(v, mesh_axes, ctx.mesh)
    return _map(one, x)


@api_boundary
def pvary(x, axis_name):
    """`pcast(x, axis_name, to='varying')`: jax's name for it before jax 0.10 (which
    removed lax.pvary); kept because programs written for it still call it."""
    if isinstance(axis_name, (set, frozenset)):
        raise ShardcTypeError(f"{axis_name=} must be a tuple or a str. Got {axis_name}")
    axes = (axis_name,) if isinstance(axis_name, str) else tuple(axis_name)
    if not axes:
        return x
    ctx = manual_ctx()
    if ctx is not None:      # as jax's pvary: axes it already varies over are skipped
        def one(v):
            if not core.is_tracer(v):
                v = _as_tracer(v)
            new = tuple(a for a in axes if a not in ctx.vma_of(v.value))
            return pcast(v, new, to="varying") if new else v
        return _map(one, x)
    return pcast(x, axes, to="varying")


_RAGGED_ARGS = ("input_offsets", "send_sizes", "output_offsets", "recv_sizes")


def _check_ragged(operand, output, metadata):
    """jax's checks of ragged_all_to_all's arguments, named as jax names them."""
    op, out = aval(operand), aval(output)
    for name, v in zip(_RAGGED_ARGS, metadata):
        a = aval(v)
        if not dtypes.is_int(a.dtype):
            raise ArgumentError(f"ragged_all_to_all {name} must be integer type.")
        if a.ndim != 1 or a.shape[0] < 1:
            raise ArgumentError(f"ragged_all_to_all {name} must be rank 1 with positive "
                                f"dimension size, but got shape {a.shape}")
    if len({aval(v).shape for v in metadata}) != 1:
        raise ArgumentError("ragged_all_to_all: " + ", ".join(_RAGGED_ARGS) + " must have "
                            "the same length, got " + ", ".join(str(aval(v).shape[0])
                                                               for v in metadata))
    if op.ndim < 1 or op.shape[1:] != out.shape[1:] or op.dtype != out.dtype:
        raise ArgumentError(f"ragged_all_to_all: operand {op} and output {out} must have the "
                            "same dtype and the same shape but for the leading dim")


@api_boundary
def ragged_all_to_all(operand, output, input_offsets, send_sizes, output_offsets,
                      recv_sizes, *, axis_name, axis_index_groups=None):
    """jax.lax.ragged_all_to_all: slice i of `operand` (rows input_offsets[i] to
    input_offsets[i] + send_sizes[i]) goes to the device i // (K / axis size) along
    `axis_name`, which writes it into its `output` at output_offsets[i]; rows of
    `output` nobody writes keep their values.

    For GPUs and TPUs this is XLA's op (shardc.ops.ragged_collective). XLA:CPU has
    none, so there (and over a vmap's axis) it is built from a dense all_to_all: each
    device packs the rows it sends to each peer (at most len(output) of them, as
    disjoint writes fit there) and the row each lands on, exchanges both and scatters
    what it receives. Gradients and vmap follow from those ops."""
    from . import numpy as snp
    if axis_index_groups is not None:
        raise ShardcError("ragged_all_to_all: axis_index_groups is not supported (shardc "
                          "groups a collective by mesh axes)")
    meta = (input_offsets, send_sizes, output_offsets, recv_sizes)
    _check_ragged(operand, output, meta)
    _, axes, sizes = _axes("ragged_all_to_all", axis_name)
    ndev, k = int(np.prod(sizes)), aval(input_offsets).shape[0]
    if k % ndev:
        raise ArgumentError(f"ragged_all_to_all: the {k} slices do not divide among the "
                            f"{ndev} devices along {axis_name!r}")
    operand, output = _as_tracer(operand), _as_tracer(output)
    if all(batching.vmap_axis_size(a) is None for a in axes) and target_platform() != "cpu":
        meta = [snp.asarray(v).astype(np.int32) for v in meta]
        return ragged_all_to_all_p.bind(operand, output, *meta, axes=axes, sizes=sizes)
    n, m, per = aval(operand).shape[0], aval(output).shape[0], k // ndev
    io, ss, oo = (snp.reshape(snp.asarray(v).astype(np.int32), (ndev, per))
                  for v in (input_offsets, send_sizes, output_offsets))
    rows = max(min(per * n, m), 1)      # rows sent to one peer
    ends = snp.cumsum(ss, axis=1)                                   # (ndev, per)
    r = snp.arange(rows, dtype=np.int32)
    # the slice each packed row belongs to, and its place in that slice
    which = snp.sum(ends[:, None, :] <= r[None, :, None], axis=2, dtype=np.int32)
    sent = which < per
    which = snp.minimum(which, per - 1)
    within = r[None, :] - snp.take_along_axis(ends - ss, which, axis=1)
    src = snp.take_along_axis(io, which, axis=1) + within
    dst = snp.take_along_axis(oo, which, axis=1) + within
    dst = snp.where(sent & (dst >= 0) & (dst < m), dst, m)         # m: dropped
    data = snp.take(operand, snp.clip(src, 0, n - 1), axis=0)       # (ndev, rows, ...)
    data = all_to_all(data, axes, 0, 0, tiled=True)
    dst = all_to_all(dst, axes, 0, 0, tiled=True)
    flat = snp.reshape(data, (ndev * rows,) + aval(operand).shape[1:])
    return output.at[snp.reshape(dst, (-1,))].set(flat, mode="drop")
