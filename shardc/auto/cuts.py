"""The memory cuts of the sharding search (solve.py's `memory_budget`): while a
choice's modelled peak is over the budget, a linear constraint on what is live where
it peaks, each buffer by the choice of the class that decides its size (a reshard by
the joint choice of the value's class and its reader's where their edge has joint
variables), the rest taken as at that choice: exact there, an estimate elsewhere (a
weaker bound first, see `cut`)."""
from __future__ import annotations

import numpy as np

from .costmodel import dims as to_dims
from .graph import _bytes
from .memory import _OWN_BUFFERS, _ends, fused_reads
from .strategies import key
from ..ir.program import Lit
from ..propagate.factors import cached_rule


def cut(ilp, sol, budget, memory=None) -> bool:
    """Constrain the bytes live where `sol` peaks (memory model; `memory`: its
    breakdown of `sol`, for where in a loop's body it peaks): the inputs and
    outputs, the values defined before that op and read at or after it, each as
    its class's choice shards it, and the parameters gathered for a reader at or
    after it (the shared reshards); if the op's body peaks inside (the model adds a
    loop body's peak on top of what is live at the loop), the body's values live
    there and its block arguments resharded for readers there or after, likewise;
    what the model counts beyond those (other operands resharded for an op, partial
    sums) is taken as it is at `sol`."""
    at = sol.predicted.peak_at
    ops = ilp.g.program.ops
    if at is None or at not in ops:
        return False
    i = ops.index(at)
    live = [np.zeros(len(c)) for c in ilp.cost]
    now, last = _values(ilp, ilp.g.program, i, sol, live)
    # parameters gathered for their readers (from the start, XLA's schedule, until
    # their last reader): by the shared reshards' y[S, T]
    gathered, pick, seen = {}, sol.choice, set()
    mesh = ilp.g.mesh
    for k, sh in ilp.shared.items():
        vals = {id(e.value): e.value for e in sh.edges if last.get(id(e.value), -1) >= i}
        if not vals:
            continue
        v = next(iter(vals.values()))
        gathered[k] = [len(vals) * _bytes(v, t, mesh) for t in sh.ts]
        for e in sh.edges:
            if id(e.value) not in vals:
                continue
            src = e.src.values[id(e.value)][pick[ilp.cls[id(e.src)]]]
            dst = e.targets[pick[ilp.cls[id(e.dst)]]]
            if ilp.g.reshard(e.value.aval, src, dst)[1] and \
                    (id(e.value), key(dst)) not in seen:
                seen.add((id(e.value), key(dst)))
                now += _bytes(e.value, dst, mesh)
    acc = {}
    now += _at_peak(ilp, at, sol, live, acc)
    _into_loop(ilp, at, sol, acc)
    parent = at
    for body, op in (memory.inside if memory is not None else ()):
        # a body's peak, on top: its values live there, its block arguments
        # resharded for readers there or after (gathered at its start), the op's
        # operands resharded and its partial sums
        skip = _ends(body) if not parent.prim.traits & _OWN_BUFFERS else set()
        j = next((k for k, o in enumerate(body.ops) if o is op), None)
        if j is None:
            break
        now += _values(ilp, body, j, sol, live, skip)[0]
        args = {id(v) for v in body.inputs} - skip
        for o in body.ops[j + 1:]:
            _resharded(ilp, o, sol, acc, args)
        now += _at_peak(ilp, op, sol, live, acc)
        parent = op
    joint = {}
    for k, extra in acc.items():
        if k[0] == "joint":     # by the joint choice of the value's and its reader's
            a, b = k[2][0], k[2][1]
            joint[k[2]] = joint[k[2]] + extra if k[2] in joint else extra
            now += int(extra[sol.choice[a], sol.choice[b]])
        else:
            live[k[1]] = live[k[1]] + extra
            now += int(extra[sol.choice[k[1]]])
    # what the model counts beyond these (temporaries in the outputs' buffers, an
    # elementwise op over its dying operand) is taken as at `sol`: exact there, but a
    # choice whose larger outputs hold more temporaries is cut off though it fits.
    # First a weaker cut, which keeps more of those: the outputs not yet written hold
    # temporaries up to their size, the rest as at `sol` only where it lowers the
    # bound; the exact one if that no longer cuts `sol` off
    per, const = _unwritten(ilp, i)
    free = const + sum(f[sol.choice[c]] for c, f in per.items())
    rest = sol.predicted.peak_bytes - sol.predicted.io_bytes - now
    weak = min(rest + free, 0)
    if sol.predicted.io_bytes + now - free + weak > budget:
        for c, f in per.items():
            live[c] = live[c] - f
        ilp.cuts.append((live, budget - weak + const, gathered, joint))
    else:
        ilp.cuts.append((live, budget - rest, gathered, joint))   # exact at `sol`
    return True


def _unwritten(ilp, i):
    """The program's outputs not yet written at its op i (not an input), whose
    buffers may hold temporaries there: ({class: bytes per choice}, bytes of those
    whose sharding is fixed)."""
    g = ilp.g
    p = g.program
    done = {id(v) for v in p.inputs} | {id(v) for op in p.ops[:i + 1] for v in op.outputs}
    per, const = {}, 0
    for v, s in zip(p.outputs, p.out_shardings):
        if type(v) is Lit or id(v) in done:
            continue
        grp = g.where.get(id(v))
        if s is not None:
            const += _bytes(v, to_dims(s.closed(), v.aval.ndim, g.mesh), g.mesh)
            continue
        if grp is None:
            continue
        c = ilp.cls[id(grp)]
        nb = np.array([_bytes(v, d, g.mesh) for d in grp.values[id(v)]], dtype=float)
        per[c] = per[c] + nb if c in per else nb
    return per, int(const)


def _values(ilp, p, i, sol, live, skip=()):
    """The values of `p` (the program or a body) holding a buffer at its op i (the
    memory model's: values fused into their readers hold none, and those they read
    live until those readers; a body's block arguments from its start, what it
    yields until its end), each by its class's choice, added to `live`; returns
    (their bytes at `sol`, each value's last reader). The program's inputs and
    outputs are not counted (they are in every cut)."""
    g = ilp.g
    fused, reads = fused_reads(p, [cached_rule(op, g.rules) for op in p.ops], skip)
    last = {}
    for j, vs in enumerate(reads):
        for v in vs:
            last[id(v)] = j
    top = p is g.program
    for v in p.outputs:
        if type(v) is not Lit:
            if top:
                last.pop(id(v), None)      # outputs are counted with the inputs
            else:
                last[id(v)] = len(p.ops)
    vals = [] if top else [v for v in p.inputs if id(v) not in skip]
    vals += [v for op in p.ops[:i + 1] for v in op.outputs]
    now = 0
    for v in vals:
        if last.get(id(v), -1) < i or id(v) not in g.where or id(v) in fused or \
                id(v) in skip:
            continue
        grp = g.where[id(v)]
        c = ilp.cls[id(grp)]
        nb = np.array([_bytes(v, d, g.mesh) for d in grp.values[id(v)]])
        live[c] = live[c] + nb
        now += nb[sol.choice[c]]
    return int(now), last

def _at_peak(ilp, at, sol, live, acc) -> int:
    """The op where `sol` peaks holds its operands resharded for it (into `acc`,
    see _resharded) and its partial sums: by its class's choice, added to `live`;
    returns the partial sums' bytes at `sol`."""
    _resharded(ilp, at, sol, acc)
    grp = ilp.g.where.get(id(at.outputs[0])) if at.outputs else None
    ss = None if grp is None or grp.n < 2 else \
        next((ss for op, ss in grp.members if op is at), None)
    if ss is None:
        return 0
    c = ilp.cls[id(grp)]
    extra = np.zeros(grp.n)
    for t, st in enumerate(ss):
        if st.comm_bytes:        # a sharded reduction: its partial sums
            extra[t] += sum(_bytes(v, d, ilp.g.mesh) for v, d in zip(at.outputs, st.outs))
    live[c] = live[c] + extra
    return int(extra[sol.choice[c]])

def _into_loop(ilp, op, sol, acc):
    """A loop's operands resharded for the block arguments they enter as (a buffer
    each, live through the loop: memory._resharded_operands), per choice of the
    argument's class, the value's as at `sol`, into `acc` as _resharded's.
    Parameters gathered are the y's."""
    g, mesh = ilp.g, ilp.g.mesh
    for e in g.edges:
        if type(e.operand) is not tuple or e.operand[0] != "operand" or \
                e.dst.boundary is None or e.dst.boundary[0] is not op or e.dst.n < 2 or \
                (e.src.inputs and e.src.n > 1):
            continue
        a, c = ilp.cls[id(e.src)], ilp.cls[id(e.dst)]
        src = e.src.values[id(e.value)][sol.choice[a]]
        extra = np.array([_bytes(e.value, t, mesh) if g.reshard(e.value.aval, src, t)[1]
                          else 0 for t in e.targets], dtype=float)
        k = (id(e.value), c)
        acc[k] = np.maximum(acc[k], extra) if k in acc else extra


def _resharded(ilp, op, sol, acc, only=None):
    """op's operands (those in `only`, if given) resharded for it by a collective:
    per joint choice of the value's class and op's where the edge has joint
    variables (acc[("joint", id(value), its key in `full`)]), else per choice of
    op's class, the value's as at `sol` (acc[(id(value), class)]); the largest over
    a class's readers (one buffer per value and target). Parameters gathered are
    the y's."""
    g, mesh = ilp.g, ilp.g.mesh
    if ilp._edge_of is None:
        ilp._edge_of = {(id(e.value), id(e.dst), e.operand): e for e in g.edges}
    grp = g.where.get(id(op.outputs[0])) if op.outputs else None
    if grp is None or grp.n < 2:
        return
    c = ilp.cls[id(grp)]
    ss = next((ss for o, ss in grp.members if o is op), None)
    if ss is None:
        return
    for j, v in enumerate(op.inputs):
        if type(v) is Lit or (only is not None and id(v) not in only):
            continue
        src_grp = g.where.get(id(v))
        if src_grp is None or src_grp is grp or (src_grp.inputs and src_grp.n > 1):
            continue
        e = ilp._edge_of.get((id(v), id(grp), j))
        a = ilp.cls[id(src_grp)]
        tag = None if e is None or a == c else \
            (a, c, id(g.matrix(e))) if a < c else (c, a, id(g.matrix(e)))
        if tag in ilp.full:
            srcs = src_grp.values[id(v)]
            m = np.array([[_bytes(v, t, mesh) if g.reshard(v.aval, s, t)[1] else 0
                           for t in e.targets] for s in srcs], dtype=float)
            m = m if a < c else m.T
            k = ("joint", id(v), tag)
            acc[k] = np.maximum(acc[k], m) if k in acc else m
            continue
        src = src_grp.values[id(v)][sol.choice[a]]
        extra = np.zeros(grp.n)
        for t, st in enumerate(ss):
            if st.ins[j] is not None and g.reshard(v.aval, src, st.ins[j])[1]:
                extra[t] = _bytes(v, st.ins[j], mesh)
        k = (id(v), c)
        acc[k] = np.maximum(acc[k], extra) if k in acc else extra
