"""The sharding search: an integer linear program over per-op strategies (Alpa, OSDI'22),
solved by HiGHS through scipy.optimize.milp.

Variables: x[c, s] (binary) picks strategy s for every group of class c (graph.py:
groups are ops with their followers, classes are the repeats of one group across
layers); e[a, b, s, t] (continuous, the transportation polytope between two one-hot
rows, hence 0/1 at a solution) for classes joined by an edge whose reshard cost
depends on both choices, with sum_t e = x[a, s] and sum_s e = x[b, t] (choices alike
towards the edge share their rows). Edge costs that depend on one side only (a fixed
producer, a class's edges to itself, a sum of one term per side) are that side's.
Sharding groups (a gradient tied to its parameter) are equalities between choices.

Objective: the seconds of communication per step on `hw` (every op's own collectives,
the reshards on the edges, each at its axes' bandwidth and latency), the same for
every program. Compute is not in it: a contraction (a dot, a convolution; strategies.
heavy) may only take the strategies that split its work over the most devices, so
its time is the same under all of them, and the rest (elementwise ops, reductions,
reshapes) is memory-bound work over values a reshard would move anyway (Alpa, OSDI'22,
section 4.2). Counting it traded collectives for a little less replicated elementwise
work: more bytes over the links for a model of CPU time the step does not show. The
bytes each choice holds and makes (its inputs, outputs and results) break ties, at
1 ns per MB, so among choices alike in communication the one using less memory wins;
memory itself is a constraint (`memory_budget`), not a price. A parameter read by
several ops is resharded once per target (XLA's CSE): its readers' joint choices
bound y[S, T], "the value, with dims S, is resharded to T", which carries the cost;
other values pay one reshard per reader (their joint variables would cost the LP more
time than the bias they remove). The LP relaxation is solved first and the MIP among
the choices it weighs.

`memory_budget` bounds the peak bytes per device (memory.py's model of the choice):
the inputs and outputs as sharded always, and while the choice's peak is over budget,
the buffers live where it peaks (the values the memory model keeps, the gathered
parameters by their y, the peak op's resharded operands and partial sums by its
choice; at a loop, once those live across it no longer lower its peak, the body's at
the body's peak too: cuts.py), the rest there taken as at that choice (re-solved, a
few times). A budget
below what the inputs and outputs need sharded as far as they go, or below every
peak found, is an error naming that amount.

`Solution.apply(program)` realizes the choice: the auto inputs' shardings, and a
sharding_constraint on every result the choice decided, so shardc's propagation
reproduces it (and fills in what it did not decide: region bodies, fixed ops).
"""
from __future__ import annotations

import functools
import time


from .costmodel import CPU
from .graph import Graph
from .ilp import Ilp
from .memory import memory_breakdown
from .solution import Alternative, Prediction, Solution
from .strategies import key
from ..errors import ShardcError
from ..ir.program import Lit
from ..propagate import axes as ax
from ..propagate import passes


def solve(program, auto=(), hw=CPU, memory_budget=None, rounds=3,
          time_limit=120.0, gap=5e-4, exact=False, cuts=6, agree=None) -> Solution:
    """Choose shardings for `program` (traced, not yet propagated: it is prepared here,
    in place) whose inputs at indices `auto` are free; every other input keeps its
    sharding. `rounds`: layer clustering's refinement rounds (0: none); `gap`: the
    relative optimality gap HiGHS may stop at; `time_limit`: seconds it may take (it
    then returns the best choice found); `exact`: the MIP over every choice, not only
    those the LP relaxation weighs (slower: 10 s rather than 1 on a 12-layer GPT);
    `cuts`: how many times the budget is re-imposed on the values live at the peak;
    `agree(choice)`: the choice (per class) to take instead of this one (the processes
    of a multi-process program take one process's: api/autojit.py)."""
    t0 = time.perf_counter()
    passes.prepare(program)
    g = Graph(program, set(auto), hw)
    classes = g.classes(rounds)
    ilp = Ilp(g, classes)
    ilp.times["graph"] = time.perf_counter() - t0
    if memory_budget is not None:
        need = ilp.min_memory()
        if need > memory_budget:
            raise ShardcError(
                f"no sharding of the program fits memory_budget={int(memory_budget)} B per "
                f"device: its inputs and outputs alone need at least {int(need)} B per "
                f"device (sharded as far as they go); raise memory_budget to at least "
                f"{int(need)}")
    fit = functools.partial(_fit, g, classes, time_limit=time_limit, gap=gap, exact=exact,
                            cuts=cuts)
    sol, best = fit(ilp, memory_budget)
    if agree is not None:
        theirs = agree(list(map(int, sol.choice)))
        if len(theirs) != len(classes):
            raise ShardcError("the processes traced different programs: their sharding "
                              "searches have different sizes; every process must trace "
                              "the same program (shapes, dtypes, shardings, constants)")
        if theirs != list(sol.choice):
            sol = _decode(g, classes, ilp, theirs)
    if memory_budget is not None and sol.predicted.peak_bytes > memory_budget:
        least = _least_budget(fit, classes, g, memory_budget, best.predicted.peak_bytes)
        raise ShardcError(
            f"no sharding found fits memory_budget={int(memory_budget)} B per device at "
            f"its peak: the inputs and outputs need at least {int(need)} B, and the "
            f"smallest budget the search fits is {least} B per device; raise "
            f"memory_budget to at least {least}")
    sol.solve_s = time.perf_counter() - t0
    sol.times = ilp.times
    return sol


def _fit(g, classes, ilp, memory_budget, *, time_limit, gap, exact, cuts):
    """(the choice, the least-peak choice seen) under `memory_budget` (or none)."""
    chosen = ilp.solve(memory_budget, time_limit, gap, exact)
    sol = _decode(g, classes, ilp, chosen)
    best, cut_at = sol, {}
    for _ in range(cuts if memory_budget is not None else 0):
        # the budget holds the peak of what is live at once: while the choice's peak
        # (the memory model's) is over it, constrain what is live where it peaks; at a
        # loop, the values live across it, and once that no longer lowers the peak
        # there, its body's values at the body's peak too (each cut is exact only at
        # the choice it is made at: the weaker one first, the stronger may cut off
        # cheaper choices that fit)
        at, peak = sol.predicted.peak_at, sol.predicted.peak_bytes
        if peak <= memory_budget:
            break
        deep = peak >= cut_at.get(id(at), float("inf"))
        if not ilp.cut(sol, memory_budget, _assumed_memory(g, sol) if deep else None):
            break
        cut_at[id(at)] = peak
        try:
            chosen = ilp.solve(memory_budget, time_limit, gap, exact)
        except ShardcError:
            break
        sol = _decode(g, classes, ilp, chosen)
        best = min(best, sol, key=lambda s: s.predicted.peak_bytes)
    return sol, best


def _least_budget(fit, classes, g, failed, found, probes=6):
    """The smallest budget the search fits, bisected between one it failed (`failed`)
    and the peak of a choice it found (`found`): each probe a search of its own, and the
    answer a budget a search under it fitted (its cuts lead the search to its own
    choices, so the peak first found need not be the least, nor every budget above a
    fitting one fit)."""
    def fits(budget):
        try:
            sol, _ = fit(Ilp(g, classes), budget)
        except ShardcError:
            return False
        return sol.predicted.peak_bytes <= budget
    lo, hi = int(failed), int(found)
    for _ in range(4):          # a budget that fits: doubling the gap until one does
        if fits(hi):
            break
        lo, hi = hi, hi + max(hi - lo, 1) * 2
    for _ in range(probes):
        if hi - lo <= max(1, hi // 100):
            break
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return hi


def factorizations(n, k) -> list:
    """Every way to write `n` as an ordered product of `k` positive factors."""
    if k == 1:
        return [(n,)]
    return [(d,) + rest for d in range(1, n + 1) if n % d == 0
            for rest in factorizations(n // d, k - 1)]


def solve_mesh(build, n_devices, axis_names, **kw):
    """The mesh shape too: `build(shape)` gives (traced program, auto input indices) on
    a mesh of `shape` (a size per name of `axis_names`); every factorization of
    `n_devices` is solved (keywords as `solve`'s). Returns (best shape, its Solution,
    {shape: Solution, or the ShardcError that shape met})."""
    tried = {}
    for shape in factorizations(n_devices, len(axis_names)):
        program, auto = build(shape)
        try:
            tried[shape] = solve(program, auto, **kw)
        except ShardcError as e:
            tried[shape] = e
    ok = {k: v for k, v in tried.items() if isinstance(v, Solution)}
    if not ok:
        raise ShardcError(f"no mesh shape of {n_devices} devices over {tuple(axis_names)} "
                          "admits a sharding: " + "; ".join(
                              f"{k}: {v}" for k, v in tried.items()))
    best = min(ok, key=lambda k: ok[k].objective)
    return best, ok[best], tried


def _decode(g, classes, ilp, chosen) -> Solution:
    mesh = g.mesh
    sol = Solution()
    sol.groups, sol.classes = len(g.groups), len(classes)
    sol.variables, sol.constraint_rows = ilp.variables, ilp.rows
    sol.objective, sol.bound = ilp.objective, ilp.bound
    sol.choice = chosen
    pick = {}
    for c, members in enumerate(classes):
        for grp in members:
            pick[id(grp)] = chosen[c]
    pred = sol.predicted
    for grp in g.groups:
        s = pick[id(grp)]
        pred.io_bytes += int(grp.mem[s])
        for vid, ds in grp.values.items():
            sol.dims[vid] = ds[s]
        if grp.boundary is not None and grp.n > 1:
            for v in grp.boundary[1]:        # block arguments and the op's results
                sh = ax.sharding_of(grp.values[id(v)][s], mesh)
                if v in grp.boundary[0].outputs:
                    sol.constraints.append((v, sh))
                else:
                    sol.pins.append((v, sh))
        for op, ss in grp.members:
            st = ss[s]
            runs = g.runs.get(id(op), 1)
            pred.compute_s += st.compute_s * runs
            pred.comm_s += st.comm_s * runs
            pred.collective_bytes += st.comm_bytes * runs
            if len(ss) > 1:
                # every result the choice decided, followers' too: propagation would
                # otherwise merge a follower's other operands and users into it
                for v, d in zip(op.outputs, st.outs):
                    if v.aval.ndim:
                        sol.constraints.append((v, ax.sharding_of(d, mesh)))
        for i, v in grp.inputs:
            if grp.auto:
                sol.input_shardings[i] = ax.sharding_of(grp.values[id(v)][s], mesh)
    done = set()
    for e in g.edges:      # a value resharded one way once, however many ops read it
        src = e.src.values[id(e.value)][pick[id(e.src)]]
        dst = e.targets[pick[id(e.dst)]]
        if type(e.operand) is tuple and e.dst.n > 1:
            # into a loop (or out of its body): pinned (resharded) where it enters
            sol.reshards.setdefault((id(e.dst.boundary[0]), e.operand[0], id(e.value)),
                                    set()).add(ax.sharding_of(dst, mesh))
        if (id(e.value), key(dst)) in done:
            continue
        done.add((id(e.value), key(dst)))
        secs, nbytes = g.reshard(e.value.aval, src, dst)
        pred.comm_s += secs * e.runs
        pred.collective_bytes += nbytes * e.runs
    for v, s in zip(g.program.outputs, g.program.out_shardings):
        if s is not None and type(v) is not Lit and id(v) in sol.dims:
            secs, nbytes = g.reshard(v.aval, sol.dims[id(v)],
                                     ax.dims_of(s, v.aval.ndim, mesh))
            pred.comm_s += secs
            pred.collective_bytes += nbytes
    m = _assumed_memory(g, sol)
    pred.peak_bytes, pred.peak_at = m.peak, m.at
    for c, members in enumerate(classes):
        for grp in members:
            if not grp.auto:
                continue
            local = ilp.local_cost(c, chosen)
            s = chosen[c]
            others = [t for t in range(grp.n) if t != s]
            t = min(others, key=lambda t: local[t]) if others else None
            for i, v in grp.inputs:
                ds = grp.values[id(v)]
                sol.alternatives[i] = _alt(ds, s, t, local, v, mesh)
                sol.input_classes[i] = c      # its costs are its class's, summed
    return sol


def _assumed_memory(g, sol):
    """The memory model's breakdown of the program with its top-level values sharded as
    `sol` chose (set for the count, then unset)."""
    p, saved = g.program, []
    for v in list(p.inputs) + [v for op in p.walk() for v in
                               list(op.outputs) + [a for r in op.regions for a in r.inputs]]:
        d = sol.dims.get(id(v))
        if d is not None:
            saved.append((v, v.sharding))
            v.sharding = ax.sharding_of(d, g.mesh)
    try:
        return memory_breakdown(p, g.hw)
    finally:
        for v, s in saved:
            v.sharding = s


def _alt(ds, s, t, local, v, mesh):
    from .costmodel import local_bytes
    return Alternative(ax.sharding_of(ds[s], mesh), float(local[s]),
                       None if t is None else ax.sharding_of(ds[t], mesh),
                       None if t is None else float(local[t]),
                       local_bytes(v.aval, ds[s], mesh),
                       None if t is None else local_bytes(v.aval, ds[t], mesh))


__all__ = ["solve", "Solution", "Prediction", "Alternative", "key"]
