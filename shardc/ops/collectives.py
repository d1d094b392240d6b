"""The collectives of manual parallelism (psum, all_gather, ppermute, ...): shapes,
factor rules, lowerings, gradients and batching.

Collectives name mesh axes (`axes`, a tuple) and carry their sizes, so shapes are
known from the op alone. Device groups are computed at lowering from the program's
mesh: devices are numbered in mesh order (row-major over the mesh axes).
"""
from __future__ import annotations

from functools import partial
from math import prod

import numpy as np

from ..ir import dtypes
from ..trace.core import Primitive
from ..ir.primitive import NO_FACTOR_RULE, PropKind, Vma
from ..errors import ShardcError
from ..ir.program import Aval
from ..lower.emit import sharding_per_value, tensor_type
from ..ir.rules import NEED_REPLICATION, RuleBuilder, pointwise
from ..ir.sharding import Sharding
from .common import check_dtype
from .device_groups import channel, device_groups, groups_attr, pairs_attr


# ---------------------------------------------------------------- collectives

def _all_reduce_lower(kind, ctx, x, *, axes, sizes):
    from .reduce import lower_reduce, monoid_region
    groups = device_groups(ctx.mesh, axes)
    xa = ctx.in_avals[0]
    if kind != "add" and dtypes.is_complex(xa.dtype):
        # XLA's all-reduce takes no complex order (real part, then imaginary part, as
        # jax's max): gather the values, then reduce them here
        stacked = xa.update(shape=(1,) + xa.shape)
        whole = xa.update(shape=(prod(sizes),) + xa.shape)
        sh = ctx.in_shardings[0]
        sh = [Sharding(((),) + sh.dims)] if sh is not None else None
        (x,) = ctx.op("stablehlo.reshape", [x], [tensor_type(xa)], [tensor_type(stacked)],
                      sharding=sh)
        (x,) = ctx.op("stablehlo.all_gather", [x], [tensor_type(stacked)],
                      [tensor_type(whole)],
                      {"all_gather_dim": "0 : i64", "channel_handle": channel(ctx),
                       "replica_groups": groups_attr(groups),
                       "use_global_device_ids": "unit"}, sharding=sh)
        return [lower_reduce(ctx, kind, x, [0], whole, ctx.out_avals[0])]
    region = monoid_region(ctx, kind, ctx.in_avals[0])
    t = tensor_type(ctx.out_avals[0])
    return ctx.op("stablehlo.all_reduce", [x], [t], [t],
                  {"channel_handle": channel(ctx), "replica_groups": groups_attr(groups),
                   "use_global_device_ids": "unit"}, regions=[region])


# jax's collectives over axes a value does not vary on first make it varying (pvary):
# their results vary over the axes (Vma.AXES), so a psum after them sums, not scales
def _collective(name, shape_rule, lower, rule, vma):
    return Primitive(name, shape_rule=shape_rule, sharding_rule=rule, lower=lower, vma=vma,
                     prop_kind=PropKind.ELEMENTWISE if rule is pointwise else PropKind.NONE)


def _reduce_shape(x, *, axes, sizes):
    check_dtype("collective", x, "any")
    return x.strong() if x.weak else x


def _all_reduce(name, kind):
    return _collective(name, _reduce_shape, partial(_all_reduce_lower, kind), pointwise,
                       Vma.REMOVE)


psum_p = _all_reduce("psum", "add")
pmax_p = _all_reduce("pmax", "max")
pmin_p = _all_reduce("pmin", "min")


# all_gather: the gathered dim grows by the group size (tiled) or is new (not tiled)
def _ag_shape(x, *, axes, sizes, axis, tiled):
    n = prod(sizes)
    if tiled:
        if not 0 <= axis < x.ndim:
            raise ShardcError(f"all_gather: axis {axis} out of range for {x}")
        return x.update(shape=tuple(d * n if i == axis else d for i, d in enumerate(x.shape)))
    if not 0 <= axis <= x.ndim:
        raise ShardcError(f"all_gather: axis {axis} out of range for {x}")
    return x.update(shape=x.shape[:axis] + (n,) + x.shape[axis:])


def _ag_rule(ins, outs, *, axes, sizes, axis, tiled):
    x, out = ins[0], outs[0]
    b = RuleBuilder(ins, outs)
    od = 0
    for d in range(out.ndim):
        if d == axis:
            if tiled:
                b.factor([d], [None], x.shape[d], NEED_REPLICATION)
            b.factor([None], [d], out.shape[d], NEED_REPLICATION)
            if tiled:
                od += 1
            continue
        b.factor([od], [d], x.shape[od])
        od += 1
    return b.build()


def _ag_lower(ctx, x, *, axes, sizes, axis, tiled):
    from .common import i64_array
    xa, out = ctx.in_avals[0], ctx.out_avals[0]
    if not tiled:
        shape = xa.shape[:axis] + (1,) + xa.shape[axis:]
        xa2 = xa.update(shape=shape)
        sh = Sharding(ctx.in_shardings[0].dims[:axis] + ((),) + ctx.in_shardings[0].dims[axis:])
        (x,) = ctx.op("stablehlo.reshape", [x], [tensor_type(xa)], [tensor_type(xa2)],
                      sharding=[sh])
        xa = xa2
    groups = device_groups(ctx.mesh, axes)
    _ = i64_array
    return ctx.op("stablehlo.all_gather", [x], [tensor_type(xa)], [tensor_type(out)],
                  {"all_gather_dim": f"{axis} : i64", "channel_handle": channel(ctx),
                   "replica_groups": groups_attr(groups), "use_global_device_ids": "unit"})


all_gather_p = _collective("all_gather", _ag_shape, _ag_lower, _ag_rule, Vma.AXES)


# psum_scatter: a reduce-scatter along scatter_dimension
def _ps_shape(x, *, axes, sizes, scatter_dimension, tiled):
    n, d = prod(sizes), scatter_dimension
    if not 0 <= d < x.ndim:
        raise ShardcError(f"psum_scatter: scatter_dimension {d} out of range for {x}")
    if tiled:
        if x.shape[d] % n:
            raise ShardcError(f"psum_scatter: dimension {d} of {x} is not divisible by the "
                              f"axis size {n}")
        return x.update(shape=tuple(s // n if i == d else s for i, s in enumerate(x.shape)),
                        weak=False)
    if x.shape[d] != n:
        raise ShardcError(f"psum_scatter(tiled=False) needs dimension {d} of {x} to equal the "
                          f"axis size {n}")
    return x.update(shape=x.shape[:d] + x.shape[d + 1:], weak=False)


def _ps_rule(ins, outs, *, axes, sizes, scatter_dimension, tiled):
    x = ins[0]
    b = RuleBuilder(ins, outs)
    od = 0
    for d in range(x.ndim):
        if d == scatter_dimension:
            b.factor([d], [None], x.shape[d], NEED_REPLICATION)
            if tiled:
                b.factor([None], [od], outs[0].shape[od], NEED_REPLICATION)
                od += 1
            continue
        b.factor([d], [od], x.shape[d])
        od += 1
    return b.build()


def _ps_lower(ctx, x, *, axes, sizes, scatter_dimension, tiled):
    from .reduce import monoid_region
    xa, out = ctx.in_avals[0], ctx.out_avals[0]
    d = scatter_dimension
    tiled_out = out if tiled else out.update(shape=out.shape[:d] + (1,) + out.shape[d:])
    groups = device_groups(ctx.mesh, axes)
    region = monoid_region(ctx, "add", xa)
    sh = ctx.out_shardings[0]
    if not tiled:
        sh = Sharding(sh.dims[:d] + ((),) + sh.dims[d:])
    (r,) = ctx.op("stablehlo.reduce_scatter", [x], [tensor_type(xa)], [tensor_type(tiled_out)],
                  {"channel_handle": channel(ctx), "replica_groups": groups_attr(groups),
                   "scatter_dimension": f"{d} : i64", "use_global_device_ids": "unit"},
                  [sh], regions=[region])
    if not tiled:
        (r,) = ctx.op("stablehlo.reshape", [r], [tensor_type(tiled_out)], [tensor_type(out)])
    return r


psum_scatter_p = _collective("psum_scatter", _ps_shape, _ps_lower, _ps_rule, Vma.AXES)


# all_to_all (tiled form; the untiled form is built from it with reshapes)
def _a2a_shape(x, *, axes, sizes, split_axis, concat_axis):
    n = prod(sizes)
    for name, a in (("split_axis", split_axis), ("concat_axis", concat_axis)):
        if not 0 <= a < x.ndim:
            raise ShardcError(f"all_to_all: {name} {a} out of range for {x}")
    if x.shape[split_axis] % n:
        raise ShardcError(f"all_to_all: dimension {split_axis} of {x} is not divisible by the "
                          f"axis size {n}")
    shape = list(x.shape)
    shape[split_axis] //= n
    shape[concat_axis] *= n
    return x.update(shape=shape)


def _a2a_rule(ins, outs, *, axes, sizes, split_axis, concat_axis):
    x, out = ins[0], outs[0]
    b = RuleBuilder(ins, outs)
    for d in range(x.ndim):
        if d in (split_axis, concat_axis):
            b.factor([d], [None], x.shape[d], NEED_REPLICATION)
            b.factor([None], [d], out.shape[d], NEED_REPLICATION)
        else:
            b.factor([d], [d], x.shape[d])
    return b.build()


def _a2a_lower(ctx, x, *, axes, sizes, split_axis, concat_axis):
    groups = device_groups(ctx.mesh, axes)
    return ctx.op("stablehlo.all_to_all", [x], [tensor_type(ctx.in_avals[0])],
                  [tensor_type(ctx.out_avals[0])],
                  {"channel_handle": channel(ctx), "concat_dimension": f"{concat_axis} : i64",
                   "replica_groups": groups_attr(groups),
                   "split_count": f"{prod(sizes)} : i64",
                   "split_dimension": f"{split_axis} : i64"})


all_to_all_p = _collective("all_to_all", _a2a_shape, _a2a_lower, _a2a_rule, Vma.AXES)


# ppermute: send the block at axis index src to axis index dst
def pp_perm(perm, sizes):
    """ppermute's (source, destination) pairs as ints; a negative index counts from the
    end of the axis, as jax's (it indexes the device group with it)."""
    n = prod(sizes)
    return tuple((int(s) + n if -n <= int(s) < 0 else int(s),
                  int(d) + n if -n <= int(d) < 0 else int(d)) for s, d in perm)


def _pp_shape(x, *, axes, sizes, perm):
    n = prod(sizes)
    srcs, dsts = [s for s, _ in perm], [d for _, d in perm]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts) or \
            any(not 0 <= i < n for i in srcs + dsts):
        raise ShardcError(f"ppermute: {list(perm)} is not a permutation of indices 0..{n - 1} "
                          f"of axis {axes if len(axes) > 1 else axes[0]!r}: each index may be a "
                          "source at most once and a destination at most once")
    return x


def _pp_lower(ctx, x, *, axes, sizes, perm):
    # as JAX: permutation indices count devices of a group in device-id order
    groups = np.sort(device_groups(ctx.mesh, axes), axis=1)
    pairs = [(int(g[s]), int(g[d])) for g in groups for s, d in perm]
    t = tensor_type(ctx.in_avals[0])
    return ctx.op("stablehlo.collective_permute", [x], [t], [t],
                  {"channel_handle": channel(ctx), "source_target_pairs": pairs_attr(pairs)})


ppermute_p = _collective("ppermute", _pp_shape, _pp_lower, pointwise, Vma.AXES)


# axis_index: this device's position along the named axes
def _ai_shape(*, axes, sizes, auto=()):
    return Aval((), dtypes.int32)


def _ai_lower(ctx, *, axes, sizes, auto=()):
    if not auto:
        return _ai_index(ctx, axes)
    # partition_id is ambiguous to XLA while the `auto` axes are still automatic: as
    # jax does, compute it in a nested manual computation over those axes
    saved_lines, saved_indent = ctx.lines, ctx.indent
    inner = []
    ctx.lines, ctx.indent = inner, saved_indent + "    "
    try:
        (r,) = _ai_index(ctx, axes)
    finally:
        ctx.lines, ctx.indent = saved_lines, saved_indent
    t = tensor_type(ctx.out_avals[0])
    rep = sharding_per_value([Sharding.replicated(0)])
    body = (f"{{\n{saved_indent}  ^bb0():\n" + "\n".join(inner) + "\n"
            f'{saved_indent}    "sdy.return"({r}) : ({t}) -> ()\n{saved_indent}}}')
    return ctx.op("sdy.manual_computation", [], [], [t],
                  {"in_shardings": "#sdy.sharding_per_value<[]>",
                   "manual_axes": "#sdy<manual_axes{" + ", ".join(f'"{a}"' for a in auto) +
                   "}>", "out_shardings": rep}, sharding=False, regions=[body])


def _ai_index(ctx, axes):
    mesh = ctx.mesh
    u32 = Aval((), dtypes.uint32)
    ut = tensor_type(u32)
    rep = [Sharding.replicated(0)]
    (pid,) = ctx.op("stablehlo.partition_id", [], [], [ut], sharding=rep)
    names = list(mesh.names)
    total = None
    for a in axes:
        stride = prod(mesh.sizes[b] for b in names[names.index(a) + 1:])
        s = ctx.constant(stride, u32)
        m = ctx.constant(mesh.sizes[a], u32)
        (q,) = ctx.op("stablehlo.divide", [pid, s], [ut, ut], [ut], sharding=rep)
        (r,) = ctx.op("stablehlo.remainder", [q, m], [ut, ut], [ut], sharding=rep)
        if total is None:
            total = r
        else:
            k = ctx.constant(mesh.sizes[a], u32)
            (t,) = ctx.op("stablehlo.multiply", [total, k], [ut, ut], [ut], sharding=rep)
            (total,) = ctx.op("stablehlo.add", [t, r], [ut, ut], [ut], sharding=rep)
    return ctx.op("stablehlo.convert", [total], [ut], [tensor_type(ctx.out_avals[0])],
                  sharding=rep)


axis_index_p = _collective("axis_index", _ai_shape, _ai_lower, NO_FACTOR_RULE, Vma.AXES)

# ---------------------------------------------------------------- gradients
# Collectives transpose to their duals.

def _psum_vjp(ctx, cts, x, *, axes, sizes):
    """A broadcast over mesh axes where variance is checked (the cotangent of an
    invariant result is itself invariant); a psum again over unchecked ones, as jax's
    shard_map(check_vma=False), and over a vmap's named axes, as jax's vmap and pmap."""
    from .batching import vmap_axis_size
    mc = ctx.builder.manual
    checked = mc is not None and mc.check_vma
    again = [i for i, a in enumerate(axes) if vmap_axis_size(a) is not None or not checked]
    if not again:
        return [cts[0]]
    return [psum_p.bind(cts[0], axes=tuple(axes[i] for i in again),
                        sizes=tuple(sizes[i] for i in again))]


def _vjps():
    from ..ir.primitive import nondiff
    from . import lax as L      # looked up when a rule runs

    psum_p.vjp = _psum_vjp

    def chooser(ctx, cts, x, *, axes, sizes):
        """The gradient goes to the devices holding the max (or min), split on ties."""
        loc = L.convert_element_type(L.eq(x, ctx.out), cts[0].dtype)
        count = psum_p.bind(loc, axes=axes, sizes=sizes)
        return [L.mul(cts[0], L.div(loc, count))]
    pmax_p.vjp = chooser
    pmin_p.vjp = chooser
    all_gather_p.vjp = lambda ctx, cts, x, *, axes, sizes, axis, tiled: [
        psum_scatter_p.bind(cts[0], axes=axes, sizes=sizes, scatter_dimension=axis,
                            tiled=tiled)]
    psum_scatter_p.vjp = lambda ctx, cts, x, *, axes, sizes, scatter_dimension, tiled: [
        all_gather_p.bind(cts[0], axes=axes, sizes=sizes, axis=scatter_dimension, tiled=tiled)]
    all_to_all_p.vjp = lambda ctx, cts, x, *, axes, sizes, split_axis, concat_axis: [
        all_to_all_p.bind(cts[0], axes=axes, sizes=sizes, split_axis=concat_axis,
                          concat_axis=split_axis)]
    ppermute_p.vjp = lambda ctx, cts, x, *, axes, sizes, perm: [
        ppermute_p.bind(cts[0], axes=axes, sizes=sizes, perm=tuple((d, s) for s, d in perm))]
    axis_index_p.vjp = nondiff


_vjps()

# ---------------------------------------------------------------- batching (vmap)

def _split_axes(ctx, axes, sizes):
    """(whether the vmapped axis is among `axes`, the other axes, their sizes)."""
    rest = [(a, s) for a, s in zip(axes, sizes) if a != ctx.axis_name]
    return len(rest) < len(axes), tuple(a for a, _ in rest), tuple(s for _, s in rest)


def _only_vmapped(ctx, name, axes, sizes):
    vm, rest, _ = _split_axes(ctx, axes, sizes)
    if vm and rest:
        raise ShardcError(f"{name} over the vmapped axis {ctx.axis_name!r} together with "
                          f"mesh axes {rest}: apply it to each in turn", ctx.op.loc)
    return vm


def _batch_rules():
    """vmap. A collective over the vmapped axis acts across the mapped dim (the examples
    are its 'devices'); over other axes it acts as before on the batched value."""
    from . import lax as L
    from .batching import bcast, move_dim
    from .reduce import reduce_max_p, reduce_min_p, reduce_sum_p
    across = {psum_p: reduce_sum_p, pmax_p: reduce_max_p, pmin_p: reduce_min_p}

    def all_reduce(prim):
        def rule(ctx, args, batched, *, axes, sizes):
            (x,), (b,) = args, batched
            vm, rest, rsizes = _split_axes(ctx, axes, sizes)
            if vm:
                a = L.aval(x)
                if b:
                    x = across[prim].bind(x, axes=(0,))
                elif prim is psum_p:
                    x = L.mul(x, L.lit(ctx.size, a))
                if a.weak:
                    x = L.convert_element_type(x, a.dtype)
                b = False
            if rest:
                x = prim.bind(x, axes=rest, sizes=rsizes)
            return x, b
        return rule
    for p in across:
        p.batch = all_reduce(p)

    def same(prim):
        """Over mesh axes only: the collective on the batched value, its dims shifted."""
        def rule(ctx, args, batched, **params):
            shifted = {k: v + 1 if k in ("axis", "scatter_dimension", "split_axis",
                                          "concat_axis") else v for k, v in params.items()}
            return prim.bind(args[0], **shifted), True
        return rule

    def all_gather_rule(ctx, args, batched, *, axes, sizes, axis, tiled):
        if not _only_vmapped(ctx, "all_gather", axes, sizes):
            return same(all_gather_p)(ctx, args, batched, axes=axes, sizes=sizes, axis=axis,
                                      tiled=tiled)
        x = move_dim(bcast(ctx, args[0], batched[0]), 0, axis)
        if tiled:
            a = L.aval(x)
            x = L.reshape(x, a.shape[:axis] + (a.shape[axis] * a.shape[axis + 1],)
                          + a.shape[axis + 2:])
        return x, False
    all_gather_p.batch = all_gather_rule

    def psum_scatter_rule(ctx, args, batched, *, axes, sizes, scatter_dimension, tiled):
        if not _only_vmapped(ctx, "psum_scatter", axes, sizes):
            return same(psum_scatter_p)(ctx, args, batched, axes=axes, sizes=sizes,
                                        scatter_dimension=scatter_dimension, tiled=tiled)
        x = bcast(ctx, args[0], batched[0])
        s = reduce_sum_p.bind(x, axes=(0,))
        d = scatter_dimension
        if tiled:
            a = L.aval(s)
            s = L.reshape(s, a.shape[:d] + (ctx.size, a.shape[d] // ctx.size) + a.shape[d + 1:])
            return move_dim(s, d, 0), True
        return move_dim(s, d, 0), True
    psum_scatter_p.batch = psum_scatter_rule

    def all_to_all_rule(ctx, args, batched, *, axes, sizes, split_axis, concat_axis):
        if not _only_vmapped(ctx, "all_to_all", axes, sizes):
            return same(all_to_all_p)(ctx, args, batched, axes=axes, sizes=sizes,
                                      split_axis=split_axis, concat_axis=concat_axis)
        # x[j, ..., s, ...]: example j's chunk k of dim s goes to example k, at the j-th
        # place of its dim c
        x = bcast(ctx, args[0], batched[0])
        a = L.aval(x)
        n, s, c = ctx.size, split_axis + 1, concat_axis + 1
        x = L.reshape(x, a.shape[:s] + (n, a.shape[s] // n) + a.shape[s + 1:])
        labels = ["j"] + [d for d in range(1, a.ndim)]   # dims by their old number
        labels = labels[:s] + ["k", "m"] + labels[s + 1:]
        # target: k first, then the old dims in order with j just before dim c
        order = ["k"]
        for d in range(1, a.ndim):
            if d == c:
                order.append("j")
            order.append("m" if d == s else d)
        x = L.transpose(x, tuple(labels.index(t) for t in order))
        b = L.aval(x)
        pos = order.index("j")
        x = L.reshape(x, b.shape[:pos] + (b.shape[pos] * b.shape[pos + 1],) + b.shape[pos + 2:])
        return x, True
    all_to_all_p.batch = all_to_all_rule

    def ppermute_rule(ctx, args, batched, *, axes, sizes, perm):
        if not _only_vmapped(ctx, "ppermute", axes, sizes):
            return same(ppermute_p)(ctx, args, batched, axes=axes, sizes=sizes, perm=perm)
        x = bcast(ctx, args[0], batched[0])
        a = L.aval(x)
        src = {d: s for s, d in perm}
        rows = []
        for d in range(ctx.size):
            if d in src:
                s = src[d]
                rows.append(L.slice(x, (s,) + (0,) * (a.ndim - 1), (s + 1, *a.shape[1:])))
            else:
                rows.append(L.zeros((1, *a.shape[1:]), a.dtype))
        return L.concatenate(rows, 0), True
    ppermute_p.batch = ppermute_rule

    def axis_index_rule(ctx, args, batched, *, axes, sizes, auto=()):
        _only_vmapped(ctx, "axis_index", axes, sizes)
        return L.iota(dtypes.int32, (ctx.size,)), True
    axis_index_p.batch = axis_index_rule


_batch_rules()
