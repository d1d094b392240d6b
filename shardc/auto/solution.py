"""What the sharding search chose (solve.py), how to write it into the program, and
what it predicts."""
from __future__ import annotations

from ..ir.primitive import PRIMITIVES
from ..ir.program import Lit, Op, Value


class Prediction:
    """What the solver predicts per step and device: seconds (compute, communication),
    collective bytes (as shardc.report counts them, a value resharded one way counted
    once, as XLA reuses it),
    bytes of inputs and outputs, and the memory model's peak bytes and the op where
    it is reached."""
    __slots__ = ("compute_s", "comm_s", "collective_bytes", "io_bytes", "peak_bytes",
                 "peak_at")

    def __init__(self, compute_s=0.0, comm_s=0.0, collective_bytes=0, io_bytes=0):
        self.compute_s, self.comm_s = compute_s, comm_s
        self.collective_bytes, self.io_bytes = collective_bytes, io_bytes
        self.peak_bytes, self.peak_at = 0, None

    @property
    def total_s(self):
        return self.compute_s + self.comm_s

    def __repr__(self):
        return (f"Prediction({self.total_s * 1e3:.4f} ms: compute {self.compute_s * 1e3:.4f}"
                f" ms, communication {self.comm_s * 1e3:.4f} ms, "
                f"{self.collective_bytes} B collectives; inputs+outputs {self.io_bytes} B, "
                f"peak {self.peak_bytes} B)")


class Alternative:
    """For an auto input: its sharding and what its class costs with it, against the
    best other sharding with every other choice kept (`next_*`: None if it has none)."""
    __slots__ = ("sharding", "cost_s", "next_sharding", "next_cost_s", "bytes", "next_bytes")

    def __init__(self, sharding, cost_s, next_sharding, next_cost_s, nbytes, next_bytes):
        self.sharding, self.cost_s = sharding, cost_s
        self.next_sharding, self.next_cost_s = next_sharding, next_cost_s
        self.bytes, self.next_bytes = nbytes, next_bytes

    def __repr__(self):
        return (f"Alternative({self.sharding} {self.cost_s:.3g} s, next {self.next_sharding}"
                f" {self.next_cost_s if self.next_cost_s is None else f'{self.next_cost_s:.3g}'}"
                " s)")


class Solution:
    """The solver's choice. `input_shardings`: {input index: Sharding} of the auto
    inputs; `constraints`: [(value, Sharding)] for the results of the chosen ops;
    `dims`: {id(value): dims} of every value the graph has (loop bodies' too);
    `predicted`: a Prediction; `alternatives`: {input index: Alternative}; `solve_s`, `variables`,
    `constraint_rows`, `groups`, `classes`: the problem's size and time; `objective`
    (seconds) and `bound`, the LP relaxation's, below the optimum."""

    def __init__(self):
        self.input_shardings, self.constraints, self.dims = {}, [], {}
        self.alternatives = {}
        self.predicted = Prediction()
        self.solve_s = 0.0
        self.variables = self.constraint_rows = self.groups = self.classes = 0
        self.objective = self.bound = 0.0
        self.times = {}
        self.choice = []     # per class of the problem, its choice
        # searched region ops: [(block argument, Sharding)], and {(id(op), "operand" or
        # "yield", id(value)): {Sharding}} what each takes in (Solution.apply)
        self.pins, self.reshards = [], {}
        # {auto input index: its class}: inputs chosen alike (a layer's repeats) share
        # one class, whose Alternative costs are summed over them (explain says so)
        self.input_classes = {}

    # set by the API (shardc.jit(..., memory_budget=)) for explain and shardc report: the
    # budget solved under (bytes per device) and the Hardware solved for (None: CPU)
    memory_budget = None
    hw = None

    def apply(self, program):
        """Write the choice into `program` (the one solved): auto inputs' shardings, a
        sharding_constraint after every chosen op's result, marked `auto=True` (explain
        names the search as their origin; they lower as any constraint), in loop bodies
        too; a searched region op's block arguments take their sharding as a source,
        and its operands and yielded values are constrained to what it needs where
        they enter. Returns `program`."""
        for i, s in self.input_shardings.items():
            program.inputs[i].sharding = s
        after = {}
        sources = program.meta.get("sources", {})
        # results of source ops (constraints themselves) keep what they were given
        made = {id(o) for op in program.walk() if op.prim.source_of for o in op.outputs}
        for v, s in self.constraints:
            after[id(v)] = s
            if v.sharding is not None and sources.get(v) is not None and \
                    sources[v].kind == "constraint" and id(v) not in made:
                # solve's prepare took a user constraint after `v` as v's own sharding;
                # the chosen one comes between them now, and prepare again decides
                v.sharding = None
                del sources[v]
        pins = {id(v): s for v, s in self.pins}
        # one sharding per (op, operand or yielded value); several: left to propagation
        into = {k: next(iter(ss)) for k, ss in self.reshards.items() if len(ss) == 1}
        _Writer(after, pins, into, sources).block(program)
        return program


def _constraint(v, s, loc):
    wsc = PRIMITIVES["sharding_constraint"]
    c = Value(v.aval, s)
    return Op(wsc, [v], [c], {"sharding": s, "auto": True}, loc), c


class _Writer:
    """Solution.apply's walk over a program and its bodies: `after` {id(value):
    sharding} constrains a result after its op, `pins` a block argument, `into`
    {(id(region op), "operand" or "yield", id(value)): sharding} a value where a
    region op takes it or its body yields it."""

    def __init__(self, after, pins, into, sources):
        self.after, self.pins, self.into, self.sources = after, pins, into, sources
        self.renamed = {}

    def _name(self, v):
        return self.renamed.get(id(v), v) if type(v) is not Lit else v

    def block(self, p, owner=None):
        from ..propagate.engine import Source
        from ..propagate.explain import SEARCH
        ops = []
        for v in p.inputs if owner is not None else ():
            s = self.pins.get(id(v))
            if s is not None:
                v.sharding = s
                self.sources[v] = Source("constraint", SEARCH, owner.loc)
                # and constrained where the body starts: the lowered loop's state is
                # XLA's to shard (its block arguments carry none), and a use sharded
                # otherwise (a ys slice written) would pull it there
                c_op, self.renamed[id(v)] = _constraint(v, s, owner.loc)
                ops.append(c_op)
        for op in p.ops:
            given = list(op.inputs)     # `into` names them as solved, before renaming
            op.inputs = [self._name(v) for v in op.inputs]
            if op.regions:
                pinned = {}
                for j, (g, v) in enumerate(zip(given, op.inputs)):
                    s = self.into.get((id(op), "operand", id(g)))
                    if s is None:
                        continue
                    if id(v) not in pinned:
                        c_op, pinned[id(v)] = _constraint(v, s, op.loc)
                        ops.append(c_op)
                    op.inputs[j] = pinned[id(v)]
                for r in op.regions:
                    self.block(r, op)
            ops.append(op)
            for v in op.outputs:
                s = self.after.get(id(v))
                if s is not None:
                    c_op, self.renamed[id(v)] = _constraint(v, s, op.loc)
                    ops.append(c_op)
        given = list(p.outputs)
        outs = [self._name(v) for v in p.outputs]
        if owner is not None:       # what the body yields, as the loop carries it
            pinned = {}
            for k, (g, v) in enumerate(zip(given, outs)):
                s = self.into.get((id(owner), "yield", id(g)))
                if s is None or type(v) is Lit:
                    continue
                if id(v) not in pinned:
                    c_op, pinned[id(v)] = _constraint(v, s, owner.loc)
                    ops.append(c_op)
                outs[k] = pinned[id(v)]
        p.ops, p.outputs = ops, outs
