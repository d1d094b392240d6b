"""The solver's graph: a program's top-level ops in groups, each group one choice.

A group is a leader (an op the solver chooses a strategy for, or a program input) and
its followers (pass-through ops that take their operand's sharding: strategies.follows),
so a group's strategies are the leader's and its cost per strategy the members' sum.
Edges carry a value from the group that makes it to an op of another group that reads
it; an edge's cost matrix is the reshard from the value's dims under the producer's
strategy s to what the consumer's strategy t needs (costmodel.reshard_cost).

Layer clustering (`classes`): groups are coloured by their ops' signatures and then,
for a few rounds, by their neighbours' colours along the edges (Weisfeiler-Lehman
refinement). An unrolled loop's layers have the same colours except within a few hops
of where the repetition starts and ends, so one class holds a group of every layer and
the solver gives all of them one choice: the problem's size depends on what a layer
is, not on how many there are.

Loop and branch bodies (scan, while, cond, a custom_vjp's body that is not inlined)
are searched too: their ops are groups as the top level's, whose costs and edges count
`runs` times (a scan body its length: costmodel.region_runs). The values a region op
ties to one sharding by its data-flow edges (a carry's block argument and the loop's
result; a scan's ys without their stacked dim) are one boundary group each, choosing
that sharding; what flows into them (an init, an xs, a const, a yielded value) is an
edge, the reshard before the loop or at the end of its body.
"""
from __future__ import annotations

import numpy as np

from .costmodel import CPU, dims as to_dims, local_bytes, region_runs, reshard_cost
from .strategies import (Strategy, dims_choices, fixed_strategy, follow, follows, inline,
                         inline_strategies, is_fixed, key, op_strategies, searched_region)
from ..ir.program import Lit
from ..ir.rules import Edge as FlowEdge
from ..propagate.factors import cached_rule


class Group:
    """`members`: [(op, [Strategy per choice])]; `inputs`: [(index, value)] of program
    inputs it is; `values`: {id(value): [dims per choice]} in order of definition;
    `cost`, `mem`: per choice, seconds of communication and the bytes it holds for the
    whole step (its inputs and program outputs); `held`: per choice, the bytes of the
    values its ops make; `label`: its ops' signatures; `boundary`: for a region op's
    boundary group, (the op, its values: block arguments and the op's results)."""
    __slots__ = ("n", "members", "inputs", "values", "order", "cost", "mem", "label",
                 "auto", "vlabel", "held", "boundary")

    def __init__(self, n, label):
        self.n, self.label = n, label
        self.members, self.inputs, self.values, self.order = [], [], {}, []
        self.vlabel = {}
        self.cost = np.zeros(n)
        self.mem = np.zeros(n)
        self.held = np.zeros(n)     # bytes of the values its ops make, per choice
        self.auto = False
        self.boundary = None

    def define(self, v, dims_per_choice, label=None):
        self.values[id(v)] = dims_per_choice
        self.vlabel[id(v)] = label
        self.order.append(id(v))


class Edge:
    """`value`, made by group `src`, read by group `dst` (as its operand `operand`,
    or a label) needing dims `targets[t]` under dst's choice t; `runs`: how many times
    per step (in a loop body, the trip count)."""
    __slots__ = ("src", "value", "dst", "operand", "targets", "runs")

    def __init__(self, src, value, dst, operand, targets, runs=1):
        self.src, self.value, self.dst, self.operand, self.targets = (
            src, value, dst, operand, targets)
        self.runs = runs


def _sig(op):
    if op.sig is not None:
        return op.sig
    return (op.prim.name, tuple(str(v.aval) for v in op.inputs),
            tuple(str(v.aval) for v in op.outputs), repr(sorted(op.params.items())))


class Graph:
    """Groups and edges of a prepared program (`auto`: the indices of the inputs whose
    sharding is chosen)."""

    def __init__(self, program, auto, hw=CPU):
        self.program, self.hw, self.mesh = program, hw, program.mesh
        self.rules, self.cache, self.rcache, self.mcache = {}, {}, {}, {}
        self.groups, self.edges, self.where = [], [], {}
        self.tied = {}         # sharding group id -> its values (each shares one sharding)
        self.runs = {}         # id(op) -> how many times it runs per step (1 at the top)
        mesh = self.mesh
        for i, v in enumerate(program.inputs):
            if i in auto:
                choices = dims_choices(v.aval.shape, mesh)
            else:
                choices = [to_dims(v.sharding, v.aval.ndim, mesh)]
            g = self._group(len(choices), ("input", str(v.aval), i in auto,
                                           None if i in auto else key(choices[0])))
            g.auto = i in auto
            g.inputs.append((i, v))
            g.define(v, choices)
            self.where[id(v)] = g
            g.mem += [_bytes(v, d, mesh) for d in choices]
        for op in program.ops:
            self._add(op)
        for v, s in zip(program.outputs, program.out_shardings):
            g = self.where.get(id(v)) if type(v) is not Lit else None
            if g is None:
                continue
            ds = g.values[id(v)]
            if s is not None:        # a sink that requires the fixed output sharding
                want = to_dims(s.closed(), v.aval.ndim, mesh)
                g.cost += [self.reshard(v.aval, d, want)[0] for d in ds]
                g.mem += _bytes(v, want, mesh)
            else:
                g.mem += [_bytes(v, d, mesh) for d in ds]

    def _group(self, n, label):
        g = Group(n, label)
        self.groups.append(g)
        return g

    def _choices(self, v):
        g = self.where.get(id(v))
        return g.n if g is not None else 0

    def _add(self, op, runs=1):
        self.runs[id(op)] = runs
        if searched_region(op):
            self._region(op, runs)
            return
        if op.prim.sharding_group:     # values that must share one sharding: ties
            self.tied.setdefault(op.params.get("group_id"), []).append(op.inputs[0])
            return
        k = follows(op, self.rules, self._choices)
        if k is not None and id(op.inputs[k]) in self.where:
            v = op.inputs[k]
            g = self.where[id(v)]
            ss = [follow(op, k, d, self.mesh, self.hw, self.rules, self.cache)
                  for d in g.values[id(v)]]
            self._member(g, op, ss, runs)
            g.label += ((_sig(op), g.vlabel[id(v)]),)
        else:
            k = None
            if inline(op):
                ss = inline_strategies(op, self.mesh)
            elif is_fixed(op) or cached_rule(op, self.rules) is None:
                ss = [fixed_strategy(op, self.mesh)]
            else:
                ss = op_strategies(op, self.mesh, self.hw, self.rules, self.cache)
            g = self._group(len(ss), (_sig(op),))
            self._member(g, op, ss, runs)
        for j, v in enumerate(op.inputs):
            if type(v) is Lit or not v.aval.ndim or id(v) not in self.where or j == k:
                continue
            self.edges.append(Edge(self.where[id(v)], v, g, j, [s.ins[j] for s in ss],
                                   runs))

    def _region(self, op, runs):
        """A searched region op (module docstring): its boundary groups, the edges into
        them from its operands, its bodies' ops, then the edges from what they yield."""
        flow = [e for e in op.prim.data_flow(op) if type(e) is FlowEdge]
        args = {id(v) for r in op.regions for v in r.inputs}
        results = {id(v) for v in op.outputs}
        parent = {}

        def root(v):
            while parent.get(v, v) != v:
                v = parent[v]
            return v
        for e in flow:       # a loop's result and its block arguments: one sharding
            if not e.stacked and id(e.outer) in results and id(e.inner) in args:
                parent[root(id(e.outer))] = root(id(e.inner))
        stacked = {id(e.outer) for e in flow if e.stacked and id(e.outer) in results}
        comps = {}
        for v in [v for r in op.regions for v in r.inputs] + list(op.outputs):
            comps.setdefault(root(id(v)), []).append(v)
        sig = _sig(op)
        for vs in comps.values():
            base = vs[0].aval.shape[1:] if id(vs[0]) in stacked else vs[0].aval.shape
            choices = dims_choices(base, self.mesh)
            g = self._group(len(choices), (("boundary", sig, base),))
            g.boundary = (op, vs)
            for v in vs:
                ds = [[[]] + d for d in choices] if id(v) in stacked else choices
                g.define(v, ds, ("boundary", sig, id(v) in results))
                self.where[id(v)] = g
                if id(v) in results:
                    g.held += [_bytes(v, d, self.mesh) for d in ds]
        inner = {id(v) for r in op.regions for v in r.outputs if type(v) is not Lit}
        for e in flow:      # the reshards into the loop, before it runs
            if id(e.inner) in args and id(e.outer) not in results:
                self._into(e.outer, e.inner, "stack" if e.stacked else None, runs,
                           ("operand", e.role))
        for r, n in zip(op.regions, region_runs(op)):
            for o in r.ops:
                self._add(o, runs * n)
        n_of = {id(v): n for r, n in zip(op.regions, region_runs(op)) for v in r.outputs
                if type(v) is not Lit}
        for e in flow:      # what a body yields, resharded at its end (a block argument
            # yielded as a result it is not tied to: a scan's ys slice; one tied to the
            # result is its boundary group, no reshard)
            if id(e.outer) in results and id(e.inner) in inner and \
                    (e.stacked or id(e.inner) not in args):
                self._into(e.inner, e.outer, "slice" if e.stacked else None,
                           runs * n_of[id(e.inner)], ("yield", e.role))

    def _into(self, v, member, how, runs, role):
        """An edge carrying `v` into `member`'s boundary group: `v` as `member`, or
        (`how`) "stack"ed on it (an xs: the stacked dim whole), or a "slice" of it (a
        yielded slice of ys). `role`: ("operand" or "yield", the edge's role)."""
        if type(v) is Lit or not v.aval.ndim or id(v) not in self.where:
            return
        g = self.where[id(member)]
        ds = g.values[id(member)]
        targets = [[[]] + d for d in ds] if how == "stack" else \
            [d[1:] for d in ds] if how == "slice" else ds
        self.edges.append(Edge(self.where[id(v)], v, g, role, targets, runs))

    def _member(self, g, op, ss, runs=1):
        g.members.append((op, ss))
        # the objective: communication (solve.py), each time the op runs
        g.cost += [s.comm_s * runs for s in ss]
        for j, v in enumerate(op.outputs):
            g.define(v, [s.outs[j] for s in ss], (_sig(op), j))
            self.where[id(v)] = g
            g.held += [_bytes(v, s.outs[j], self.mesh) for s in ss]

    def reshard(self, aval, src, dst):
        """(seconds, collective bytes) of one reshard, memoized."""
        k = (aval, key(src), key(dst))
        hit = self.rcache.get(k)
        if hit is None:
            c = reshard_cost(aval, src, dst, self.mesh, self.hw)
            hit = self.rcache[k] = (c.comm_s, c.comm_bytes)
        return hit

    def matrix(self, e) -> np.ndarray:
        """Seconds of the reshard on edge `e` per (producer choice, consumer choice),
        for every time it runs."""
        src = e.src.values[id(e.value)]
        k = (e.value.aval, tuple(map(key, src)), tuple(map(key, e.targets)), e.runs)
        hit = self.mcache.get(k)
        if hit is None:
            hit = self.mcache[k] = e.runs * np.array(
                [[self.reshard(e.value.aval, s, t)[0] for t in e.targets] for s in src])
        return hit

    def classes(self, rounds=3) -> list:
        """Groups in classes that share one choice (see the module docstring); `rounds`
        0 gives every group its own class."""
        gs = self.groups
        if rounds <= 0:
            return [[g] for g in gs]
        index = {id(g): i for i, g in enumerate(gs)}
        color = [hash((g.label, g.n)) for g in gs]
        ins = [[] for _ in gs]
        outs = [[] for _ in gs]
        for e in self.edges:
            u, w = index[id(e.src)], index[id(e.dst)]
            # the value by what makes it, not where in its group: a follower chain
            # (the residual stream) may run through every layer
            lab = hash((e.src.vlabel[id(e.value)], e.operand))
            ins[w].append((lab, u))
            outs[u].append((lab, w))
        for _ in range(rounds):
            color = [hash((color[i], tuple(sorted((lab, color[u]) for lab, u in ins[i])),
                           tuple(sorted((lab, color[w]) for lab, w in outs[i]))))
                     for i in range(len(gs))]
        by = {}
        for g, c in zip(gs, color):
            by.setdefault((c, g.n, g.label), []).append(g)
        return list(by.values())


def _bytes(v, d, mesh):
    try:
        return local_bytes(v.aval, d, mesh)
    except (AttributeError, TypeError):
        return 0


__all__ = ["Graph", "Group", "Edge", "Strategy"]
