"""The communication cost model (propagate/cost.py): hand-computed bytes on IR values,
the conflict costs explain prints, and the buffers XLA's compiled HLO really moves."""
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
from shardc.ir.parse import parse_program
from shardc.ir.program import Aval
from shardc.ir.sharding import MeshShape, Sharding
from shardc.propagate import cost, passes
from shardc.tools.report import collectives

MESH = MeshShape((("x", 2), ("y", 4)))
F32 = np.dtype("float32")


def comms(src, dst, shape=(16, 32)):
    return [(c.kind, tuple(a[0] for a in c.axes), c.buffer, c.sent)
            for c in cost.reshard(Aval(shape, F32), src and Sharding(src),
                                  dst and Sharding(dst), MESH)]


def test_reshard_bytes_by_hand():
    # f32[16,32] is 2048 B
    assert comms([["x"], []], None) == [("all-gather", ("x",), 2048, 1024)]
    assert comms([["x"], []], [[], ["x"]]) == [("all-to-all", ("x",), 1024, 512)]
    # local 2048/8 = 256 B, gathered over y (4) to 1024 B; a ring sends 3/4 of it
    assert comms([["x", "y"], []], [["x"], []]) == [("all-gather", ("y",), 1024, 768)]
    # adding axes is a local slice; the same sharding costs nothing
    assert comms(None, [["x"], ["y"]]) == []
    assert comms([["x"], ["y"]], [["x"], ["y"]]) == []
    # y moves to dim 0 (all-to-all on 256 B), then x is gathered (256 -> 512 B)
    assert comms([["x"], ["y"]], [["y"], []]) == [("all-to-all", ("y",), 256, 192),
                                                  ("all-gather", ("x",), 512, 256)]


def _propagated(text):
    p = parse_program(text)
    passes.prepare(p)
    passes.propagate(p)
    return p


def test_sharded_contraction_costs_an_all_reduce_of_the_result():
    p = _propagated("""mesh <x=2, y=4>
func @f(%a: f32[8,16] [{}, {y}], %b: f32[16,32] [{y}, {}]) -> (f32[8,32] [{}, {}]) {
  %0: f32[8,32] = dot_general(%a, %b) {contracting=((1,), (0,)), batch=((), ())}
  return %0
}
""")
    [(op, v, cs)] = cost.program_costs(p)
    assert op.prim.name == "dot_general"
    # the f32[8,32] result (1024 B) summed over y: a ring all-reduce sends 2 * 3/4 of it
    assert [(c.kind, c.buffer, c.sent) for c in cs] == [("all-reduce", 1024, 1536)]


def test_explain_prints_the_cost_of_each_conflict():
    text = passes.propagate_text("""mesh <x=2, y=4>
func @f(%a: f32[8,16], %b: f32[16,32] [{}, {x}], %c: f32[8,32] [{x}, {}]) -> (f32[8,32]) {
  %0: f32[8,32] = dot_general(%a, %b) {contracting=((1,), (0,)), batch=((), ())}
  %1: f32[8,32] = add(%0, %c)
  return %1
}
""", explain=True)
    # %0 is [{x}, {}]; its dim 1 wanted x too: moving x there is an all-to-all of the
    # 512 B local block, half of which leaves each device
    assert "dim 1 of a f32[8,32] wanted {x} but kept {}: dim 0 of the tensor already uses " \
        "the same mesh axes (resharding it: all-to-all over {x}: 256 B sent per device)" \
        in text, text


def _xla(fn, args, mesh, **jit):
    compiled = shardc.jit(fn, **jit).lower(*args).compile()
    return compiled, [(c.kind, c.bytes) for c in collectives(compiled.as_text(), mesh)]


def put(mesh, shape, spec):
    return shardc.device_put(np.ones(shape, np.float32), NamedSharding(mesh, spec))


@pytest.mark.parametrize("case", ["all-reduce", "all-gather", "all-to-all"])
def test_estimates_match_the_buffers_xla_moves(mesh2x4, case):
    if case == "all-reduce":
        def fn(a, b):
            return a @ b
        args = [put(mesh2x4, (64, 256), P(None, "y")), put(mesh2x4, (256, 128), P("y", None))]
        jit = {"out_shardings": NamedSharding(mesh2x4, P())}
    elif case == "all-gather":
        def fn(a):
            return a * 2.0
        args = [put(mesh2x4, (64, 256), P("x", "y"))]
        jit = {"out_shardings": NamedSharding(mesh2x4, P("x", None))}
    else:
        def fn(a):
            return shardc.lax.with_sharding_constraint(
                a * 2.0, NamedSharding(mesh2x4, P(None, "y"))) + 1.0
        args = [put(mesh2x4, (64, 256), P("y", None))]
        jit = {}
    compiled, xla = _xla(fn, args, mesh2x4, **jit)
    p = compiled.lowered.traced.program
    ours = [(c.kind, c.buffer) for _, _, cs in cost.program_costs(p) for c in cs]
    assert ours == xla, (ours, xla)
    assert ours and ours[0][0] == case
