"""The IR as JSON for tools: values (type, sharding, provenance), ops, locations.

Value names are the printer's (`%x`, `%0`, ...), so JSON and text agree. A value's
"why" lists, per sharded dim, the source (argument, constraint, out_sharding) and the
ops the sharding travelled through, innermost first, as `.explain()` prints them (a
control-flow boundary also says what crossed it: `"crossing": "slice of xs 0 of scan@..."`).
"""
from __future__ import annotations

import os

from ..propagate.explain import chain_whys, hop_crossing
from ..ir.program import Lit, Program, _Namer, fmt_param


def _loc(loc):
    if loc is None or not getattr(loc, "line", 0):
        return None
    return f"{os.path.basename(loc.file)}:{loc.line}"


def why_json(v) -> list:
    """[{dim, axes, from, from_loc, via: [{op, loc}]}] for each sharded dim of `v`."""
    if v.sharding is None or not v.why:
        return []
    out = []
    for d, axes in enumerate(v.sharding.dims):
        if not axes:
            continue
        hops, origin = chain_whys(v, d)
        out.append({
            "dim": d, "axes": [str(a) for a in axes],
            "from": origin.label if origin is not None else "propagation",
            "from_kind": origin.kind if origin is not None else None,
            "from_loc": _loc(origin.loc) if origin is not None else None,
            "via": [_hop(w) for w in hops]})
    return out


def _hop(why):
    out = {"op": why.op.prim.name, "loc": _loc(why.op.loc)}
    crossing = hop_crossing(why)
    if crossing:
        out["crossing"] = crossing
    return out


def _value(v, name):
    return {"name": name, "type": str(v.aval),
            "sharding": str(v.sharding) if v.sharding is not None else None,
            "why": why_json(v)}


def _body(p, namer):
    ops = []
    for op in p.ops:
        results = [_value(v, namer.define(v)) for v in op.outputs]
        entry = {"op": op.prim.name, "results": results,
                 "operands": [str(v) if isinstance(v, Lit) else namer.ref(v)
                              for v in op.inputs],
                 "params": {k: fmt_param(val) for k, val in op.params.items()},
                 "loc": _loc(op.loc)}
        if op.regions:
            regions = []
            for r in op.regions:
                args = [_value(v, namer.define(v, v.name)) for v in r.inputs]
                inner = _body(r, namer)
                regions.append({"args": args, "ops": inner,
                                "return": [namer.ref(v) for v in r.outputs]})
            entry["regions"] = regions
        ops.append(entry)
    return ops


def program_json(p: Program, stage="propagated") -> dict:
    """A JSON-ready dict of the program (see the module docstring)."""
    namer = _Namer()
    inputs = [_value(v, namer.define(v, v.name)) for v in p.inputs]
    ops = _body(p, namer)
    outs = []
    for i, v in enumerate(p.outputs):
        fixed = p.out_shardings[i] if i < len(p.out_shardings) else None
        outs.append({"value": namer.ref(v), "type": str(v.aval),
                     "sharding": str(fixed) if fixed is not None else None})
    conflicts = [{"op": c.op.prim.name, "loc": _loc(c.op.loc), "dim": c.dim,
                  "type": str(c.value.aval), "wanted": [str(a) for a in c.wanted],
                  "kept": [str(a) for a in c.kept], "reason": c.reason}
                 for c in p.meta.get("conflicts", [])]
    return {"function": p.name, "stage": stage,
            "mesh": dict(p.mesh.axes) if p.mesh is not None else None,
            "inputs": inputs, "ops": ops, "outputs": outs, "conflicts": conflicts}
