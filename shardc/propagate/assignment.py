"""Propagation's output: a sharding and its provenance per value, kept apart from the IR.

`engine.assign(program)` reads the program (and the sources its values and
`meta["sources"]` carry) and returns an Assignment without writing into the IR;
`apply` then writes it onto the program's values for the stages after propagation
(lowering, the printer, explain), or `sharding_of` / `shardings()` read it directly.
"""
from __future__ import annotations

from . import axes as ax
from .state import _why_of


class Assignment:
    """Per value its closed sharding and provenance (built on demand from the engine's
    final states, which nothing changes any more); `out_shardings` and `out_why`: per
    function result; `conflicts`: the conflicts propagation settled (state.Conflict)."""
    __slots__ = ("_states", "_made", "mesh", "out_shardings", "out_why", "conflicts")

    def __init__(self, states, mesh, out_states, conflicts):
        self._states = states       # Value -> state.State
        self._made = {}             # a state's key (an int) -> its Sharding
        self.mesh = mesh
        self.out_shardings = [self._sharding(s) for s in out_states]
        self.out_why = [_why_of(s) for s in out_states]
        self.conflicts = conflicts

    def _sharding(self, s):
        sh = self._made.get(s.key)
        if sh is None:
            sh = self._made[s.key] = ax.sharding_of(s.dims, self.mesh)
        return sh

    def __contains__(self, v):
        return v in self._states

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
