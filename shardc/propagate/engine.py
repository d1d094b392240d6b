"""Sharding propagation: the driver of one worklist over factor rules (Shardy's algorithm).

Sources are the program's input shardings, fixed output shardings and sharding
constraints; their dims are *closed* and never change. Every other value starts
open and unsharded. A visit to an op merges its tensors' shardings factor by factor
(merge.py, on projections made by factors.py) and writes back what changed; ops
touching a changed value go back on the worklist (of per-value states: the IR is never
written) until nothing changes. The rounds and
what each lets propagate are declared in schedule.py; region ops and sharding groups
tie values together by the data-flow edges they declare (edges.py). Values nothing
reached end replicated. `assign` returns the result as an Assignment: per value its
sharding and, per dim, where its axes came from (state.py), and the settled conflicts.
"""
from __future__ import annotations

import operator

from . import axes as ax
from ..errors import ShardcError
from ..ir.program import Lit, Program
from .assignment import Assignment
from .edges import DataFlow, _EdgeOp, _FlowOp
from .factors import _RuleInfo, cached_rule, default_rule, identity_rule
from .merge import decide
from .schedule import BOTH, ROUNDS, directions, post_order
from .state import (EMPTY as _EMPTY, LIT as _LIT, LIT_KEY as _LIT_KEY, Conflict, Source,
                    Why, _State, _new_why, _whys)

__all__ = ["Assignment", "Conflict", "Engine", "Source", "Why", "assign", "default_rule",
           "post_order", "propagate"]

_MISSING = object()
_STATE_KEY = operator.attrgetter("key")
_KIND_OF = object()     # the primitive decides its kind per op (prim.kind_of(op))


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


class Engine(DataFlow):
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
        self.node_of = {}       # Op | edge -> _Node
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
        repl = self.repl.get(v, ())
        s = _State(dims, closed, why, tuple(ax.to_ref(a, self.mesh) for a in repl))
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
        self.repl = p.meta.get("replicated", {})
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
                    s.repl = ()
                    st[v] = s
                else:
                    state(v, sources.get(v))
            rules[op] = cached_rule(op, cache) if cached else rule_of(op)
        for v in p.outputs:
            if type(v) is not Lit:
                uses[v] = uses.get(v, 0) + 1
        self.order = []
        self._held, self._one = [], []      # (see DataFlow._flow_ops)
        self._order(post_order(p, producer))
        self._groups()
        self._share()
        nodes, node_of = self.nodes, self.node_of
        dirs_of = self._dirs_of
        rinfo = self._rinfo
        kinds = {}
        for op in self.order:
            rule = rules[op]
            if type(op) is _EdgeOp:
                ri = self._rule_info(rule, 1)
                both = self._intern((BOTH,) * len(rule.sizes))
                dirs = (both,) * len(ROUNDS)
                node = _Node(op, ri, [op.outer], [op.inner], [st[op.outer], st[op.inner]],
                             dirs, self._active(dirs), edge=True)
            elif type(op) is _FlowOp:     # (passed through in every round, as Shardy's)
                ins, outs = op.inputs, op.outputs
                ri = self._rule_info(rule, len(ins))
                dirs = (self._intern((BOTH,) * len(rule.sizes)),) * len(ROUNDS)
                node = _Node(op, ri, ins, outs, [st[v] for v in (*ins, *outs)],
                             dirs, self._active(dirs))
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
                    dirs = directions(kind, multi, rule, self._intern)
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
                ri = self._rule_info(identity_rule(v.aval.shape), 1)
                self.returns.append((v, st[v], s, ri, self._intern((BOTH,) * rank)))

    def _rule_info(self, rule, n_in):
        ri = self._rinfo.get(id(rule))
        if ri is None or ri.n_in != n_in:
            ri = self._rinfo[id(rule)] = _RuleInfo(rule, n_in)
        return ri

    def _intern(self, dirs):
        return self._dirs.setdefault(dirs, dirs)

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
        out = decide(ri, dirs, states)
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
            flow = type(op) is _FlowOp
            for d, s, sd in diffs:
                if flow and t < n_in and 0 <= s < n_in:
                    s, sd = n_in, d     # a source takes a Flow's sharding from its owner
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
                                   for p in range(1, len(ROUNDS))]
        for priority in range(len(ROUNDS)):
            self._return_edges()
            # after a round every node's last visit used that round's directions; a
            # round that changes none and finds no node dirty would visit nothing
            if new_dirs[priority] or any(n.dirty for n in nodes):
                self._sweep(priority)
            self._return_edges()
        return self._finish()

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
            if alias:   # (values sharing v's state: their readers are revisited too)
                for u in alias.get(v, ()):
                    for n in touch.get(u) or touching(u):
                        n.dirty = True
                        if n is not current and not n.queued:
                            n.queued = True
                            stack.append(n)

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

    def _finish(self):
        """The Assignment: every value's final state, closed, with its provenance."""
        return Assignment(self.st, self.mesh, self.out_states, self.conflicts)


def assign(program: Program, rule_of=default_rule) -> Assignment:
    """The propagation stage: the shardings (and their provenance) of every value of
    `program`, from the sources it carries; the program is not changed."""
    if program.mesh is None:
        raise ShardcError("propagation needs a mesh on the program")
    return Engine(program, rule_of).run()


def propagate(program: Program, rule_of=default_rule) -> Program:
    """Give every value of `program` a closed sharding, in place; returns it."""
    return assign(program, rule_of).apply(program)
