"""The notebook views and the command line on programs with scan and cond: every stage
renders, the regions are shown (block arguments with their provenance, the ops of each
body), and the report ties a loop's collective to its line."""
import contextlib
import io
import json
import textwrap

import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc import lax
from shardc.tools import html


def put(mesh, shape, *spec):
    return shardc.device_put(np.ones(shape, np.float32), NamedSharding(mesh, P(*spec)))


def model(h, ws, i):
    def layer(h, w):
        return snp.tanh(h @ w), h.sum()
    h, sums = lax.scan(layer, h, ws)
    return lax.cond(i > 0, lambda h: h * 2, lambda h: -h, h), sums


def _args(mesh):
    return put(mesh, (8, 16), "x"), put(mesh, (3, 16, 16), None, None, "y"), np.int32(1)


def test_notebook_views_show_scan_and_cond_regions(mesh2x4):
    lowered = shardc.jit(model).lower(*_args(mesh2x4))
    traced = lowered.traced
    h = traced._repr_html_()
    assert "scan(" in h and "cond(" in h
    assert h.count("^(") == 3            # the scan body and the two branches
    assert "slice of xs 0 of scan@test_views_regions.py:" in h    # a block arg's note
    assert "= dot_general(" in h and "= neg(" in h
    lh = lowered._repr_html_()
    assert "stablehlo.while" in lh and "stablehlo.case" in lh and "scan(" in lh
    ch = lowered.compile()._repr_html_()
    assert "collectives XLA inserted" in ch and "while" in ch


def test_ir_html_attaches_block_argument_notes_to_their_region_line(mesh2x4):
    rows, _ = html.ir_rows(shardc.jit(model).trace(*_args(mesh2x4)).explain())
    [(code, notes)] = [(c, n) for c, n in rows if "^(" in c and "f32[16,16]" in c]
    assert any("slice of xs 0 of scan@" in n for n in notes), notes


MODEL = textwrap.dedent("""\
    import shardc.numpy as snp
    from shardc import lax


    def model(h, ws):
        def layer(h, w):
            return snp.tanh(h @ w), None
        h, _ = lax.scan(layer, h, ws)
        return lax.cond(h.sum() > 0, lambda h: h * 2, lambda h: -h, h)
    """)
ARGS = ["--mesh", "x=2,y=4", "--arg", "f32[8,16]@P(None,'y')",
        "--arg", "f32[3,16,16]@P(None,'y',None)"]


def _cli(*args):
    """The command in this process (test_cli runs it as a subprocess): its stdout."""
    from shardc.tools import cli
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    assert code == 0, err.getvalue()
    return out.getvalue()


def test_cli_stages_of_a_program_with_scan_and_cond(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    fn = f"{path}:model"
    ir = _cli("ir", fn, *ARGS)
    assert "= scan(" in ir and "= cond(" in ir and ir.count("^(") == 3
    assert "= scan(" in _cli("ir", fn, *ARGS, "--stage", "traced")
    js = json.loads(_cli("ir", fn, *ARGS, "--format", "json"))
    scan = next(op for op in js["ops"] if op["op"] == "scan")
    assert len(scan["regions"]) == 1 and scan["regions"][0]["ops"][0]["op"] == "dot_general"
    cond = next(op for op in js["ops"] if op["op"] == "cond")
    assert len(cond["regions"]) == 2
    w = scan["regions"][0]["args"][1]        # the slice of the stacked weights
    assert w["sharding"] == "[{y}, {}]"
    assert w["why"][0]["via"] == [{"op": "scan boundary", "loc": "model.py:8",
                                   "crossing": "slice of xs 0 of scan@model.py:8"}]
    hlo = _cli("stablehlo", fn, *ARGS)
    assert "stablehlo.while" in hlo and "stablehlo.case" in hlo
    assert " while(" in _cli("hlo", fn, *ARGS)
    rep = _cli("report", fn, *ARGS)
    # the dot's contracting dim is split on y: an all-reduce at its line, per iteration
    assert "per iteration of scan at model.py:8 (3 iterations)" in rep, rep
    assert "all-reduce{y} per iteration (x3)" in rep, rep
    js = json.loads(_cli("report", fn, *ARGS, "--format", "json"))
    [c] = [c for c in js["collectives"] if c["op"] == "dot_general"]
    assert c["line"] == 7 and c["loops"][0]["line"] == 8 and c["runs"] == 3
