"""When each factor of each op may propagate: the schedule of rounds, declared.

Shardy layers its strategies: user priorities (shardc has one) run op priorities,
op priorities run the aggressive merge (merge.py) in rounds of widening scope, and
each round lets a factor propagate in some directions. `ROUNDS` lists those rounds in
order; a factor's directions in a round are the union of its directions in that round
and every round before it, and blocked factors never propagate. The worklist visits
ops in `post_order`, the order XLA's Shardy sees them in.
"""
from __future__ import annotations

from ..ir.program import Lit, Program
from ..ir.rules import PASS

NONE, FORWARD, BACKWARD, BOTH = 0, 1, 2, 3


def _simple_ops(only_single_use):
    """Elementwise and reshape-like ops in both directions, dynamic slices forwards;
    with `only_single_use`, only ops none of whose non-scalar operands has several uses."""
    def step(kind, multi, rule):
        if only_single_use and multi:
            d = NONE
        elif kind in ("elementwise", "reshape"):
            d = BOTH
        elif kind == "dynamic_slice":
            d = FORWARD
        else:
            d = NONE
        return [d] * len(rule.sizes)
    return step


def _pass_factors(kind, multi, rule):
    back = BACKWARD if kind == "broadcast" else BOTH
    return [back if k == PASS else NONE for k in rule.kinds]


def _all_factors(kind, multi, rule):
    return [BACKWARD if kind == "broadcast" else BOTH] * len(rule.sizes)


def _everything(kind, multi, rule):
    return [BOTH] * len(rule.sizes)


# (what the round adds, its step: (op kind, multi-use operand, rule) -> per-factor dirs)
ROUNDS = (
    ("elementwise and reshape ops whose operands have one use", _simple_ops(True)),
    ("elementwise and reshape ops", _simple_ops(False)),
    ("pass-through factors of every op, broadcasts only backwards", _pass_factors),
    ("every factor, broadcasts only backwards", _all_factors),
    ("every factor in both directions", _everything),
)


def directions(kind, multi, rule, intern):
    """Per round, the direction of each factor of an op of this kind and rule
    (`multi`: a non-scalar operand has several uses); `intern` shares equal tuples."""
    out, cur = [], None
    for _, step in ROUNDS:
        dirs = step(kind, multi, rule)
        cur = dirs if cur is None else [a | b for a, b in zip(cur, dirs)]
        out.append(intern(tuple(NONE if b else d for d, b in zip(cur, rule.blocked))))
    return tuple(out)


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
