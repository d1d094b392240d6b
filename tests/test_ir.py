"""The IR text: printing is deterministic, parsing round-trips, the verifier catches errors."""
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.ir.program import print_program
from shardc.ir.parse import parse_program
from shardc.ir.verify import VerifyError, verify


def _traced(mesh):
    @shardc.jit
    def f(x, w, idx):
        h = snp.tanh(x @ w) * 2.0 + 1
        h = shardc.with_sharding_constraint(h, NamedSharding(mesh, P("x", None)))
        g = h[idx]
        return snp.sum(g, axis=0), snp.cumsum(h[:, ::2], axis=1), snp.argmax(h, axis=1)
    x = shardc.device_put(np.ones((8, 16), np.float32), NamedSharding(mesh, P("x", "y")))
    w = np.ones((16, 4), np.float32)
    return f.trace(x, w, np.array([1, 2], np.int32))


def test_roundtrip_traced_and_propagated(mesh2x4):
    t = _traced(mesh2x4)
    for text in (t.traced_ir, t.ir):
        p = parse_program(text)
        assert print_program(p) == text
        verify(p)


def test_printing_is_deterministic(mesh2x4):
    assert _traced(mesh2x4).ir == _traced(mesh2x4).ir


def test_parsed_program_propagates_like_the_original(mesh2x4):
    from shardc.propagate import passes
    t = _traced(mesh2x4)
    p = parse_program(t.traced_ir)
    passes.prepare(p)
    passes.propagate(p)
    assert print_program(p) == t.ir


def test_verifier_rejects_bad_types():
    text = """mesh <x=2>
func @f(%a: f32[4] [{x}]) -> (f32[4]) {
  %0: f32[5] = exp(%a)
  return %0
}
"""
    with pytest.raises(VerifyError, match="do not match"):
        verify(parse_program(text))


def test_verifier_rejects_unknown_axis():
    text = """mesh <x=2>
func @f(%a: f32[4] [{z}]) -> (f32[4]) {
  %0: f32[4] = exp(%a)
  return %0
}
"""
    with pytest.raises(VerifyError, match="unknown mesh axis"):
        verify(parse_program(text))


def test_parse_error_names_the_line():
    with pytest.raises(shardc.ShardcError, match="line 3"):
        parse_program("mesh <x=2>\nfunc @f(%a: f32[4]) -> (f32[4]) {\n  %0: f32[4] = nosuchop(%a)\n"
                      "  return %0\n}\n")


def test_every_primitive_has_all_its_rules():
    """Adding an op means registering its shape, sharding, lowering and gradient rules."""
    from shardc.trace.core import PRIMITIVES
    for name, p in PRIMITIVES.items():
        missing = [k for k in ("shape_rule", "lower", "vjp") if getattr(p, k) is None]
        if not p.has_regions:
            missing += ["sharding_rule"] if p.sharding_rule is None else []
        assert not missing, f"{name} lacks {missing}"


def test_bad_params_in_ir_text_are_a_clear_error():
    text = """mesh <x=2>
func @f(%a: f32[4,4] [{x}, {}]) -> (f32[4,4]) {
  %0: f32[4,4] = dot_general(%a, %a)
  return %0
}
"""
    with pytest.raises(shardc.ShardcError, match="dot_general needs the parameter"):
        verify(parse_program(text))
