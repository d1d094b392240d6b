"""shardc.report on loops: a collective inside a scan / while_loop body is tied to the
user's line inside the body and says it runs once per iteration of which loop (with the
scan's trip count); the text, JSON and HTML forms say so."""
import inspect
import json

import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc import lax
from shardc.tools.html import report_html
from shardc.tools.report import collectives, report


def put(mesh, shape, *spec):
    return shardc.device_put(np.ones(shape, np.float32), NamedSharding(mesh, P(*spec)))


def line_of(fun, text):
    lines, start = inspect.getsourcelines(fun)
    return start + next(i for i, ln in enumerate(lines) if text in ln)


def stacked(h, ws):
    def layer(h, w):
        return snp.tanh(h @ w), None        # contracting dim split on y: an all-reduce
    return lax.scan(layer, h, ws)[0]


def test_an_all_reduce_in_a_scan_body_runs_per_iteration(mesh2x4):
    compiled = shardc.jit(stacked).lower(put(mesh2x4, (8, 16), None, "y"),
                                         put(mesh2x4, (5, 16, 16), None, "y")).compile()
    [c] = collectives(compiled.as_text(), mesh2x4)
    assert (c.kind, c.axes, c.op) == ("all-reduce", ("y",), "dot_general")
    assert c.loc == (__file__, line_of(stacked, "snp.tanh(h @ w)"))
    [loop] = c.loops
    assert loop.op == "scan" and loop.loc == (__file__, line_of(stacked, "lax.scan"))
    assert loop.trip_count == 5 and c.runs == 5
    where = f"test_report_loops.py:{line_of(stacked, 'lax.scan')}"
    assert str(c).endswith(f", per iteration of scan at {where} (5 iterations)")

    r = report(compiled)
    [row] = [row for row in r.rows if row.collectives]
    assert row.op == "dot_general" and row.collectives == [c]
    text = r.text()
    assert f"per iteration of scan at {where} (5 iterations)" in text
    assert "all-reduce{y} per iteration (x5)" in text
    assert f"({c.bytes} B per device; {5 * c.bytes / 1024:.1f} KiB per call counting loop " \
        "iterations)" in text, text
    js = json.loads(json.dumps(r.json()))
    assert js["collectives"][0]["loops"][0]["trip_count"] == 5
    assert js["collectives"][0]["runs"] == 5
    assert js["collective_bytes_per_call"] == 5 * c.bytes
    html = report_html(r)
    assert "per iteration of scan at" in html and "<th" in html and ">runs<" in html


def shmap_in_scan(xs):
    mesh = shardc.make_mesh((2, 4), ("x", "y"), axis_types=(shardc.AxisType.Auto,) * 2)

    def total(v):
        return shardc.lax.psum(v, "y")      # the psum

    def body(c, x):
        s = shardc.shard_map(total, mesh=mesh, in_specs=P(None, "y"), out_specs=P())(x)
        return c + s, None
    return lax.scan(body, snp.zeros((8, 4), np.float32), xs)[0]


def test_a_psum_in_a_shard_map_in_a_scan_runs_per_iteration(mesh2x4):
    compiled = shardc.jit(shmap_in_scan).lower(put(mesh2x4, (3, 8, 16), None, None, "y")) \
        .compile()
    cs = [c for c in collectives(compiled.as_text(), mesh2x4) if c.kind == "all-reduce"]
    assert cs, compiled.as_text()
    [c] = cs
    assert c.loc == (__file__, line_of(shmap_in_scan, "# the psum"))
    assert c.axes == ("y",) and c.op == "psum"
    assert [lp.op for lp in c.loops] == ["scan"] and c.runs == 3
    # the row of the psum in the shard_map body claims it
    [row] = [row for row in report(compiled).rows if row.collectives]
    assert row.op == "psum" and row.collectives == [c]


def loop(a, w, n):
    return lax.while_loop(lambda c: c[0] < n,
                          lambda c: (c[0] + 1, snp.tanh(c[1] @ w)), (0, a))[1]


def test_a_while_loop_with_unknown_trip_count(mesh2x4):
    compiled = shardc.jit(loop).lower(put(mesh2x4, (8, 16), None, "y"),
                                      put(mesh2x4, (16, 16), "y"), np.int32(3)).compile()
    [c] = [c for c in collectives(compiled.as_text(), mesh2x4) if c.op == "dot_general"]
    [lp] = c.loops
    assert lp.op == "while" and lp.trip_count is None and c.runs is None
    assert lp.loc == (__file__, line_of(loop, "lax.while_loop"))
    text = report(compiled).text()
    assert "per iteration of while at test_report_loops.py:" in text
    assert "some run in a loop of unknown trip count" in text


def no_loop(x, w):
    return x @ w


def test_collectives_outside_loops_keep_their_report(mesh2x4):
    compiled = shardc.jit(no_loop).lower(put(mesh2x4, (8, 16), None, "y"),
                                         put(mesh2x4, (16, 16), "y")).compile()
    [c] = collectives(compiled.as_text(), mesh2x4)
    assert c.loops == [] and c.runs == 1 and "per iteration" not in str(c)
    text = report(compiled).text()
    assert "per iteration" not in text and "runs" not in text


def nested(h, ws, n):
    def layer(h, w):
        h = lax.while_loop(lambda c: c[0] < n,
                           lambda c: (c[0] + 1, snp.tanh(c[1] @ w)), (0, h))[1]
        return h, None
    return lax.scan(layer, h, ws)[0]


def test_a_collective_in_nested_loops_names_both_innermost_first(mesh2x4):
    compiled = shardc.jit(nested).lower(put(mesh2x4, (8, 16), None, "y"),
                                        put(mesh2x4, (5, 16, 16), None, "y"),
                                        np.int32(2)).compile()
    [c] = [c for c in collectives(compiled.as_text(), mesh2x4) if c.op == "dot_general"]
    assert [(lp.op, lp.loc[1]) for lp in c.loops] == [
        ("while", line_of(nested, "lax.while_loop")), ("scan", line_of(nested, "lax.scan"))]
    assert c.loops[1].trip_count == 5 and c.runs is None
    assert str(c).endswith(" (5 iterations)") and ", per iteration of while at " in str(c)
