"""AUTO against the hand strategies, compiled (issue 19's "Measured"):
`python -m bench.auto_compare [--programs a,b] [--no-check] [--markdown]`.

On the (2, 4) ("data", "model") mesh, for mlp_tp, transformer_block, train_step and
train_step_scan (bench/programs.py's bodies and inputs; the train steps' 48 layers on
this mesh, train_step_scan's as one lax.scan over weights stacked on a leading layer
dim, which every strategy leaves whole) and the 12-layer GPT train step
(bench/auto_solve.py: d=512, 8 heads, sequence 256), every strategy is compiled by
shardc and measured as the bench measures: XLA's collective bytes per call
(shardc.report) and peak bytes per device (memory_analysis(): arguments + outputs +
temporaries - aliased), each beside the cost model's prediction
(costmodel.program_cost, memory.peak_memory) of the propagated program.

The hand strategies (x is the batch-major input, every other input a parameter):
  dp        x's batch over (data, model), parameters replicated;
  fsdp      x's batch over (data, model), every matrix's first dim over (data, model);
  megatron  x's batch over data; column-parallel weights (w1, wq, wk, wv, b1) split
            their output dim over model, row-parallel ones (w2, wo) their input dim;
  2-d       megatron's, with each weight's other dim over data (data x tensor).
AUTO is shardc.jit(f, in_shardings=shardc.AUTO(mesh), out_shardings=shardc.AUTO(mesh),
memory_budget=...): every input and output free, once without a budget and once per
hand strategy H with memory_budget = H's predicted peak (the model's, which the solver bounds): "no
worse" when its compiled bytes and peak are both <= H's, or one is within 5 % and
the other strictly lower. On the small programs every AUTO executable runs on the
bench's inputs and its values are checked against jax.jit's. For the layered steps
the log says how many distinct choices the layers' parameters got.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("XLA_FLAGS", "")
if "--xla_force_host_platform_device_count" not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] += " --xla_force_host_platform_device_count=8"

import numpy as np  # noqa: E402

DM = ("data", "model")
HANDS = ("dp", "fsdp", "megatron", "2-d")
COLUMN = {"w1": (None, "model"), "wq": (None, "model"), "wk": (None, "model"),
          "wv": (None, "model"), "b1": ("model",)}
ROW = {"w2": ("model",), "wo": ("model",)}
TWO_D = {"w1": ("data", "model"), "wq": ("data", "model"), "wk": ("data", "model"),
         "wv": ("data", "model"), "b1": ("model",), "w2": ("model", "data"),
         "wo": ("model", None, "data")}
SLACK = 0.05


def leaf_spec(strategy, name, nd):
    """A hand strategy's PartitionSpec of the input leaf `name` (rank `nd`)."""
    from jax.sharding import PartitionSpec as P
    if name == "x":
        return P(DM) if strategy in ("dp", "fsdp") else P("data")
    if strategy == "dp":
        return P()
    if strategy == "fsdp":
        return P(DM) if nd > 1 else P()
    if strategy == "megatron":
        return P(*COLUMN.get(name, ROW.get(name, ())))
    return P(*TWO_D.get(name, ()))


class Case:
    """One program: `shardc_fn` / `jax_fn` take the arguments; `args`: a tuple of
    NumPy pytrees (run and checked) or of ShapeDtypeStructs (compiled only); `stacked`:
    its parameters have a leading layer dim (a scan's), unsharded."""

    def __init__(self, name, shardc_fn, jax_fn, args, run, stacked=False):
        self.name, self.shardc_fn, self.jax_fn, self.args, self.run = (
            name, shardc_fn, jax_fn, args, run)
        self.stacked = stacked


def case_spec(case, strategy, name, nd):
    """`strategy`'s spec of `case`'s input leaf `name` (rank `nd`): a stacked
    parameter's is its layer's, after an unsharded layer dim."""
    from jax.sharding import PartitionSpec as P
    if case.stacked and name != "x":
        return P(None, *leaf_spec(strategy, name, nd - 1))
    return leaf_spec(strategy, name, nd)


def cases(names=None) -> list:
    import jax
    import jax.numpy as jnp

    import shardc
    from bench import programs as P
    from bench.auto_solve import gpt_shapes, gpt_train_step

    def pos(body, fw):          # mlp_tp's positional leaves, named
        def f(x, w1, b1, w2, b2):
            return body(fw[0], fw[1], x, w1, b1, w2, b2)
        return f
    snn, jnn = (shardc.numpy, shardc.nn), (jnp, jax.nn)
    fws = P.frameworks()
    out = [
        Case("mlp_tp", pos(P.mlp_tp, snn), pos(P.mlp_tp, jnn), P._mlp_inputs(), True),
        Case("transformer_block",
             lambda x, p: P.transformer_block(*snn, x, p),
             lambda x, p: P.transformer_block(*jnn, x, p), P._tb_inputs(), True),
        Case("train_step",
             lambda ps, x: P.train_step(*snn, ps, x, shardc.value_and_grad),
             lambda ps, x: P.train_step(*jnn, ps, x, jax.value_and_grad), P._ts_inputs(), True),
        Case("train_step_scan", lambda ps, x: P.train_step_scan(fws["shardc"], ps, x),
             lambda ps, x: P.train_step_scan(fws["jax"], ps, x), P._tss_inputs(), True,
             stacked=True),
        Case("gpt_12", lambda ps, x: gpt_train_step(*snn, ps, x, shardc.value_and_grad),
             lambda ps, x: gpt_train_step(*jnn, ps, x, jax.value_and_grad),
             tuple(gpt_shapes(12)), False),
    ]
    return [c for c in out if names is None or c.name in names]


def _names(args):
    """Per leaf of `args`, its name: its dict key, or mlp_tp's positional names."""
    import jax
    paths = jax.tree_util.tree_flatten_with_path(args)[0]
    positional = ("x", "w1", "b1", "w2", "b2")
    out = []
    for path, _ in paths:
        k = path[-1]
        if hasattr(k, "key"):
            out.append(k.key)
        elif len(path) == 1:
            out.append(positional[k.idx] if len(args) == 5 else "x")
        else:
            out.append("x" if path[0].idx == len(args) - 1 else "?")
    return out


def _abstract(args, mesh, specs):
    """ShapeDtypeStructs of `args` (arrays or structs) with the per-leaf `specs`."""
    import jax
    from jax.sharding import NamedSharding
    leaves, tree = jax.tree.flatten(args)
    return jax.tree.unflatten(tree, [
        jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NamedSharding(mesh, s))
        for a, s in zip(leaves, specs)])


def measure(compiled):
    """(compiled collective bytes per call, compiled peak, predicted bytes, predicted
    peak) of a shardc Compiled."""
    from shardc.auto import costmodel as cm
    from shardc.auto import memory
    from shardc.report import report
    program = compiled.lowered.traced.program
    nbytes = report(compiled).json()["collective_bytes_per_call"]
    ma = compiled.memory_analysis()
    peak = (ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes
            - ma.alias_size_in_bytes)
    return (int(nbytes), int(peak), int(cm.program_cost(program).collective_bytes),
            int(memory.peak_memory(program)))


def run_case(case, mesh, check=True, log=print):
    """Rows {program, strategy, budget, bytes, peak, pred_bytes, pred_peak, solve_s,
    equal, ok} of one case: the hand strategies, AUTO, AUTO under each one's peak."""
    import jax

    import shardc
    from shardc.errors import ShardcError
    names = _names(case.args)
    leaves = jax.tree.leaves(case.args)
    rows = []
    for h in HANDS:
        specs = [case_spec(case, h, n, len(a.shape)) for n, a in zip(names, leaves)]
        compiled = shardc.jit(case.shardc_fn).lower(*_abstract(case.args, mesh, specs)).compile()
        b, p, pb, pp = measure(compiled)
        rows.append(dict(program=case.name, strategy=h, budget=None, bytes=b, peak=p,
                         pred_bytes=pb, pred_peak=pp, solve_s=None, equal=None, ok=None))
        log(f"  {case.name} {h}: {b:,} B collectives, peak {p:,} B "
            f"(predicted {pb:,}, {pp:,})")
    want = None
    if check and case.run:
        want = jax.jit(case.jax_fn)(*case.args)
    auto = shardc.AUTO(mesh)
    plain = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), case.args)
    for h in (None,) + HANDS:
        hand = None if h is None else next(r for r in rows if r["strategy"] == h)
        budget = None if hand is None else hand["pred_peak"]
        f = shardc.jit(case.shardc_fn, in_shardings=auto, out_shardings=auto,
                       memory_budget=budget)
        try:
            compiled = f.lower(*plain).compile()
        except ShardcError as e:
            log(f"  {case.name} auto@{h}: {e}")
            rows.append(dict(program=case.name, strategy=f"auto@{h}", budget=budget,
                             bytes=None, peak=None, pred_bytes=None, pred_peak=None,
                             solve_s=None, equal=None, ok=False))
            continue
        sol = compiled.lowered.traced.program.meta["auto"]
        b, p, pb, pp = measure(compiled)
        equal = _equal(compiled, case, want) if want is not None else None
        ok = None if hand is None else _no_worse(b, p, hand["bytes"], hand["peak"])
        rows.append(dict(program=case.name, strategy="auto" if h is None else f"auto@{h}",
                         budget=budget, bytes=b, peak=p, pred_bytes=pb, pred_peak=pp,
                         solver_bytes=sol.predicted.collective_bytes,
                         solver_peak=sol.predicted.peak_bytes, solve_s=sol.solve_s,
                         equal=equal, ok=ok))
        rows[-1]["layers"] = _layers(case.args, sol)
        log(f"  {case.name} {rows[-1]['strategy']}: {b:,} B collectives, peak {p:,} B "
            f"(predicted {pb:,}, {pp:,}); solved in {sol.solve_s:.2f} s"
            + ("" if ok is None else f"; no worse than {h}: {ok}")
            + ("" if equal is None else f"; values equal jax.jit's: {equal}")
            + ("" if rows[-1]["layers"] is None else
               f"; distinct per-layer choices: {rows[-1]['layers']}"))
    return rows


def _layers(args, sol):
    """How many distinct choices the layers' parameters got (a list of per-layer dicts
    first among `args`), or None."""
    if not isinstance(args[0], list):
        return None
    n = len(args[0][0])
    per = [tuple(str(sol.input_shardings[i * n + k]) for k in range(n))
           for i in range(len(args[0]))]
    return len(set(per))


def _no_worse(b, p, hb, hp) -> bool:
    if b <= hb and p <= hp:
        return True
    return (b < hb and p <= hp * (1 + SLACK)) or (p < hp and b <= hb * (1 + SLACK))


def _equal(compiled, case, want) -> bool:
    import jax
    leaves, tree = jax.tree.flatten(case.args)
    placed = [jax.device_put(a, s)
              for a, s in zip(leaves, jax.tree.leaves(compiled.input_shardings))]
    got = compiled(*jax.tree.unflatten(tree, placed))
    return all(np.allclose(np.asarray(a), np.asarray(b), rtol=2e-4, atol=2e-4)
               for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)))


def _mib(n):
    return f"{n / 2**20:,.2f}"


def markdown(rows) -> str:
    """The table: per program and strategy, collective MiB per call and peak MiB per
    device as XLA compiled them, as the cost model predicts them for the compiled
    program and (AUTO) as the solver predicted its choice; AUTO's solve time and
    verdict."""
    out = ["| program | strategy | collectives MiB: XLA / model / solver | peak MiB: XLA / "
           "model / solver | solve s | no worse | = jax.jit |",
           "|---|---|---:|---:|---:|:-:|:-:|"]
    for r in rows:
        if r["bytes"] is None:
            out.append(f"| {r['program']} | {r['strategy']} | no solution | | | **no** | |")
            continue
        ok = "" if r["ok"] is None else ("yes" if r["ok"] else "**no**")
        eq = "" if r["equal"] is None else ("yes" if r["equal"] else "**no**")
        s = "" if r["solve_s"] is None else f"{r['solve_s']:.2f}"
        sb = "" if r.get("solver_bytes") is None else f" / {_mib(r['solver_bytes'])}"
        sp = "" if r.get("solver_peak") is None else f" / {_mib(r['solver_peak'])}"
        out.append(f"| {r['program']} | {r['strategy']} | {_mib(r['bytes'])} / "
                   f"{_mib(r['pred_bytes'])}{sb} | {_mib(r['peak'])} / {_mib(r['pred_peak'])}"
                   f"{sp} | {s} | {ok} | {eq} |")
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.auto_compare",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--programs", default="", help="comma-separated subset")
    ap.add_argument("--no-check", action="store_true", help="skip the values check")
    a = ap.parse_args(argv)
    import shardc
    mesh = shardc.make_mesh((2, 4), DM, axis_types=(shardc.AxisType.Auto,) * len(DM))
    rows = []
    t0 = time.perf_counter()
    for case in cases(a.programs.split(",") if a.programs else None):
        rows += run_case(case, mesh, check=not a.no_check,
                         log=lambda *m: print(*m, file=sys.stderr, flush=True))
    print(markdown(rows))
    bad = [r for r in rows if r["ok"] is False or r["equal"] is False]
    print(f"\n{len(rows)} rows in {time.perf_counter() - t0:.0f} s; "
          f"{len(bad)} where AUTO is worse or its values differ"
          + "".join(f"\n  {r['program']} {r['strategy']}" for r in bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
