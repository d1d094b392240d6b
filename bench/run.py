"""`python -m bench.run [--quick] [--programs a,b] [--out PATH]`: shardc vs jax.jit.

Runs every program of bench/programs.py under both, on 8 simulated CPU devices, in
one process; prints a table with shardc/jax ratios; writes bench/results.json as
{"results": [{"program", "metric", "shardc", "jax", "ops"}]} and, when matplotlib is
importable, bench/results.png.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

os.environ.setdefault("XLA_FLAGS", "")
if "--xla_force_host_platform_device_count" not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] += " --xla_force_host_platform_device_count=8"

HERE = os.path.dirname(os.path.abspath(__file__))

# repeats of the lower (+compile) measurement: (full, quick); chains scale down
REPEATS = {"default": (7, 3), "chain_1k": (5, 3), "chain_10k": (3, 1), "chain_100k": (2, 1),
           "flax_block": (11, 3)}   # its lowering is short and noisy here: more samples
QUICK_SKIP = ("chain_100k",)
# `--programs scan`: the loop programs and the unrolled ones they are compared with
GROUPS = {"scan": ("deep_mlp", "deep_mlp_scan", "train_step", "train_step_scan",
                   "train_step_remat")}
# (scan program, unrolled program): the scan's compile_s must be <= 0.2x the unrolled one's
SCAN_VS_UNROLLED = (("deep_mlp_scan", "deep_mlp"), ("train_step_scan", "train_step"))
SCAN_COMPILE_TARGET = 0.2

# Targets (from the benchmark issue): metric -> (max ratio shardc/jax, description)
TARGETS = {"lower_s": 0.5, "call_us": 1.1, "op_us": 1.1, "run_s": 1.05,
           "collective_bytes": 1.0, "peak_bytes": 1.0, "temp_bytes": 1.0}
# Per-program targets that differ (issue 18: a flax program's import + propagate + emit
# within jax's own lowering time of it)
PROGRAM_TARGETS = {"flax_block": {"lower_s": 1.0}, "flax_train_step": {"lower_s": 1.0}}


def target(program, metric):
    """The max shardc/jax ratio of `metric` on `program`, or None (no target)."""
    return PROGRAM_TARGETS.get(program, {}).get(metric, TARGETS.get(metric))


def _log(*a):
    print(*a, file=sys.stderr, flush=True)


collectives_seen: dict = {}   # program -> {"shardc": [...], "jax": [...]} (for the notes)


def bench_program(prog, fws, quick, log=_log):
    """All metrics of one program: a list of result rows."""
    import jax
    import numpy as np

    import shardc

    from . import metrics as M
    from . import programs as P

    mesh = shardc.make_mesh(prog.mesh_shape, prog.axis_names,
                            axis_types=(shardc.AxisType.Auto,) * len(prog.axis_names))
    args = P.place(prog, mesh, prog.make_inputs())
    sfw, jfw = fws["shardc"], fws["jax"]
    if prog.eager_ops is not None:
        return bench_eager(prog, fws, args, quick, log)
    missing = prog.missing(sfw)
    if missing:
        log(f"  {prog.name}: needs shardc.{'/'.join(missing)} (not in this shardc); skipped")
        return [{"program": prog.name, "metric": "skipped", "shardc": None,
                 "note": f"needs shardc.{'/'.join(missing)}"}]
    full, fast = REPEATS.get(prog.name, REPEATS["default"])
    repeats = fast if quick else full
    if prog.runs is not None:
        repeats = min(repeats, prog.runs)
    run = prog.compile_and_run

    lower = {"shardc": [], "jax": []}
    comp = {"shardc": [], "jax": []}
    stages = []
    last = {}
    for r in range(repeats):
        order = ("shardc", "jax") if r % 2 == 0 else ("jax", "shardc")
        for side in order:
            gc.collect()
            if side == "shardc":
                t, lowered, st = M.lower_shardc(prog, sfw, args)
                stages.append(st)
            else:
                t, lowered = M.lower_jax(prog, jfw, args)
            lower[side].append(t)
            last[side] = [lowered, None]
            if run:
                tc, compiled = M.compile_timed(lowered)
                comp[side].append(tc)
                last[side][1] = compiled
        log(f"  {prog.name}: repeat {r + 1}/{repeats}: lower shardc {lower['shardc'][-1]:.4f}s "
            f"jax {lower['jax'][-1]:.4f}s" +
            (f"; compile shardc {comp['shardc'][-1]:.3f}s jax {comp['jax'][-1]:.3f}s"
             if run else ""))

    s_text = last["shardc"][0].text
    shlo_ops = M.stablehlo_op_count(s_text)
    ir_ops = stages[-1]["ir_ops"]
    rows = []

    def row(metric, s, j=None, ops=None):
        d = {"program": prog.name, "metric": metric, "shardc": s}
        if j is not None:
            d["jax"] = j
        if ops is not None:
            d["ops"] = ops
        rows.append(d)

    row("lower_s", M.median(lower["shardc"]), M.median(lower["jax"]), shlo_ops)
    for k in ("trace_s", "prepare_s", "propagate_s", "emit_s"):
        row(k, M.median([s[k] for s in stages]), None, ir_ops)
    if not run:
        return rows

    row("compile_s", M.median(comp["shardc"]), M.median(comp["jax"]), shlo_ops)
    sc, jc = last["shardc"][1], last["jax"][1]
    s_hlo, j_hlo = sc.as_text(), jc.as_text()
    s_coll, j_coll = M.list_collectives(s_hlo, mesh), M.list_collectives(j_hlo, mesh)
    row("collective_bytes", sum(c["bytes"] for c in s_coll), sum(c["bytes"] for c in j_coll))
    collectives_seen[prog.name] = {"shardc": s_coll, "jax": j_coll}
    row("peak_bytes", M.peak_bytes(sc), M.peak_bytes(jc))
    row("temp_bytes", M.temp_bytes(sc), M.temp_bytes(jc))

    # run time of the compiled executables on placed inputs
    rs = M.run_s({"shardc": sc, "jax": jc}, args, budget_s=0.5 if quick else 1.5,
                 **({} if prog.runs is None else {"min_iters": prog.runs}))
    row("run_s", rs["shardc"], rs["jax"])

    # cached call through the jitted function (compiles once more, untimed)
    sf, jf = prog.fresh(sfw), prog.fresh(jfw)
    s_out, j_out = jax.block_until_ready((sf(*args), jf(*args)))
    for a, b in zip(jax.tree.leaves(s_out), jax.tree.leaves(j_out)):
        if not np.allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4):
            log(f"  WARNING {prog.name}: shardc and jax outputs differ")
        if not a.sharding.is_equivalent_to(b.sharding, a.ndim):
            log(f"  note {prog.name}: output sharding shardc {a.sharding.spec} "
                f"vs jax {b.sharding.spec}")
    # each sample blocks on its outputs: keep the total near a budget per side
    budget = 0.6 if quick else 2.5
    n = int(min(1200, max(60 if prog.runs is None else 2 * prog.runs,
                          budget / max(rs["shardc"], rs["jax"], 1e-6))))
    cu = M.call_us({"shardc": sf, "jax": jf}, args, n=n)
    row("call_us", cu["shardc"], cu["jax"])
    return rows


def bench_eager(prog, fws, args, quick, log=_log):
    """Each op of an eager program, run without jit under both numpy modules: one row
    per op ("<program>.<op>") with op_us (per op in a back-to-back stream, waited for
    once: what an eager loop costs) and call_us (until the call returns, as for jit),
    each with the sides' samples interleaved and a "ratio": the median paired ratio."""
    import functools

    import jax
    import numpy as np

    from . import metrics as M
    rows = []
    for name, op in prog.eager_ops.items():
        fns = {side: functools.partial(op, fws[side].m) for side in ("shardc", "jax")}
        for _ in range(20):                       # compile, fill the caches
            outs = {side: f(*args) for side, f in fns.items()}
        s, j = jax.block_until_ready((outs["shardc"], outs["jax"]))
        if not np.allclose(np.asarray(s), np.asarray(j), rtol=1e-4, atol=1e-4) or \
                s.dtype != j.dtype or not s.sharding.is_equivalent_to(j.sharding, s.ndim):
            log(f"  WARNING {prog.name}.{name}: shardc and jax results differ (values, "
                f"dtype or sharding {s.sharding} vs {j.sharding})")
        stream = M.stream_us(fns, args, per=10, rounds=21 if quick else 101)
        call = M.paired_call_us(fns, args, n=150 if quick else 1000)
        log(f"  {prog.name}.{name}: op_us shardc {stream['shardc']:.1f} jax "
            f"{stream['jax']:.1f} (paired ratio {stream['ratio']:.2f}); call_us shardc "
            f"{call['shardc']:.1f} jax {call['jax']:.1f} (paired ratio {call['ratio']:.2f})")
        for metric, d in (("op_us", stream), ("call_us", call)):
            rows.append({"program": f"{prog.name}.{name}", "metric": metric,
                         "shardc": d["shardc"], "jax": d["jax"], "ratio": d["ratio"]})
    return rows


# ---------------------------------------------------------------- output


def _fmt(v, metric):
    if v is None:
        return "-"
    if metric.endswith("_bytes"):
        return f"{v:,.0f}"
    if metric.endswith("_us"):
        return f"{v:.1f}"
    if v >= 100:
        return f"{v:.1f}"
    return f"{v:.4f}" if v >= 0.001 else f"{v * 1e6:.1f}µ"


def ratio(s, j):
    if s is None or j is None:
        return None
    if j == 0:
        return 1.0 if s == 0 else float("inf")
    return s / j


def row_ratio(r):
    """A row's shardc/jax ratio: its own "ratio" when the measurement paired the samples
    (eager_ops: the median of each chunk's ratio to the adjacent chunk of the other
    side, steadier on a loaded machine than a ratio of medians), else shardc / jax."""
    return r["ratio"] if r.get("ratio") is not None else ratio(r["shardc"], r.get("jax"))


SUMMARY_METRICS = ("lower_s", "compile_s", "call_us", "op_us", "run_s", "collective_bytes",
                   "peak_bytes", "temp_bytes")


def summary_table(results) -> str:
    """A Markdown table, one line per program: `shardc / jax (ratio)` per metric."""
    by = {(r["program"], r["metric"]): r for r in results}
    programs = list(dict.fromkeys(r["program"] for r in results))
    lines = ["| program | ops | " + " | ".join(SUMMARY_METRICS) + " |",
             "|---|---:|" + "---:|" * len(SUMMARY_METRICS)]
    for p in programs:
        cells = []
        for m in SUMMARY_METRICS:
            r = by.get((p, m))
            if r is None:
                cells.append("-")
                continue
            rat = row_ratio(r)
            tgt = target(p, m)
            miss = rat is not None and tgt is not None and rat > tgt
            cells.append(f"{_fmt(r['shardc'], m)} / {_fmt(r.get('jax'), m)} "
                         f"({'' if rat is None else f'{rat:.2f}'}{'!' if miss else ''})")
        ops = by.get((p, "lower_s"), {}).get("ops", "")
        skipped = by.get((p, "skipped"))
        if skipped:
            cells = [skipped["note"]] + ["-"] * (len(cells) - 1)
        lines.append(f"| {p} | {ops} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Cells: shardc / jax (shardc/jax ratio; `!` misses the target: lower_s ≤ 0.5 "
                 "(flax programs ≤ 1.0), call_us and op_us ≤ 1.1, run_s ≤ 1.05, collective, "
                 "peak and temp bytes ≤ 1). "
                 "Times in s (µ = microseconds), call_us and op_us in µs, ops = StableHLO ops.")
    for extra in (scaling_summary(results), loop_summary(results)):
        if extra:
            lines.append("")
            lines.append(extra)
    return "\n".join(lines)


def table(results) -> str:
    """A Markdown table: one line per (program, metric), ratio and target check."""
    lines = ["| program | metric | ops | shardc | jax | shardc/jax | target |",
             "|---|---|---:|---:|---:|---:|---|"]
    for r in results:
        m = r["metric"]
        rat = row_ratio(r)
        tgt = target(r["program"], m)
        if r.get("note"):
            mark = r["note"]
        elif rat is None or tgt is None:
            mark = ""
        else:
            mark = f"≤{tgt:g} {'ok' if rat <= tgt else 'MISS'}"
        lines.append(f"| {r['program']} | {m} | {r.get('ops', '')} | {_fmt(r['shardc'], m)} | "
                     f"{_fmt(r.get('jax'), m)} | {'' if rat is None else f'{rat:.2f}'} | {mark} |")
    for extra in (scaling_summary(results), loop_summary(results)):
        if extra:
            lines.append("")
            lines.append(extra)
    return "\n".join(lines)


def loop_summary(results) -> str:
    """The loop programs against their unrolled / un-rematted counterparts, per side:
    scan compile_s / unrolled compile_s (target <= 0.2) and train_step_remat's memory
    against train_step_scan's (target: below it)."""
    by = {(r["program"], r["metric"]): r for r in results}
    parts = []
    for scan, unrolled in SCAN_VS_UNROLLED:
        a, b = by.get((scan, "compile_s")), by.get((unrolled, "compile_s"))
        if not (a and b):
            continue
        cells = []
        for side in ("shardc", "jax"):
            if a.get(side) is None or not b.get(side):
                continue
            r = a[side] / b[side]
            cells.append(f"{side} {a[side]:.3f}/{b[side]:.3f} s = {r:.2f} "
                         f"({'ok' if r <= SCAN_COMPILE_TARGET else 'MISS'})")
        parts.append(f"compile_s {scan} / {unrolled} (target ≤ {SCAN_COMPILE_TARGET:g}): "
                     + "; ".join(cells))
    for metric in ("peak_bytes", "temp_bytes"):
        a, b = by.get(("train_step_remat", metric)), by.get(("train_step_scan", metric))
        if not (a and b):
            continue
        cells = []
        for side in ("shardc", "jax"):
            if a.get(side) is None or b.get(side) is None:
                continue
            cells.append(f"{side} {a[side]:,.0f} vs {b[side]:,.0f} "
                         f"({'below' if a[side] < b[side] else 'NOT below'})")
        parts.append(f"{metric} train_step_remat vs train_step_scan: " + "; ".join(cells))
    return "\n".join(f"- {p}" for p in parts)


def scaling_summary(results) -> str:
    """propagate_s per op on chain_N, and the 100k/1k ratio (target ≤ 1.5)."""
    per = {}
    for r in results:
        if r["program"].startswith("chain_") and r["metric"] == "propagate_s" and r.get("ops"):
            per[r["program"]] = (r["ops"], r["shardc"] / r["ops"] * 1e6)
    if not per:
        return ""
    parts = [f"{k}: {v[1]:.1f} µs/op ({v[0]} ops)" for k, v in per.items()]
    s = "propagate_s per op — " + "; ".join(parts)
    if "chain_1k" in per and "chain_100k" in per:
        g = per["chain_100k"][1] / per["chain_1k"][1]
        s += f"; 100k/1k = {g:.2f} (target ≤ 1.5 {'ok' if g <= 1.5 else 'MISS'})"
    elif "chain_1k" in per and "chain_10k" in per:
        g = per["chain_10k"][1] / per["chain_1k"][1]
        s += f"; 10k/1k = {g:.2f}"
    return s


def plot(results, path) -> bool:
    """A bar chart of shardc/jax ratios per program and metric (needs matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    metrics = [m for m in SUMMARY_METRICS
               if any(r["metric"] == m and r.get("jax") is not None for r in results)]
    programs = list(dict.fromkeys(r["program"] for r in results))[::-1]   # first on top
    cols = min(3, len(metrics)) or 1
    rows = -(-len(metrics) // cols) or 1
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 0.35 * len(programs) * rows + 1.6),
                             squeeze=False)
    for ax in axes.flat[len(metrics):]:
        ax.set_visible(False)
    for ax, m in zip(axes.flat, metrics):
        names, vals, tgts = [], [], []
        for p in programs:
            r = next((r for r in results if r["program"] == p and r["metric"] == m), None)
            rat = row_ratio(r) if r else None
            if rat is not None:
                names.append(p)
                vals.append(rat)
                tgts.append(target(p, m))
        # green / red: meets / misses the target; grey: a metric with no target
        ax.barh(names, vals, color=["tab:gray" if t is None else
                                    "tab:green" if v <= t else "tab:red"
                                    for v, t in zip(vals, tgts)])
        for y, v in enumerate(vals):
            ax.text(v, y, f" {v:.2f}", va="center", fontsize=7)
        ax.axvline(1.0, color="k", lw=0.8)
        if m in TARGETS:
            ax.axvline(TARGETS[m], color="tab:blue", ls="--", lw=0.8)
        ax.set_title(f"{m}: shardc/jax" + (f" (target ≤ {TARGETS[m]:g})" if m in TARGETS
                                           else ""), fontsize=9)
        ax.set_xlim(0, max(vals + [1.2]) * 1.18)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="fewer repeats, skip chain_100k (about a minute)")
    ap.add_argument("--programs", default="",
                    help="comma-separated program names or groups "
                         f"({', '.join(GROUPS)}; default: all)")
    ap.add_argument("--out", default=os.path.join(HERE, "results.json"))
    ap.add_argument("--no-plot", action="store_true")
    opts = ap.parse_args(argv)

    t_start = time.perf_counter()
    # shardc first: it sizes XLA's CPU thread pool for collectives before jax makes its
    # CPU client (runtime/backend.py _size_cpu_pool); imported after, shardc runs every
    # collective program one at a time through Python (safe on a small pool, and slow)
    import shardc  # noqa: F401
    import jax

    from . import programs as P
    if jax.device_count() < 8:
        sys.exit(f"bench needs 8 devices, jax sees {jax.device_count()}: set XLA_FLAGS="
                 "--xla_force_host_platform_device_count=8 before jax is imported")
    progs = P.all_programs()
    if opts.programs:
        names = [n.strip() for n in opts.programs.split(",") if n.strip()]
        names = list(dict.fromkeys(g for n in names for g in GROUPS.get(n, (n,))))
        unknown = [n for n in names if n not in progs]
        if unknown:
            sys.exit(f"unknown programs {unknown}; known: {', '.join(progs)}")
    else:
        names = [n for n in progs if not (opts.quick and n in QUICK_SKIP)]
    if not P.has_grad():
        _log("note: train_step left out: shardc has no gradients yet (shardc.value_and_grad)")
    fws = P.frameworks()
    _warm_up(fws)

    results = []
    for name in names:
        _log(f"{name} ...")
        t = time.perf_counter()
        try:
            results += bench_program(progs[name], fws, opts.quick)
        except Exception as e:  # one broken program must not hide the others
            import traceback
            traceback.print_exc()
            _log(f"  {name} FAILED: {type(e).__name__}: {e}")
        _log(f"  {name} done in {time.perf_counter() - t:.1f}s")

    with open(opts.out, "w") as f:
        json.dump({"results": results}, f, indent=1)
    print(table(results))
    print()
    print(summary_table(results))
    png = os.path.splitext(opts.out)[0] + ".png"
    if not opts.no_plot and plot(results, png):
        _log(f"wrote {png}")
    _log(f"wrote {opts.out}; bench took {time.perf_counter() - t_start:.0f}s")


def _warm_up(fws):
    """Pay one-time costs (imports, jax's internal caches) before any timing."""
    import shardc

    from . import programs as P
    prog = P.all_programs()["mlp_tp"]
    mesh = shardc.make_mesh(prog.mesh_shape, prog.axis_names,
                            axis_types=(shardc.AxisType.Auto,) * len(prog.axis_names))
    args = P.place(prog, mesh, prog.make_inputs())
    for fw in fws.values():
        f = prog.fresh(fw)
        f.lower(*args).compile()
        f(*args)


if __name__ == "__main__":
    main()
