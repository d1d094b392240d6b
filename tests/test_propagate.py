"""Propagation as text: this IR in, this annotated IR out (each also checked against
XLA's own Shardy on the same program)."""
import pytest

from oracle import shardy_for_text
from shardc.propagate.passes import propagate_text

CASES = {
    'reduce keeps the other axis': (
        """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{x}, {y}]) -> (f32[16]) {
  %0: f32[16] = reduce_sum(%a) {axes=(0,)}
  return %0
}
""",
        """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{x}, {y}]) -> (f32[16] [{y}]) {
  %0: f32[16] [{y}] = reduce_sum(%a) {axes=(0,)}
  return %0
}
"""),
    'matmul conflict: larger tensor wins': (
        """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{x}, {}], %b: f32[16,32] [{}, {x}]) -> (f32[8,32]) {
  %0: f32[8,32] = dot_general(%a, %b) {contracting=((1,), (0,)), batch=((), ())}
  return %0
}
""",
        """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{x}, {}], %b: f32[16,32] [{}, {x}]) -> (f32[8,32] [{}, {x}]) {
  %0: f32[8,32] [{}, {x}] = dot_general(%a, %b) {contracting=((1,), (0,)), batch=((), ())}
  return %0
}
"""),
    'elementwise tie: the earlier operand wins': (
        """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{}, {x}], %b: f32[8,16] [{x}, {}]) -> (f32[8,16]) {
  %0: f32[8,16] = mul(%a, %b)
  return %0
}
""",
        """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{}, {x}], %b: f32[8,16] [{x}, {}]) -> (f32[8,16] [{}, {x}]) {
  %0: f32[8,16] [{}, {x}] = mul(%a, %b)
  return %0
}
"""),
    'reshape split with sub-axes': (
        """mesh <x=2, y=4>
func @f(%a: f32[8] [{y}]) -> (f32[2,4]) {
  %0: f32[2,4] = reshape(%a) {shape=(2, 4)}
  %1: f32[2,4] = exp(%0)
  return %1
}
""",
        """mesh <x=2, y=4>
func @f(%a: f32[8] [{y}]) -> (f32[2,4] [{}, {}]) {
  %0: f32[2,4] [{y:(1)2}, {y:(2)2}] = reshape(%a) {shape=(2, 4)}
  %1: f32[2,4] [{y:(1)2}, {y:(2)2}] = exp(%0)
  return %1
}
"""),
    "broadcast takes its user's sharding": (
        """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{x}, {y}], %b: f32[16] [{}]) -> (f32[8,16]) {
  %0: f32[8,16] = broadcast_in_dim(%b) {shape=(8, 16), broadcast_dimensions=(1,)}
  %1: f32[8,16] = add(%a, %0)
  return %1
}
""",
        """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{x}, {y}], %b: f32[16] [{}]) -> (f32[8,16] [{x}, {y}]) {
  %0: f32[8,16] [{x}, {y}] = broadcast_in_dim(%b) {shape=(8, 16), broadcast_dimensions=(1,)}
  %1: f32[8,16] [{x}, {y}] = add(%a, %0)
  return %1
}
"""),
    'constraint shards its input': (
        """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{}, {}]) -> (f32[8,16]) {
  %0: f32[8,16] = exp(%a)
  %1: f32[8,16] [{y}, {x}] = sharding_constraint(%0) {sharding=[{y}, {x}]}
  %2: f32[8,16] = tanh(%1)
  return %2
}
""",
        """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{}, {}]) -> (f32[8,16] [{y}, {x}]) {
  %0: f32[8,16] [{y}, {x}] = exp(%a)
  %1: f32[8,16] [{y}, {x}] = sharding_constraint(%0) {sharding=[{y}, {x}]}
  %2: f32[8,16] [{y}, {x}] = tanh(%1)
  return %2
}
"""),
    'uneven result keeps only dividing axes': (
        """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{x}, {y}]) -> (f32[7,16]) {
  %0: f32[7,16] = slice(%a) {start_indices=(0, 0), limit_indices=(7, 16)}
  %1: f32[7,16] = exp(%0)
  return %1
}
""",
        """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{x}, {y}]) -> (f32[7,16] [{}, {y}]) {
  %0: f32[7,16] [{x}, {y}] = slice(%a) {start_indices=(0, 0), limit_indices=(7, 16)}
  %1: f32[7,16] [{x}, {y}] = exp(%0)
  return %1
}
"""),
    'two axes on one dim': (
        """mesh <x=2, y=4>
func @f(%a: f32[16,4] [{x, y}, {}]) -> (f32[4,16]) {
  %0: f32[4,16] = transpose(%a) {permutation=(1, 0)}
  return %0
}
""",
        """mesh <x=2, y=4>
func @f(%a: f32[16,4] [{x, y}, {}]) -> (f32[4,16] [{}, {x, y}]) {
  %0: f32[4,16] [{}, {x, y}] = transpose(%a) {permutation=(1, 0)}
  return %0
}
"""),
    'multi-use operand waits for a later round': (
        """mesh <x=2, y=4>
func @f(%a: f32[8] [{x}], %b: f32[8] [{y}]) -> (f32[8]) {
  %0: f32[8] = square(%a)
  %1: f32[8] = add(%b, %0)
  return %1
}
""",
        """mesh <x=2, y=4>
func @f(%a: f32[8] [{x}], %b: f32[8] [{y}]) -> (f32[8] [{y}]) {
  %0: f32[8] [{y}] = square(%a)
  %1: f32[8] [{y}] = add(%b, %0)
  return %1
}
"""),
    'out_shardings pull backwards': (
        """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{}, {}]) -> (f32[8,16] [{}, {y}]) {
  %0: f32[8,16] = exp(%a)
  %1: f32[8,16] = tanh(%0)
  return %1
}
""",
        """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{}, {}]) -> (f32[8,16] [{}, {y}]) {
  %0: f32[8,16] [{}, {y}] = exp(%a)
  %1: f32[8,16] [{}, {y}] = tanh(%0)
  return %1
}
"""),
}


@pytest.mark.parametrize("name", list(CASES))
def test_text_in_text_out(name):
    src, want = CASES[name]
    assert propagate_text(src) == want


@pytest.mark.parametrize("name", list(CASES))
def test_cases_agree_with_xla_shardy(name):
    for ours, xla in shardy_for_text(CASES[name][0]):
        assert ours == xla


def test_explain_names_source_ops_and_lines():
    src = CASES["constraint shards its input"][0].replace(
        "= sharding_constraint(%0) {sharding=[{y}, {x}]}",
        '= sharding_constraint(%0) {sharding=[{y}, {x}]} loc("model.py":12)').replace(
        "= tanh(%1)", '= tanh(%1) loc("model.py":13)')
    text = propagate_text(src, explain=True)
    assert "// %2: dim 0 {y} from with_sharding_constraint at model.py:12 via tanh@model.py:13" \
        in text, text


def test_conflicts_are_recorded_with_the_rule_that_settled_them():
    text = propagate_text(CASES["matmul conflict: larger tensor wins"][0], explain=True)
    assert "// conflict at dot_general" in text and "wanted {x}" in text, text
    assert "another factor of the op (dim 1), from a larger tensor, took the same mesh " \
        "axes" in text, text
    text = propagate_text(CASES["elementwise tie: the earlier operand wins"][0], explain=True)
    assert "dim 0 of a f32[8,16] wanted {x} but kept {}: another factor of the op (dim 1), " \
        "from a tensor earlier in the op (operands before results)" in text, text
    # the add (an elementwise op, an earlier round) shards %0's dim 0 before the
    # dot_general's round: b's larger factor finds the axis taken
    text = propagate_text("""mesh <x=2, y=4>
func @f(%a: f32[8,16], %b: f32[16,32] [{}, {x}], %c: f32[8,32] [{x}, {}]) -> (f32[8,32]) {
  %0: f32[8,32] = dot_general(%a, %b) {contracting=((1,), (0,)), batch=((), ())}
  %1: f32[8,32] = add(%0, %c)
  return %1
}
""", explain=True)
    assert "%0: f32[8,32] [{x}, {}] = dot_general" in text, text
    assert "dim 1 of a f32[8,32] wanted {x} but kept {}: dim 0 of the tensor already uses " \
        "the same mesh axes" in text, text


def test_sources_are_never_overridden():
    src = """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{x}, {}]) -> (f32[8,16] [{}, {y}]) {
  %0: f32[8,16] [{y}, {}] = sharding_constraint(%a) {sharding=[{y}, {}]}
  %1: f32[8,16] = exp(%0)
  return %1
}
"""
    out = propagate_text(src)
    assert "%a: f32[8,16] [{x}, {}]" in out
    assert "%0: f32[8,16] [{y}, {}] = sharding_constraint" in out
    assert "-> (f32[8,16] [{}, {y}])" in out


def test_open_constraint_dims_are_filled_by_propagation():
    src = """mesh <x=2, y=4>
func @f(%a: f32[8,16] [{x}, {y}]) -> (f32[8,16]) {
  %0: f32[8,16] [{?}, {}] = sharding_constraint(%a) {sharding=[{?}, {}]}
  %1: f32[8,16] = exp(%0)
  return %1
}
"""
    out = propagate_text(src)
    assert "%0: f32[8,16] [{x}, {}] = sharding_constraint" in out, out
    for ours, xla in shardy_for_text(src):
        assert ours == xla


def test_a_size_one_axis_overlaps_itself():
    # a mesh axis of size 1 is the ref ("x", 1, 1): its device interval [1, 1) is empty,
    # yet (as Shardy's whole-axis refs) it overlaps itself, so no factor takes an axis
    # another dim holds (an Explicit size-1 axis stays in shardings: fuzz seed 7100021500)
    from shardc.propagate import axes as ax
    x1, y2 = ("x", 1, 1), ("y", 1, 2)
    assert ax.overlaps(x1, x1) and not ax.overlaps(x1, y2)
    assert ax.prefix_without_overlap(x1, [x1]) is None
    assert ax.prefix_without_overlap(x1, [y2]) == x1
    assert not ax.overlaps(("y", 1, 2), ("y", 2, 2)) and ax.overlaps(("y", 1, 4), ("y", 2, 2))


def test_an_explicit_type_keeps_its_value_off_other_explicit_axes():
    # on a mesh with Explicit and Auto axes a typed value's dims are open for the Auto
    # axes only (jax lowers the type as [{?}, {?}] replicated={x, z}); a reshard of it
    # makes a new value and leaves it alone. `{auto}` marks a value with no type
    # sharding (an out_sharding= operand): it takes the reshard's axes. (Before: %0 took
    # [{x}, {z}] from its reshard, and the parser read %0 as untyped.)
    src = """mesh <x=2 explicit, y=2, z=2 explicit>
func @f(%a: f32[8,16] [{}, {}]) -> (f32[8@x,16@z], f32[8,16], f32[8,16]{auto}, f32[8,16]) {
  %0: f32[8,16] = tanh(%a)
  %1: f32[8@x,16@z] [{x}, {z}] = sharding_constraint(%0) {sharding=[{x}, {z}], reshard=True}
  %2: f32[8,16]{auto} = exp(%a)
  %3: f32[8@x,16@z] [{x}, {z}] = sharding_constraint(%2) {sharding=[{x}, {z}], reshard=True}
  %4: f32[8,16] = sin(%a)
  %5: f32[8,16] [{y}, {}] = sharding_constraint(%4) {sharding=[{y}, {}]}
  %6: f32[8,16] = add(%5, %3)
  return %1, %0, %2, %6
}
"""
    assert propagate_text(src) == """mesh <x=2 explicit, y=2, z=2 explicit>
func @f(%a: f32[8,16] [{}, {}]) -> (f32[8@x,16@z] [{x}, {z}], f32[8,16] [{}, {}], \
f32[8,16]{auto} [{x}, {z}], f32[8,16] [{}, {}]) {
  %0: f32[8,16] [{}, {}] = tanh(%a)
  %1: f32[8@x,16@z] [{x}, {z}] = sharding_constraint(%0) {sharding=[{x}, {z}], reshard=True}
  %2: f32[8,16]{auto} [{x}, {z}] = exp(%a)
  %3: f32[8@x,16@z] [{x}, {z}] = sharding_constraint(%2) {sharding=[{x}, {z}], reshard=True}
  %4: f32[8,16] [{y}, {}] = sin(%a)
  %5: f32[8,16] [{y}, {}] = sharding_constraint(%4) {sharding=[{y}, {}]}
  %6: f32[8,16] [{}, {}] = add(%5, %3)
  return %1, %0, %2, %6
}
"""
