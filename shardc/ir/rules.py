"""Factor-based sharding rules (Shardy's OpShardingRule), stated per op as data.

A rule names the op's *factors* (independent index spaces, each with a size) and,
for every dimension of every operand and result, the factors it is made of, major
first: matmul is `([i, k], [k, j]) -> ([i, j]) {i, j, k} reduction={k}`. Propagation
(propagate.py) reads only rules, never op names.

Factor kinds: "pass" (same index in every tensor that has it), "reduction" (summed
away: results lack it), "need_replication" (must be whole to compute the op, e.g.
a sort dim) and "permutation" (data moves along it, e.g. a pad or concat dim).
Blocked factors never propagate.
"""
from __future__ import annotations

PASS, REDUCTION = "pass", "reduction"
NEED_REPLICATION, PERMUTATION = "need_replication", "permutation"


class Rule:
    __slots__ = ("operands", "results", "sizes", "kinds", "blocked", "elementwise")

    def __init__(self, operands, results, sizes, kinds, blocked, elementwise=False):
        self.operands = operands    # per operand: per dim: tuple of factor indices
        self.results = results
        self.sizes = sizes          # per factor
        self.kinds = kinds          # per factor
        self.blocked = blocked      # per factor: bool
        self.elementwise = elementwise

    def __str__(self):
        names = "ijklmnopqrstuvwxyzabcdefgh"

        def name(f):
            return names[f] if f < len(names) else f"f{f}"

        def tensor(t):
            return "[" + ", ".join("".join(name(f) for f in d) or "_" for d in t) + "]"
        s = ("(" + ", ".join(tensor(t) for t in self.operands) + ") -> ("
             + ", ".join(tensor(t) for t in self.results) + ") {"
             + ", ".join(f"{name(f)}={n}" for f, n in enumerate(self.sizes)) + "}")
        for kind in (REDUCTION, NEED_REPLICATION, PERMUTATION):
            fs = [name(f) for f, k in enumerate(self.kinds) if k == kind]
            if fs:
                s += f" {kind}={{{', '.join(fs)}}}"
        blocked = [name(f) for f, b in enumerate(self.blocked) if b]
        if blocked:
            s += f" blocked={{{', '.join(blocked)}}}"
        return s


class RuleBuilder:
    """Builds a Rule factor by factor, as Shardy's OpShardingRuleBuilder."""

    def __init__(self, in_avals, out_avals):
        self.ops = [[[] for _ in range(a.ndim)] for a in in_avals]
        self.res = [[[] for _ in range(a.ndim)] for a in out_avals]
        self.sizes, self.kinds, self.blocked = [], [], []

    def _new(self, size, kind, blocked):
        self.sizes.append(size)
        self.kinds.append(kind)
        self.blocked.append(blocked)
        return len(self.sizes) - 1

    def factor(self, operand_dims, result_dims, size, kind=PASS, blocked=False):
        """Add a factor on dim operand_dims[i] of operand i (None: absent), likewise results.

        As Shardy, a size-1 factor is not appended to a dim that already has factors."""
        f = self._new(size, kind, blocked)
        for ts, dims in ((self.ops, operand_dims), (self.res, result_dims)):
            for t, d in zip(ts, dims):
                if d is not None and not (size == 1 and t[d]):
                    t[d].append(f)
        return self

    def same_dims(self, shape, pred=lambda d: True, kind=lambda d: PASS,
                  blocked=lambda d: False):
        """One factor per dim `d` of `shape` (where pred(d)) on dim d of every non-scalar
        tensor."""
        for d, n in enumerate(shape):
            if pred(d):
                f = self._new(n, kind(d), blocked(d))
                for t in self.ops + self.res:
                    if t:
                        t[d].append(f)
        return self

    def build(self, elementwise=False) -> Rule:
        # a dim no factor maps gets a size-1 factor of its own, so its axes still count
        for t in self.ops + self.res:
            for d in t:
                if not d:
                    d.append(self._new(1, PASS, False))
        freeze = lambda ts: tuple(tuple(tuple(d) for d in t) for t in ts)  # noqa: E731
        return Rule(freeze(self.ops), freeze(self.res), tuple(self.sizes), tuple(self.kinds),
                    tuple(self.blocked), elementwise)


def pointwise(in_avals, out_avals, **_):
    """Every tensor shares every dim (scalars take no part): elementwise ops."""
    shape = out_avals[0].shape
    return RuleBuilder(in_avals, out_avals).same_dims(shape).build(elementwise=True)


def no_rule(in_avals, out_avals, **_):
    """Ops that pass no sharding between operands and results (constant, iota)."""
    return None


# ---------------------------------------------------------------- data-flow edges
# What a region op (or a sharding group) declares about values that must share one
# sharding, as Shardy's ShardableDataFlowOpInterface: `Primitive.data_flow(op)` gives
# a list of these, or None. Propagation reads only these, never op names.


class Edge:
    """`outer` (an operand or result of the op) and `inner` (a block argument or region
    result) have one sharding, except the mesh axes in `manual`: the op partitions over
    those itself, so they are not seen outside, and `spec` (a Sharding) says where they
    sit on the outer value. An edge from an operand to a block argument is taken before
    the region is visited, one from a region result to a result after it.

    An operand's `spec` is also a constraint on it: exactly `spec` if `closed` (every
    axis of the op's mesh is manual), else `spec` with every dim open.

    `stacked`: the outer value has one more, leading, dim than the inner one (a scan's
    xs and its per-iteration slice): that dim is its own and the others are shared.
    `role`: what the outer value is to the op ("carry 0", "xs 1"), for explanations."""
    __slots__ = ("outer", "inner", "manual", "spec", "loc", "closed", "stacked", "role")

    def __init__(self, outer, inner, manual=frozenset(), spec=None, loc=None, closed=False,
                 stacked=False, role=None):
        self.outer, self.inner, self.manual, self.spec, self.loc = (
            outer, inner, frozenset(manual), spec, loc)
        self.closed = closed
        self.stacked = stacked
        self.role = role


class Flow:
    """How Shardy sees one value crossing a region op (its data-flow edge op): `owner`
    and `targets` hold one sharding, which the `sources` meet as the operands of an
    identity op, so sources that disagree on a dim leave it to neither. Propagation
    visits it after the op's regions, where Shardy's edge op follows the op. No sources:
    the targets are the owner itself (a cond's operands, which jax's branches close
    over; a loop's constants, which XLA's canonicalizer makes so before Shardy)."""
    __slots__ = ("owner", "sources", "targets", "loc", "role")

    def __init__(self, owner, sources=(), targets=(), loc=None, role=None):
        self.owner, self.sources, self.targets = owner, tuple(sources), tuple(targets)
        self.loc, self.role = loc, role


class Group:
    """`value` has one sharding with every other value declared in a Group of the same
    `key` anywhere in the program (Shardy's sharding groups)."""
    __slots__ = ("key", "value")

    def __init__(self, key, value):
        self.key, self.value = key, value
