"""Propagation's output: a sharding and its provenance per value, kept apart from the IR.

`engine.assign(program)` reads the program (and the sources its values and
`meta["sources"]` carry) and returns an Assignment without writing into the IR;
`apply` then writes it onto the program's values for the stages after propagation
(lowering, the printer, explain), or `sharding_of` reads it directly.
"""
from __future__ import annotations


class Assignment:
    """`entries`: value -> (Sharding, provenance per dim); `out_shardings` and `out_why`:
    per function result; `conflicts`: the conflicts propagation settled (state.Conflict)."""
    __slots__ = ("entries", "out_shardings", "out_why", "conflicts")

    def __init__(self, entries, out_shardings, out_why, conflicts):
        self.entries = entries
        self.out_shardings = out_shardings
        self.out_why = out_why
        self.conflicts = conflicts

    def sharding_of(self, v):
        e = self.entries.get(v)
        return e[0] if e is not None else None

    def why_of(self, v):
        e = self.entries.get(v)
        return e[1] if e is not None else None

    def shardings(self) -> dict:
        """{id(value): sharding}, as print_program's `shardings` takes it."""
        return {id(v): e[0] for v, e in self.entries.items()}

    def apply(self, p):
        """Write the assignment onto `p` (the program it was computed for); returns p."""
        for v, (sh, why) in self.entries.items():
            v.sharding = sh
            v.why = why
        p.out_shardings = list(self.out_shardings)
        p.meta["out_why"] = self.out_why
        p.meta["conflicts"] = self.conflicts
        return p
