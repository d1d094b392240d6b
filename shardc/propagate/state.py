"""What propagation keeps per value while it runs, and the provenance it records.

A value's `_State` holds its dim shardings as axis refs (axes.py), which dims are
closed (sources: never changed), and per dim a `Why` (the op that set it and the
tensor it came from) or a `Source` (an argument, constraint or output sharding).
"""
from __future__ import annotations

import operator

EMPTY = []    # an unsharded dim's axes (shared: never edited)

class Source:
    """Where a sharding came from: an argument, a constraint, an output sharding."""
    __slots__ = ("kind", "label", "loc")

    def __init__(self, kind, label, loc=None):
        self.kind, self.label, self.loc = kind, label, loc

    def __str__(self):
        where = f" at {self.loc.short()}" if self.loc is not None and self.loc.line else ""
        return f"{self.label}{where}"


class Why(tuple):
    """Provenance of one dim: the op that set it and the tensor it was copied from.
    (A tuple (op, src, src_dim): the engine makes one per dim it changes.)"""
    __slots__ = ()

    def __new__(cls, op, src, src_dim):
        return tuple.__new__(cls, (op, src, src_dim))

    op = property(operator.itemgetter(0))
    src = property(operator.itemgetter(1))
    src_dim = property(operator.itemgetter(2))


_new_why = tuple.__new__

class Conflict:
    __slots__ = ("op", "value", "dim", "wanted", "kept", "reason")

    def __init__(self, op, value, dim, wanted, kept, reason):
        self.op, self.value, self.dim = op, value, dim
        self.wanted, self.kept, self.reason = wanted, kept, reason


class _State:
    """Mutable per-value sharding during propagation. `key`: dims and closedness (what
    decides a visit, see Engine.apply) as tuples, which the engine then replaces by a
    small int standing for them (Engine._kid); kept in step with `dims`. `repl`: whole
    mesh axes no dim may take (Shardy's replicated axes: an explicit type's axes on a
    mesh with Auto axes too), part of the key when any."""
    __slots__ = ("dims", "closed", "why", "key", "repl")

    def __init__(self, dims, closed, why, repl=()):
        self.dims, self.closed, self.why, self.repl = dims, closed, why, repl
        self.key = state_key(dims, closed, repl)


def state_key(dims, closed, repl=()):
    key = (tuple(map(tuple, dims)), tuple(closed))
    return key + (repl,) if repl else key


def _empty_state(rank, kid):
    """The state of a value nothing has sharded yet: open and unsharded (`kid`: the
    engine's int for its key). Its lists are shared: the engine replaces a state's
    dims (and their lists) rather than editing them, never edits `closed`, and gives a
    state its own `why` list when it first records one (_whys)."""
    s = _State.__new__(_State)
    e = _EMPTY_STATES.get(rank)
    if e is None:
        e = _EMPTY_STATES[rank] = ([EMPTY] * rank, (False,) * rank)
    s.dims, s.closed = e
    s.why = None
    s.repl = ()
    s.key = kid
    return s


_EMPTY_STATES: dict = {}
_NO_WHYS: dict = {}


def _whys(s):
    """`s.why`, as a list of its own."""
    why = s.why
    if why is None:
        why = s.why = [None] * len(s.dims)
    return why


def _why_of(s):
    """A finished state's provenance per dim (shared when nothing was recorded)."""
    why = s.why
    if why is None:
        rank = len(s.dims)
        why = _NO_WHYS.get(rank)
        if why is None:
            why = _NO_WHYS[rank] = (None,) * rank
    return why


class _Return:
    """Stands for the function's return in provenance records."""
    class prim:
        name = "return"
        prop_kind = None
    loc = None


RETURN = _Return()
# a literal operand's state: no dims (its key is the engine's int 0)
LIT = _State([], [], [])
LIT_KEY = LIT.key
LIT.key = 0
