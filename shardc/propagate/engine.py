"""Sharding propagation: one generic worklist engine over factor rules (Shardy's algorithm).

Sources are the program's input shardings, fixed output shardings and sharding
constraints; their dims are *closed* and never change. Every other value starts
open and unsharded. For each op the engine projects its tensors' dim shardings onto
the op's factors (rules.py), finds per factor the mesh axes all tensors agree on,
and writes them back to the tensors that lack them; ops touching a changed value go
back on the worklist until nothing changes.

How conflicts are settled (Shardy's aggressive strategy, deterministic):
  * within a factor, tensors that disagree keep their longest common prefix;
  * between factors that want the same mesh axis, the factor whose sharding comes
    from the larger tensor wins, then (elementwise ops) the more sharded factor,
    then the lower tensor index (operands before results), then the lower factor.
The losing proposal is recorded in `program.meta["conflicts"]`.

Propagation runs in five rounds of widening scope (Shardy's op priorities): first
elementwise/reshape/transpose ops whose operands have one use, then those with any
number of uses, then pass-through factors of all ops (broadcasts only backwards),
then every factor (broadcasts only backwards), then everything. Values nothing
reached end replicated. Each value's `why` records, per dim, where its axes came from.
"""
from __future__ import annotations

import functools
import operator
from math import gcd

from . import axes as ax
from ..errors import ShardcError
from ..ir.program import Lit, Program
from ..ir.rules import PASS

NONE, FORWARD, BACKWARD, BOTH = 0, 1, 2, 3


class Source:
    """Where a sharding came from: an argument, a constraint, an output sharding."""
    __slots__ = ("kind", "label", "loc")

    def __init__(self, kind, label, loc=None):
        self.kind, self.label, self.loc = kind, label, loc

    def __str__(self):
        where = f" at {self.loc.short()}" if self.loc is not None and self.loc.line else ""
        return f"{self.label}{where}"


class Why(tuple):
    """Provenance of one dim: the op that set it and the tensor it was copied from.
    (A tuple (op, src, src_dim): the engine makes one per dim it changes.)"""
    __slots__ = ()

    def __new__(cls, op, src, src_dim):
        return tuple.__new__(cls, (op, src, src_dim))

    op = property(operator.itemgetter(0))
    src = property(operator.itemgetter(1))
    src_dim = property(operator.itemgetter(2))


_new_why = tuple.__new__

class Conflict:
    __slots__ = ("op", "value", "dim", "wanted", "kept", "reason")

    def __init__(self, op, value, dim, wanted, kept, reason):
        self.op, self.value, self.dim = op, value, dim
        self.wanted, self.kept, self.reason = wanted, kept, reason


class _Edge:
    """A shard_map boundary: identity between an outer value's free (non-manual) axes
    and a body value (Shardy's data-flow edges of a manual computation)."""
    __slots__ = ("outer", "inner", "manual", "spec", "loc", "prim")

    def __init__(self, outer, inner, manual, spec, loc):
        self.outer, self.inner, self.manual, self.spec = outer, inner, manual, spec
        self.loc = loc
        self.prim = _EDGE_PRIM


class _EdgePrim:
    name = "shard_map boundary"
    prop_kind = "elementwise"


_EDGE_PRIM = _EdgePrim()


class _FS:
    """A tensor's sharding along one factor (Shardy's FactorSharding)."""
    __slots__ = ("axes", "overflow", "closed", "minor")

    def __init__(self, closed, minor):
        self.axes = []
        self.overflow = []
        self.closed = closed
        self.minor = minor


class _State:
    """Mutable per-value sharding during propagation. `key`: dims and closedness (what
    decides a visit, see Engine.apply) as tuples, which the engine then replaces by a
    small int standing for them (Engine._kid); kept in step with `dims`."""
    __slots__ = ("dims", "closed", "why", "key")

    def __init__(self, dims, closed, why):
        self.dims, self.closed, self.why = dims, closed, why
        self.key = (tuple(map(tuple, dims)), tuple(closed))


def _empty_state(rank, kid):
    """The state of a value nothing has sharded yet: open and unsharded (`kid`: the
    engine's int for its key). Its lists are shared: the engine replaces a state's
    dims (and their lists) rather than editing them, never edits `closed`, and gives a
    state its own `why` list when it first records one (_whys)."""
    s = _State.__new__(_State)
    e = _EMPTY_STATES.get(rank)
    if e is None:
        e = _EMPTY_STATES[rank] = ([_EMPTY] * rank, (False,) * rank)
    s.dims, s.closed = e
    s.why = None
    s.key = kid
    return s


_EMPTY_STATES: dict = {}
_NO_WHYS: dict = {}


def _whys(s):
    """`s.why`, as a list of its own."""
    why = s.why
    if why is None:
        why = s.why = [None] * len(s.dims)
    return why


def _why_of(s):
    """A finished state's provenance per dim (shared when nothing was recorded)."""
    why = s.why
    if why is None:
        rank = len(s.dims)
        why = _NO_WHYS.get(rank)
        if why is None:
            why = _NO_WHYS[rank] = (None,) * rank
    return why


# ---------------------------------------------------------------- projection


def _project(mapping, st, sizes):
    """Dim shardings of one tensor -> {factor: _FS} (buildTensorFactorShardings)."""
    out = {}
    for d, factors in enumerate(mapping):
        if not factors:
            continue
        axes = st.dims[d]
        closed = st.closed[d]
        if len(factors) == 1:           # minor-most: takes all the axes, merged
            fs = out[factors[0]] = _FS(closed, True)
            if len(axes) == 1:
                fs.axes.append(axes[0])
            elif axes:
                for a in axes:
                    ax.add_or_merge(fs.axes, a)
            continue
        if not axes:
            last = factors[-1]
            for f in factors:
                out[f] = _FS(closed, f == last)
            continue
        i = 0
        rem = axes[0] if axes else None   # remaining part of axes[i] as a ref
        overflow = False
        last = factors[-1]
        for f in factors:
            fs = out[f] = _FS(closed, f == last)
            if overflow:
                fs.closed = True
                break
            if fs.minor:
                while rem is not None:
                    ax.add_or_merge(fs.axes, rem)
                    i += 1
                    rem = axes[i] if i < len(axes) else None
                break
            left = sizes[f]
            while rem is not None:
                if rem[2] == 1:
                    g = 1
                else:
                    g = gcd(left, rem[2])
                    if g == 1:
                        break
                if rem[2] > g:
                    fs.axes.append((rem[0], rem[1], g))
                    rem = (rem[0], rem[1] * g, rem[2] // g)
                    left //= g
                else:
                    fs.axes.append(rem)
                    left //= rem[2]
                    i += 1
                    rem = axes[i] if i < len(axes) else None
            if left > 1 and rem is not None:
                overflow = True
                while rem is not None:
                    ax.add_or_merge(fs.overflow, rem)
                    i += 1
                    rem = axes[i] if i < len(axes) else None
    return out


def _unproject(mapping, fss, sizes):
    """{factor: _FS} -> dim shardings (createTensorShardingAttr)."""
    dims = []
    for factors in mapping:
        d = []
        for f in factors:
            fs = fss[f]
            n = 1
            for k, a in enumerate(fs.axes):
                n *= a[2]
                if k == 0:
                    ax.add_or_merge(d, a)
                else:
                    d.append(a)
            if fs.overflow:
                for k, a in enumerate(fs.overflow):
                    if k == 0:
                        ax.add_or_merge(d, a)
                    else:
                        d.append(a)
                break
            if n < sizes[f]:
                break
        dims.append(d)
    return dims


# ---------------------------------------------------------------- factor propagation


def _compatible(old, new, can_expand):
    """Shardy's getCompatibleMajorAxesInternal: the common major axes of two lists.

    The result may be `old` or `new` itself; callers never modify it."""
    if not new or old == new:
        return old, can_expand
    if not old:
        return (new, True) if can_expand else (old, False)
    result = []
    i = 0
    n = min(len(old), len(new))
    while i < n:
        o, w = old[i], new[i]
        if o[0] != w[0]:
            return result, False
        if o[1] == w[1] and o[2] == w[2]:
            result.append(w)
        elif ax.prefix_of(w, o):
            if i + 1 < len(new):
                result.append(w)
                return result, False
            result.append(o)
        elif ax.prefix_of(o, w):
            if not can_expand or i + 1 < len(old):
                result.append(o)
                return result, False
            result.append(w)
        else:
            return result, False
        i += 1
    result.extend(old[i:])
    if can_expand:
        result.extend(new[i:])
    return result, can_expand


def _major_axes(projs, n_in, f, direction):
    if direction == NONE:
        return []
    if direction == BACKWARD:
        first, second = projs[n_in:], projs[:n_in]
    else:
        first, second = projs[:n_in], projs[n_in:]
    result, can = [], True
    for p in first:
        fs = p.get(f)
        if fs is not None:
            result, can = _compatible(result, fs.axes, can)
    if direction != BOTH:
        can = False
    for p in second:
        fs = p.get(f)
        if fs is not None:
            result, can = _compatible(result, fs.axes, can)
    return result


def _truncate(axes, fix):
    """Keep the longest prefix of `axes` that `fix(axis, sharded_so_far)` accepts."""
    prev = 1
    for i, a in enumerate(axes):
        new = fix(a, prev)
        if new is None:
            del axes[i:]
            return
        if new != a:
            axes[i] = new
            del axes[i + 1:]
            return
        prev *= new[2]


def _within_factor(a, fs, prev, size):
    """compatiblePrefixNoConflictsWithinFactor (no replicated/unreduced axes here)."""
    for x in fs.axes:
        if ax.contains(x, a):
            return a
    if not fs.closed and not fs.overflow:
        if fs.minor:
            return a
        if size % prev == 0:
            g = gcd(size // prev, a[2])
            if g == a[2]:
                return a
            if g != 1:
                return (a[0], a[1], g)
    if fs.axes and ax.prefix_of(fs.axes[-1], a):
        return fs.axes[-1]
    return None


def _change(ri, t, new_dims, fset, src, closed):
    """A decided change of tensor t: (t, new dims, their key, per dim the tensor and dim
    its new axes come from -- (-1, None) if none -- for the provenance records)."""
    mappings = ri.mappings
    whys = []
    for factors in mappings[t]:
        w = _NO_WHY
        for f in factors:
            s = src[f][0]
            if f in fset and s >= 0 and s != t:
                w = (s, next((k for k, fs in enumerate(mappings[s]) if f in fs), None))
                break
        whys.append(w)
    return t, new_dims, (tuple(map(tuple, new_dims)), tuple(closed)), whys   # key: see _decided


_NO_WHY = (-1, None)


def _within_closed(a, axes):
    """_within_factor for a closed minor-most factor without overflow."""
    for x in axes:
        if ax.contains(x, a):
            return a
    if axes and ax.prefix_of(axes[-1], a):
        return axes[-1]
    return None


def _across_dims(a, dims, k):
    """_across_factors for a simple rule: the tensor's other dims are its other factors."""
    for j, axes in enumerate(dims):
        if j != k and axes:
            a = ax.prefix_without_overlap(a, axes)
            if a is None:
                return None
    return a


_EMPTY = []
_NO_SRC = (-1, -1)
_STATE_KEY = operator.attrgetter("key")
_KIND_OF = object()     # the primitive decides its kind per op (prim.kind_of(op))


def _across_factors(a, proj, f):
    for g, fs in proj.items():
        if g != f:
            if fs.overflow:
                a = ax.prefix_without_overlap(a, fs.overflow)
                if a is None:
                    return None
            if fs.axes:
                a = ax.prefix_without_overlap(a, fs.axes)
                if a is None:
                    return None
    return a


def _lost_to(rank, f, holder, holder_dim, changed):
    """Why factor f could not take a mesh axis that factor `holder` (at dim
    `holder_dim` of the same tensor) uses: `rank(g)` is the conflict order's key
    (source size, sharded size, source tensor, factor); `changed`: the factors this
    visit gave new axes to the tensor."""
    if holder is None or holder not in changed:
        where = "another dim" if holder_dim is None else f"dim {holder_dim}"
        return f"{where} of the tensor already uses the same mesh axes"
    (sf, hf, tf, _), (sg, hg, tg, _) = rank(f), rank(holder)
    why = ("from a larger tensor" if sg != sf else "more sharded" if hg != hf else
           "from a tensor earlier in the op (operands before results)" if tg != tf else
           "a factor listed before it (same tensor size)")
    return f"another factor of the op (dim {holder_dim}), {why}, took the same mesh axes"


def _holder(lost, dims, k):
    """The first dim other than k whose axes overlap axis `lost`, or None."""
    for j, axes in enumerate(dims):
        if j != k and axes and ax.prefix_without_overlap(lost, axes) != lost:
            return j
    return None


class _RuleInfo:
    """What the engine reads of a rule on every visit, computed once per distinct rule.

    A *simple* rule maps every dim to exactly one factor and no factor twice within a
    tensor (elementwise ops, dot_general, transposes, reductions, most broadcasts):
    its projection onto factors is the tensors' own dim shardings, so `apply` works on
    those directly (`Engine._decide_simple`). `checks` (simple rules only): per factor
    on two or more tensors, its (tensor, dim) places. When the tensors agree on every
    such dim, a visit cannot change anything (every factor's merged sharding is what
    each tensor already has), so the engine skips it."""
    __slots__ = ("rule", "mappings", "n_in", "nf", "checks", "fdims", "dim_of", "in_places",
                 "out_places", "tsizes", "update_order")

    def __init__(self, rule, n_in):
        self.rule = rule
        self.mappings = rule.operands + rule.results
        self.n_in = n_in
        self.nf = nf = len(rule.sizes)
        simple = all(len(fs) == 1 for m in self.mappings for fs in m) and \
            all(len(set(m)) == len(m) for m in self.mappings)
        if not simple:
            self.checks = None
            return
        self.fdims = tuple(tuple(fs[0] for fs in m) for m in self.mappings)
        self.dim_of = tuple({f: d for d, f in enumerate(fd)} for fd in self.fdims)
        places = [[] for _ in range(nf)]
        ins = [[] for _ in range(nf)]
        outs = [[] for _ in range(nf)]
        for t, fd in enumerate(self.fdims):
            for d, f in enumerate(fd):
                places[f].append((t, d))
                (ins if t < n_in else outs)[f].append((t, d))
        self.checks = tuple((f, tuple(pl)) for f, pl in enumerate(places) if len(pl) > 1)
        # results first, then operands (tensors without dims take no part)
        self.update_order = tuple(t for t in list(range(n_in, len(self.fdims))) +
                                  list(range(n_in)) if self.fdims[t])
        self.in_places = tuple(tuple(x) for x in ins)
        self.out_places = tuple(tuple(x) for x in outs)
        sizes = rule.sizes
        tsizes = []
        for fd in self.fdims:
            n = 1
            for f in fd:
                n *= sizes[f]
            tsizes.append(n)
        self.tsizes = tuple(tsizes)


def _merged(axes):
    """A dim's axes as the projection sees them: consecutive sub-axes merged."""
    if len(axes) < 2:
        return axes
    prev = axes[0]
    for a in axes[1:]:
        if a[0] == prev[0] and prev[1] * prev[2] == a[1]:
            out = []
            for b in axes:
                ax.add_or_merge(out, b)
            return out
        prev = a
    return axes


class _Node:
    """An op (or shard_map boundary edge) on the worklist, with what its visits need.

    `dirs[p]`: the direction of each factor in op-priority round p (static: it depends
    only on the op's kind, its rule and its operands' use counts). `dirty`: one of its
    tensors changed since its last visit. A visit with the same directions as the last
    one to a node that is not dirty would change nothing, so the sweep skips it (at the
    same place in the worklist, so the order of the visits that matter is unchanged)."""
    __slots__ = ("op", "ri", "rid", "ins", "outs", "states", "dirs", "active", "queued",
                 "dirty", "last", "edge")

    def __init__(self, op, ri, ins, outs, states, dirs, active, edge=False):
        self.op, self.ri, self.ins, self.outs, self.states = op, ri, ins, outs, states
        self.rid = id(ri)
        self.dirs = dirs
        self.active = active
        self.queued = False
        self.dirty = True
        self.last = None
        self.edge = edge


class Engine:
    """Propagates shardings through one program (and, recursively, its regions)."""

    def __init__(self, program: Program, rule_of):
        self.p = program
        self.mesh = program.mesh
        self.rule_of = rule_of
        self.st = {}            # Value -> _State
        self.users = {}         # Value -> [Op]
        self.producer = {}      # Value -> Op
        self.uses = {}          # Value -> number of uses
        self.conflicts = []
        self._conflict_keys = set()
        self.rules = {}         # Op -> Rule | None
        self.nodes = []         # the worklist's initial order
        self.node_of = {}       # Op | _Edge -> _Node
        self._touch = {}        # Value -> [_Node] reading it (producer first, then users)
        self._rinfo = {}        # id(Rule) -> _RuleInfo
        self._dirs = {}         # interned direction tuples
        self._dirs_of = {}      # (kind, multi-use, id(rule)) -> directions per round
        self._memo = {}         # apply's decisions (see apply)
        self._kids = {_LIT_KEY: 0}   # state key -> int (see _kid)
        self._empty_kids = {}   # rank -> int of an empty open state's key

    # -- setup

    def _state(self, v, source=None):
        rank = v.aval.ndim
        if v.sharding is not None:
            dims = ax.dims_of(v.sharding, rank, self.mesh)
            opens = v.sharding.open or (False,) * rank
            closed = [not o for o in opens]
            why = [source] * rank
        else:
            dims = [[] for _ in range(rank)]
            closed = [False] * rank
            why = [None] * rank
        s = _State(dims, closed, why)
        s.key = self._kid(s.key)
        self.st[v] = s
        return s

    def _kid(self, key):
        """The int standing for a state key (dims and closedness as tuples): memo keys
        of ints hash much faster than nested tuples."""
        k = self._kids.get(key)
        if k is None:
            k = self._kids[key] = len(self._kids)
        return k

    def _empty_kid(self, rank):
        k = self._empty_kids.get(rank)
        if k is None:
            k = self._empty_kids[rank] = self._kid((((),) * rank, (False,) * rank))
        return k

    def setup(self):
        p = self.p
        sources = p.meta.get("sources", {})
        users, uses, producer, rules = self.users, self.uses, self.producer, self.rules
        st = self.st
        state = self._state
        for i, v in enumerate(p.inputs):
            state(v, sources.get(v) or Source("arg", f"argument {v.name or i}"))
        rule_of = self.rule_of
        cached = rule_of is default_rule
        cache = {}
        empties = {}
        new_state = _State.__new__
        for op in p.walk():
            if op.regions:
                for r in op.regions:
                    for v in r.inputs:
                        state(v, sources.get(v))
            prim = op.prim
            k = prim.operand_uses(**op.params) if prim.operand_uses else 1
            for v in op.inputs:
                if type(v) is not Lit:
                    lst = users.get(v)
                    if lst is None:
                        users[v] = [op]
                        uses[v] = uses.get(v, 0) + k
                    else:
                        lst.append(op)
                        uses[v] += k
            for v in op.outputs:
                producer[v] = op
                if v.sharding is None:      # open and unsharded (see _empty_state)
                    rank = len(v.aval.shape)
                    e = empties.get(rank)
                    if e is None:
                        e = empties[rank] = ([_EMPTY] * rank, (False,) * rank,
                                             self._empty_kid(rank))
                    s = new_state(_State)
                    s.dims, s.closed, s.key = e
                    s.why = None
                    st[v] = s
                else:
                    state(v, sources.get(v))
            rules[op] = _cached_rule(op, cache) if cached else rule_of(op)
        for v in p.outputs:
            if type(v) is not Lit:
                uses[v] = uses.get(v, 0) + 1
        self.order = []
        self._order(post_order(p, producer))
        self._groups()
        nodes, node_of = self.nodes, self.node_of
        dirs_of = self._dirs_of
        rinfo = self._rinfo
        kinds = {}
        for op in self.order:
            rule = rules[op]
            if type(op) is _Edge:
                ri = self._rule_info(rule, 1)
                both = self._intern((BOTH,) * len(rule.sizes))
                dirs = (both,) * 5
                node = _Node(op, ri, [op.outer], [op.inner], [st[op.outer], st[op.inner]],
                             dirs, self._active(dirs), edge=True)
            else:
                ins, outs = op.inputs, op.outputs
                ri = rinfo.get(id(rule))
                if ri is None or ri.n_in != len(ins):
                    ri = self._rule_info(rule, len(ins))
                states = [st[v] if type(v) is not Lit else _LIT for v in ins]
                states += [st[v] for v in outs]
                prim = op.prim
                kind = kinds.get(prim)
                if kind is None:
                    kind = kinds[prim] = _KIND_OF if hasattr(prim, "kind_of") else \
                        prim.prop_kind
                if kind is _KIND_OF:
                    kind = prim.kind_of(op)
                multi = False
                for v in ins:
                    if type(v) is not Lit and uses.get(v, 0) > 1 and v.aval.shape:
                        multi = True
                        break
                key = (kind, multi, id(rule))
                entry = dirs_of.get(key)
                if entry is None:
                    dirs = self._schedule(kind, multi, rule)
                    entry = dirs_of[key] = (dirs, self._active(dirs))
                node = _Node(op, ri, ins, outs, states, *entry)
            nodes.append(node)
            node_of[op] = node
        # output slots: identity edges to the returned values
        self.out_states = []
        self.returns = []
        for i, v in enumerate(p.outputs):
            fixed = p.out_shardings[i] if i < len(p.out_shardings) else None
            rank = v.aval.ndim
            if fixed is not None:
                dims = ax.dims_of(fixed, rank, self.mesh)
                src = Source("out", f"out_shardings[{i}]")
                s = _State(dims, [True] * rank, [src] * rank)
            else:
                s = _State([[] for _ in range(rank)], [False] * rank, [None] * rank)
            s.key = self._kid(s.key)
            self.out_states.append(s)
            if type(v) is not Lit and rank:
                ri = self._rule_info(_identity_rule(v.aval.shape), 1)
                self.returns.append((v, st[v], s, ri, self._intern((BOTH,) * rank)))

    def _groups(self):
        """Members of a sharding group share one state: the first member that has a
        sharding gives it to all (Shardy's syncGroupMemberShardings)."""
        members: dict = {}
        for op in self.p.walk():
            if op.prim.name == "sharding_group" and not isinstance(op.inputs[0], Lit):
                members.setdefault(op.params["group_id"], []).append(op.inputs[0])
        self.group_of = {}
        for vs in members.values():
            vs = list(dict.fromkeys(vs))
            lead = next((v for v in vs if any(self.st[v].dims) or self.st[v].closed and
                         all(self.st[v].closed)), vs[0])
            state = self.st[lead]
            src = Source("group", "sharded like its group (shard_alike / gradient)")
            for v in vs:
                if v is not lead:
                    old = self.st[v]
                    if any(old.closed) and old.dims != state.dims:
                        continue   # a second source that disagrees keeps its own
                    if not any(old.closed):
                        why = _whys(state)
                        for d in range(len(why)):
                            if why[d] is None and state.dims[d]:
                                why[d] = src
                    self.st[v] = state
                self.group_of[v] = vs
        # a value's state may be shared: a change must make every node reading it dirty
        self._alias = {}
        if self.group_of:
            by_state: dict = {}
            for v, s in self.st.items():
                by_state.setdefault(id(s), []).append(v)
            for vs in by_state.values():
                if len(vs) > 1:
                    for v in vs:
                        self._alias[v] = [u for u in vs if u is not v]

    def _rule_info(self, rule, n_in):
        ri = self._rinfo.get(id(rule))
        if ri is None or ri.n_in != n_in:
            ri = self._rinfo[id(rule)] = _RuleInfo(rule, n_in)
        return ri

    def _intern(self, dirs):
        return self._dirs.setdefault(dirs, dirs)

    def _schedule(self, kind, multi, rule):
        """Per op-priority round, the direction of each factor (Shardy's schedule: the
        union of the rounds' directions so far; blocked factors never propagate).
        `multi`: a non-scalar operand has several uses."""
        bcast = kind == "broadcast"
        out, cur = [], None
        for level in range(5):
            if level <= 1:
                if kind in ("elementwise", "reshape"):
                    dd = BOTH if level == 1 or not multi else NONE
                elif kind == "dynamic_slice":
                    dd = FORWARD if level == 1 or not multi else NONE
                else:
                    dd = NONE
                step = [dd] * len(rule.sizes)
            elif level == 2:
                step = [NONE if k != PASS else BACKWARD if bcast else BOTH for k in rule.kinds]
            elif level == 3:
                step = [BACKWARD if bcast else BOTH] * len(rule.sizes)
            else:
                step = [BOTH] * len(rule.sizes)
            cur = step if cur is None else [a | b for a, b in zip(cur, step)]
            out.append(self._intern(tuple(NONE if b else d
                                          for d, b in zip(cur, rule.blocked))))
        return tuple(out)

    def _order(self, ops):
        """Ops in Shardy's pre-order, with shard_map boundary edges around bodies."""
        for op in ops:
            if self.rules.get(op) is not None:
                self.order.append(op)
            if op.prim.name != "shard_map":
                for r in op.regions:
                    self._order(post_order(r))
                continue
            manual = set(op.params["manual_axes"])
            free = [n for n in self.mesh.names if n not in manual]
            region = op.regions[0]
            ins = [_Edge(o, i, manual, sp, op.loc) for o, i, sp in
                   zip(op.inputs, region.inputs, op.params["in_specs"] +
                       tuple(_replicated_spec(v) for v in op.inputs[len(op.params["in_specs"]):]))
                   if not isinstance(o, Lit)]
            outs = [_Edge(o, i, manual, sp, op.loc) for o, i, sp in
                    zip(op.outputs, region.outputs, op.params["out_specs"])
                    if not isinstance(i, Lit)]
            if free:
                for e in ins + outs:
                    self.rules[e] = _identity_rule(e.inner.aval.shape)
                    self.users.setdefault(e.outer, []).append(e)
                    self.users.setdefault(e.inner, []).append(e)
                self.order += ins
            self._order(post_order(region))
            if free:
                self.order += outs

    @staticmethod
    def _active(dirs):
        """Per round: does any factor propagate at all?"""
        return tuple(any(d) for d in dirs)

    def _touching(self, v):
        """The worklist nodes that read value `v`: its producer, then its users."""
        t = []
        node_of = self.node_of
        prod = self.producer.get(v)
        if prod is not None and prod in node_of:
            t.append(node_of[prod])
        for u in self.users.get(v, ()):
            n = node_of.get(u)
            if n is not None:
                t.append(n)
        self._touch[v] = t
        return t

    def _mark(self, v):
        """`v` changed outside a sweep: its nodes must be visited again."""
        for n in self._touch.get(v) or self._touching(v):
            n.dirty = True
        for u in self._alias.get(v, ()):
            for n in self._touch.get(u) or self._touching(u):
                n.dirty = True

    # -- one op

    def apply(self, op, ri, dirs, ins, outs, states, notify):
        """Propagate across one op; returns True if any tensor changed.

        What a visit decides is a function of the rule, the directions and the tensors'
        dim shardings (and closedness) only, so outcomes are memoized per engine: a
        program repeating a block (layers, chains) decides each repeat by one lookup.
        The outcome is then committed to this op's tensors (_commit)."""
        key = (id(ri), id(dirs), *[s.key for s in states])   # small ints
        out = self._memo.get(key, _MISSING)
        if out is _MISSING:
            out = self._decided(ri, dirs, states, key)
        if out is None:
            return False
        return self._commit(op, ri, out, ins, outs, states, notify)

    def _decided(self, ri, dirs, states, key):
        """Decide a visit not seen before and memoize it under `key`."""
        if ri.checks is not None:
            out = self._decide_simple(ri, dirs, states)
        else:
            out = self._decide(ri, dirs, states)
        if out is not None:
            # per change: the new state's key as the engine's int, and the dims that
            # differ from the state decided on (with where their axes come from)
            kid = self._kid
            changes = []
            for t, dims, k, whys in out[1]:
                old = states[t]
                diffs = [(d, *whys[d]) for d, (a, b) in enumerate(zip(old.dims, dims))
                         if a != b]
                changes.append((t, dims, kid(k), whys, old.key, diffs))
            out = (out[0], changes)
        self._memo[key] = out
        return out

    def _commit(self, op, ri, out, ins, outs, states, notify):
        """Record a decision's conflicts and write its new dim shardings (with their
        provenance) to the tensors, notifying the ops that read them."""
        conflicts, changes = out
        n_in = ri.n_in
        mappings = ri.mappings
        group_of = self.group_of
        for t, f, wanted, kept, reason in conflicts:
            self._record_conflict(op, (ins[t] if t < n_in else outs[t - n_in]), mappings[t],
                                  f, list(wanted), list(kept), reason)
        any_changed = False
        for t, new_dims, new_key, whys, old_key, diffs in changes:
            st = states[t]
            if new_key == st.key:
                continue
            tensor = ins[t] if t < n_in else outs[t - n_in]
            why = _whys(st)
            if st.key != old_key:   # another tensor of this op shares its state
                diffs = [(d, *whys[d]) for d, (a, b) in enumerate(zip(st.dims, new_dims))
                         if a != b]
            for d, s, sd in diffs:
                why[d] = _new_why(Why, (op, (ins[s] if s < n_in else outs[s - n_in])
                                        if s >= 0 else None, sd))
            st.dims = new_dims      # shared with the memo: never edited in place
            st.key = new_key
            any_changed = True
            notify(tensor)
            if group_of:
                for m in group_of.get(tensor, ()):
                    if m is not tensor:
                        notify(m)
        return any_changed

    def _decide(self, ri, dirs, states):
        """One visit's decision for any rule: (conflicts, changes, src) or None."""
        rule = ri.rule
        sizes = rule.sizes
        n_in = ri.n_in
        mappings = ri.mappings
        projs = [_project(m, s, sizes) if m else {} for m, s in zip(mappings, states)]
        nf = ri.nf
        # a factor all tensors already agree on cannot change
        for f in range(nf):
            if dirs[f]:
                first = None
                for p in projs:
                    fs = p.get(f)
                    if fs is not None:
                        if first is None:
                            first = fs.axes
                        elif fs.axes != first:
                            break
                else:
                    continue
                break
        else:
            return None
        per_factor = [_major_axes(projs, n_in, f, dirs[f]) for f in range(nf)]
        if not any(per_factor):
            return None
        # the tensor each factor's sharding comes from: the largest one holding it
        src = [(-1, -1)] * nf
        for t, proj in enumerate(projs):
            tsize = 1
            for f in proj:
                tsize *= sizes[f]
            for f, fs in proj.items():
                want = per_factor[f]
                if want and ax.list_prefix_status(want, fs.axes) != ax.NOT_PREFIX \
                        and tsize > src[f][1]:
                    src[f] = (t, tsize)
        elementwise = rule.elementwise

        def key(f):
            shard = ax.total_size(per_factor[f]) if elementwise else 0
            return (-src[f][1], -shard, src[f][0], f)
        order = sorted(range(nf), key=key)
        mappings = ri.mappings
        changed_dims = {}
        conflicts = []
        n_t = len(projs)
        for t in list(range(n_in, n_t)) + list(range(n_in)):
            proj = projs[t]
            if not proj:
                continue
            for f in order:
                fs = proj.get(f)
                if fs is None or not per_factor[f]:
                    continue
                new = list(per_factor[f])
                if fs.closed or fs.overflow or not fs.minor:
                    _truncate(new, lambda a, prev: _within_factor(a, fs, prev, sizes[f]))
                if not ax.is_strict_prefix(fs.axes, new):
                    continue
                if len(proj) > 1:       # other factors of the tensor may hold the axes
                    wanted = list(new)
                    _truncate(new, lambda a, prev: _across_factors(a, proj, f))
                    if new != wanted and src[f][0] >= 0:
                        lost = wanted[min(len(new), len(wanted) - 1)]
                        g = next((g for g, gs in proj.items() if g != f and
                                  ax.prefix_without_overlap(lost, gs.axes + gs.overflow)
                                  != lost), None)
                        gd = next((d for d, fs in enumerate(mappings[t]) if g in fs), None)
                        conflicts.append((t, f, wanted, list(new), _lost_to(
                            key, f, g, gd, changed_dims.get(t, ()))))
                if t < n_in and elementwise:
                    for r in projs[n_in:]:
                        rf = r.get(f)
                        if rf is not None and ax.is_strict_prefix(rf.axes, new):
                            new = list(rf.axes)
                if ax.is_strict_prefix(fs.axes, new):
                    fs.axes = new
                    changed_dims.setdefault(t, set()).add(f)
        changes = [_change(ri, t, _unproject(mappings[t], projs[t], sizes), fset, src,
                           states[t].closed) for t, fset in changed_dims.items()]
        if not changes and not conflicts:
            return None
        return conflicts, changes

    def _decide_simple(self, ri, dirs, states):
        """_decide for a simple rule (see _RuleInfo): the same steps, with each factor's
        sharding in a tensor being that tensor's (merged) dim sharding."""
        fdims = ri.fdims
        n_in = ri.n_in
        nf = ri.nf
        cur = [[dd if len(dd) < 2 else _merged(dd) for dd in s.dims] if fdims[t] else None
               for t, s in enumerate(states)]
        # per factor: the compatible major axes over the tensors (_major_axes)
        per_factor = []
        any_axes = False
        in_places, out_places = ri.in_places, ri.out_places
        for f in range(nf):
            d = dirs[f]
            if d == NONE:
                per_factor.append(_EMPTY)
                continue
            if d == BACKWARD:
                first, second = out_places[f], in_places[f]
            else:
                first, second = in_places[f], out_places[f]
            result, can = _EMPTY, True
            for t, k in first:
                result, can = _compatible(result, cur[t][k], can)
            if d != BOTH:
                can = False
            for t, k in second:
                result, can = _compatible(result, cur[t][k], can)
            per_factor.append(result)
            if result:
                any_axes = True
        if not any_axes:
            return None
        # the tensor each factor's sharding comes from: the largest one holding it
        src = [_NO_SRC] * nf
        tsizes = ri.tsizes
        for t, fd in enumerate(fdims):
            if not fd:
                continue
            tsize = tsizes[t]
            ct = cur[t]
            for k, f in enumerate(fd):
                want = per_factor[f]
                if want and tsize > src[f][1] and \
                        ax.list_prefix_status(want, ct[k]) != ax.NOT_PREFIX:
                    src[f] = (t, tsize)
        rule = ri.rule
        elementwise = rule.elementwise
        if elementwise:
            def rank(f):
                return (-src[f][1], -ax.total_size(per_factor[f]), src[f][0], f)
        else:
            def rank(f):
                return (-src[f][1], 0, src[f][0], f)
        order = sorted(range(nf), key=rank)
        changed_dims = {}
        conflicts = []
        dim_of = ri.dim_of
        for t in ri.update_order:
            fd = fdims[t]
            ct = cur[t]
            closed = states[t].closed
            dt = dim_of[t]
            for f in order:
                want = per_factor[f]
                if not want:
                    continue
                k = dt.get(f)
                if k is None:
                    continue
                old = ct[k]
                new = list(want)
                if closed[k]:
                    _truncate(new, lambda a, prev: _within_closed(a, old))
                if old and not ax.is_strict_prefix(old, new) or not new:
                    continue
                if len(fd) > 1:
                    wanted = list(new)
                    _truncate(new, lambda a, prev: _across_dims(a, ct, k))
                    if new != wanted and src[f][0] >= 0:
                        j = _holder(wanted[min(len(new), len(wanted) - 1)], ct, k)
                        conflicts.append((t, f, wanted, list(new), _lost_to(
                            rank, f, fd[j] if j is not None else None, j,
                            changed_dims.get(t, ()))))
                if t < n_in and elementwise:
                    for rt, rk in out_places[f]:
                        rf = cur[rt][rk]
                        if ax.is_strict_prefix(rf, new):
                            new = list(rf)
                if (ax.is_strict_prefix(old, new) if old else new):
                    ct[k] = new
                    fset = changed_dims.get(t)
                    if fset is None:
                        changed_dims[t] = {f}
                    else:
                        fset.add(f)
        changes = [_change(ri, t, cur[t], fset, src, states[t].closed)
                   for t, fset in changed_dims.items()]
        if not changes and not conflicts:
            return None
        return conflicts, changes


    def _record_conflict(self, op, tensor, mapping, f, wanted, kept, reason):
        d = next((k for k, fs in enumerate(mapping) if f in fs), None)
        key = (id(op), id(tensor), d, tuple(wanted), tuple(kept))
        if key in self._conflict_keys:   # the same conflict seen on an earlier visit
            return
        self._conflict_keys.add(key)
        self.conflicts.append(Conflict(op, tensor, d, wanted, kept, reason))

    # -- driver

    def run(self):
        self.setup()
        nodes = self.nodes
        # per round: how many nodes propagate differently than in the round before
        new_dirs = [len(nodes)] + [sum(1 for n in nodes if n.dirs[p] is not n.dirs[p - 1])
                                   for p in range(1, 5)]
        for priority in range(5):
            self._return_edges()
            # after a round every node's last visit used that round's directions; a
            # round that changes none and finds no node dirty would visit nothing
            if new_dirs[priority] or any(n.dirty for n in nodes):
                self._sweep(priority)
            self._return_edges()
        self._finish()

    def _sweep(self, priority):
        nodes = self.nodes
        for n in nodes:
            n.queued = True
        stack = nodes[::-1]
        touch = self._touch
        touching = self._touching
        current = None

        alias = self._alias

        def notify(v):
            for n in touch.get(v) or touching(v):
                n.dirty = True
                if n is not current and not n.queued:
                    n.queued = True
                    stack.append(n)
            if alias:
                for u in alias.get(v, ()):
                    for n in touch.get(u) or touching(u):
                        n.dirty = True

        pop = stack.pop
        memo = self._memo
        decide = self._decided
        commit = self._commit
        state_key = _STATE_KEY
        while stack:
            n = pop()
            n.queued = False
            dirs = n.dirs[priority]
            if n.last is dirs and not n.dirty:
                continue
            n.last = dirs
            n.dirty = False
            if not n.active[priority]:
                continue
            current = n
            if n.edge:
                self._apply_edge(n, notify)
                continue
            # apply(), with its memo lookup inline (a visit that changes nothing is
            # decided once per distinct case and then found here)
            states = n.states
            key = (n.rid, id(dirs), *map(state_key, states))
            out = memo.get(key, _MISSING)
            if out is _MISSING:
                out = decide(n.ri, dirs, states, key)
            if out is not None:
                commit(n.op, n.ri, out, n.ins, n.outs, states, notify)

    def _apply_edge(self, n, notify):
        """Propagate free axes across a shard_map boundary."""
        e = n.op
        outer = self.st[e.outer]
        manual = e.manual
        view = _State([[a for a in d if a[0] not in manual] for d in outer.dims],
                      list(outer.closed), _whys(outer))
        view.key = self._kid(view.key)
        before = [list(d) for d in view.dims]
        inner = self.st[e.inner]
        rank = len(before)
        self.apply(e, n.ri, n.dirs[0], [e.outer], [e.inner], [view, inner], notify)
        if view.dims != before:
            dims = list(outer.dims)
            for d in range(rank):
                if not outer.closed[d]:
                    prefix = [ax.to_ref(a, self.mesh) for a in e.spec.dims[d]]
                    dims[d] = prefix + view.dims[d]
            outer.dims = dims
            outer.key = self._kid((tuple(map(tuple, outer.dims)), tuple(outer.closed)))
            notify(e.outer)

    def _return_edges(self):
        """Identity edges between returned values and the function's result slots."""
        mark = self._mark
        for v, s, slot, ri, dirs in self.returns:
            if s.dims != slot.dims:
                self.apply(_RETURN, ri, dirs, [v], [v], [s, slot], mark)

    def _finish(self):
        """Close every sharding and store it, with its provenance, on the IR values."""
        mesh = self.mesh
        made = {}       # state key (its int) -> Sharding

        def sharding_of(s):
            sh = made.get(s.key)
            if sh is None:
                sh = made[s.key] = ax.sharding_of(s.dims, mesh)
            return sh
        for v, s in self.st.items():
            v.sharding = sharding_of(s)
            v.why = _why_of(s)
        self.p.out_shardings = [sharding_of(s) for s in self.out_states]
        self.p.meta["out_why"] = [_why_of(s) for s in self.out_states]
        self.p.meta["conflicts"] = self.conflicts


def post_order(p: Program, producer=None):
    """The ops in the order XLA's Shardy sees them: XLA rebuilds the module from HLO,
    whose instructions are a depth-first post-order from the results (operands left to
    right); ops the results do not reach follow in program order.

    `producer`: {value: op} for (at least) the values `p`'s ops define, if known."""
    if producer is None:
        producer = {}
        for op in p.ops:
            for v in op.outputs:
                producer[v] = op
    get = producer.get
    seen, order = set(), []
    add = seen.add
    for root in p.outputs:
        op = get(root) if type(root) is not Lit else None
        if op is None or op in seen:
            continue
        stack = [(op, 0)]
        add(op)
        while stack:
            op, i = stack.pop()
            ins = op.inputs
            n = len(ins)
            while i < n:
                v = ins[i]
                i += 1
                dep = get(v) if type(v) is not Lit else None
                if dep is not None and dep not in seen:
                    add(dep)
                    stack.append((op, i))
                    stack.append((dep, 0))
                    break
            else:
                order.append(op)
    if len(order) < len(p.ops):
        order += [op for op in p.ops if op not in seen]
    return order


class _Return:
    """Stands for the function's return in provenance records."""
    class prim:
        name = "return"
        prop_kind = None
    loc = None


_RETURN = _Return()
_LIT = _State([], [], [])
_LIT_KEY = _LIT.key
_LIT.key = 0


def _replicated_spec(v):
    from ..ir.sharding import Sharding
    return Sharding.replicated(v.aval.ndim)


@functools.lru_cache(maxsize=256)
def _identity_rule(shape):
    from ..ir.program import Aval
    from ..ir.rules import pointwise
    a = Aval(shape, None)
    return pointwise([a], [a])


def default_rule(op):
    rule_fn = op.prim.sharding_rule
    if rule_fn is None:
        return None
    return rule_fn([v.aval for v in op.inputs], [v.aval for v in op.outputs], **op.params)


_MISSING = object()


def _cached_rule(op, cache):
    """default_rule, memoized per (rule, operand and result types, params) within one
    propagation: rules are pure functions of these (deep_mlp's layers, or a long chain,
    repeat a few distinct ops many times). Ops with unhashable params are not cached."""
    rule_fn = op.prim.sharding_rule
    if rule_fn is None:
        return None
    sig = op.sig       # names (primitive, params, operand types), hence the result types
    if sig is not None:
        rule = cache.get(sig, _MISSING)
        if rule is _MISSING:
            rule = cache[sig] = default_rule(op)
        return rule
    ins = [v.aval for v in op.inputs]
    outs = [v.aval for v in op.outputs]
    try:
        key = (rule_fn, tuple(ins), tuple(outs),
               tuple([(k, type(v), v) for k, v in op.params.items()]))
        rule = cache.get(key, _MISSING)
    except TypeError:
        return rule_fn(ins, outs, **op.params)
    if rule is _MISSING:
        rule = cache[key] = rule_fn(ins, outs, **op.params)
    return rule


def propagate(program: Program, rule_of=default_rule) -> Program:
    """Give every value of `program` a closed sharding, in place; returns it."""
    if program.mesh is None:
        raise ShardcError("propagation needs a mesh on the program")
    Engine(program, rule_of).run()
    return program
