"""Propagation as a stage: a prepared program in, an Assignment out, the IR untouched;
and the data-flow edges ops declare instead of propagation knowing them by name."""
import pathlib
import re

from shardc.ir.parse import parse_program
from shardc.ir.program import print_program
from shardc.propagate import engine, passes

SRC = """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{x}, {}], %b: f32[16,32]) -> (f32[8,32] [{}, {y}]) {
  %0: f32[8,32] = dot_general(%a, %b) {contracting=((1,), (0,)), batch=((), ())}
  %1: f32[8,32] = tanh(%0)
  return %1
}
"""


def test_assign_leaves_the_program_alone_and_apply_gives_the_propagated_program():
    p = passes.prepare(parse_program(SRC))
    before = print_program(p)
    a = engine.assign(p)
    assert print_program(p) == before
    assert all(v.why is None for op in p.ops for v in op.outputs)
    [op0, op1] = p.ops
    assert str(a.sharding_of(op1.outputs[0])) == "[{x}, {y}]"
    assert a.why_of(op1.outputs[0])[0].op is op1
    # the printer can read the assignment without it being applied
    text = print_program(p, shardings=a.shardings())
    assert "%1: f32[8,32] [{x}, {y}] = tanh(%0)" in text, text
    # applied (with the results' shardings exported), it is what passes.propagate gives
    q = passes.propagate(passes.prepare(parse_program(SRC)))
    a.out_shardings = passes.export_out_shardings(p, a.out_shardings)
    assert print_program(a.apply(p)) == print_program(q) != before


def test_no_op_names_in_propagation():
    """Propagation reads rules, traits and declared data-flow edges, never op names."""
    root = pathlib.Path(engine.__file__).parent
    names = ("shard_map", "sharding_group", "sharding_constraint", "inspect_sharding",
             "broadcast_in_dim", "dot_general")
    for f in root.glob("*.py"):
        code = re.sub(r'"""[\s\S]*?"""|#.*', "", f.read_text())
        for n in names:
            assert f'"{n}"' not in code, (f.name, n)
