"""Regions are IR citizens: the verifier checks a region's block arguments and yields
against the operands and results through the op's shape rule, as any op's types."""
import pytest

from shardc.ir.parse import parse_program
from shardc.ir.program import print_program
from shardc.ir.verify import VerifyError, verify
import shardc  # noqa: F401  (registers the ops)

GOOD = """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{x}, {y}], %b: f32[3] [{}]) -> (f32[4,16] [{}, {y}]) {
  %0: f32[4,16] [{}, {y}] = shard_map(%a, %b) {in_specs=([{x}, {y}],), out_specs=([{}, {y}],), \
manual_axes=('x', 'y'), mesh=<x=2, y=4>, check_vma=True} loc("model.py":3) {
  ^(%1: f32[4,4] [{}, {}], %4: f32[3] [{}]):
    %2: f32[4,4] [{}, {}] = sin(%1) loc("model.py":2)
    %3: f32[4,4] [{}, {}] = psum(%2) {axes=('x',), sizes=(2,)} loc("model.py":2)
    return %3
  }
  return %0
}
"""


def test_a_well_typed_region_verifies_and_prints_back():
    p = parse_program(GOOD)
    verify(p)
    assert print_program(p) == GOOD


@pytest.mark.parametrize("old, new, phrase", [
    # the block argument is not the operand's per-device block
    ("^(%1: f32[4,4] [{}, {}]", "^(%1: f32[8,4] [{}, {}]", "block argument 0 is f32[8,4]"),
    ("^(%1: f32[4,4] [{}, {}]", "^(%1: i32[4,4] [{}, {}]", "block argument 0 is i32[4,4]"),
    # a captured operand (past in_specs) is whole on every device
    ("%4: f32[3] [{}]):", "%4: f32[1] [{}]):", "block argument 1 is f32[1]"),
    # a block argument too few
    (", %4: f32[3] [{}]):", "):", "2 operands, 1 in_specs and 1 block arguments"),
    # the yield does not give the declared result
    ("%0: f32[4,16] [{}, {y}] = shard_map", "%0: f32[4,8] [{}, {y}] = shard_map",
     "do not match the op's shape rule"),
    ("return %3\n  }", "return %3, %3\n  }", "yields 2 values for 1 out_specs"),
])
def test_region_types_are_checked_against_the_op(old, new, phrase):
    assert old in GOOD
    p = parse_program(GOOD.replace(old, new).replace(
        "-> (f32[4,16] [{}, {y}])", "-> (f32[4,8] [{}, {y}])" if "f32[4,8]" in new else
        "-> (f32[4,16] [{}, {y}])"))
    with pytest.raises(VerifyError) as e:
        verify(p)
    assert phrase in str(e.value) and "shard_map" in str(e.value), str(e.value)
    assert e.value.op is not None and e.value.op.prim.name == "shard_map"


def test_an_op_owns_as_many_regions_as_it_declares():
    p = parse_program(GOOD)
    op = p.ops[0]
    op.regions = ()
    with pytest.raises(VerifyError, match="owns 1 region"):
        verify(p)
    op.regions = (op.regions + (parse_program(GOOD).ops[0].regions[0],)) * 2
    with pytest.raises(VerifyError, match="owns 1 region"):
        verify(p)


def test_region_op_results_need_no_sharding_in_text():
    """shard_map's result shardings follow from out_specs: the text may leave them out
    (only a constraint's result must carry its sharding)."""
    p = parse_program(GOOD.replace("%0: f32[4,16] [{}, {y}] = shard_map", "%0: f32[4,16] = "
                                   "shard_map"))
    assert p.ops[0].outputs[0].sharding is None
    verify(p)
