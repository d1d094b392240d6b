"""Per-op sharding strategies for the solver (Alpa's), read off shardc's factor rules.

A strategy of an op on a mesh gives every mesh axis to at most one of the op's factors
(several axes on one factor in mesh order, their product dividing the factor's size);
its operand and result dims follow from the rule (`_unproject`), and its own cost is
costmodel.op_cost under those dims: compute plus the all-reduce of sharded reduction
factors, the communication *inside* the op. A heavy op (a contraction) keeps only the
strategies that split its work the most (`heavy`). Strategies with the same dims are one (the
cheapest kept). Ops the solver may not choose for (no rule, regions, fixed shardings)
have one strategy: what they are fixed to, or replicated.

Dims are lists (per dim) of lists of axis refs, as costmodel takes them; `key(dims)`
is their hashable form.
"""
from __future__ import annotations

import itertools

from .costmodel import CPU, _factors_of, _unproj, dims as to_dims, op_cost
from ..ir.primitive import Trait
from ..ir.program import Lit
from ..ir.rules import PASS, REDUCTION, Edge
from ..propagate.factors import cached_rule


class Strategy:
    """`ins`: per operand its dims (None for a literal); `outs`: per result; `cost`:
    seconds per device (op_cost's total); `comm_s`, `comm_bytes`: its collectives;
    `flops`: its work per device."""
    __slots__ = ("ins", "outs", "cost", "comm_s", "comm_bytes", "compute_s", "flops")

    def __init__(self, ins, outs, cost=0.0, comm_s=0.0, comm_bytes=0, compute_s=0.0,
                 flops=0.0):
        self.ins, self.outs = ins, outs
        self.cost, self.comm_s, self.comm_bytes, self.compute_s = (
            cost, comm_s, comm_bytes, compute_s)
        self.flops = flops

    def __repr__(self):
        return f"Strategy({self.ins} -> {self.outs}, {self.cost:.3g} s)"


def key(d):
    return None if d is None else tuple(tuple(x) for x in d)


def _replicated(v):
    return None if type(v) is Lit else [[] for _ in v.aval.shape]


def _axes(mesh):
    return [(n, 1, s) for n, s in mesh.axes if s > 1]


def dims_choices(shape, mesh) -> list:
    """Every sharding of a value of `shape`: each mesh axis on at most one dim (several
    on one dim in mesh order), dividing it evenly."""
    axes = _axes(mesh)
    out = []
    for pick in itertools.product(range(len(shape) + 1), repeat=len(axes)):
        d = [[] for _ in shape]
        for a, where in zip(axes, pick):
            if where < len(shape):
                d[where].append(a)
        if all(n % _size(x) == 0 for n, x in zip(shape, d)):
            out.append(d)
    return out


def _size(refs):
    n = 1
    for r in refs:
        n *= r[2]
    return n


def _cost(op, ins, outs, mesh, hw, rules, cache):
    k = (op.sig, tuple(map(key, ins)), tuple(map(key, outs))) if op.sig is not None else None
    if k is not None:
        hit = cache.get(k)
        if hit is not None:
            return hit
    c = op_cost(op, ins, outs, mesh, hw, rules=rules)
    s = Strategy(ins, outs, c.total_s, c.comm_s, c.comm_bytes, c.compute_s, c.flops)
    if k is not None:
        cache[k] = s
    return s


def op_strategies(op, mesh, hw=CPU, rules=None, cache=None) -> list:
    """The op's strategies (see the module docstring), cheapest first among equals."""
    rules = {} if rules is None else rules
    cache = {} if cache is None else cache
    rule = cached_rule(op, rules)
    sizes, kinds = rule.sizes, rule.kinds
    free = [f for f, n in enumerate(sizes)
            if n > 1 and kinds[f] in (PASS, REDUCTION) and not rule.blocked[f]]
    best = {}
    for pick in itertools.product([None] + free, repeat=len(_axes(mesh))):
        fac = {}
        for a, f in zip(_axes(mesh), pick):
            if f is not None:
                fac.setdefault(f, []).append(a)
        if any(sizes[f] % _size(a) for f, a in fac.items()):
            continue
        ins = [None if type(v) is Lit else _unproj(m, fac, sizes)
               for v, m in zip(op.inputs, rule.operands)]
        outs = [_unproj(m, fac, sizes) for m in rule.results]
        k = (tuple(map(key, ins)), tuple(map(key, outs)))
        if k in best:
            continue
        best[k] = _cost(op, ins, outs, mesh, hw, rules, cache)
    out = list(best.values())
    if heavy(op, rule):     # its work split over as many devices as it can be
        least = min(s.flops for s in out)
        out = [s for s in out if s.flops <= least * (1 + 1e-9)]
    return out


def heavy(op, rule) -> bool:
    """A contraction (a dot, a convolution: a reduction factor over two or more
    tensors), whose work dwarfs an elementwise op's: the solver splits it over as many
    devices as its factors allow (Alpa, OSDI'22, section 4.2), never replicates it."""
    return REDUCTION in rule.kinds and sum(1 for m in rule.operands if m) > 1


def inline(op) -> bool:
    """A region op whose body runs once in place (custom_vjp_call, custom_jvp_call,
    checkpoint) with every array operand and result of one shape (relu, gelu): it is
    taken as elementwise, its body's shardings left to propagation."""
    if not op.regions or op.prim.traits & (Trait.LOOP | Trait.BRANCHES) or \
            op.prim.operand_constraints is not None \
            or op.prim.source_of is not None:
        return False
    shapes = {v.aval.shape for v in list(op.inputs) + list(op.outputs)
              if type(v) is not Lit and v.aval.ndim}
    # (an array result among them: scalars alone give the body nothing to shard alike)
    return len(shapes) == 1 and any(type(v) is not Lit and v.aval.ndim
                                    for v in op.outputs) and \
        all(type(v) is Lit or v.aval.ndim == 0 or v.aval.shape in shapes
            for v in op.outputs)


def searched_region(op) -> bool:
    """A region op whose bodies the solver searches (graph.py): a loop, a cond, a body
    not inlined, whose data-flow edges tie its operands, block arguments and results
    over every mesh axis (not shard_map's manual ones), with no fixed shardings."""
    if not op.regions or inline(op) or op.prim.data_flow is None or \
            op.prim.source_of is not None or op.prim.operand_constraints is not None or \
            any(v.aval.ts is not None and any(v.aval.ts.dims) for v in op.outputs):
        return False
    return all(not e.manual and e.spec is None for e in op.prim.data_flow(op)
               if type(e) is Edge)


def is_fixed(op) -> bool:
    """Ops the solver takes as they are: sources (sharding constraints, shard_map's
    results), loops and other regions, explicit-mode types."""
    return (op.prim.source_of is not None or (bool(op.regions) and not inline(op))
            or op.prim.operand_constraints is not None
            or any(v.aval.ts is not None and any(v.aval.ts.dims) for v in op.outputs))


def _as_elementwise(op, d) -> Strategy:
    """An inline region op with every array at dims `d` (scalars whole)."""
    def at(v):
        return None if type(v) is Lit else d if v.aval.ndim else []
    return Strategy([at(v) for v in op.inputs], [at(v) for v in op.outputs])


def inline_strategies(op, mesh) -> list:
    shape = next(v.aval.shape for v in op.outputs if v.aval.ndim)
    return [_as_elementwise(op, d) for d in dims_choices(shape, mesh)]


def fixed_strategy(op, mesh) -> Strategy:
    """What a fixed op requires: its operand constraints (else replicated operands, or
    an explicit type's sharding) and its results as set (else replicated)."""
    need = {}
    if op.prim.operand_constraints is not None:
        for v, s, _ in op.prim.operand_constraints(op):
            if s is not None and type(v) is not Lit:
                need[id(v)] = to_dims(s.closed(), v.aval.ndim, mesh)
    ins = []
    for v in op.inputs:
        if type(v) is Lit:
            ins.append(None)
        elif id(v) in need:
            ins.append(need[id(v)])
        else:
            ts = v.aval.ts
            ins.append(to_dims(ts, v.aval.ndim, mesh) if ts is not None else _replicated(v))
    outs = []
    for v in op.outputs:
        s = v.sharding if v.sharding is not None else v.aval.ts
        outs.append(to_dims(s.closed() if s is not None else None, v.aval.ndim, mesh))
    return Strategy(ins, outs)


def follows(op, rules, choices=None) -> int | None:
    """The operand an op follows, or None: an op with regions, fixed shardings or a
    reduction is chosen for; a pass-through op (elementwise, convert, copy, broadcast,
    reshape, transpose) takes its sharding from one array operand's producer (of an
    elementwise op's operands, the one whose producer has the most choices, so a
    mask from an iota does not decide), and needs no variables of its own.
    `choices(value)`: how many choices the value's producer has."""
    if inline(op):
        arrays = [k for k, v in enumerate(op.inputs) if type(v) is not Lit and v.aval.ndim]
        return arrays[0] if len(arrays) == 1 else None
    if is_fixed(op) or len(op.outputs) != 1:
        return None
    rule = cached_rule(op, rules)
    if rule is None or any(k != PASS for k in rule.kinds) or any(rule.blocked):
        return None
    arrays = [k for k, v in enumerate(op.inputs) if type(v) is not Lit and v.aval.ndim]
    if len(arrays) == 1:
        return arrays[0]
    if not arrays or not rule.elementwise:
        return None
    n = [choices(op.inputs[k]) if choices else 1 for k in arrays]
    return arrays[n.index(max(n))]


def follow(op, k, d, mesh, hw, rules, cache) -> Strategy:
    """A follower's strategy when operand `k` has dims `d`: the factors take its axes
    (and other operands are needed as they map onto those factors)."""
    if op.regions:
        return _as_elementwise(op, d)
    rule = cached_rule(op, rules)
    fac = _factors_of(rule.operands[k], d, rule.sizes)
    ins = [None if type(v) is Lit else d if i == k else _unproj(m, fac, rule.sizes)
           for i, (v, m) in enumerate(zip(op.inputs, rule.operands))]
    outs = [_unproj(m, fac, rule.sizes) for m in rule.results]
    return _cost(op, ins, outs, mesh, hw, rules, cache)
