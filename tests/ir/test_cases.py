"""Every case of the propagation corpus (tests/ir/cases/*.txt; format in corpus.py): the IR
text in, propagated as `shardc ir` does (prepare + propagate), equals the text out."""
import pytest

from shardc.ir.primitive import PRIMITIVES
from shardc.ir.rules import no_rule
from shardc.propagate.passes import propagate_text

from .corpus import all_cases

CASES = all_cases()

# primitives whose factor rule no case can exercise, with the reason
UNTESTABLE: dict[str, str] = {}


def _param(c):
    marks = [pytest.mark.xfail(reason=c.xfail, strict=True)] if c.xfail else []
    return pytest.param(c, id=c.id, marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_case(case):
    got = propagate_text(case.src)
    assert got == case.want, f"{case.id} ({case.comment}): got\n{got}"


def test_enough_cases():
    assert len(CASES) >= 150, len(CASES)


def _ops_in(text):
    import re
    return set(re.findall(r"= ([a-z_0-9]+)\(", text))


def test_every_factor_rule_appears_in_a_case():
    used = set().union(*(_ops_in(c.src) for c in CASES))
    with_rule = {n for n, p in PRIMITIVES.items()
                 if p.sharding_rule is not None and p.sharding_rule is not no_rule}
    missing = sorted(with_rule - used - set(UNTESTABLE))
    assert not missing, f"primitives with a factor rule but no corpus case: {missing}"
