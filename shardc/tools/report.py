"""What XLA did with a program: the collectives it inserted (bytes, mesh axes, the
user's line that caused each) and, per IR op, the sharded and per-device types.

    collectives(hlo_text, mesh) -> [Collective]      # any partitioned HLO module
    report(compiled) -> Report                       # a shardc Compiled; .text(), .json()

A collective's `bytes` is the larger of its operand and result buffers on one device
(the gathered side of an all-gather, the scattered input of a reduce-scatter, the
buffer of an all-reduce). A collective inside a loop body is listed once, with the
loops it runs in (`loops`: innermost first, each the user's scan / while_loop line and
its trip count when known): it runs once per iteration.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np

from . import hlo
from ..errors import Loc, lib_path

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
    loops: list = field(default_factory=list)   # [Loop] it runs in, innermost first

    @property
    def where(self) -> str:
        return where_text(self.loc) or "?"

    @property
    def runs(self):
        """How many times it runs per call: the product of its loops' trip counts
        (None if one is unknown)."""
        n = 1
        for lp in self.loops:
            if lp.trip_count is None:
                return None
            n *= lp.trip_count
        return n

    def per_iteration(self) -> str:
        """'per iteration of scan at f.py:12 (5 iterations)', '' outside loops."""
        return ", ".join(f"per iteration of {lp}" for lp in self.loops)

    def __str__(self):
        axes = "{" + ", ".join(self.axes) + "}"
        loops = self.per_iteration()
        return (f"{self.kind} {hlo_short_type(self.type)} {fmt_bytes(self.bytes)} over "
                f"{axes} at {self.where}" + (f" ({self.op})" if self.op else "") +
                (f", {loops}" if loops else ""))

    def json(self) -> dict:
        return {"kind": self.kind, "hlo_name": self.name, "type": self.type,
                "bytes": self.bytes, "axes": list(self.axes), "groups": self.groups,
                "pairs": [list(p) for p in self.pairs],
                **_loc_json(self.loc), "op": self.op,
                "loops": [lp.json() for lp in self.loops], "runs": self.runs}


@dataclass
class Loop:
    """A loop (an HLO while: the user's scan, fori_loop or while_loop) a collective's
    body runs in."""
    op: str                  # the shardc primitive that made it: "scan", "while"
    loc: tuple | None        # (file, line) of the user's loop
    trip_count: int | None   # iterations, if known (XLA's, else the scan's length)
    hlo_name: str = ""

    def __str__(self):
        where = f" at {where_text(self.loc)}" if self.loc else ""
        n = self.trip_count
        trips = f" ({n} iteration{'s' * (n != 1)})" if n is not None else ""
        return f"{self.op or 'a loop'}{where}{trips}"

    def json(self) -> dict:
        return {"op": self.op, "file": self.loc[0] if self.loc else None,
                "line": self.loc[1] if self.loc else None, "trip_count": self.trip_count,
                "hlo_name": self.hlo_name}


def where_text(loc) -> str:
    """'train.py:12', with the library's line when the op came from one:
    'train.py:12 (in flax/linen/linear.py:287)'."""
    if not loc:
        return ""
    if isinstance(loc, Loc):
        return loc.short()
    return f"{os.path.basename(loc[0])}:{loc[1]}"


def _loc_json(loc) -> dict:
    lib = loc.lib if isinstance(loc, Loc) else None
    return {"file": loc[0] if loc else None, "line": loc[1] if loc else None,
            "library_line": f"{lib_path(lib.file)}:{lib.line}" if lib is not None else None}


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


def _prim(ins):
    """The shardc primitive an instruction came from: its op_name's last part (XLA
    prefixes the ops of a shard_map body with `shard_map/`)."""
    return ins.metadata.get("op_name", "").rsplit("/", 1)[-1]


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
            return loc, _prim(cur)
        if d < depth:
            todo += [(module.by_name[o], d + 1) for o in cur.operands if o in module.by_name]
    return None, ""


_CALLS = ("body", "condition", "calls", "to_apply", "branch_computations",
          "true_computation", "false_computation")
_TRIPS = re.compile(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"(\d+)"')


def _callers(module):
    """{computation: the instruction that calls it} (the first caller found)."""
    out = {}
    for ins in module.instrs:
        for key in _CALLS:
            if f"{key}=" not in ins.attrs:
                continue
            text = hlo._attr(ins.attrs, key) or ""
            for name in re.findall(r"%?([\w.\-]+)", text):
                out.setdefault(name, ins)
    return out


def _loops(module, comp, callers):
    """The while loops whose body (or condition) computation `comp` runs in."""
    out, seen = [], set()
    while comp in callers and comp not in seen:
        seen.add(comp)
        ins = callers[comp]
        if ins.opcode == "while":
            m = _TRIPS.search(ins.attrs)
            out.append(Loop(_prim(ins), module.loc(ins),
                            int(m.group(1)) if m else None, ins.name))
        comp = ins.computation
    return out


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
    callers = _callers(module)
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
                              loc, op, pairs, ins.computation,
                              _loops(module, ins.computation, callers)))
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
                     **_loc_json(r.loc),
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
