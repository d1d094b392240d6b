"""The text-in/text-out propagation corpus (tests/ir/cases/*.txt), as Shardy's lit tests.

A case file holds several cases, each:

    === name of the case
    # what the case checks (one line)
    # xfail: why shardc's decision is wrong (optional; the expectation stays correct)
    <IR text in, as `shardc ir --stage traced` prints it>
    --- expect
    <the IR after shardc.propagate.passes.prepare + propagate, as `shardc ir` prints it>

Lines before the first `===` are the file's own comments.

To add a case: write its input with an empty expectation, run
`python tests/ir/regen.py --write FAMILY`, READ what it wrote, then check it against XLA:
`python tests/oracle/intermediates.py FAMILY` (every op's sharding) and
tests/oracle/test_corpus_vs_xla.py (results). Where shardc is wrong, write the correct
expectation by hand and add an `# xfail:` line; regen.py never rewrites those."""
from __future__ import annotations

import pathlib
from dataclasses import dataclass

CASES_DIR = pathlib.Path(__file__).resolve().parent / "cases"
CASE, EXPECT = "=== ", "--- expect"


@dataclass
class Case:
    file: str           # the file's stem (its family)
    name: str
    comment: str
    xfail: str | None
    src: str
    want: str
    line: int           # 1-based line of the `===` marker

    @property
    def id(self):
        return f"{self.file}:{self.name}"


def _text(lines):
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    while lines and not lines[0].strip():
        lines = lines[1:]
    return "".join(x + "\n" for x in lines)


def parse_file(path: pathlib.Path) -> list[Case]:
    lines = path.read_text().splitlines()
    starts = [i for i, x in enumerate(lines) if x.startswith(CASE)]
    cases = []
    for k, i in enumerate(starts):
        body = lines[i + 1:starts[k + 1] if k + 1 < len(starts) else len(lines)]
        notes, xfail = [], None
        while body and body[0].startswith("#"):
            head = body.pop(0)[1:].strip()
            if head.startswith("xfail:"):
                xfail = head[len("xfail:"):].strip()
            else:
                notes.append(head)
        comment = "\n# ".join(notes)     # several lines stay several (render)
        where = f"{path.name}:{i + 1}"
        if not comment:
            raise ValueError(f"{where}: a case needs a '# what it checks' line")
        if EXPECT not in body:
            raise ValueError(f"{where}: no '{EXPECT}' line")
        cut = body.index(EXPECT)
        cases.append(Case(path.stem, lines[i][len(CASE):].strip(), comment, xfail,
                          _text(body[:cut]), _text(body[cut + 1:]), i + 1))
    names = [c.name for c in cases]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"{path.name}: case names repeated: {sorted(dup)}")
    return cases


def all_cases() -> list[Case]:
    return [c for p in sorted(CASES_DIR.glob("*.txt")) for c in parse_file(p)]


def render(cases: list[Case], header: str) -> str:
    """A case file's text (regen.py writes files back with it)."""
    out = header
    for c in cases:
        out += f"\n{CASE}{c.name}\n# {c.comment}\n"
        if c.xfail:
            out += f"# xfail: {c.xfail}\n"
        out += c.src + EXPECT + "\n" + c.want
    return out


def header_of(path: pathlib.Path) -> str:
    lines = path.read_text().splitlines()
    head = []
    for x in lines:
        if x.startswith(CASE):
            break
        head.append(x)
    return _text(head)
