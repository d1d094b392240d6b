"""What XLA did with a program: the collectives it inserted (bytes, mesh axes, the
user's line that caused each) and, per IR op, the sharded and per-device types.

    collectives(hlo_text, mesh) -> [Collective]      # any partitioned HLO module
    report(compiled) -> Report                       # a shardc Compiled; .text(), .json()

A collective's `bytes` is the larger of its operand and result buffers on one device
(the gathered side of an all-gather, the scattered input of a reduce-scatter, the
buffer of an all-reduce). Collectives inside loops are listed once.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from . import hlo

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute",
         "ragged-all-to-all", "collective-broadcast")


@dataclass
class Collective:
    """One collective in the partitioned program."""
    kind: str              # "all-reduce", "all-gather", ...
    name: str              # the HLO instruction's name
    type: str              # its HLO result type (the -done's for async pairs)
    bytes: int             # per device; see the module docstring
    axes: tuple            # mesh axes it communicates over, e.g. ("model",)
    groups: list           # device groups (partition ids = flat mesh positions)
    loc: tuple | None      # (file, line) of the user's code that caused it
    op: str = ""           # the shardc primitive at that line (from op metadata)
    pairs: list = field(default_factory=list)   # collective-permute (source, target)s
    computation: str = ""

    @property
    def where(self) -> str:
        return f"{os.path.basename(self.loc[0])}:{self.loc[1]}" if self.loc else "?"

    def __str__(self):
        axes = "{" + ", ".join(self.axes) + "}"
        return (f"{self.kind} {hlo_short_type(self.type)} {fmt_bytes(self.bytes)} over "
                f"{axes} at {self.where}" + (f" ({self.op})" if self.op else ""))

    def json(self) -> dict:
        return {"kind": self.kind, "hlo_name": self.name, "type": self.type,
                "bytes": self.bytes, "axes": list(self.axes), "groups": self.groups,
                "pairs": [list(p) for p in self.pairs],
                "file": self.loc[0] if self.loc else None,
                "line": self.loc[1] if self.loc else None, "op": self.op}


def fmt_bytes(n) -> str:
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{int(n)} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def hlo_short_type(t: str) -> str:
    """`f32[32,256]{1,0}` -> `f32[32,256]`; tuples keep their parts."""
    parts = [f"{dt}[{','.join(map(str, s))}]" for dt, s in hlo.array_types(t)]
    return parts[0] if len(parts) == 1 else "(" + ", ".join(parts) + ")"


# ---------------------------------------------------------------- mesh axes


def _mesh_axes(mesh):
    """[(name, size)] from a jax Mesh, shardc MeshShape/MeshInfo, dict or pairs."""
    if mesh is None:
        return []
    if hasattr(mesh, "axis_names") and hasattr(mesh, "axis_sizes"):
        return list(zip(mesh.axis_names, mesh.axis_sizes))
    if hasattr(mesh, "shape") and hasattr(mesh.shape, "axes"):   # MeshInfo
        return list(mesh.shape.axes)
    if hasattr(mesh, "axes"):
        return list(mesh.axes)
    if isinstance(mesh, dict):
        return list(mesh.items())
    return [tuple(a) for a in mesh]


def axes_of(groups, mesh_axes) -> tuple:
    """The mesh axes a set of device groups spans: full axes by name, parts of an
    axis as Shardy sub-axes (`x:(1)2`); ("?",) if the groups follow no axes."""
    sizes = [s for _, s in mesh_axes]
    n = int(np.prod(sizes, dtype=np.int64)) if sizes else 1
    if not groups or not mesh_axes:
        return ()
    if any(d >= n for g in groups for d in g):
        return ("?",)
    out = []
    for g in groups[:1]:
        coords = np.array(np.unravel_index(g, sizes)).T if len(g) else np.zeros((0, 0))
        total = 1
        for k, (name, size) in enumerate(mesh_axes):
            vals = sorted(set(coords[:, k].tolist()))
            if len(vals) <= 1:
                continue
            total *= len(vals)
            if len(vals) == size:
                out.append(name)
                continue
            stride = vals[1] - vals[0]
            pre = size // (len(vals) * stride) if len(vals) * stride else 0
            if vals != list(range(vals[0], vals[0] + stride * len(vals), stride)) or pre < 1:
                return ("?",)
            out.append(f"{name}:({pre}){len(vals)}")
        if total != len(g):
            return ("?",)
    return tuple(out)


def _pair_axes(pairs, mesh_axes):
    sizes = [s for _, s in mesh_axes]
    names = []
    for a, b in pairs:
        if max(a, b) >= int(np.prod(sizes, dtype=np.int64)):
            return ("?",)
        ca, cb = np.unravel_index(a, sizes), np.unravel_index(b, sizes)
        for k, (name, _) in enumerate(mesh_axes):
            if ca[k] != cb[k] and name not in names:
                names.append(name)
    return tuple(n for n, _ in mesh_axes if n in names)


# ---------------------------------------------------------------- collectives


def _kind(opcode):
    base = opcode[:-len("-start")] if opcode.endswith("-start") else opcode
    return base if base in KINDS else None


def _loc(module, ins, depth=4):
    """The instruction's user location, else the nearest operand's that has one."""
    seen, todo = set(), [(ins, 0)]
    while todo:
        cur, d = todo.pop(0)
        if cur.name in seen:
            continue
        seen.add(cur.name)
        loc = module.loc(cur)
        if loc is not None and loc[1]:
            return loc, cur.metadata.get("op_name", "")
        if d < depth:
            todo += [(module.by_name[o], d + 1) for o in cur.operands if o in module.by_name]
    return None, ""


def collectives(hlo_text: str, mesh=None) -> list:
    """Every collective in a partitioned HLO module, in program order.

    `mesh` (a jax Mesh, or {name: size}) names the axes; partition ids are positions in
    the mesh's flattened device array, as shardc compiles programs."""
    module = hlo.parse(hlo_text)
    mesh_axes = _mesh_axes(mesh)
    n = int(np.prod([s for _, s in mesh_axes], dtype=np.int64)) if mesh_axes else 1
    done_of = {}
    for ins in module.instrs:
        if ins.opcode.endswith("-done") and ins.operands:
            done_of[ins.operands[0]] = ins
    out = []
    for ins in module.instrs:
        kind = _kind(ins.opcode)
        if kind is None:
            continue
        result_type = done_of[ins.name].type if ins.name in done_of else ins.type
        in_bytes = sum(hlo.type_bytes(module.by_name[o].type)
                       for o in ins.operands if o in module.by_name)
        nbytes = max(in_bytes, hlo.type_bytes(result_type)) if not \
            ins.opcode.endswith("-start") or ins.name in done_of else in_bytes
        pairs = hlo.source_target_pairs(ins) if kind == "collective-permute" else []
        if pairs:
            groups, axes = [], _pair_axes(pairs, mesh_axes)
        else:
            groups = hlo.device_groups(ins, n)
            axes = axes_of(groups, mesh_axes)
        loc, op = _loc(module, ins)
        out.append(Collective(kind, ins.name, result_type, int(nbytes), axes, groups,
                              loc, op, pairs, ins.computation))
    return out


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


class Report:
    """Per-op table, collectives, per-device memory and cost of one compiled program."""

    def __init__(self, name, mesh, rows, colls, memory, cost):
        self.name, self.mesh, self.rows = name, mesh, rows
        self.collectives, self.memory, self.cost = colls, memory, cost

    def text(self) -> str:
        return _render(self)

    def json(self) -> dict:
        return {
            "function": self.name,
            "mesh": dict(self.mesh),
            "ops": [{"value": r.name, "op": r.op, "type": r.type, "sharding": r.sharding,
                     "per_device_type": r.local, "per_device_bytes": r.bytes,
                     "file": r.loc[0] if r.loc else None,
                     "line": r.loc[1] if r.loc else None,
                     "collectives": [c.name for c in r.collectives]} for r in self.rows],
            "collectives": [c.json() for c in self.collectives],
            "collective_bytes": sum(c.bytes for c in self.collectives),
            "memory": self.memory, "cost": self.cost}

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
    from ..ir.program import _Namer
    from ..ir.dtypes import short_name
    namer = _Namer()
    for v in program.inputs:
        namer.define(v, v.name)
    by_line = {}
    for c in colls:
        if c.loc:
            by_line.setdefault((c.op, os.path.basename(c.loc[0]), c.loc[1]), []).append(c)
    rows, claimed = [], set()

    def visit(p):
        for op in p.ops:
            key = (op.prim.name, os.path.basename(op.loc.file), op.loc.line)
            mine = [] if key in claimed else by_line.get(key, [])
            claimed.add(key)
            for i, v in enumerate(op.outputs):
                name = namer.define(v)
                local = _local_shape(v, program.mesh)
                nbytes = int(np.prod(local, dtype=np.int64)) * v.aval.dtype.itemsize
                rows.append(OpRow(name, op.prim.name, str(v.aval),
                                  str(v.sharding) if v.sharding is not None else "",
                                  f"{short_name(v.aval.dtype)}[{','.join(map(str, local))}]",
                                  nbytes, (op.loc.file, op.loc.line) if op.loc.line else None,
                                  mine if i == 0 else []))
            for r in op.regions:
                for v in r.inputs:
                    namer.define(v, v.name)
                visit(r)
    visit(program)
    return rows


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
    rows = _rows(traced.program, colls)
    try:
        memory = _memory(compiled.memory_analysis())
    except Exception:   # not every backend reports memory
        memory = {}
    try:
        cost = _cost(compiled.cost_analysis())
    except Exception:
        cost = {}
    return Report(traced.program.name, mesh.shape.axes, rows, colls, memory, cost)


# ---------------------------------------------------------------- text form


def _table(rows, indent="  "):
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _where(loc):
    return f"{os.path.basename(loc[0])}:{loc[1]}" if loc else ""


def _render(r: Report) -> str:
    mesh = ", ".join(f"{n}={s}" for n, s in r.mesh)
    n = int(np.prod([s for _, s in r.mesh], dtype=np.int64)) if r.mesh else 1
    where = (f"mesh <{mesh}> ({n} device{'s' if n != 1 else ''})" if r.mesh
             else "one device (no mesh)")
    lines = [f"@{r.name} on {where}", ""]
    rows = [("value", "op", "type", "sharding", "per device", "bytes", "line", "collectives")]
    for o in r.rows:
        rows.append((o.name, o.op, o.type, o.sharding, o.local, fmt_bytes(o.bytes),
                     _where(o.loc), ", ".join(f"{c.kind}{{{','.join(c.axes)}}}"
                                              for c in o.collectives)))
    lines += ["ops:"] + _table(rows) + [""]
    total = sum(c.bytes for c in r.collectives)
    lines.append(f"collectives XLA inserted: {len(r.collectives)}"
                 + (f" ({fmt_bytes(total)} per device)" if r.collectives else ""))
    if r.collectives:
        rows = [("collective", "type", "bytes", "mesh axes", "line", "op", "hlo")]
        for c in r.collectives:
            rows.append((c.kind, hlo_short_type(c.type), fmt_bytes(c.bytes),
                         "{" + ", ".join(c.axes) + "}", c.where, c.op, "%" + c.name))
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
    return "\n".join(lines).rstrip() + "\n"
