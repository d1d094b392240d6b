"""What XLA did with a program, per IR op: the sharded and per-device types, the
collectives each op caused (hlo_collectives.py reads those from the HLO), memory and cost.

    collectives(hlo_text, mesh) -> [Collective]      # any partitioned HLO module
    report(compiled) -> Report                       # a shardc Compiled; .text(), .json()
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .hlo_collectives import (KINDS, Collective, Loop, axes_of, collectives,  # noqa: F401
                              fmt_bytes, hlo_short_type, loc_json, where_text)

# ---------------------------------------------------------------- the report


@dataclass
class OpRow:
    name: str        # %0
    op: str          # dot_general
    type: str        # f32[64,1024]
    sharding: str    # [{data}, {model}]
    local: str       # f32[32,256] (the shard one device holds)
    bytes: int       # of that shard
    loc: tuple | None
    collectives: list
    # ops of this primitive at this line: XLA names a collective's cause by primitive
    # and line only, so with several the row's collectives are one of theirs
    shared: int = 1


class Report:
    """Per-op table, collectives, per-device memory and cost of one compiled program."""

    def __init__(self, name, mesh, rows, colls, memory, cost, auto=None):
        self.name, self.mesh, self.rows = name, mesh, rows
        self.collectives, self.memory, self.cost = colls, memory, cost
        self.auto = auto     # an AUTO program's prediction beside these (autoreport.py)

    def text(self) -> str:
        return _render(self)

    def json(self) -> dict:
        return {
            "function": self.name,
            "mesh": dict(self.mesh),
            "ops": [{"value": r.name, "op": r.op, "type": r.type, "sharding": r.sharding,
                     "per_device_type": r.local, "per_device_bytes": r.bytes,
                     **loc_json(r.loc),
                     "collectives": [c.name for c in r.collectives],
                     "shared": r.shared} for r in self.rows],
            "collectives": [c.json() for c in self.collectives],
            "collective_bytes": sum(c.bytes for c in self.collectives),
            # counting each loop iteration (None: a loop's trip count is unknown)
            "collective_bytes_per_call": None if any(c.runs is None for c in
                                                     self.collectives) else
            sum(c.bytes * c.runs for c in self.collectives),
            "memory": self.memory, "cost": self.cost,
            **({"auto": self.auto} if self.auto is not None else {})}

    def _repr_html_(self):
        from .html import report_html
        return report_html(self)

    def __str__(self):
        return self.text()


def _local_shape(v, mesh_shape):
    sh = v.sharding
    if sh is None:
        return v.aval.shape
    return tuple(-(-n // sh.shards(mesh_shape, d)) for d, n in enumerate(v.aval.shape))


def _rows(program, colls):
    from ..ir.dtypes import short_name
    from ..ir.program import _Namer
    namer = _Namer()
    for v in program.inputs:
        namer.define(v, v.name)
    by_line = {}
    for c in colls:
        if c.loc:
            by_line.setdefault((c.op, os.path.basename(c.loc[0]), c.loc[1]), []).append(c)
    rows, claimed = [], set()
    same = {}
    for op in program.walk():
        key = (op.prim.name, os.path.basename(op.loc.file), op.loc.line)
        same[key] = same.get(key, 0) + 1

    def visit(p):
        for op in p.ops:
            key = (op.prim.name, os.path.basename(op.loc.file), op.loc.line)
            mine = [] if key in claimed else by_line.get(key, [])
            claimed.add(key)
            for c in mine:       # the op's location, with its library line
                c.loc = op.loc
            for i, v in enumerate(op.outputs):
                name = namer.define(v)
                local = _local_shape(v, program.mesh)
                nbytes = int(np.prod(local, dtype=np.int64)) * v.aval.dtype.itemsize
                rows.append(OpRow(name, op.prim.name, str(v.aval),
                                  str(v.sharding) if v.sharding is not None else "",
                                  f"{short_name(v.aval.dtype)}[{','.join(map(str, local))}]",
                                  nbytes, op.loc if op.loc.line else None,
                                  mine if i == 0 else [], same[key] if mine else 1))
            for r in op.regions:
                for v in r.inputs:
                    namer.define(v, v.name)
                visit(r)
    visit(program)
    return rows


def _scan_lengths(program, colls):
    """A loop XLA gives no trip count: take the `length` of the region op at its line
    (a scan's; a while_loop has none: unknown)."""
    lengths = {(op.prim.name, os.path.basename(op.loc.file), op.loc.line):
               op.params["length"] for op in program.walk()
               if op.regions and isinstance(op.params.get("length"), int) and op.loc.line}
    for c in colls:
        for lp in c.loops:
            if lp.trip_count is None and lp.loc:
                lp.trip_count = lengths.get((lp.op, os.path.basename(lp.loc[0]), lp.loc[1]))


def _memory(stats):
    if stats is None:
        return {}
    keys = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes",
            "temp_size_in_bytes", "generated_code_size_in_bytes")
    return {k.replace("_size_in_bytes", ""): int(getattr(stats, k)) for k in keys
            if hasattr(stats, k)}


def _cost(cost):
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else {}
    cost = cost or {}
    return {k: float(cost[k]) for k in ("flops", "transcendentals", "bytes accessed")
            if k in cost}


def report(compiled) -> Report:
    """The report of a shardc Compiled (from `f.lower(*args).compile()`)."""
    traced = compiled.lowered.traced
    mesh = traced.mesh
    colls = collectives(compiled.as_text(), mesh.shape.axes)
    _scan_lengths(traced.program, colls)
    rows = _rows(traced.program, colls)
    try:
        memory = _memory(compiled.memory_analysis())
    except Exception:   # not every backend reports memory
        memory = {}
    try:
        cost = _cost(compiled.cost_analysis())
    except Exception:
        cost = {}
    from .autoreport import comparison
    return Report(traced.program.name, mesh.shape.axes, rows, colls, memory, cost,
                  comparison(traced.program, colls, memory, cost))


# ---------------------------------------------------------------- text form


def _table(rows, indent="  "):
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


_where = where_text


def _times(c):
    """' per iteration (x5)' for a collective in a loop body, '' otherwise."""
    if not c.loops:
        return ""
    return " per iteration" + (f" (x{c.runs})" if c.runs is not None else "")


def _render(r: Report) -> str:
    mesh = ", ".join(f"{n}={s}" for n, s in r.mesh)
    n = int(np.prod([s for _, s in r.mesh], dtype=np.int64)) if r.mesh else 1
    where = (f"mesh <{mesh}> ({n} device{'s' if n != 1 else ''})" if r.mesh
             else "one device (no mesh)")
    lines = [f"@{r.name} on {where}", ""]
    rows = [("value", "op", "type", "sharding", "per device", "bytes", "line", "collectives")]
    for o in r.rows:
        colls = ", ".join(f"{c.kind}{{{','.join(c.axes)}}}" + _times(c) for c in o.collectives)
        if colls and o.shared > 1:
            colls += f" (of one of the {o.shared} {o.op} ops at this line)"
        rows.append((o.name, o.op, o.type, o.sharding, o.local, fmt_bytes(o.bytes),
                     _where(o.loc), colls))
    lines += ["ops:"] + _table(rows) + [""]
    total = sum(c.bytes for c in r.collectives)
    looped = any(c.loops for c in r.collectives)
    runs = [c.runs for c in r.collectives]
    per_call = ""
    if looped:
        per_call = "; some run in a loop of unknown trip count" if None in runs else \
            f"; {fmt_bytes(sum(c.bytes * n for c, n in zip(r.collectives, runs)))} " \
            "per call counting loop iterations"
    lines.append(f"collectives XLA inserted: {len(r.collectives)}"
                 + (f" ({fmt_bytes(total)} per device{per_call})" if r.collectives else ""))
    if r.collectives:
        rows = [("collective", "type", "bytes", "mesh axes", "line", "op", "hlo") +
                (("runs",) if looped else ())]
        for c in r.collectives:
            rows.append((c.kind, hlo_short_type(c.type), fmt_bytes(c.bytes),
                         "{" + ", ".join(c.axes) + "}", c.where, c.op, "%" + c.name) +
                        ((c.per_iteration() or "once",) if looped else ()))
        lines += _table(rows)
    lines.append("")
    if r.memory:
        m = r.memory
        names = (("argument", "arguments"), ("output", "outputs"), ("temp", "temporaries"),
                 ("alias", "aliased"), ("generated_code", "generated code"))
        lines.append("memory per device: " + ", ".join(
            f"{label} {fmt_bytes(m[k])}" for k, label in names if k in m))
    if r.cost:
        parts = []
        if "flops" in r.cost:
            parts.append(f"{r.cost['flops']:.4g} flops")
        if "transcendentals" in r.cost:
            parts.append(f"{r.cost['transcendentals']:.4g} transcendentals")
        if "bytes accessed" in r.cost:
            parts.append(f"{fmt_bytes(r.cost['bytes accessed'])} accessed")
        lines.append("cost per device: " + ", ".join(parts))
    if r.auto is not None:
        from .autoreport import render
        lines += [""] + render(r.auto, fmt_bytes, _table)
    return "\n".join(lines).rstrip() + "\n"
