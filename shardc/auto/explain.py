"""Why the sharding search chose what it did (issue 19): for every AUTO input its
sharding, what that costs against the next best sharding (every other choice kept) and
the bytes each holds per device; then the step the realized program is predicted to
take (the cost model on the program as propagated: compute, collectives by kind and
mesh axis, the lines that cause them) and its peak memory per device, with the memory
budget and the problem's size. `explain()` of an AUTO program ends with this section;
`shardc report` puts `Predicted` beside XLA's compiled numbers."""
from __future__ import annotations

from .costmodel import CPU, program_cost
from .memory import memory_breakdown
from ..propagate import axes as ax
from ..propagate.cost import fmt_bytes
from ..propagate.explain import SEARCH, op_text
_TOP = 8        # the costliest collectives listed by line


class Predicted:
    """The cost model's prediction for a realized (solved, applied, propagated) program,
    per device and call: `step` (costmodel.Breakdown: compute_s, comm_s, total_s,
    collective_bytes), `memory` (memory.Memory: peak, at), `by_kind` {kind: bytes},
    `by_axes` {(kind, axes text): bytes}, `sites` [(op, kind, axes text, bytes)] in
    program order (an op's collectives of one kind over the same axes added up)."""

    def __init__(self, program, hw=CPU):
        mesh = program.mesh
        self.step = program_cost(program, hw)
        self.memory = memory_breakdown(program, hw)
        self.by_kind = self.step.by_kind()
        self.by_axes, sites = {}, {}
        for op, c in self.step.ops + self.step.returns:
            for m in c.comm:
                k = (m.kind, axes_text(m.axes, mesh))
                self.by_axes[k] = self.by_axes.get(k, 0) + m.buffer * c.runs
                s = (id(op), *k)
                if s not in sites:
                    sites[s] = [op, *k, 0]
                sites[s][3] += m.buffer * c.runs
        self.sites = [tuple(s) for s in sites.values()]

    @property
    def collective_bytes(self) -> int:
        return self.step.collective_bytes

    @property
    def peak_bytes(self) -> int:
        return self.memory.peak


def axes_text(refs, mesh) -> str:
    """Mesh axis refs as `{data, model}` (sub-axes as `x:(1)2`)."""
    return "{" + ", ".join(str(ax.from_ref(r, mesh)) for r in refs) + "}"


def fmt_s(s) -> str:
    """Seconds in the unit that reads best: `0 s`, `15.6 us`, `2.31 ms`, `1.2 s`."""
    a = abs(s)
    if a == 0:
        return "0 s"
    if a < 1e-3:
        return f"{s * 1e6:.3g} us"
    if a < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def input_name(program, i) -> str:
    return program.inputs[i].name or f"input {i}"


def explain_auto(program, sol, hw=None) -> str:
    """The "automatic sharding" section for `program` (solved by `sol`, applied and
    propagated): see the module docstring. `hw`: the device the search assumed (the
    Solution's `hw` if it has one, else the simulated CPU)."""
    hw = hw or getattr(sol, "hw", None) or CPU
    n = len(sol.input_shardings)
    lines = [f"automatic sharding: {n} input{'s' * (n != 1)} chosen by {SEARCH}"]
    for i in sorted(sol.input_shardings):
        lines += _input_lines(program, i, sol)
    pred = Predicted(program, hw)
    lines += _step_lines(pred, sol, program.mesh)
    lines += _memory_lines(pred, sol)
    lines.append(
        f"search: {sol.solve_s:.2f} s; {sol.groups} groups of ops in {sol.classes} classes,"
        f" {sol.variables} variables, {sol.constraint_rows} constraints; objective "
        f"{fmt_s(sol.objective)} (LP bound {fmt_s(sol.bound)})")
    lines += _mesh_lines(getattr(sol, "mesh_shapes", None))
    return "".join(f"// {ln}\n" if ln else "//\n" for ln in lines)


def _mesh_lines(shapes):
    """AUTO(axis_names=...): each mesh shape tried, its objective or why it failed."""
    if not shapes:
        return []
    ok = {k: v for k, v in shapes.items() if not isinstance(v, Exception)}
    best = min(ok, key=ok.get)
    out = [f"mesh shape: {_shape(best)} of {len(shapes)} tried"]
    for k, v in shapes.items():
        why = f"objective {fmt_s(v)}" if k in ok else f"not possible: {v}"
        out.append(f"  {_shape(k)}: {why}{' (chosen)' if k == best else ''}")
    return out


def _shape(k):
    return ", ".join(f"{n}={s}" for n, s in k)


def _input_lines(program, i, sol):
    v = program.inputs[i]
    s = sol.input_shardings[i]
    alt = sol.alternatives.get(i)
    head = f"  {input_name(program, i)}: {v.aval} {s}"
    if alt is None:
        return [head]
    alike = _alike(sol, i)
    head += (f": {fmt_bytes(alt.bytes)} per device; {fmt_s(alt.cost_s)} in its reshards "
             "and the ops that follow it" +
             (f", over the {alike} inputs chosen alike (repeated layers)" if alike > 1 else ""))
    if alt.next_sharding is None:
        return [head, "    no other sharding"]
    nxt = (f"    next best {alt.next_sharding}: {fmt_bytes(alt.next_bytes)} per device; "
           f"{fmt_s(alt.next_cost_s)}")
    return [head, nxt + ": " + _why(alt, sol)]


def _alike(sol, i) -> int:
    """How many AUTO inputs share input i's choice (layer clustering: the Alternative's
    costs are their class's, summed over them), if the Solution says (`input_classes`,
    {input index: class}); else 1."""
    classes = getattr(sol, "input_classes", None) or {}
    if i not in classes:
        return 1
    return sum(1 for c in classes.values() if c == classes[i])


def _why(alt, sol) -> str:
    """Why the choice beat the next best: time first, then memory."""
    d = alt.next_cost_s - alt.cost_s
    tol = 1e-9 * max(abs(alt.cost_s), abs(alt.next_cost_s)) + 1e-15
    less = alt.next_bytes - alt.bytes
    if d > tol:
        return f"{fmt_s(d)} slower" + (f" and {fmt_bytes(less)} more per device" if less > 0
                                       else "")
    if d >= -tol:
        if less > 0:
            return f"as fast, chosen for {fmt_bytes(less)} less per device"
        if less < 0:
            return f"as fast and {fmt_bytes(-less)} less per device: a tie the whole " \
                "step's memory broke"
        return "as fast, as large: a tie"
    budget = getattr(sol, "memory_budget", None)
    if less > 0:
        return (f"{fmt_s(-d)} faster but {fmt_bytes(less)} more per device: chosen for "
                "memory" + (f" (memory_budget {fmt_bytes(int(budget))})" if budget else ""))
    return f"{fmt_s(-d)} faster alone; the choice is the best found for the whole step"


def _step_lines(pred, sol, mesh):
    st = pred.step
    lines = [f"predicted step per device: {fmt_s(st.total_s)} = compute "
             f"{fmt_s(st.compute_s)} ({st.flops:.3g} flops) + communication "
             f"{fmt_s(st.comm_s)}"]
    est = sol.predicted
    if abs(est.total_s - st.total_s) > 1e-3 * max(st.total_s, 1e-15) or \
            est.collective_bytes != st.collective_bytes:
        lines.append(f"  (the search's own estimate: {fmt_s(est.total_s)}, "
                     f"{fmt_bytes(est.collective_bytes)} of collectives)")
    if not pred.by_axes:
        lines.append("  collectives: none")
        return lines
    lines.append(f"  collectives: {fmt_bytes(st.collective_bytes)} per call")
    for (kind, axes), b in sorted(pred.by_axes.items()):
        lines.append(f"    {kind} over {axes}: {fmt_bytes(b)}")
    top = sorted(range(len(pred.sites)), key=lambda k: -pred.sites[k][3])[:_TOP]
    lines.append("  where:" if len(top) == len(pred.sites) else
                 f"  where (the {len(top)} largest of {len(pred.sites)}):")
    for k in sorted(top):
        op, kind, axes, b = pred.sites[k]
        lines.append(f"    {kind} over {axes} {fmt_bytes(b)} at {op_text(op)}")
    return lines


def _memory_lines(pred, sol):
    m = pred.memory
    at = f" at {op_text(m.at)}" if m.at is not None else ""
    lines = [f"predicted peak memory per device: {fmt_bytes(m.peak)}{at} (arguments "
             f"{fmt_bytes(m.arguments)}, outputs {fmt_bytes(m.outputs)}, temporaries "
             f"{fmt_bytes(m.temporaries)}" +
             (f", aliased {fmt_bytes(m.aliased)}" if m.aliased else "") + ")"]
    budget = getattr(sol, "memory_budget", None)
    if budget is None:
        lines.append("  no memory_budget")
    else:
        lines.append(f"  memory_budget {fmt_bytes(int(budget))} per device: the peak is "
                     f"{100 * m.peak / budget:.0f} % of it")
    return lines
