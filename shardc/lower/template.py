"""Op templates for lowering: the text of a lowered op with its SSA names as fields, so
the ops like it (same signature, location, shardings and literal values) are written by
filling in their names instead of lowering them again (Lowering.body)."""
from __future__ import annotations

import operator
import re

from ..ir.program import Lit
from .types_text import tensor_type

_NAME = re.compile(r"%(?:arg)?\d+")
NO_TEMPLATE = object()


def _lit_key(x):
    t = type(x)
    if t is float:
        return (t, x.hex()) if x == x else NO_TEMPLATE     # -0.0 is not 0.0; NaNs vary
    if t is int or t is bool:
        return (t, x)
    return NO_TEMPLATE


def template_key(op, indent):
    """What an op's text depends on besides SSA names (see Lowering.body), or None."""
    sig = op.sig
    if sig is None or op.regions:
        return None
    ins = op.inputs
    for v in ins:
        if type(v) is Lit:
            break
    else:
        return (sig, indent, op.loc, *[v.sharding for v in ins],
                *[v.sharding for v in op.outputs])
    key = [sig, indent, op.loc]
    for v in ins:
        if type(v) is Lit:
            k = _lit_key(v.value)
            if k is NO_TEMPLATE:
                return None
            key.append(k)
        else:
            key.append(v.sharding)
    for v in op.outputs:
        key.append(v.sharding)
    return tuple(key)


class Template:
    """The text of one lowered op with its SSA names as fields (`%s`, filled in the
    order `pick` takes them from the op's names: first its operands', then the names
    it made, numbered from the first fresh one)."""
    __slots__ = ("fmt", "pick", "n_fresh", "types", "results")

    @classmethod
    def record(cls, low, op, operand_names, lines, n0, res):
        n_fresh = low.n - n0
        pos = {}
        for j, nm in enumerate(operand_names):
            if nm in pos or "{" in nm:
                return None           # an operand used twice: its fields would merge
            pos[nm] = j
        file = op.loc[0] if op.loc is not None else ""
        if "%" in file:
            return None
        results = []
        for r in res:
            if r in pos:
                results.append(pos[r])
            else:
                k = _fresh_index(r, n0, n_fresh)
                if k is None:
                    return None
                results.append(len(pos) + k)
        parts, order, last = [], [], 0
        text = "\n".join(lines)
        for m in _NAME.finditer(text):
            tok = m.group()
            field = pos.get(tok)
            if field is None:
                k = _fresh_index(tok, n0, n_fresh)
                if k is None:
                    continue
                field = len(pos) + k
            parts.append(text[last:m.start()].replace("%", "%%"))
            parts.append("%s")
            order.append(field)
            last = m.end()
        parts.append(text[last:].replace("%", "%%"))
        t = cls()
        t.fmt = "".join(parts) if lines else None
        if len(order) > 1:
            t.pick = operator.itemgetter(*order)
        elif order:
            i = order[0]
            t.pick = lambda fields: (fields[i],)
        else:
            t.pick = lambda fields: ()
        t.n_fresh = n_fresh
        t.types = [(k, low.types[f"%{n0 + k}"]) for k in range(n_fresh)
                   if f"%{n0 + k}" in low.types]
        t.results = results
        return t

    def apply(self, low, op, names, lines):
        fields = [names[id(v)] for v in op.inputs if type(v) is not Lit]
        n0 = low.n
        if self.n_fresh:
            low.n = n0 + self.n_fresh
            fields += [f"%{n0 + k}" for k in range(self.n_fresh)]
        if self.fmt is not None:
            lines.append(self.fmt % self.pick(fields))
        types = low.types
        for k, t in self.types:
            types[f"%{n0 + k}"] = t
        for v, f in zip(op.outputs, self.results):
            r = fields[f]
            names[id(v)] = r
            types.setdefault(r, tensor_type(v.aval))


def _fresh_index(name, n0, n_fresh):
    if name[1] == "a":
        return None
    k = int(name[1:]) - n0
    return k if 0 <= k < n_fresh else None
