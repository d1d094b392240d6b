"""`shardc report` of an AUTO program (its Solution in `program.meta["auto"]`): the cost
model's prediction for the realized program (auto/explain.Predicted) beside what XLA
compiled: collective bytes per call (by kind), peak memory per device (argument +
output + temp - alias, as memory_analysis() gives them) and flops, with the predicted
step time (XLA measures none)."""
from __future__ import annotations

_SHOWN = 8       # the chosen inputs named in the title (json has them all)
KINDS_ORDER = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all",
               "collective-permute")


def compiled_peak(memory: dict):
    """Peak bytes per device from a report's memory dict, None if the backend gave none."""
    if not memory or "temp" not in memory:
        return None
    return memory.get("argument", 0) + memory.get("output", 0) + memory["temp"] - \
        memory.get("alias", 0)


def compiled_bytes(colls):
    """(collective bytes per call, {kind: bytes per call}), counting loop iterations;
    (None, {...}) if a loop's trip count is unknown."""
    total, kinds = 0, {}
    for c in colls:
        n = c.runs
        if n is None:
            total = None
            continue
        kinds[c.kind] = kinds.get(c.kind, 0) + c.bytes * n
        if total is not None:
            total += c.bytes * n
    return total, kinds


def comparison(program, colls, memory, cost, hw=None) -> dict | None:
    """The prediction beside the compiled numbers (JSON-ready), None if `program` was
    not chosen by the sharding search."""
    sol = program.meta.get("auto")
    if sol is None:
        return None
    from ..auto.costmodel import CPU
    from ..auto.explain import Predicted, input_name
    from ..propagate.explain import op_text
    pred = Predicted(program, hw or getattr(sol, "hw", None) or CPU)
    st, mem = pred.step, pred.memory
    total, kinds = compiled_bytes(colls)
    budget = getattr(sol, "memory_budget", None)
    return {
        "inputs": {input_name(program, i): str(s)
                   for i, s in sorted(sol.input_shardings.items())},
        "memory_budget": None if budget is None else int(budget),
        "solve_s": float(sol.solve_s),
        "predicted": {
            "step_s": st.total_s, "compute_s": st.compute_s, "comm_s": st.comm_s,
            "flops": st.flops, "collective_bytes": st.collective_bytes,
            "collective_bytes_by_kind": dict(sorted(pred.by_kind.items())),
            "peak_bytes": mem.peak, "peak_at": op_text(mem.at) if mem.at is not None else None,
            "arguments": mem.arguments, "outputs": mem.outputs,
            "temporaries": mem.temporaries},
        "compiled": {
            "collective_bytes": total,
            "collective_bytes_by_kind": dict(sorted(kinds.items())),
            "peak_bytes": compiled_peak(memory), "flops": (cost or {}).get("flops")},
    }


def _ratio(p, c) -> str:
    if p is None or c is None or not c:
        return ""
    return f"{100 * (p - c) / c:+.1f} %"


def parts(a: dict, fmt_bytes):
    """(title, table rows (the first the header), notes) of `comparison`'s dict."""
    from ..auto.explain import fmt_s
    p, c = a["predicted"], a["compiled"]

    def b(n):
        return "?" if n is None else fmt_bytes(n)
    shown = list(a["inputs"].items())
    more = len(shown) - _SHOWN
    title = "automatic sharding (shardc.AUTO): " + ", ".join(
        f"{k} {v}" for k, v in shown[:_SHOWN]) + (f", ... ({more} more)" if more > 0 else "")
    rows = [("per device", "predicted", "compiled", "vs compiled")]
    rows.append(("collective bytes per call", b(p["collective_bytes"]),
                 b(c["collective_bytes"]), _ratio(p["collective_bytes"],
                                                  c["collective_bytes"])))
    kinds = set(p["collective_bytes_by_kind"]) | set(c["collective_bytes_by_kind"])
    for k in sorted(kinds, key=lambda k: (KINDS_ORDER + (k,)).index(k)):
        ck = c["collective_bytes_by_kind"].get(k)
        if ck is None and c["collective_bytes"] is not None:
            ck = 0       # (None: in a loop of unknown trip count)
        rows.append((f"  {k}", b(p["collective_bytes_by_kind"].get(k, 0)), b(ck), ""))
    rows.append(("peak memory", b(p["peak_bytes"]), b(c["peak_bytes"]),
                 _ratio(p["peak_bytes"], c["peak_bytes"])))
    rows.append(("flops", f"{p['flops']:.4g}",
                 "?" if c["flops"] is None else f"{c['flops']:.4g}",
                 _ratio(p["flops"], c["flops"])))
    rows.append(("step time", fmt_s(p["step_s"]), "(not measured)", ""))
    at = f" at {p['peak_at']}" if p["peak_at"] else ""
    budget = a["memory_budget"]
    notes = [f"predicted step: compute {fmt_s(p['compute_s'])}, communication "
             f"{fmt_s(p['comm_s'])}; predicted peak{at}; " +
             (f"memory_budget {fmt_bytes(int(budget))}" if budget is not None else
              "no memory_budget") + f"; solved in {a['solve_s']:.2f} s"]
    return title, rows, notes


def render(a: dict, fmt_bytes, table) -> list:
    """The report's text lines for `comparison`'s dict (`table(rows)`: report's)."""
    title, rows, notes = parts(a, fmt_bytes)
    return [title] + table(rows) + ["  " + n for n in notes]
