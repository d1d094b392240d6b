"""The collectives XLA inserted in a partitioned HLO module: kind, bytes, mesh axes, the
user's line that caused each, and the loops each runs in.

    collectives(hlo_text, mesh) -> [Collective]

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
                **loc_json(self.loc), "op": self.op,
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


def loc_json(loc) -> dict:
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
