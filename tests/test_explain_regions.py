"""explain through control-flow bodies: a value inside a scan / cond / while body whose
sharding came from outside says which boundary it crossed, as what (carry, slice of xs,
operand, result) and at which line of the user's; the CLI's `ir --explain` shows it."""
import os
import re
import subprocess
import sys
import textwrap

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc import lax

HERE = os.path.basename(__file__)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _line(marker):
    """The line of this file that holds `# <marker>`."""
    with open(__file__) as f:
        return next(i + 1 for i, ln in enumerate(f) if ln.rstrip().endswith(f"# <{marker}>"))


def _notes(text):
    """{value name: its provenance comment} of an explained program."""
    return dict(re.findall(r"// %(\w+): (.*)", text))


def _names(text, op):
    """The block arguments of the first `op` in the text (names, in order)."""
    lines = text.splitlines()
    i = next(k for k, ln in enumerate(lines) if f"= {op}(" in ln)
    return re.findall(r"%(\w+):", lines[i + 1])


def _sds(mesh, shape, *spec, dtype=np.float32):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(mesh, P(*spec)))


def _stacked_mlp(h, ws):
    def layer(h, w):
        return snp.tanh(h @ w), None
    h, _ = lax.scan(layer, h, ws)  # <scan>
    return h


def test_scan_body_values_name_the_boundary_and_the_slice(mesh2x4):
    text = shardc.jit(_stacked_mlp).trace(_sds(mesh2x4, (4, 16), "x"),
                                          _sds(mesh2x4, (3, 16, 16), None, None, "y")).explain()
    where = f"scan@{HERE}:{_line('scan')}"
    notes = _notes(text)
    carry, w = _names(text, "scan")
    assert notes[carry].startswith(f"dim 0 {{x}} from argument h via carry 0 entering the "
                                   f"{where} body"), text
    # the stacked weights' slice: y stays on the slice's dim 1
    assert notes[w] == f"dim 1 {{y}} from argument ws via slice of xs 0 of {where}", text


def test_scan_result_from_the_body_says_it_left_it(mesh2x4):
    text = shardc.jit(_stacked_mlp).trace(_sds(mesh2x4, (4, 16), "x"),
                                          _sds(mesh2x4, (3, 16, 16), None, None, "y")).explain()
    res = re.search(r"%(\w+): f32\[4,16\] \[\{x\}, \{y\}\] = scan", text).group(1)
    assert (f"dim 1 {{y}} from argument ws via carry 0 leaving the scan@{HERE}:"
            f"{_line('scan')} body <- tanh@") in _notes(text)[res], text


def _ys(xs):
    def body(c, x):
        return c, snp.exp(x)
    return lax.scan(body, 0.0, xs)[1]  # <ys>


def test_stacked_ys_say_they_are_stacked(mesh2x4):
    text = shardc.jit(_ys).trace(_sds(mesh2x4, (5, 8, 16), None, "x")).explain()
    (res,) = re.findall(r"%(\w+): f32\[5,8,16\] \[\{\}, \{x\}, \{\}\] = scan", text) or \
        re.findall(r", %(\w+): f32\[5,8,16\] \[\{\}, \{x\}, \{\}\] = scan", text)
    assert f"ys 0 of scan@{HERE}:{_line('ys')}, stacked from its body's slices" in \
        _notes(text)[res], text


def _branches(i, a):
    mesh = shardc.make_mesh((2, 4), ("x", "y"), axis_types=(shardc.AxisType.Auto,) * 2)

    def one(a):
        return shardc.with_sharding_constraint(snp.sin(a), NamedSharding(mesh, P("x", "y")))
    return lax.switch(i, [snp.cos, one], a)  # <switch>


def test_cond_branch_takes_the_other_branchs_sharding_and_says_from_where(mesh2x4):
    """Branch 0 has no constraint: its value's x,y came from branch 1 through the op's
    result (the branches agree on their result shardings)."""
    text = shardc.jit(_branches).trace(jax.ShapeDtypeStruct((), np.int32),
                                       _sds(mesh2x4, (8, 16))).explain()
    lines = text.splitlines()
    cos = next(ln for ln in lines if "= cos(" in ln)
    assert "[{x}, {y}]" in cos
    name = re.search(r"%(\w+):", cos).group(1)
    note = _notes(text)[name]
    assert note.startswith("dim 0 {x} from with_sharding_constraint at ")
    assert f"result 0 of cond@{HERE}:{_line('switch')}, back to what its body yields" in note


def _loop(a, w):
    return lax.while_loop(lambda c: c[0] < 3,  # <while>
                          lambda c: (c[0] + 1, snp.tanh(c[1] @ w)), (0, a))[1]


def test_while_body_argument_names_the_carry(mesh2x4):
    text = shardc.jit(_loop).trace(_sds(mesh2x4, (8, 16), "x"),
                                   _sds(mesh2x4, (16, 16))).explain()
    lines = text.splitlines()
    i = max(k for k, ln in enumerate(lines) if ln.strip().startswith("^("))   # the body
    carry = re.findall(r"%(\w+): f32\[8,16\]", lines[i])[0]
    assert _notes(text)[carry].startswith(
        f"dim 0 {{x}} from argument a via carry 1 entering the while@{HERE}:{_line('while')}"
        " body"), text


MODEL = textwrap.dedent("""\
    import shardc.numpy as snp
    from shardc import lax


    def stacked(h, ws):
        def layer(h, w):
            return snp.tanh(h @ w), None
        return lax.scan(layer, h, ws)[0]
    """)


def test_cli_ir_explain_shows_provenance_through_a_scan(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("XLA_FLAGS", None)
    p = subprocess.run([sys.executable, "-m", "shardc", "ir", f"{path}:stacked", "--mesh",
                        "x=2,y=4", "--arg", "f32[4,16]@P('x',None)",
                        "--arg", "f32[3,16,16]@P(None,None,'y')", "--explain"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "via slice of xs 0 of scan@model.py:8" in p.stdout, p.stdout
    assert "carry 0 entering the scan@model.py:8 body" in p.stdout, p.stdout


def _deep(h, ws):
    def layer(h, w):
        y = snp.sin(snp.cos(snp.exp(snp.tanh(h))))
        return snp.abs(snp.negative(y)) + w, None
    return lax.scan(layer, h, ws)[0]  # <deep>


def test_a_long_chain_still_shows_where_it_entered_the_body(mesh2x4):
    """Past explain's hop limit the crossing into the body is still named."""
    text = shardc.jit(_deep).trace(_sds(mesh2x4, (8, 16)),
                                   _sds(mesh2x4, (3, 8, 16), None, "x")).explain()
    lines = text.splitlines()
    first = next(ln for ln in lines if "= tanh(" in ln)   # 6 ops from the slice
    note = _notes(text)[re.search(r"%(\w+):", first).group(1)]
    assert "<- ... <- slice of xs" in note, note
    assert f"slice of xs 0 of scan@{HERE}:{_line('deep')}" in note, text


def test_a_value_its_operands_conflict_on_says_so():
    # a * b with a split over data and b over model: neither reaches the product; it
    # said "no sharding reached it" and listed no conflict
    mesh = shardc.make_mesh((2, 4), ("data", "model"), axis_types=(shardc.AxisType.Auto,) * 2)
    a = shardc.device_put(np.ones((64, 256), np.float32), NamedSharding(mesh, P("data")))
    b = shardc.device_put(np.ones((64, 256), np.float32), NamedSharding(mesh, P("model")))
    text = shardc.jit(lambda a, b: a * b).trace(a, b).explain()
    assert "no sharding reached it" not in text
    assert "shardings reached it but conflicted" in text
    assert "its operands want {data} and {model}, which are incompatible" in text
