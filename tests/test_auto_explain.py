"""Explaining the sharding search's choice (issue 19, part 4): explain_auto names every
AUTO input, its sharding and the next best with their costs and bytes, and the
realized program's predicted step and peak; the values the search's constraints fix
say so in explain's provenance (and those constraints print, parse and lower as any
constraint); shardc report puts the prediction beside XLA's compiled numbers."""
import json
import re

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as PS

import shardc
from shardc.auto import costmodel as cm
from shardc.auto import memory
from shardc.auto.explain import SEARCH, explain_auto, fmt_s
from shardc.auto.solve import solve
from shardc.ir.parse import parse_program
from shardc.ir.program import print_program
from shardc.lower.emit import lower
from shardc.propagate import passes
from shardc.propagate.cost import fmt_bytes
from shardc.propagate.explain import explain_program
from shardc.tools import report as rep
from shardc.tools.html import report_html

DM = ("data", "model")
HERE = "test_auto_explain.py"


def mesh():
    return shardc.make_mesh((2, 4), DM, axis_types=(shardc.AxisType.Auto,) * len(DM))


def sds(shape, spec=None):
    s = None if spec is None else NamedSharding(mesh(), spec)
    return jax.ShapeDtypeStruct(shape, np.float32, sharding=s)


def scaled_mlp(x, w1, w2, s):
    h = shardc.nn.gelu(x @ w1)
    return h @ w2 * s


LINE_W2 = scaled_mlp.__code__.co_firstlineno + 2     # `h @ w2 * s`


def scaled_args():      # a batch of 64 over data: the weights' best is replicated
    return sds((64, 64), PS("data")), sds((64, 256)), sds((256, 64)), sds(())


def solved(fn, args, auto, budget=None):
    """Traced, solved and applied as the API does (sol in meta["auto"]), propagated."""
    t = shardc.jit(fn).trace(*args)
    sol = solve(t._program, auto=auto, memory_budget=budget)
    sol.memory_budget = budget
    sol.apply(t._program)
    t._program.meta["auto"] = sol
    return t, sol


def relu_layers(x, ws):
    for w in ws:
        x = shardc.nn.relu(x @ w)
    return x


def section(text, name):
    """An input's two lines of explain_auto's text."""
    lines = text.splitlines()
    k = next(i for i, ln in enumerate(lines) if ln.startswith(f"//   {name}: "))
    return lines[k], lines[k + 1]


def test_explain_names_each_auto_input_its_sharding_and_the_next_best():
    t, sol = solved(scaled_mlp, scaled_args(), [1, 2, 3])
    p = t.propagate().program
    text = explain_auto(p, sol)
    assert text.startswith(f"// automatic sharding: 3 inputs chosen by {SEARCH}\n")
    for i, name in ((1, "w1"), (2, "w2")):
        alt = sol.alternatives[i]
        # the data-parallel weights: any other sharding gathers them, costing time
        assert alt.sharding == sol.input_shardings[i] and not any(alt.sharding.dims)
        assert alt.next_cost_s > alt.cost_s
        head, nxt = section(text, name)
        assert head == (f"//   {name}: {p.inputs[i].aval} {alt.sharding}: "
                        f"{fmt_bytes(alt.bytes)} per device; {fmt_s(alt.cost_s)} in its "
                        "reshards and the ops that follow it")
        assert nxt == (f"//     next best {alt.next_sharding}: {fmt_bytes(alt.next_bytes)} "
                       f"per device; {fmt_s(alt.next_cost_s)}: "
                       f"{fmt_s(alt.next_cost_s - alt.cost_s)} slower")
    assert sol.alternatives[3].next_sharding is None      # a scalar has one sharding
    assert section(text, "s")[1] == "//     no other sharding"
    b, m = cm.program_cost(p), memory.memory_breakdown(p)
    assert (f"// predicted step per device: {fmt_s(b.total_s)} = compute "
            f"{fmt_s(b.compute_s)} ({b.flops:.3g} flops) + communication 0 s\n") in text
    assert "//   collectives: none\n" in text
    assert (f"// predicted peak memory per device: {fmt_bytes(m.peak)} at "
            f"{m.at.prim.name}@{HERE}:{m.at.loc.line} (arguments "
            f"{fmt_bytes(m.arguments)}, outputs {fmt_bytes(m.outputs)}") in text
    assert "//   no memory_budget\n" in text
    # explain's provenance: the replicated weights were the search's choice
    ir = explain_program(p)
    assert f"// %w1: replicated, chosen by {SEARCH}\n" in ir
    assert "// %x: dim 0 {data} from argument x\n" in ir
    assert (f"groups of ops in {sol.classes} classes, {sol.variables} variables, "
            f"{sol.constraint_rows} constraints") in text
    # deterministic: another trace and solve explains the same, its solve time aside
    t2, sol2 = solved(scaled_mlp, scaled_args(), [1, 2, 3])
    again = explain_auto(t2.propagate().program, sol2)

    def timeless(s):
        return re.sub(r"search: [0-9.]+ s", "search: _", s)
    assert timeless(again) == timeless(text)


def test_explain_under_a_memory_budget_names_the_collectives_and_the_budget():
    budget = 60_000
    t, sol = solved(scaled_mlp, scaled_args(), [1, 2, 3], budget)
    p = t.propagate().program
    text = explain_auto(p, sol)
    b, m = cm.program_cost(p), memory.memory_breakdown(p)
    assert m.peak <= budget and b.collective_bytes > 0
    # the weights are split to fit: the next best (replicated, say) costs no less time
    # in their own class but holds more
    for i, name in ((1, "w1"), (2, "w2")):
        alt = sol.alternatives[i]
        assert any(alt.sharding.dims) and alt.next_bytes > alt.bytes
        assert section(text, name)[1].endswith(
            f"chosen for {fmt_bytes(alt.next_bytes - alt.bytes)} less per device")
    assert f"//   collectives: {fmt_bytes(b.collective_bytes)} per call\n" in text
    for kind, nbytes in b.by_kind().items():
        assert re.search(rf"//     {kind} over {{[a-z, ]+}}: {re.escape(fmt_bytes(nbytes))}\n",
                         text), (kind, text)
    sites = re.findall(rf"//     ([a-z-]+) over {{[a-z, ]+}} .* at (\w+)@{HERE}:(\d+)", text)
    assert sites and all(int(line) in (LINE_W2 - 1, LINE_W2) for _, _, line in sites)
    assert (f"//   memory_budget {fmt_bytes(budget)} per device: the peak is "
            f"{100 * m.peak / budget:.0f} % of it\n") in text


def constrained(x, w1, w2, s):
    h = x @ w1
    h = shardc.with_sharding_constraint(h, NamedSharding(mesh(), PS("data")))
    return shardc.nn.gelu(h) @ w2 * s


LINE_WSC = constrained.__code__.co_firstlineno + 2


def annotated(text):
    """explain's text as ({value: its provenance note}, {value: (op, its params)})."""
    notes = dict(re.findall(r"^\s*// (%\w+): (.*)$", text, re.M))
    names = {}
    for ln in text.splitlines():
        m = re.match(r"\s*(%\w+): .* = (\w+)\([^)]*\)(?: \{(.*)\})?(?: loc\(.*\))?$", ln)
        if m:
            names[m.group(1)] = (m.group(2), m.group(3) or "")
    return notes, names


def test_provenance_names_the_search_not_a_constraint_line():
    t, sol = solved(constrained, scaled_args(), [1, 2, 3])
    p = t.propagate().program
    auto_ops = [op for op in p.ops if op.params.get("auto")]
    assert len(auto_ops) == len(sol.constraints) > 0
    notes, names = annotated(explain_program(p))
    assert notes["%x"] == "dim 0 {data} from argument x"     # a fixed input, as given
    for i, name in ((1, "w1"), (2, "w2")):
        dims = sol.input_shardings[i].dims
        assert notes[f"%{name}"] == ("; ".join(
            f"dim {d} {{{', '.join(map(str, a))}}} from argument {name}, chosen by {SEARCH}"
            for d, a in enumerate(dims) if a) or f"replicated, chosen by {SEARCH}")
    assert any(sol.input_shardings[1].dims)
    searched = [n for n, (prim, params) in names.items() if "auto=True" in params]
    assert len(searched) == len(auto_ops)
    for n in searched:     # (the search's constraints' values: their sharding is its)
        note = notes[n]
        assert "with_sharding_constraint" not in note, (n, note)
        if note.startswith("dim"):
            assert f"from {SEARCH} at {HERE}:" in note, (n, note)
    assert any(f"from {SEARCH} at {HERE}:" in notes[n] for n in searched)
    # the user's own constraint keeps its line
    user = [n for n, (prim, params) in names.items()
            if prim == "sharding_constraint" and "auto=True" not in params]
    assert user and all(notes[n] == f"dim 0 {{data}} from with_sharding_constraint at "
                        f"{HERE}:{LINE_WSC}" for n in user)


def test_search_constraints_print_parse_and_lower_as_any_constraint():
    t, sol = solved(constrained, scaled_args(), [1, 2, 3])
    p = t.propagate().program
    q = parse_program(print_program(p))
    marked = [op for op in q.ops if op.prim.name == "sharding_constraint"
              and op.params.get("auto") is True]
    assert len(marked) == len(sol.constraints)
    srcs = passes.prepare(q).meta["sources"]
    assert {str(srcs[op.outputs[0]]).split(" at ")[0] for op in marked} == {SEARCH}
    text = lower(p)
    for op in p.ops:
        op.params.pop("auto", None)
    assert "sdy.sharding_constraint" in text and lower(p) == text


def mlp(x, w1, w2):
    return shardc.nn.gelu(x @ w1) @ w2


def test_report_puts_the_prediction_beside_the_compiled_program():
    t, sol = solved(mlp, (sds((4, 256), PS("data")), sds((256, 1024)), sds((1024, 256))),
                    [1, 2])
    compiled = t.lower().compile()
    p = compiled.lowered.traced.program
    r = rep.report(compiled)
    a = r.auto
    b, m = cm.program_cost(p), memory.memory_breakdown(p)
    pr, co = a["predicted"], a["compiled"]
    assert (pr["collective_bytes"], pr["collective_bytes_by_kind"], pr["peak_bytes"],
            pr["step_s"], pr["flops"]) == (b.collective_bytes, dict(sorted(
                b.by_kind().items())), m.peak, b.total_s, b.flops)
    colls = rep.collectives(compiled.as_text(), p.mesh.axes)
    kinds = {}
    for c in colls:
        kinds[c.kind] = kinds.get(c.kind, 0) + c.bytes
    stats = compiled.memory_analysis()
    peak = stats.argument_size_in_bytes + stats.output_size_in_bytes + \
        stats.temp_size_in_bytes - stats.alias_size_in_bytes
    assert (co["collective_bytes"], co["collective_bytes_by_kind"], co["peak_bytes"]) == \
        (sum(kinds.values()), dict(sorted(kinds.items())), peak)
    assert co["flops"] == compiled.cost_analysis()["flops"]
    # calibrated: the prediction is within 10 % of XLA's bytes (kind by kind) and 15 %
    # of its peak
    assert co["collective_bytes"] > 0 and set(pr["collective_bytes_by_kind"]) == set(kinds)
    for k, n in kinds.items():
        assert abs(pr["collective_bytes_by_kind"][k] - n) <= 0.1 * n, (k, pr, co)
    assert abs(pr["peak_bytes"] - peak) <= 0.15 * peak
    assert a["inputs"] == {"w1": str(sol.input_shardings[1]), "w2": str(sol.input_shardings[2])}
    text = r.text()
    row = re.search(r"\n  collective bytes per call +(\S+ \S+) +(\S+ \S+)", text)
    assert row.groups() == (rep.fmt_bytes(pr["collective_bytes"]),
                            rep.fmt_bytes(co["collective_bytes"]))
    row = re.search(r"\n  peak memory +(\S+ \S+) +(\S+ \S+) +([+-][0-9.]+) %", text)
    assert row.groups() == (rep.fmt_bytes(m.peak), rep.fmt_bytes(peak),
                            f"{100 * (m.peak - peak) / peak:+.1f}")
    assert re.search(rf"\n  step time +{re.escape(fmt_s(b.total_s))} +\(not measured\)\n",
                     text)
    assert json.loads(json.dumps(r.json()))["auto"]["compiled"]["peak_bytes"] == peak
    assert "automatic sharding (shardc.AUTO): w1 " in report_html(r)
    # every value the search's constraints decide names the search (a replicated one
    # too: "replicated, chosen by", not "no sharding reached it")
    notes, names = annotated(explain_program(p))
    line = mlp.__code__.co_firstlineno + 1
    chosen = [n for n, (prim, params) in names.items() if params.endswith("auto=True")]
    assert chosen and all(notes[n].endswith(f"{SEARCH} at {HERE}:{line}") for n in chosen)
    assert all(notes[n].startswith("replicated, chosen by") == ("{}, {}]" in names[n][1])
               for n in chosen)
    # a program the search did not choose has no such section
    p.meta.pop("auto")
    plain = rep.report(compiled)
    assert plain.auto is None and "auto" not in plain.json()
    assert "automatic sharding" not in plain.text() + report_html(plain)


def test_why_the_choice_beat_the_next_best():
    from types import SimpleNamespace
    from shardc.auto.explain import _why
    from shardc.auto.solution import Alternative
    from shardc.ir.sharding import Sharding
    a, b = Sharding([["data"], []]), Sharding([[], []])
    sol = SimpleNamespace(memory_budget=None)

    def why(cost, nxt, nbytes, next_bytes, budget=None):
        sol.memory_budget = budget
        return _why(Alternative(a, cost, b, nxt, nbytes, next_bytes), sol)
    assert why(1e-6, 3e-6, 100, 100) == "2 us slower"
    assert why(1e-6, 3e-6, 100, 400) == "2 us slower and 300 B more per device"
    assert why(1e-6, 1e-6, 100, 400) == "as fast, chosen for 300 B less per device"
    assert why(1e-6, 1e-6, 400, 400) == "as fast, as large: a tie"
    assert why(2e-3, 1e-3, 1024, 4096, 2048) == \
        "1 ms faster but 3.0 KiB more per device: chosen for memory (memory_budget 2.0 KiB)"
    assert why(2e-3, 1e-3, 1024, 1024).startswith("1 ms faster alone;")


def test_compiled_bytes_count_loop_iterations_and_the_title_names_eight_inputs():
    from shardc.tools import autoreport
    loop = rep.Loop("scan", None, 3)

    def coll(kind, nbytes, loops=()):
        return rep.Collective(kind, "c", "f32[4]", nbytes, ("data",), [], None,
                              loops=list(loops))
    colls = [coll("all-reduce", 100), coll("all-gather", 10, [loop]),
             coll("all-reduce", 1, [loop, rep.Loop("scan", None, 2)])]
    assert autoreport.compiled_bytes(colls) == (100 + 30 + 6, {"all-reduce": 106,
                                                               "all-gather": 30})
    colls.append(coll("all-gather", 5, [rep.Loop("while", None, None)]))
    assert autoreport.compiled_bytes(colls)[0] is None
    assert autoreport.compiled_peak({"argument": 10, "output": 4, "temp": 3, "alias": 4}) == 13
    assert autoreport.compiled_peak({}) is None
    # nine inputs chosen: the title names eight, the json all
    t, sol = solved(relu_layers, (sds((8, 64), PS("data")), [sds((64, 64)) for _ in range(9)]),
                    range(1, 10))
    p = t.propagate().program
    a = autoreport.comparison(p, [], {}, {})
    assert list(a["inputs"]) == [p.inputs[i].name for i in range(1, 10)]
    title, rows, _ = autoreport.parts(a, rep.fmt_bytes)
    assert title.count("[{") == 8 and title.endswith(", ... (1 more)")
    assert rows[1][1:3] == (rep.fmt_bytes(a["predicted"]["collective_bytes"]), "0 B")
    assert a["compiled"]["peak_bytes"] is None and ("peak memory", ) == rows[-3][:1]
    assert rows[-3][2] == "?"


def test_inputs_chosen_alike_across_layers_say_their_cost_is_summed():
    # repeated layers share one class: an input's cost is its class's, over every layer
    t, sol = solved(relu_layers, (sds((8, 64), PS("data")), [sds((64, 64)) for _ in range(6)]),
                    range(1, 7))
    classes = {sol.input_classes[i] for i in range(1, 7)}
    assert len(classes) < 6        # the inner layers alike
    text = explain_auto(t.propagate().program, sol)
    alike = [n for n in range(2, 7) if f"over the {n} inputs chosen alike" in text]
    assert alike, text
