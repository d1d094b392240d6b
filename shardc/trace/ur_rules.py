"""Explicit mode: the unreduced (partial sums) and reduced axes of an op's result type,
as jax's per-primitive `ur_rule`s give them.

An unreduced value (P(unreduced={'Y'})) is the sum of what the devices along Y hold;
only ops linear in it may see it without a reduction, and jax makes that reduction
explicit: any other op on it is a type error (reshard it first). A primitive states
how it treats partial sums with `prim.type_partial`:

- "sum" (add, sub, neg): operands partial over the same axes, result too;
- "scale" (mul): a partial operand times one reduced over the same axes;
- ("layout", operands): moves, picks or sums elements of the listed operands (all when
  None), which must be partial over the same axes -- a zero constant is a partial sum
  over any axes -- and so is the result (reshape, slice, select's cases, reduce_sum...);
  ("layout", operands, "any"): so do its reduced axes where any operand has them
  (jax's concatenate; the others keep them only where every operand does);
- "pad": the operand's axes (as jax's), its padding value a zero or partial sums alike;
- "each" (optimization_barrier): each result keeps its own operand's axes.

Reduced axes (P(reduced={'Y'})): a replicated value whose cotangent is a partial sum.
Elementwise ops, reductions and the ops above keep them, where every operand is reduced
over them (jax's default_nary_reduced_rule; a scalar, or a broadcast of one, may be
replicated); other ops' results are plain replicated values.

A gradient rule's ops are traced untyped (its cotangents take their primals' types
after it); mark_cotangent_ops types their partial sums after the fact, by the same
kinds and, for ops jax types no partial sums through, `prim.linear_in`.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShardingTypeError
from ..ir.primitive import PropKind, Trait
from ..ir.program import Lit
from ..ir.sharding import Sharding, axis_name

EMPTY = frozenset()


def _producer(v):
    from .core import current_builder
    from .types import producer
    b = current_builder()
    return producer(b, v) if b is not None else None


def _splat(v, depth=4):
    """Whether `v` is a scalar, a broadcast, cast or reshape of one (jnp.where's of a
    Python scalar), or picks among such (select): a scalar beside a reduced operand is
    as jax's, which it reshards to the reduced type (the rules below let it be)."""
    if type(v) is Lit or not getattr(v.aval, "ndim", 0):
        return True
    op = _producer(v) if depth else None
    if op is None or op.regions:
        return False
    kind = getattr(op.prim, "type_partial", None)
    if op.prim.traits & Trait.FUSED and op.inputs:
        return _splat(op.inputs[0], depth - 1)
    if type(kind) is tuple and kind[1] is not None and op.prim.prop_kind == \
            PropKind.ELEMENTWISE:
        return all(_splat(op.inputs[i], depth - 1) for i in kind[1] if i < len(op.inputs))
    return False


def _zero(v, depth=4):
    """Whether `v` is a zero constant: a literal, or a constant op's zeros (jnp.pad's
    padding value, a cast or broadcast of one) traced by the current builder."""
    if type(v) is Lit:
        try:
            return not bool(v.value)
        except (TypeError, ValueError):
            return False
    op = _producer(v) if depth else None
    if op is None:
        return False
    if op.prim.traits & Trait.CONSTANT:
        value = op.params.get("value")      # (an iota has none)
        try:
            return value is not None and not np.any(value)
        except (TypeError, ValueError):
            return False
    if op.prim.traits & Trait.FUSED and op.inputs:
        # a broadcast, reshape, transpose or convert of zeros is zeros
        return _zero(op.inputs[0], depth - 1)
    return False


def _sets(in_ts):
    return ([frozenset(t.unreduced) if t is not None else EMPTY for t in in_ts],
            [frozenset(t.reduced) if t is not None else EMPTY for t in in_ts])


def _axes(s):
    return "{" + ", ".join(repr(a) for a in sorted(s)) + "}"


def partial_axes(prim, in_vals, in_ts):
    """(unreduced, reduced) axes of the results of `prim` on operands `in_vals` whose
    type shardings are `in_ts`; raises ShardingTypeError where jax does."""
    us, rs = _sets(in_ts)
    if not any(us) and not any(rs):
        return EMPTY, EMPTY
    name = prim.name
    kind = getattr(prim, "type_partial", None)
    if kind is None:
        if any(us):
            i = next(i for i, u in enumerate(us) if u)
            raise ShardingTypeError(
                f"{name}: operand {i} is unreduced over mesh axes {_axes(us[i])} (partial "
                f"sums, e.g. a dot's out_sharding=P(..., unreduced=...)), which {name} "
                "does not take: it would need an implicit reduction (as in jax, only sums, "
                "slices and layout changes of partial sums, and their products with values "
                "reduced over the same axes, stay partial sums). Reduce it first with "
                "shardc.reshard(x, P(...))")
        if prim.prop_kind != PropKind.ELEMENTWISE and not prim.traits & Trait.REDUCE:
            return EMPTY, EMPTY     # a replicated value (dot: as jax's)
        # (a max or product of a reduced value is too, as jax's reduce_sum: its rule is
        # linear in the cotangent; jax has no rule for them yet)
        return EMPTY, _nary_reduced(name, in_vals, in_ts, rs)
    if kind == "sum":
        return _same(name, in_vals, us, "unreduced"), _nary_reduced(name, in_vals, in_ts, rs)
    if kind == "scale":
        return _scale(name, in_vals, in_ts, us, rs)
    if kind == "pad":
        u = _same(name, in_vals[:2], us[:2], "unreduced")
        if u and not us[0]:
            raise ShardingTypeError(
                f"{name}: its padding value is unreduced over mesh axes {_axes(u)} while "
                "the operand is not; reduce it first with shardc.reshard(x, P(...))")
        return u, rs[0]
    which = kind[1]
    idx = range(len(in_vals)) if which is None else [i for i in which if i < len(in_vals)]
    vals = [in_vals[i] for i in idx]
    u = _same(name, vals, [us[i] for i in idx], "unreduced")
    # (a scalar broadcast takes any reduced axes, as jax's scalars: jnp.where(c, 0, x))
    r = [rs[i] for i in idx if rs[i] or not _splat(in_vals[i])]
    if len({x for x in r if x}) > 1:
        raise ShardingTypeError(f"{name}: its operands are reduced over different mesh axes "
                                f"{', '.join(_axes(x) for x in r if x)}; reshard them alike")
    if kind[2:] == ("any",):
        red = next((x for x in r if x), EMPTY)
        for i in idx:       # (jax: its operands' shardings must be the same)
            t = in_ts[i]
            sharded = {axis_name(a) for a in t.axes()} & red if t is not None else EMPTY
            if sharded:
                raise ShardingTypeError(
                    f"{name}: operand {i} ({_describe(in_vals[i], t)}) is sharded on "
                    f"{_axes(sharded)} while another operand is reduced over {_axes(red)}; "
                    "operands cannot be sharded on the axes another is reduced on (as "
                    "jax). Reshard them alike first")
        return u, red
    # (mixed with a plain value, the result is a plain one: its cotangent is whole)
    return u, (r[0] if r and all(x == r[0] for x in r) else EMPTY)


def each_partial_axes(in_ts):
    """(unreduced, reduced) of each result of an op whose result i is operand i."""
    return [(frozenset(t.unreduced), frozenset(t.reduced)) if t is not None else
            (EMPTY, EMPTY) for t in in_ts]


def _same(name, vals, us, what):
    """The common unreduced axes of `vals`, literal zeros aside; an error if they differ."""
    seen = {u for v, u in zip(vals, us) if not (_zero(v) and not u)}
    if len(seen) <= 1:
        return next(iter(seen), EMPTY)
    u = max(seen, key=len)
    i = next(i for i, x in enumerate(us) if x != u and not _zero(vals[i]))
    other = "is unreduced over " + _axes(us[i]) if us[i] else "is not"
    raise ShardingTypeError(
        f"{name}: an operand is unreduced over mesh axes {_axes(u)} while operand {i} "
        f"{other}: combining partial sums with a whole value would need an implicit "
        "reduction, which jax does not allow either. Reduce the partial sums first with "
        "shardc.reshard(x, P(...)), or make both partial over the same axes")


def _scale(name, in_vals, in_ts, us, rs):
    """jax's mul: partial sums times a value reduced over the same axes stay partial."""
    if all(us):
        raise ShardingTypeError(
            f"{name}: both operands are unreduced ({', '.join(_axes(u) for u in us)}); a "
            "product of partial sums is not a partial sum (mul is bilinear). Reduce one "
            "with shardc.reshard(x, P(...)) first")
    if not any(us):
        return EMPTY, _nary_reduced(name, in_vals, in_ts, rs)
    i = 0 if us[0] else 1
    j = 1 - i
    if rs[j] != us[i]:
        raise ShardingTypeError(
            f"{name}: operand {i} is unreduced over mesh axes {_axes(us[i])}, so operand "
            f"{j} must be reduced over the same axes (P(..., reduced={_axes(us[i])}), as "
            f"jax); it is {_describe(in_vals[j], in_ts[j])}. Reduce operand {i} first with "
            "shardc.reshard(x, P(...)), or reshard operand "
            f"{j} to P(..., reduced={_axes(us[i])})")
    return us[i], EMPTY


def _describe(v, ts):
    if type(v) is Lit:
        return "a constant"
    return str(v.aval)


def _nary_reduced(name, in_vals, in_ts, rs):
    """jax's default_nary_reduced_rule: the operands reduced over the same axes, which
    no other operand may be replicated or sharded on (scalars aside)."""
    seen = {r for r in rs if r}
    if not seen:
        return EMPTY
    if len(seen) > 1:
        raise ShardingTypeError(f"{name}: all operands should be reduced over the same mesh "
                                f"axes; got {', '.join(_axes(r) for r in seen)}")
    (red,) = seen
    for i, (v, t, r) in enumerate(zip(in_vals, in_ts, rs)):
        sharded = {a for d in t.dims for a in d} & red if t is not None else EMPTY
        if r or _splat(v) and not sharded:
            continue
        how = f"sharded on {_axes(sharded)}" if sharded else "replicated on them"
        u = frozenset(t.unreduced) if t is not None else EMPTY
        if not sharded and u & red:
            continue
        raise ShardingTypeError(
            f"{name}: operand {i} ({_describe(v, t)}) is {how} while another operand is "
            f"reduced over {_axes(red)}; operands cannot be replicated or sharded on the "
            "axes another is reduced on (as jax). Reshard it to P(..., reduced="
            f"{_axes(red)}), or reshard the reduced one to be sharded on those axes")
    return red


# ---------------------------------------------------------------- gradient rules' ops

def _partial_of(v, partial):
    if type(v) is Lit:
        return EMPTY
    u = partial.get(id(v))
    if u is None:
        # (untyped: the partial sums an earlier backward pass marked it, which a
        # gradient of that pass, or a transform re-tracing it, reads)
        ts = v.aval.ts if v.aval.ts is not None else v.sharding
        u = frozenset(ts.unreduced) if ts is not None else EMPTY
    return u


def cotangent_partial(op, partial):
    """Explicit mode: the unreduced axes of the results of `op`, an op a gradient rule
    bound untyped, given `partial` (id(value) -> unreduced axes of the values before it;
    typed values: their types'). None: `op` is not linear in its partial operands, with
    its other operands held whole (a product of two, partial sums beside a whole
    summand, a nonlinear op), so XLA reduces them first and its results are whole.
    Linearity is the op's `type_partial` (ur_rules' module doc) or, for ops jax types
    no partial sums through, its `linear_in`: the operands it is linear in, one at a
    time (div's numerator, each of a dot's operands, a broadcast's)."""
    us = [_partial_of(v, partial) for v in op.inputs]
    n = len(op.outputs)
    if not any(us):
        return [EMPTY] * n
    kind = getattr(op.prim, "type_partial", None)
    if kind == "each":
        return [us[i] if i < len(us) else EMPTY for i in range(n)]
    if op.regions or len({u for u in us if u}) > 1:
        return None
    joint = kind == "sum" or kind == "pad" or type(kind) is tuple
    if kind == "sum":
        lin = range(len(us))
    elif kind == "pad":
        lin = (0, 1)
    elif type(kind) is tuple:
        lin = range(len(us)) if kind[1] is None else kind[1]
    else:
        lin = (0, 1) if kind == "scale" else getattr(op.prim, "linear_in", ())
    part = [i for i, u in enumerate(us) if u]
    if any(i not in lin for i in part):
        return None
    if joint and any(not us[i] and not _zero(op.inputs[i])
                     for i in lin if i < len(us)):
        return None     # partial sums beside a whole summand
    if not joint and len(part) > 1:
        return None     # a product of partial sums
    return [us[part[0]]] * n


def mark_cotangent_ops(ops, partial, reduced):
    """Type the partial sums of a gradient rule's untyped `ops` (see cotangent_partial):
    each result's unreduced axes go into `partial`, and its sharding says them (dims
    left to propagation) so XLA keeps them partial, as jax's typed transposes do; the
    results of an op that reduced partial sums, and of ops reading them, go into
    `reduced` (whole values, which only a reshard makes partial sums again)."""
    for op in ops:
        got = cotangent_partial(op, partial)
        if got is None or any(type(v) is not Lit and id(v) in reduced for v in op.inputs):
            reduced.update(id(v) for v in op.outputs)
            continue
        for v, u in zip(op.outputs, got):
            if u:
                partial[id(v)] = u
                if v.sharding is None:
                    n = v.aval.ndim
                    v.sharding = Sharding([()] * n, [True] * n, u)
