"""Propagation's output: a sharding and its provenance per value, kept apart from the IR.

`engine.assign(program)` reads the program (and the sources its values and
`meta["sources"]` carry) and returns an Assignment without writing into the IR;
`apply` then writes it onto the program's values for the stages after propagation
(lowering, the printer, explain), or `sharding_of` / `shardings()` read it directly.
Printed (`str`/`repr`), it is one line per value: its name as the IR prints it, its
sharding and why; `a["x"]` looks a value's sharding up by that name.
"""
from __future__ import annotations

from . import axes as ax
from .state import _why_of


class Assignment:
    """Per value its closed sharding and provenance (built on demand from the engine's
    final states, which nothing changes any more); `out_shardings` and `out_why`: per
    function result; `conflicts`: the conflicts propagation settled (state.Conflict)."""
    __slots__ = ("_states", "_made", "mesh", "out_shardings", "out_why", "conflicts",
                 "program", "_names")

    def __init__(self, states, mesh, out_states, conflicts):
        self._states = states       # Value -> state.State
        self._made = {}             # a state's key (an int) -> its Sharding
        self.mesh = mesh
        self.out_shardings = [self._sharding(s) for s in out_states]
        self.out_why = [_why_of(s) for s in out_states]
        self.conflicts = conflicts
        self.program = None         # the program it was computed for, once known (names)
        self._names = None

    def _sharding(self, s):
        sh = self._made.get(s.key)
        if sh is None:
            sh = self._made[s.key] = ax.sharding_of(s.dims, self.mesh)
        return sh

    def __contains__(self, v):
        if isinstance(v, str):
            return self._by_name(v) is not None
        return v in self._states

    def __len__(self):
        return len(self._states)

    def __iter__(self):
        """The values, in the program's order when it is known."""
        return (v for v, _ in self.named())

    def __getitem__(self, key):
        """The sharding of a value, or of the value printed as `key` ("x", "%3")."""
        v = self._by_name(key) if isinstance(key, str) else key
        if v is None or v not in self._states:
            raise KeyError(key)
        return self.sharding_of(v)

    def named(self) -> list:
        """[(value, printed name)] for the assigned values, in the program's order."""
        if self._names is None:
            if self.program is not None:
                from ..ir.program import value_names
                pairs = [(v, n) for v, n in value_names(self.program) if v in self._states]
            else:
                pairs = []
            seen = {id(v) for v, _ in pairs}     # (values the program does not reach)
            pairs += [(v, v.name or f"v{i}") for i, v in enumerate(self._states)
                      if id(v) not in seen]
            self._names = pairs
        return self._names

    def _by_name(self, name):
        name = name.lstrip("%")
        return next((v for v, n in self.named() if n == name), None)

    def __str__(self):
        from .explain import explain_value
        rows = []
        for v, name in self.named():
            sh = self.sharding_of(v)
            why = explain_value(v, sharding=sh, why_of=self.why_of)
            rows.append(f"%{name}: {v.aval} {sh}" + (f"  // {why}" if why else ""))
        outs = self.program.outputs if self.program is not None else ()
        names = dict((id(v), n) for v, n in self.named())
        for i, s in enumerate(self.out_shardings):
            of = f" (%{names[id(outs[i])]})" if i < len(outs) and id(outs[i]) in names else ""
            rows.append(f"result {i}{of}: {s}")
        return "\n".join(rows)

    __repr__ = __str__

    def sharding_of(self, v):
        s = self._states.get(v)
        return self._sharding(s) if s is not None else None

    def why_of(self, v):
        s = self._states.get(v)
        return _why_of(s) if s is not None else None

    def shardings(self) -> dict:
        """{id(value): sharding}, as print_program's `shardings` takes it."""
        return {id(v): self._sharding(s) for v, s in self._states.items()}

    def apply(self, p):
        """Write the assignment onto `p` (the program it was computed for); returns p."""
        made, mesh = self._made, self.mesh
        for v, s in self._states.items():
            sh = made.get(s.key)
            if sh is None:
                sh = made[s.key] = ax.sharding_of(s.dims, mesh)
            v.sharding = sh
            v.why = _why_of(s)
        p.out_shardings = list(self.out_shardings)
        p.meta["out_why"] = self.out_why
        p.meta["conflicts"] = self.conflicts
        return p
