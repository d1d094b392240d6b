"""Shape ops: broadcast_in_dim, reshape, transpose, concatenate, pad, slice, rev, iota."""
from __future__ import annotations

from math import gcd, prod

from ..ir import dtypes
from ..trace.core import Primitive
from ..trace.types import restrict
from ..ir.primitive import PropKind, Trait
from ..errors import ArgumentError, ShardcError, ShardcTypeError
from ..ir.program import Aval
from ..ir.sharding import Sharding
from ..lower.emit import tensor_type
from ..ir.rules import NEED_REPLICATION, PERMUTATION, RuleBuilder, no_rule
from .common import i64_array
from .partitioner_holds import padded_whole, slice_source


# ---------------------------------------------------------------- broadcast_in_dim

def _bcast_shape(x, *, shape, broadcast_dimensions):
    dims = broadcast_dimensions
    if any(n < 0 for n in shape):
        raise ShardcTypeError(f"shapes must not have negative sizes, got {tuple(shape)}")
    if len(dims) != x.ndim or len(set(dims)) != len(dims) or \
            any(not 0 <= d < len(shape) for d in dims) or list(dims) != sorted(dims):
        raise ShardcError(f"broadcast_in_dim: bad broadcast_dimensions {dims} for {x} -> "
                          f"{tuple(shape)}")
    for i, d in enumerate(dims):
        if x.shape[i] not in (1, shape[d]):
            raise ShardcTypeError(f"cannot broadcast shape {x.shape} to {tuple(shape)}")
    return Aval(shape, x.dtype, x.weak)


def _bcast_rule(ins, outs, *, shape, broadcast_dimensions):
    if outs[0].size == 0:   # XLA makes zero-element results constants before propagating
        return None
    x = ins[0]
    if x.size == outs[0].size:
        # only inserts size-1 dims: XLA imports it as a reshape, and so does Shardy
        return reshape_rule(ins, outs)
    out_to_in = {o: i for i, o in enumerate(broadcast_dimensions)}
    b = RuleBuilder(ins, outs)
    for o, n in enumerate(shape):
        i = out_to_in.get(o)
        if i is not None and x.shape[i] == 1 and n != 1:
            b.factor([i], [None], 1)
            i = None
        b.factor([i], [o], n)
    return b.build()


def _lower_bcast(ctx, x, *, shape, broadcast_dimensions):
    return ctx.op1("stablehlo.broadcast_in_dim", [x],
                   {"broadcast_dimensions": i64_array(broadcast_dimensions)})


broadcast_in_dim_p = Primitive("broadcast_in_dim", shape_rule=_bcast_shape,
                               sharding_rule=_bcast_rule, lower=_lower_bcast,
                               prop_kind=PropKind.BROADCAST,
                               traits=Trait.KEEPS_CONSTANT | Trait.FUSED)


def _bcast_type(in_avals, out_avals, mesh, explicit, *, shape, broadcast_dimensions):
    """Explicit mode, as jax's: each operand dim's axes go to the result dim it maps to
    (a size-1 dim's too: on size-1 axes it may grow), new dims are unsharded, and partial
    sums stay partial sums (a broadcast is linear)."""
    ts = in_avals[0].ts
    if ts is None:
        return [None]
    ts = restrict(ts, explicit, len(ts.dims))
    dims = [()] * len(shape)
    for i, o in enumerate(broadcast_dimensions):
        dims[o] = ts.dims[i]
    return [Sharding(dims, None, ts.unreduced, ts.reduced)]


broadcast_in_dim_p.type_rule = _bcast_type
broadcast_in_dim_p.linear_in = (0,)    # a gradient rule's partial sums stay partial
broadcast_in_dim_p.kind_of = lambda op: "reshape" if op.inputs[0].aval.size == \
    op.outputs[0].aval.size else "broadcast"


# ---------------------------------------------------------------- reshape

def _reshape_shape(x, *, shape):
    if any(d < 0 for d in shape):
        raise ShardcTypeError(f"reshape new_sizes must all be positive, got {tuple(shape)}")
    if prod(shape) != x.size:      # (jax: ValueError, from StableHLO's verifier)
        raise ArgumentError(f"cannot reshape an array of shape {x.shape} ({x.size} "
                            f"elements) into shape {tuple(shape)}")
    return Aval(shape, x.dtype, x.weak)


def reshape_rule(ins, outs, **_):
    """Shardy's two-pointer factorization of merged and split dims."""
    a, o = ins[0].shape, outs[0].shape
    if prod(a) == 0:
        return None
    b = RuleBuilder(ins, outs)
    i = j = 0
    pd_in = pd_out = pf_in = pf_out = 1
    while i < len(a) or j < len(o):
        if i < len(a) and a[i] == 1:
            b.factor([i], [None], 1)
            i += 1
            continue
        if j < len(o) and o[j] == 1:
            b.factor([None], [j], 1)
            j += 1
            continue
        if i < len(a) and pd_in == pf_in:
            pd_in *= a[i]
        if j < len(o) and pd_out == pf_out:
            pd_out *= o[j]
        n_in, n_out = pd_in // pf_in, pd_out // pf_out
        g = gcd(n_in, n_out)

        def diverged(n, small, large):
            if large % small == 0 and n % (large // small) == 0:
                return large // small
            return n // g if n > g else n
        if pf_in == pf_out:
            if g > 1:
                b.factor([i], [j], g)
                pf_in *= g
                pf_out *= g
            else:
                b.factor([i], [None], n_in)
                pf_in *= n_in
                b.factor([None], [j], n_out)
                pf_out *= n_out
        elif pf_in < pf_out:
            n = diverged(n_in, pf_in, pf_out)
            b.factor([i], [None], n)
            pf_in *= n
        else:
            n = diverged(n_out, pf_out, pf_in)
            b.factor([None], [j], n)
            pf_out *= n
        if i < len(a) and pd_in == pf_in:
            i += 1
        if j < len(o) and pd_out == pf_out:
            j += 1
    return b.build()


def _lower_reshape(ctx, x, *, shape):
    return ctx.op1("stablehlo.reshape", [x])


reshape_p = Primitive("reshape", shape_rule=_reshape_shape, sharding_rule=reshape_rule,
                      lower=_lower_reshape, prop_kind=PropKind.RESHAPE,
                      traits=Trait.KEEPS_CONSTANT | Trait.FUSED | Trait.ALIAS)
# explicit mode: these move elements, so partial sums stay partial sums (ur_rules.py)
reshape_p.type_partial = ("layout", (0,))



# ---------------------------------------------------------------- transpose

def _transpose_shape(x, *, permutation):
    if sorted(permutation) != list(range(x.ndim)):
        raise ShardcTypeError(f"transpose: {permutation} is not a permutation of the "
                              f"{x.ndim} axes of {x}")
    return Aval(tuple(x.shape[p] for p in permutation), x.dtype, x.weak)


def _transpose_rule(ins, outs, *, permutation):
    b = RuleBuilder(ins, outs)
    for o, i in enumerate(permutation):
        b.factor([i], [o], ins[0].shape[i])
    return b.build()


def _lower_transpose(ctx, x, *, permutation):
    return ctx.op1("stablehlo.transpose", [x], {"permutation": i64_array(permutation)})


transpose_p = Primitive("transpose", shape_rule=_transpose_shape, sharding_rule=_transpose_rule,
                        lower=_lower_transpose, prop_kind=PropKind.RESHAPE,
                        traits=Trait.FUSED)
transpose_p.type_partial = ("layout", (0,))


# ---------------------------------------------------------------- concatenate

def _concat_shape(*xs, dimension):
    if not xs:
        raise ShardcError("concatenate needs at least one array")
    first = xs[0]
    for x in xs:
        if x.ndim != first.ndim or x.dtype != first.dtype or any(
                a != b for k, (a, b) in enumerate(zip(x.shape, first.shape)) if k != dimension):
            raise ShardcTypeError("concatenate: arrays must have the same dtype and the "
                                  f"same shape except along axis {dimension}; got "
                                  f"{[str(x) for x in xs]}")
    shape = list(first.shape)
    shape[dimension] = sum(x.shape[dimension] for x in xs)
    return Aval(shape, first.dtype, all(x.weak for x in xs))


def _concat_rule(ins, outs, *, dimension):
    b = RuleBuilder(ins, outs)
    b.same_dims(outs[0].shape, kind=lambda d: NEED_REPLICATION if d == dimension else "pass")
    return b.build()


def _lower_concat(ctx, *xs, dimension):
    return ctx.op1("stablehlo.concatenate", list(xs), {"dimension": f"{dimension} : i64"})


concatenate_p = Primitive("concatenate", shape_rule=_concat_shape, sharding_rule=_concat_rule,
                          lower=_lower_concat, prop_kind=PropKind.NONE)
concatenate_p.type_whole = "keep"    # explicit mode: jax keeps the concat dim's sharding
concatenate_p.type_partial = ("layout", None, "any")    # reduced if any operand is (jax)


# ---------------------------------------------------------------- pad / slice / rev

def _mismatch_rule(ins, outs, in_shape, out_shape, kind, blocked=False):
    """Shardy's addPointwiseWithDiffTypeForMismatch: one factor per dim, sized as the input."""
    b = RuleBuilder(ins, outs)
    for d, (n, m) in enumerate(zip(in_shape, out_shape)):
        same = n == m
        b.factor([d] + [None] * (len(ins) - 1), [d], n,
                 "pass" if same else kind, blocked and not same)
    return b.build()


def _pad_shape(x, pv, *, padding_config):
    if pv.ndim or pv.dtype != x.dtype:
        raise ShardcError(f"pad: the padding value must be a scalar of dtype {x.dtype}")
    if len(padding_config) != x.ndim:
        raise ShardcError(f"pad: need one (low, high, interior) per axis of {x}")
    shape = []
    for n, (lo, hi, interior) in zip(x.shape, padding_config):
        if interior < 0:
            raise ShardcError("pad: interior padding must be non-negative")
        m = lo + hi + n + max(n - 1, 0) * interior
        if m < 0:
            raise ShardcError(f"pad: padding {padding_config} leaves a negative size")
        shape.append(m)
    return Aval(shape, x.dtype, x.weak and pv.weak)   # as jax: weak only if both are


def _pad_rule(ins, outs, *, padding_config):
    return _mismatch_rule(ins, outs, ins[0].shape, outs[0].shape, PERMUTATION)


def _lower_pad(ctx, x, pv, *, padding_config):
    lo, hi, interior = zip(*padding_config) if padding_config else ((), (), ())
    types = [tensor_type(a) for a in ctx.in_avals]
    out = ctx.out_avals[0]
    # XLA's partitioner aborts the process (a CHECK failure, jax.jit too) on a negative
    # low pad with interior padding of a split dim: pad without the negative part,
    # then slice it off
    crop = [-a if a < 0 and i > 0 else 0 for a, i in zip(lo, interior)]
    mid = out.update(shape=tuple(n + c for n, c in zip(out.shape, crop)))
    whole = padded_whole(ctx, interior)
    (r,) = ctx.op("stablehlo.pad", [x, pv], types, [tensor_type(mid)],
                  {"edge_padding_low": i64_array([a + c for a, c in zip(lo, crop)]),
                   "edge_padding_high": i64_array(hi),
                   "interior_padding": i64_array(interior)},
                  sharding=[whole] if whole is not None else ctx.out_shardings)
    if whole is not None:
        r = ctx.held(r, mid, whole, always=True)
    if not any(crop):
        wanted = ctx.out_shardings[0] if not ctx.lowering.sources_only else None
        return [r if whole is None or wanted is None else ctx.held(r, out, wanted, always=True)]
    return ctx.op("stablehlo.slice", [r], [tensor_type(mid)], [tensor_type(out)], {
        "start_indices": i64_array(crop), "limit_indices": i64_array(mid.shape),
        "strides": i64_array([1] * out.ndim)})


pad_p = Primitive("pad", shape_rule=_pad_shape, sharding_rule=_pad_rule, lower=_lower_pad,
                  prop_kind=PropKind.NONE)
pad_p.type_partial = "pad"     # padded with zeros or partial sums (ur_rules.py)
# a pad of zero widths is its operand (XLA's canonicalizer folds it before Shardy)
pad_p.fold = lambda op, consts, defs: [op.inputs[0]] if not any(
    any(c) for c in op.params["padding_config"]) else None


def _slice_shape(x, *, start_indices, limit_indices, strides=None):
    strides = strides or (1,) * x.ndim
    if not (len(start_indices) == len(limit_indices) == len(strides) == x.ndim):
        raise ShardcError(f"slice: need one start, limit and stride per axis of {x}")
    shape = []
    for n, s, lim, st in zip(x.shape, start_indices, limit_indices, strides):
        if not 0 <= s <= lim <= n or st < 1:
            raise ShardcError(f"slice [{s}:{lim}:{st}] is out of bounds for an axis of size {n}")
        shape.append((lim - s + st - 1) // st)
    return Aval(shape, x.dtype, x.weak)


def _slice_rule(ins, outs, **_):
    if outs[0].size == 0:   # XLA makes zero-element results constants before propagating
        return None
    return _mismatch_rule(ins, outs, ins[0].shape, outs[0].shape, PERMUTATION)


def _lower_slice(ctx, x, *, start_indices, limit_indices, strides=None):
    x = ctx.held(x, ctx.in_avals[0], slice_source(ctx), always=True)
    # A stride on a dim the slice leaves at one element or none means nothing, and XLA's
    # partitioner mis-sizes such a strided slice of a split dim (an hlo-verifier error,
    # or a wrong value): jax.jit's lax.slice(x, (5,), (6,), (3,)) over 4 devices too.
    # There the slice is lowered with stride 1 and a limit just past its element.
    out = ctx.out_avals[0].shape
    strides = strides or (1,) * len(start_indices)
    limit_indices = [t if n > 1 else s + n for s, t, n in zip(start_indices, limit_indices, out)]
    strides = [st if n > 1 else 1 for st, n in zip(strides, out)]
    return ctx.op1("stablehlo.slice", [x], {
        "start_indices": i64_array(start_indices), "limit_indices": i64_array(limit_indices),
        "strides": i64_array(strides)})


slice_p = Primitive("slice", shape_rule=_slice_shape, sharding_rule=_slice_rule,
                    lower=_lower_slice, prop_kind=PropKind.NONE, traits=Trait.KEEPS_CONSTANT)
slice_p.type_partial = ("layout", (0,))


def _rev_shape(x, *, dimensions):
    if any(not 0 <= d < x.ndim for d in dimensions):
        raise ShardcError(f"rev: bad dimensions {dimensions} for {x}")
    return x


def _rev_rule(ins, outs, *, dimensions):
    b = RuleBuilder(ins, outs)
    b.same_dims(ins[0].shape, kind=lambda d: PERMUTATION if d in dimensions else "pass")
    return b.build()


def _lower_rev(ctx, x, *, dimensions):
    return ctx.op1("stablehlo.reverse", [x], {"dimensions": i64_array(dimensions)})


rev_p = Primitive("rev", shape_rule=_rev_shape, sharding_rule=_rev_rule, lower=_lower_rev,
                  prop_kind=PropKind.NONE)
rev_p.type_partial = ("layout", (0,))


# ---------------------------------------------------------------- iota

def _iota_shape(*, dtype, shape, dimension):
    if not 0 <= dimension < len(shape):
        raise ShardcError(f"iota: dimension {dimension} out of range for shape {shape}")
    if dtype == dtypes.bool_:
        raise ShardcError("iota needs a numeric dtype")
    return Aval(shape, dtype)


def _lower_iota(ctx, *, dtype, shape, dimension):
    return ctx.op("stablehlo.iota", [], [], [tensor_type(ctx.out_avals[0])],
                  {"iota_dimension": f"{dimension} : i64"})


iota_p = Primitive("iota", shape_rule=_iota_shape, sharding_rule=no_rule, lower=_lower_iota,
                   prop_kind=PropKind.NONE, traits=Trait.CONSTANT | Trait.FUSED)


# ---------------------------------------------------------------- gradients

def _vjps():
    from ..ir.primitive import nondiff
    from .elementwise import defvjp
    from . import lax as L      # looked up when a rule runs

    def bcast_vjp(c, g, x, *, shape, broadcast_dimensions):
        xa = c.in_avals[0]
        if xa.ndim == 0 and not shape:
            return (g,)
        unit = [i for i, s in enumerate(xa.shape) if s == 1]
        bdims = [d for i, d in enumerate(broadcast_dimensions) if i not in unit]
        axes = tuple(d for d in range(len(shape)) if d not in bdims)
        from .reduce import reduce_sum_p
        y = reduce_sum_p.bind(g, axes=axes) if axes else g
        if unit:
            y = broadcast_in_dim_p.bind(y, shape=xa.shape, broadcast_dimensions=tuple(
                d for d in range(xa.ndim) if d not in unit))
        return (y,)
    defvjp(broadcast_in_dim_p, bcast_vjp)
    defvjp(reshape_p, lambda c, g, x, *, shape: (reshape_p.bind(g, shape=c.in_avals[0].shape),))

    def transpose_vjp(c, g, x, *, permutation):
        inv = tuple(sorted(range(len(permutation)), key=lambda i: permutation[i]))
        return (transpose_p.bind(g, permutation=inv),)
    defvjp(transpose_p, transpose_vjp)

    def concat_vjp(c, g, *xs, dimension):
        out, lo = [], 0
        shape = c.out.shape
        for a in c.in_avals:
            start = [0] * len(shape)
            limit = list(shape)
            start[dimension], limit[dimension] = lo, lo + a.shape[dimension]
            lo += a.shape[dimension]
            out.append(slice_p.bind(g, start_indices=tuple(start), limit_indices=tuple(limit)))
        return out
    concatenate_p.vjp = lambda ctx, cts, *xs, dimension: concat_vjp(ctx, cts[0], *xs,
                                                                    dimension=dimension)

    def pad_vjp(c, g, x, pv, *, padding_config):
        lo, hi, interior = zip(*padding_config) if padding_config else ((), (), ())
        unpad = tuple((-a, -b, 0) for a, b in zip(lo, hi))
        zero = L.zeros((), c.out.dtype)
        unpadded = pad_p.bind(g, zero, padding_config=unpad)
        ua = unpadded.value.aval
        t_op = slice_p.bind(unpadded, start_indices=(0,) * ua.ndim, limit_indices=ua.shape,
                            strides=tuple(i + 1 for i in interior)) \
            if any(interior) else unpadded
        t_pv = L.sub(L.sum_all(g), L.sum_all(t_op))
        return t_op, t_pv
    defvjp(pad_p, pad_vjp)

    def slice_vjp(c, g, x, *, start_indices, limit_indices, strides=None):
        shape = c.in_avals[0].shape
        strides = strides or (1,) * len(shape)
        out_shape = c.out.shape
        real = [s + (n - 1) * st + 1 if n else s
                for s, n, st in zip(start_indices, out_shape, strides)]
        cfg = tuple((s, d - r, st - 1) for s, d, r, st in zip(start_indices, shape, real, strides))
        return (pad_p.bind(g, L.zeros((), g.dtype), padding_config=cfg),)
    defvjp(slice_p, slice_vjp)
    defvjp(rev_p, lambda c, g, x, *, dimensions: (rev_p.bind(g, dimensions=dimensions),))
    iota_p.vjp = nondiff


_vjps()


def _batch_rules():
    """vmap: the mapped dim is a new leading dim every shape op passes through."""
    from .batching import materialize, shift_axes
    from . import lax as L

    def bcast_rule(ctx, args, batched, *, shape, broadcast_dimensions):
        return broadcast_in_dim_p.bind(args[0], shape=(ctx.size, *shape), broadcast_dimensions=(
            0, *shift_axes(broadcast_dimensions))), True
    broadcast_in_dim_p.batch = bcast_rule
    reshape_p.batch = lambda ctx, args, batched, *, shape: (
        reshape_p.bind(args[0], shape=(ctx.size, *shape)), True)
    transpose_p.batch = lambda ctx, args, batched, *, permutation: (
        transpose_p.bind(args[0], permutation=(0, *shift_axes(permutation))), True)
    rev_p.batch = lambda ctx, args, batched, *, dimensions: (
        rev_p.bind(args[0], dimensions=shift_axes(dimensions)), True)
    concatenate_p.batch = lambda ctx, args, batched, *, dimension: (
        concatenate_p.bind(*materialize(ctx, args, batched), dimension=dimension + 1), True)

    def slice_rule(ctx, args, batched, *, start_indices, limit_indices, strides=None):
        return slice_p.bind(args[0], start_indices=(0, *start_indices),
                            limit_indices=(ctx.size, *limit_indices),
                            strides=None if strides is None else (1, *strides)), True
    slice_p.batch = slice_rule

    def pad_rule(ctx, args, batched, *, padding_config):
        x, pv = args
        cfg = ((0, 0, 0), *padding_config)
        x = materialize(ctx, [x], [batched[0]])[0]
        if not batched[1]:
            return pad_p.bind(x, pv, padding_config=cfg), True
        # a per-example padding value: pad with zeros, then choose by a mask of the body
        a = L.aval(x)
        zero = L.lit(0, a.update(shape=()))
        y = pad_p.bind(x, zero, padding_config=cfg)
        mask = pad_p.bind(L.full(a.shape, True, dtypes.bool_), L.lit(False, L.aval(True)),
                          padding_config=cfg)
        ya = L.aval(y)
        return L.select(mask, y, L.broadcast_in_dim(pv, ya.shape, (0,))), True
    pad_p.batch = pad_rule


_batch_rules()
iota_p.batch = __import__("shardc.ops.batching", fromlist=["no_operands"]).no_operands
