"""jit's AOT stages: trace -> propagate -> lower -> compile, each inspectable.

`f.trace` only traces; `Traced.propagate()` gives the Propagated stage (with the
Assignment); the older views on Traced (.ir, .explain(), .out_info, .lower()) go
through it, propagating once."""
import re

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.api.stages import Propagated, Traced
from shardc.propagate import passes


def _fun(x, w):
    return snp.tanh(x @ w).T + 1.0


def _args(mesh):
    x = jax.device_put(np.arange(128, dtype=np.float32).reshape(8, 16) / 100,
                       NamedSharding(mesh, P("x", None)))
    w = jax.device_put(np.ones((16, 4), np.float32) / 10, NamedSharding(mesh, P(None, "y")))
    return x, w


@pytest.fixture
def counts(monkeypatch):
    """How often the propagation passes run."""
    n = {"prepare": 0, "propagate": 0}
    prepare, propagate = passes.prepare, passes.propagate_assignment

    def counted_prepare(p):
        n["prepare"] += 1
        return prepare(p)

    def counted_propagate(p):
        n["propagate"] += 1
        return propagate(p)
    monkeypatch.setattr(passes, "prepare", counted_prepare)
    monkeypatch.setattr(passes, "propagate_assignment", counted_propagate)
    return n


def _body_lines(text):
    return [ln for ln in text.splitlines() if re.match(r"\s+%\w+: ", ln)]


def test_trace_shows_the_program_before_propagation(mesh2x4, counts):
    t = shardc.jit(_fun).trace(*_args(mesh2x4))
    assert isinstance(t, Traced)
    assert counts == {"prepare": 0, "propagate": 0}      # f.trace does no propagation
    assert repr(t) == t.traced_ir
    head = t.traced_ir.splitlines()[1]
    assert "%x: f32[8,16] [{x}, {}]" in head and "%w: f32[16,4] [{}, {y}]" in head
    body = _body_lines(t.traced_ir)
    assert body and not any("[{" in ln for ln in body)   # only the sources are sharded


def test_propagate_gives_the_annotated_ir_and_its_assignment(mesh2x4, counts):
    f = shardc.jit(_fun)
    args = _args(mesh2x4)
    t = f.trace(*args)
    p = t.propagate()
    assert isinstance(p, Propagated) and counts == {"prepare": 1, "propagate": 1}
    assert repr(p) == p.ir
    body = _body_lines(p.ir)
    assert body and all("[{" in ln for ln in body)       # every value sharded
    a = p.assignment
    values = list(p.program.inputs) + [v for op in p.program.walk() for v in op.outputs]
    assert len(a) == len(values)
    for v in values:
        assert a.sharding_of(v) == v.sharding
    assert a.out_shardings == p.program.out_shardings
    # ... and the result sharding is jax's
    want = jax.jit(lambda x, w: jax.numpy.tanh(x @ w).T + 1.0).lower(*args).compile()
    (info,) = jax.tree_util.tree_leaves(p.out_info)
    assert info.sharding.is_equivalent_to(want.output_shardings, 2)


def test_traced_views_equal_the_propagated_stage(mesh2x4, counts):
    f = shardc.jit(_fun)
    args = _args(mesh2x4)
    t = f.trace(*args)
    assert t.ir == t.propagate().ir == f.trace(*args).propagate().ir
    assert t.explain() == t.propagate().explain()
    assert "from argument x" in t.explain() and "from argument w" in t.explain()
    assert t.out_info == t.propagate().out_info
    assert t.program is t.propagate().program
    assert repr(t) == t.traced_ir                       # still the traced program


def test_lower_from_either_stage_gives_the_same_stablehlo(mesh2x4):
    f = shardc.jit(_fun)
    args = _args(mesh2x4)
    via_traced = f.trace(*args).lower().as_text()
    via_propagated = f.trace(*args).propagate().lower().as_text()
    assert via_traced == via_propagated == f.lower(*args).as_text()
    assert "sdy.sharding" in via_traced
    np.testing.assert_allclose(f.trace(*args).propagate().lower().compile()(*args),
                               _fun(*map(np.asarray, args)), rtol=1e-6)


def test_propagation_runs_once_per_traced(mesh2x4, counts):
    t = shardc.jit(_fun).trace(*_args(mesh2x4))
    p = t.propagate()
    t.ir, t.explain(), t.out_info, t.program, t.lower(), t.lower()
    assert t.propagate() is p
    assert counts == {"prepare": 1, "propagate": 1}


def test_calls_propagate_once_per_signature(mesh2x4, counts):
    f = shardc.jit(_fun)
    x, w = _args(mesh2x4)
    f(x, w)
    f(x, w)
    assert counts["propagate"] == 1
    f(x[:4], w)
    assert counts["propagate"] == 2


def test_assignment_prints_and_looks_up_by_the_printed_names(mesh2x4):
    p = shardc.jit(_fun).trace(*_args(mesh2x4)).propagate()
    a = p.assignment
    text = str(a)
    assert repr(a) == text
    lines = text.splitlines()
    assert len(lines) == len(a) + 1                    # one per value, then the result
    decls = {m.group(1): m.group(2) for m in
             re.finditer(r"(%\w+): (\S+ \[[^\]]*\])", p.ir)}
    for ln in lines[:-1]:
        name, rest = ln.split(": ", 1)
        assert decls[name] == rest.split("  //")[0]    # same name, type and sharding
    assert "%x: f32[8,16] [{x}, {}]  // dim 0 {x} from argument x" in lines
    assert lines[-1].startswith("result 0 (%") and lines[-1].endswith(
        str(p.program.out_shardings[0]))
    assert a["x"] == a["%x"] == p.program.inputs[0].sharding
    assert "w" in a and "nope" not in a
    assert [v for v in a][:2] == list(p.program.inputs)
    with pytest.raises(KeyError):
        a["nope"]


def test_explain_and_html_work_on_both_stages(mesh2x4):
    from shardc.tools.html import traced_html
    t = shardc.jit(_fun).trace(*_args(mesh2x4))
    assert traced_html(t) == traced_html(t.propagate())
    assert "from argument x" in t.propagate().explain()
