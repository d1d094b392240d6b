"""Data-flow edges: values that share a sharding beyond what op rules say.

Ops declare them (`Primitive.data_flow`, as Shardy's ShardableDataFlowOpInterface):
an `Edge` ties an operand or result of a region op to a block argument or region
result over the axes the op does not partition manually; a `Group` ties values across
the program to one sharding (Shardy's sharding groups). The function's results are
tied to its result slots by identity edges too. `DataFlow` is the engine's part that
orders region bodies between their edges and propagates across edges.
"""
from __future__ import annotations

from . import axes as ax
from ..ir.program import Lit
from ..ir.rules import Edge, Group
from .factors import flow_rule, identity_rule, stacked_rule
from .schedule import post_order
from .state import RETURN, Source, _State, _whys, state_key


class _EdgePrim:
    """What provenance and the schedule read of an edge's "op"."""
    __slots__ = ("name",)
    prop_kind = "elementwise"

    def __init__(self, name):
        self.name = name


class _EdgeOp:
    """An edge on the worklist, named after the op that declared it."""
    __slots__ = ("outer", "inner", "manual", "spec", "loc", "prim", "region_op", "stacked",
                 "role")

    def __init__(self, e: Edge, prim, region_op=None):
        self.outer, self.inner, self.manual, self.spec = e.outer, e.inner, e.manual, e.spec
        self.loc = e.loc
        self.prim = prim
        self.region_op = region_op      # the op that declared it (for explain)
        self.stacked = e.stacked
        self.role = e.role


class _FlowOp:
    """A Flow on the worklist: its sources are its operands, its owner its one result
    (whose state its targets share)."""
    __slots__ = ("inputs", "sources", "outputs", "loc", "prim", "region_op", "role",
                 "params")

    def __init__(self, f, owner, sources, prim, region_op):
        self.inputs = self.sources = sources
        self.outputs = [owner]
        self.loc, self.prim, self.region_op, self.role = f.loc, prim, region_op, f.role
        self.params = {}


class _Classes:
    """Union-find over values: the classes of values joined."""

    def __init__(self):
        self.parent = {}

    def find(self, v):
        p = self.parent
        root = v
        while p.get(root, root) is not root:
            root = p[root]
        while v is not root:
            p[v], v = root, p[v]
        return root

    def join(self, vs):
        if vs:
            r = self.find(vs[0])
            self.parent.setdefault(r, r)
            for v in vs[1:]:
                q = self.find(v)
                if q is not r:
                    self.parent[q] = r

    def classes(self):
        out: dict = {}
        for v in self.parent:   # (insertion order: a class's first value first)
            out.setdefault(self.find(v), []).append(v)
        return list(out.values())


_PRIMS: dict = {}


def _edge_prim(prim):
    p = _PRIMS.get(prim.name)
    if p is None:
        p = _PRIMS[prim.name] = _EdgePrim(f"{prim.name} boundary")
    return p


def data_flow(op):
    flow = op.prim.data_flow
    return flow(op) if flow is not None else None


class DataFlow:
    """The engine's handling of data-flow edges (mixed into Engine)."""

    def _order(self, ops):
        """Ops in Shardy's pre-order, region bodies between their entry and exit edges."""
        for op in ops:
            if self.rules.get(op) is not None:
                self.order.append(op)
            if not op.regions:
                continue
            flow = data_flow(op)
            if not flow:
                for r in op.regions:
                    self._order(post_order(r))
                continue
            names = self.mesh.names
            entry, leave = [], []
            block_args = {id(v) for r in op.regions for v in r.inputs}
            flows = op.prim.flows(op) if op.prim.flows is not None else None
            for e in flow:
                if type(e) is not Edge or isinstance(e.outer, Lit) or \
                        isinstance(e.inner, Lit) or all(n in e.manual for n in names):
                    continue     # nothing can flow: a literal, or every axis manual
                if flows is not None and not e.stacked and not e.manual:
                    continue     # a Flow stands for it
                rule = stacked_rule(e.outer.aval.shape) if e.stacked else \
                    identity_rule(e.inner.aval.shape)
                e = _EdgeOp(e, _edge_prim(op.prim), op)
                self.rules[e] = rule
                self.users.setdefault(e.outer, []).append(e)
                self.users.setdefault(e.inner, []).append(e)
                (entry if id(e.inner) in block_args else leave).append(e)
            self.order += entry
            for r in op.regions:
                self._order(post_order(r))
            self.order += leave
            if flows:
                self.order += self._flow_ops(op, flows)

    def _flow_ops(self, op, flows):
        """The worklist ops of a region op's Flows; the values each holds are noted for
        _share (what Shardy keeps on the edge op is one sharding)."""
        out = []
        for f in flows:
            held = [v for v in (f.owner, *f.targets) if type(v) is not Lit]
            if not held:
                continue
            owner = held[0]
            self._held.append(held)
            sources = [v for v in dict.fromkeys(f.sources)
                       if type(v) is not Lit and v not in held]
            if not sources:     # one value in XLA's view: its uses are its targets' too
                self._one.append((held, sum(1 for v in op.inputs if v is owner)))
                continue
            if not owner.aval.shape:
                continue
            fo = _FlowOp(f, owner, sources, _edge_prim(op.prim), op)
            self.rules[fo] = flow_rule(owner.aval.shape, len(sources))
            for v in (*sources, owner):
                self.users.setdefault(v, []).append(fo)
            out.append(fo)
        return out

    def _share(self):
        """Values a Flow holds share one state, through nested region ops and sharding
        groups alike (one class each: an inner op's block argument may be an outer one's
        target); a class a group is in keeps the group's state. A value that is one in
        XLA's view has its aliases' uses."""
        st = self.st
        cls = _Classes()
        for held in self._held:
            cls.join(held)
        for vs in {id(vs): vs for vs in self.group_of.values()}.values():
            same: dict = {}
            for v in vs:    # (a member that disagrees keeps its own state)
                same.setdefault(id(st[v]), []).append(v)
            for b in same.values():
                cls.join(b)
        for members in cls.classes():
            lead = next((v for v in members if v in self.group_of), None) or next(
                (v for v in members if any(st[v].dims) or any(st[v].closed)), members[0])
            for v in members:
                st[v] = st[lead]
        one = _Classes()
        dropped: dict = {}
        for held, n in self._one:
            one.join(held)
            dropped[held[0]] = dropped.get(held[0], 0) + n
        uses = self.uses
        for members in one.classes():
            n = sum(uses.get(v, 0) - dropped.get(v, 0) for v in members)
            for v in members:
                uses[v] = n
        # a value's state may be shared (groups, Flows): a change must make every node
        # reading it dirty
        self._alias = {}
        if self._held or self.group_of:
            by_state: dict = {}
            for v, s in st.items():
                by_state.setdefault(id(s), []).append(v)
            for vs in by_state.values():
                if len(vs) > 1:
                    for v in vs:
                        self._alias[v] = [u for u in vs if u is not v]

    def _groups(self):
        """Members of a sharding group share one state: the first member that has a
        sharding gives it to all (Shardy's syncGroupMemberShardings)."""
        members: dict = {}
        for op in self.p.walk():
            if op.prim.data_flow is None:
                continue
            for g in data_flow(op) or ():
                if type(g) is Group and not isinstance(g.value, Lit):
                    members.setdefault(g.key, []).append(g.value)
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

    def _apply_edge(self, n, notify):
        """Propagate the free axes across an edge."""
        e = n.op
        outer = self.st[e.outer]
        manual = e.manual
        view = _State([[a for a in d if a[0] not in manual] for d in outer.dims],
                      list(outer.closed), _whys(outer), outer.repl)
        view.key = self._kid(view.key)
        before = [list(d) for d in view.dims]
        inner = self.st[e.inner]
        rank = len(before)
        self.apply(e, n.ri, n.dirs[0], [e.outer], [e.inner], [view, inner], notify)
        if view.dims != before:
            dims = list(outer.dims)
            for d in range(rank):
                if not outer.closed[d]:
                    prefix = [ax.to_ref(a, self.mesh) for a in e.spec.dims[d]] \
                        if e.spec is not None else []
                    dims[d] = prefix + view.dims[d]
            outer.dims = dims
            outer.key = self._kid(state_key(outer.dims, outer.closed, outer.repl))
            notify(e.outer)

    def _return_edges(self):
        """Identity edges between returned values and the function's result slots."""
        mark = self._mark
        for v, s, slot, ri, dirs in self.returns:
            if s.dims != slot.dims:
                self.apply(RETURN, ri, dirs, [v], [v], [s, slot], mark)
