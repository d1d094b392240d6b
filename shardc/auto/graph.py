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
"""
from __future__ import annotations

import numpy as np

from .costmodel import CPU, dims as to_dims, local_bytes, reshard_cost
from .strategies import (Strategy, dims_choices, fixed_strategy, follow, follows, inline,
                         inline_strategies, is_fixed, key, op_strategies)
from ..ir.program import Lit
from ..propagate.factors import cached_rule


class Group:
    """`members`: [(op, [Strategy per choice])]; `inputs`: [(index, value)] of program
    inputs it is; `values`: {id(value): [dims per choice]} in order of definition;
    `cost`, `mem`: per choice, seconds of communication and the bytes it holds for the
    whole step (its inputs and program outputs); `held`: per choice, the bytes of the
    values its ops make; `label`: its ops' signatures."""
    __slots__ = ("n", "members", "inputs", "values", "order", "cost", "mem", "label",
                 "auto", "vlabel", "held")

    def __init__(self, n, label):
        self.n, self.label = n, label
        self.members, self.inputs, self.values, self.order = [], [], {}, []
        self.vlabel = {}
        self.cost = np.zeros(n)
        self.mem = np.zeros(n)
        self.held = np.zeros(n)     # bytes of the values its ops make, per choice
        self.auto = False

    def define(self, v, dims_per_choice, label=None):
        self.values[id(v)] = dims_per_choice
        self.vlabel[id(v)] = label
        self.order.append(id(v))


class Edge:
    __slots__ = ("src", "value", "dst", "operand", "targets")

    def __init__(self, src, value, dst, operand, targets):
        self.src, self.value, self.dst, self.operand, self.targets = (
            src, value, dst, operand, targets)


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

    def _add(self, op):
        if op.prim.sharding_group:     # values that must share one sharding: ties
            self.tied.setdefault(op.params.get("group_id"), []).append(op.inputs[0])
            return
        k = follows(op, self.rules, self._choices)
        if k is not None and id(op.inputs[k]) in self.where:
            v = op.inputs[k]
            g = self.where[id(v)]
            ss = [follow(op, k, d, self.mesh, self.hw, self.rules, self.cache)
                  for d in g.values[id(v)]]
            self._member(g, op, ss)
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
            self._member(g, op, ss)
        for j, v in enumerate(op.inputs):
            if type(v) is Lit or not v.aval.ndim or id(v) not in self.where or j == k:
                continue
            self.edges.append(Edge(self.where[id(v)], v, g, j, [s.ins[j] for s in ss]))

    def _member(self, g, op, ss):
        g.members.append((op, ss))
        g.cost += [s.comm_s for s in ss]     # the objective: communication (solve.py)
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
        """Seconds of the reshard on edge `e` per (producer choice, consumer choice)."""
        src = e.src.values[id(e.value)]
        k = (e.value.aval, tuple(map(key, src)), tuple(map(key, e.targets)))
        hit = self.mcache.get(k)
        if hit is None:
            hit = self.mcache[k] = np.array(
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
