"""Every registered primitive states every rule the pipeline needs, and passes ask traits,
not op names: a new op that forgets a rule fails here, not in a user's program."""
import ast
import inspect
import pathlib

import pytest

import shardc  # noqa: F401  (registers every primitive)
from shardc.ir.primitive import NO_FACTOR_RULE, PRIMITIVES, Primitive, PropKind, Trait, Vma

SHARDC = pathlib.Path(shardc.__file__).resolve().parent

# comparisons of an op's name with a string that remain (file, name); only ever shrinks
ALLOWED_NAME_TESTS: set = set()   # (file, op name) pairs still tested by name: none


def missing_rules(prim) -> list[str]:
    """What `prim` lacks: a shape rule, a factor rule (or NO_FACTOR_RULE), a lowering, a
    propagation kind (PropKind.NONE included), a gradient (or the not-differentiable
    marker), a batching rule (batching.no_operands for ops without operands); ops
    with regions also need a shape rule that takes the regions' types."""
    out = []
    for what in ("shape_rule", "sharding_rule", "lower", "vjp", "operand_uses", "batch"):
        if not callable(getattr(prim, what, None)):
            out.append(what)
    if not isinstance(prim.prop_kind, PropKind):
        out.append("prop_kind")
    if not isinstance(prim.traits, Trait):
        out.append("traits")
    if not isinstance(prim.vma, Vma):
        out.append("vma")
    if prim.has_regions:
        try:
            params = inspect.signature(prim.shape_rule).parameters
        except (TypeError, ValueError):
            params = {}
        if "regions" not in params:
            out.append("shape_rule(regions=)")
    return out


@pytest.mark.parametrize("name", sorted(PRIMITIVES))
def test_primitive_states_every_rule(name):
    assert not missing_rules(PRIMITIVES[name]), (name, missing_rules(PRIMITIVES[name]))


def test_the_check_finds_a_missing_gradient_and_region_rule():
    p = Primitive("_test_incomplete", shape_rule=lambda x: x, sharding_rule=NO_FACTOR_RULE,
                  lower=lambda ctx, x: x, prop_kind=PropKind.NONE, num_regions=1)
    try:
        assert missing_rules(p) == ["vjp", "batch", "shape_rule(regions=)"]
        p.vjp = lambda ctx, cts, x: [None]
        p.batch = lambda ctx, args, batched: (args[0], batched[0])
        assert missing_rules(p) == ["shape_rule(regions=)"]
    finally:
        del PRIMITIVES["_test_incomplete"]


@pytest.mark.parametrize("missing", ["shape_rule", "sharding_rule", "lower", "prop_kind"])
def test_a_primitive_cannot_be_registered_without_a_rule(missing):
    rules = dict(shape_rule=lambda x: x, sharding_rule=NO_FACTOR_RULE,
                 lower=lambda ctx, x: x, prop_kind=PropKind.NONE)
    del rules[missing]
    with pytest.raises(TypeError):
        Primitive("_test_no_rule", **rules)
    rules[missing] = None
    with pytest.raises((TypeError, ValueError)):
        Primitive("_test_no_rule", **rules)
    assert "_test_no_rule" not in PRIMITIVES


def _is_op_name(node):
    """`<...>.prim.name` or `prim.name`."""
    return isinstance(node, ast.Attribute) and node.attr == "name" and (
        isinstance(node.value, ast.Attribute) and node.value.attr == "prim" or
        isinstance(node.value, ast.Name) and node.value.id == "prim")


def _name_tests(path):
    """(line, name) of every `<...>.name == "x"` / `.name in ("x", ...)` test on an op;
    a test against a named set (`.name in _SET`) or a prefix (`.name.startswith("x")`)
    gives "<_SET>" / "x*"."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("startswith", "endswith") and _is_op_name(node.func.value):
            for a in node.args:
                if isinstance(a, ast.Constant):
                    yield node.lineno, f"{a.value}*"
            continue
        if not isinstance(node, ast.Compare) or not _is_op_name(node.left):
            continue
        for c in node.comparators:
            if isinstance(c, ast.Name):
                yield node.lineno, f"<{c.id}>"
            for k in ([c] if isinstance(c, ast.Constant) else getattr(c, "elts", [])):
                if isinstance(k, ast.Constant) and isinstance(k.value, str):
                    yield node.lineno, k.value


def test_passes_ask_traits_not_op_names():
    found = set()
    where = []
    for path in sorted(SHARDC.rglob("*.py")):
        rel = path.relative_to(SHARDC).as_posix()
        for line, name in _name_tests(path):
            found.add((rel, name))
            if (rel, name) not in ALLOWED_NAME_TESTS:
                where.append(f"shardc/{rel}:{line}: op name {name!r}")
    assert not where, "give the op a trait instead of testing its name:\n" + "\n".join(where)


def test_the_name_scan_finds_a_name_test(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("def f(op, prim):\n    return op.prim.name == 'iota' or "
                 "prim.name in ('a', 'b')\n"
                 "def g(op):\n    return op.prim.name in _SET or "
                 "op.prim.name.startswith('reduce_')\n")
    assert sorted(_name_tests(f)) == [(2, "a"), (2, "b"), (2, "iota"), (4, "<_SET>"),
                                      (4, "reduce_*")]
