"""What a sharding decision costs in communication, from shardings and factor rules alone.

Per device, in bytes, for the collectives XLA's partitioner uses:
  * resharding a value from sharding A to B (`reshard`): axes that move to another dim
    cost an all-to-all per pair of dims (a dim's axes split over several dims: XLA
    gathers the whole value instead), axes A has and B lacks an all-gather per dim
    (the minor dim first, each gathering the value as the previous left it), axes B
    adds a local slice (free) when minor to those a dim keeps, else a
    collective-permute of B's shard; done in that order;
  * a reduction factor sharded over some axes (`reduction`): an all-reduce of the
    result over them.
Each `Comm` gives `buffer`, the bytes one device's collective works on as
shardc.report counts them (the gathered side of an all-gather, the buffer of an
all-reduce or all-to-all), and `sent`, what a ring implementation sends per device:
all-gather (g-1)/g of the gathered buffer, all-to-all (g-1)/g of the buffer,
all-reduce 2(g-1)/g of it (g: the devices in a group).
"""
from __future__ import annotations

from math import prod

from . import axes as ax
from .factors import _project, default_rule
from .state import _State
from ..ir.program import Lit
from ..ir.rules import REDUCTION


class Comm:
    """One collective: kind ("all-gather", "all-to-all", "all-reduce"), the mesh axes it
    runs over (refs), and its per-device bytes (see the module docstring)."""
    __slots__ = ("kind", "axes", "buffer", "sent")

    def __init__(self, kind, axes, buffer):
        self.kind, self.axes, self.buffer = kind, tuple(axes), int(buffer)
        g = ax.total_size(self.axes)
        share = buffer * (g - 1) // g
        self.sent = 2 * share if kind == "all-reduce" else share

    def __repr__(self):
        names = ", ".join(map(_name, self.axes))
        return f"{self.kind} over {{{names}}}: {self.buffer} B buffer, {self.sent} B sent"


def nbytes(aval) -> int:
    return prod(aval.shape) * aval.dtype.itemsize


def _refs(dims_or_sharding, rank, mesh):
    if dims_or_sharding is None:
        return [[] for _ in range(rank)]
    if isinstance(dims_or_sharding, list):
        return dims_or_sharding
    return ax.dims_of(dims_or_sharding, rank, mesh)


def reshard(aval, src, dst, mesh) -> list:
    """The collectives to turn a value of type `aval` sharded `src` into `dst` (each a
    Sharding, None for replicated, or a list of axis refs per dim)."""
    rank = len(aval.shape)
    a, b = _refs(src, rank, mesh), _refs(dst, rank, mesh)
    where_a = {r: d for d, rs in enumerate(a) for r in rs}
    where_b = {r: d for d, rs in enumerate(b) for r in rs}
    local = nbytes(aval) // ax.total_size([r for rs in a for r in rs])
    out = []
    moved = [r for r, d in where_a.items() if r in where_b and where_b[r] != d]
    pairs = {}
    for r in moved:
        pairs.setdefault((where_a[r], where_b[r]), []).append(r)
    if len({s for s, _ in pairs}) < len(pairs) or len({t for _, t in pairs}) < len(pairs):
        # one dim's axes to several dims (or several into one): XLA's partitioner has no
        # all-to-all for it and rematerializes the whole value, then slices it
        return [Comm("all-gather", [r for rs in a for r in rs], nbytes(aval))]
    for axes in pairs.values():       # one all-to-all per pair of dims
        out.append(Comm("all-to-all", axes, local))
    # one all-gather per dim losing axes, the minor dim first (XLA's partitioner)
    for d in reversed(range(rank)):
        gone = [r for r in a[d] if r not in where_b]
        if gone:
            local *= ax.total_size(gone)
            out.append(Comm("all-gather", gone, local))
    # an axis B adds on a dim is a local slice only minor to the axes the dim keeps,
    # which must stay in A's order, major in both: else shards change devices
    for d, (xs, ys) in enumerate(zip(a, b)):
        kept = [r for r in xs if where_b.get(r) == d]
        if kept != xs[:len(kept)] or kept != ys[:len(kept)]:
            out.append(Comm("collective-permute", ys,
                            nbytes(aval) // ax.total_size([r for rs in b for r in rs])))
    return out


def reduction(rule, in_dims, result_avals, result_dims, mesh) -> list:
    """All-reduces for an op's reduction factors sharded in its operands: `in_dims` per
    operand its dims' axis refs (None for literals), `result_*` per result."""
    sizes = rule.sizes
    summed = []
    for m, dims in zip(rule.operands, in_dims):
        if not m or dims is None:
            continue
        st = _State(dims, [True] * len(dims), None)
        for f, fs in _project(m, st, sizes).items():
            if rule.kinds[f] == REDUCTION:
                for r in fs.axes:
                    if r not in summed:
                        summed.append(r)
    if not summed:
        return []
    return [Comm("all-reduce", summed, nbytes(a) // ax.total_size([r for rs in d for r in rs]))
            for a, d in zip(result_avals, result_dims)]


def op_costs(op, mesh, rule=None) -> list:
    """The collectives a propagated op needs: all-reduces for its sharded reduction
    factors and, for an elementwise op, reshards of operands sharded unlike its result."""
    if rule is None:
        rule = default_rule(op)
    if rule is None:
        return []
    ins = [None if type(v) is Lit or v.sharding is None else
           ax.dims_of(v.sharding, v.aval.ndim, mesh) for v in op.inputs]
    outs = [ax.dims_of(v.sharding, v.aval.ndim, mesh) for v in op.outputs]
    comms = reduction(rule, ins, [v.aval for v in op.outputs], outs, mesh)
    if rule.elementwise and op.outputs:
        r = op.outputs[0]
        for v, dims in zip(op.inputs, ins):
            if dims is not None and v.aval.shape == r.aval.shape and dims != outs[0]:
                comms += reshard(v.aval, dims, outs[0], mesh)
    return comms


def program_costs(p) -> list:
    """(op or "return", value, [Comm]) for a propagated program: `op_costs` of every op,
    and reshards of results to the fixed output shardings."""
    mesh = p.mesh
    out = []
    for op in p.walk():
        comms = op_costs(op, mesh)
        if comms:
            out.append((op, op.outputs[0] if op.outputs else None, comms))
    for v, s in zip(p.outputs, p.out_shardings):
        if type(v) is not Lit and s is not None and v.sharding != s:
            comms = reshard(v.aval, v.sharding, s, mesh)
            if comms:
                out.append(("return", v, comms))
    return out


def conflict_cost(c, mesh) -> list:
    """What a settled conflict costs: the value gathered on the conflict's dim from the
    axes its factor wanted down to the axes it kept."""
    v = c.value
    rank = v.aval.ndim
    kept = ax.dims_of(v.sharding, rank, mesh) if v.sharding is not None else \
        [[] for _ in range(rank)]
    if c.dim is None:
        return []
    wanted = [list(d) for d in kept]
    wanted[c.dim] = list(c.wanted)
    kept = [list(d) for d in kept]
    kept[c.dim] = list(c.kept)
    # the wanted axes may be used by another dim of the kept sharding: not a valid
    # sharding, so count them as moved by an all-to-all rather than gathered twice
    used = {r for d, rs in enumerate(kept) if d != c.dim for r in rs}
    wanted[c.dim] = [r for r in wanted[c.dim] if r not in used or r in c.kept]
    moved = [r for r in c.wanted if r in used and r not in c.kept]
    comms = reshard(v.aval, wanted, kept, mesh)
    if moved:
        local = nbytes(v.aval) // ax.total_size([r for rs in kept for r in rs])
        comms.insert(0, Comm("all-to-all", moved, local))
    return comms


def describe(comms) -> str:
    """`all-gather over {x}: 3.0 KiB sent per device; ...`, or "" if none."""
    return "; ".join(f"{c.kind} over {{{', '.join(_name(a) for a in c.axes)}}}: "
                     f"{fmt_bytes(c.sent)} sent per device" for c in comms)


def fmt_bytes(n) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def _name(a):
    return a[0] if a[1] == 1 else f"{a[0]}:({a[1]}){a[2]}"
