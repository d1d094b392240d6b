"""What a program costs per device under given shardings, from the IR and the factor
rules alone (no compile): compute time, the collectives and their time, per op and
over a program (issue 19's cost model; the ILP solver asks it about hypothetical
shardings, not only the propagated ones).

An op's *plan* says how it runs under operand shardings `in_dims` and result shardings
`out_dims`, following the strategies XLA's SPMD partitioner tries, in its order:
  1. an operand already sharded as the result (same axes on every factor they share,
     its reduction factors on axes the result leaves free): the others are resharded
     to match it, the op runs locally and its sharded reduction factors are summed by
     an all-reduce (the dot handler's "lhs matches output, replicate rhs" and
     "contracting dims partitioned alike" cases; elementwise ops: operands to the
     result's sharding);
  2. the operands agree with each other (not with the result) and split a reduction
     factor: the op runs on their sharding, its partial result is all-reduced, then
     resharded to the result (a reduce-scatter is an all-reduce of the same buffer
     plus a local slice on CPU); other ops (a broadcast, say) go to 3;
  3. otherwise the result's sharding decides the pass factors, each reduction factor
     keeps the largest free axes an operand has, and operands are resharded to that.
The collectives' bytes come from propagate/cost.py (`reshard`, `reduction`); a
program counts a reshard of one value to one sharding once (XLA's CSE reuses it).
"""
from __future__ import annotations

import dataclasses
from math import ceil, prod

from ..ir.primitive import Trait
from ..ir.program import Lit
from ..ir.rules import NEED_REPLICATION, REDUCTION
from ..propagate import axes as ax
from ..propagate.cost import reduction, reshard
from ..propagate.factors import _FS, _project, _unproject, cached_rule, default_rule
from ..propagate.state import _State

INF = float("inf")


# ---------------------------------------------------------------- device profiles


@dataclasses.dataclass(frozen=True)
class Hardware:
    """One device and its links. `axis_bandwidth` / `axis_latency` / `hop_latency`: per
    mesh axis name (a dict, with "*" the default) or one number for every axis: an axis
    may run over ICI or NVLink, another over DCN or InfiniBand. Bandwidth is what one
    device sends per second over the axis (one direction); a collective over n devices
    costs its latency once and `hop_latency` once per step of its ring (n - 1: each
    step waits on a neighbour), the alpha-beta model; `combine_bytes` / `combine_count` are
    the backend's all-reduce combiner limits (independent all-reduces merged into one
    op, whose operands are then all live at once)."""
    name: str
    flops_per_s: float
    mem_bw: float
    axis_bandwidth: dict | float
    axis_latency: dict | float = 0.0
    combine_bytes: float = INF
    combine_count: int = 256
    hop_latency: dict | float = 0.0

    def bandwidth(self, axis: str) -> float:
        return _per_axis(self.axis_bandwidth, axis)

    def latency(self, axis: str) -> float:
        return _per_axis(self.axis_latency, axis)

    def comm_time(self, comm) -> float:
        """latency + a hop's latency per ring step + bytes sent / bandwidth, each of
        the slowest axis the collective spans."""
        names = {a[0] for a in comm.axes}
        if not names:
            return 0.0
        hop = max(_per_axis(self.hop_latency, n) for n in names)
        return (max(map(self.latency, names)) + (ax.total_size(comm.axes) - 1) * hop
                + comm.sent / min(map(self.bandwidth, names)))

    def on(self, **axes) -> "Hardware":
        """This device with some mesh axes on other links: `hw.on(data=GPU_IB)` takes
        the data axis's bandwidth and latency from GPU_IB."""
        bw = _as_dict(self.axis_bandwidth)
        lat = _as_dict(self.axis_latency)
        hop = _as_dict(self.hop_latency)
        for name, other in axes.items():
            bw[name] = other.bandwidth(name)
            lat[name] = other.latency(name)
            hop[name] = _per_axis(other.hop_latency, name)
        return dataclasses.replace(self, axis_bandwidth=bw, axis_latency=lat,
                                   hop_latency=hop)


def _per_axis(v, axis):
    if isinstance(v, dict):
        return v[axis] if axis in v else v["*"]
    return v


def _as_dict(v):
    return dict(v) if isinstance(v, dict) else {"*": v}


# Sources and assumptions (peak figures; a model, not a measurement):
# simulated CPU: 8 XLA host devices sharing a few cores; ~50 GFLOP/s f32 and ~20 GB/s
#   per device, collectives are memcpys (~10 GB/s, ~5 us). XLA:CPU's all-reduce
#   combiner has no byte limit and 256 operands (cpu_compiler.cc kCombineBytes).
#   `python -m bench.calibrate` measures a host's instead; on the 2-core CI host:
#   Hardware("cpu (simulated)", 2.1e10, 3.9e9, 1.9e9, 2.4e-5, hop_latency=1.8e-5),
#   which AUTO(mesh, hardware=...) takes (not the default yet: under it a 48-layer
#   scan's search gathers its stacked weights before the loop, and estimates that
#   choice at 8.4 MB where the propagated program's model says 9.5 and XLA 10.9: XLA
#   also allocates the scan's outputs before the loop, copies the gathered weights to
#   its layout and the loop state, and fragments its heap by 17 %)
CPU = Hardware("cpu (simulated)", 5e10, 2e10, 1e10, 5e-6)
# H100 SXM: 989 TFLOP/s dense bf16, 3.35 TB/s HBM3 (NVIDIA datasheet); NVLink 4 is
#   900 GB/s bidirectional per GPU, 450 GB/s each way; a few us per NCCL call.
#   XLA:GPU's all-reduce combine threshold defaults to 30 MiB.
GPU_NVLINK = Hardware("gpu (H100, NVLink)", 989e12, 3.35e12, 450e9, 3e-6, 30 * 2**20)
# Across nodes: one 400 Gb/s NDR InfiniBand NIC per GPU, 50 GB/s; ~10 us latency.
GPU_IB = Hardware("gpu (H100, InfiniBand)", 989e12, 3.35e12, 50e9, 1e-5, 30 * 2**20)
# TPU v4: 275 TFLOP/s bf16, 1.2 TB/s HBM; 6 ICI links of ~45 GB/s each way (3-D
#   torus: two links per axis, 90 GB/s), ~1 us per hop. DCN between slices: ~25 GB/s
#   per host of 4 chips, ~6 GB/s per chip, ~20 us.
TPU_ICI = Hardware("tpu v4 (ICI)", 275e12, 1.2e12, 90e9, 1e-6)
TPU_DCN = Hardware("tpu v4 (DCN)", 275e12, 1.2e12, 6.25e9, 2e-5)


# ---------------------------------------------------------------- costs


@dataclasses.dataclass
class Cost:
    """Per device: compute seconds (and flops), the collectives, their seconds."""
    compute_s: float = 0.0
    comm: list = dataclasses.field(default_factory=list)
    comm_s: float = 0.0
    flops: float = 0.0
    runs: int = 1              # times it runs per call (a scan body's length)

    @property
    def total_s(self) -> float:
        return self.compute_s + self.comm_s

    @property
    def comm_bytes(self) -> int:
        """Bytes of the collectives' buffers, as shardc.report counts them, per call."""
        return sum(c.buffer for c in self.comm) * self.runs

    @property
    def sent_bytes(self) -> int:
        return sum(c.sent for c in self.comm) * self.runs


class Plan:
    """How one op runs: per operand the dims it is resharded to (None: as it is) and
    those collectives; per result the dims it is computed in, the all-reduces of its
    sharded reduction factors, and the reshard to the result's own dims; `factors`:
    per factor the axes it is split over."""
    __slots__ = ("targets", "operand_comms", "computed", "reduce", "result_comms",
                 "factors", "rule")

    def comms(self) -> list:
        return [c for cs in self.operand_comms for c in cs] + self.reduce + \
            [c for cs in self.result_comms for c in cs]


def dims(d, rank, mesh):
    """A value's dims as axis refs: from a Sharding, None (replicated), or a list per
    dim of axis names / SubAxis / refs."""
    if d is None:
        return [[] for _ in range(rank)]
    if isinstance(d, (list, tuple)):
        return [[a if type(a) is tuple else ax.to_ref(a, mesh) for a in x] for x in d]
    return ax.dims_of(d, rank, mesh)


def local_bytes(aval, d, mesh) -> int:
    """Bytes of one device's shard of a value (padded shards round up, as XLA's)."""
    d = dims(d, len(aval.shape), mesh)
    n = prod(ceil(s / ax.total_size(a)) for s, a in zip(aval.shape, d))
    return n * aval.dtype.itemsize


def _factors_of(mapping, d, sizes):
    st = _State(d, [True] * len(d), None)
    return {f: fs.axes + fs.overflow for f, fs in _project(mapping, st, sizes).items()}


def _unproj(mapping, fac, sizes):
    fss = {}
    for m in mapping:
        for f in m:
            fs = fss[f] = _FS(True, True)
            fs.axes = list(fac.get(f, ()))
    return _unproject(mapping, fss, sizes)


def _clash(a, b) -> bool:
    return any(ax.overlaps(x, y) for x in a for y in b)


def plan(op, in_dims=None, out_dims=None, mesh=None, rule=None) -> Plan | None:
    """The plan of `op` under `in_dims` / `out_dims` (per value: see `dims`; None or
    omitted: its propagated sharding). None for ops without a factor rule."""
    if rule is None:
        rule = default_rule(op)
    if rule is None:
        return None
    return _plan(op, rule, *_io_dims(op, in_dims, out_dims, mesh), mesh)


def _plan(op, rule, ins, outs, mesh) -> Plan:
    sizes, kinds = rule.sizes, rule.kinds
    pf = [None if d is None else _factors_of(m, d, sizes) for m, d in zip(rule.operands, ins)]
    res = {}
    for m, d in zip(rule.results, outs):
        for f, a in _factors_of(m, d, sizes).items():
            res.setdefault(f, a)
    used = [a for f, a in res.items() for a in a]
    red = [f for f, k in enumerate(kinds) if k == REDUCTION]

    def base():
        return {f: ([] if kinds[f] == NEED_REPLICATION else a) for f, a in res.items()}

    cands = []
    for p in pf:     # 1. an operand sharded as the result
        if p is not None and all(
                (not _clash(a, used)) if kinds[f] == REDUCTION else
                a == (res.get(f, []) if kinds[f] != NEED_REPLICATION else [])
                for f, a in p.items()):
            fac = base()
            fac.update({f: p[f] for f in red if f in p})
            cands.append(fac)
    if not cands and not rule.elementwise:    # 2. the operands agree with each other
        fac = {}
        agree = True
        for p in pf:
            for f, a in (p or {}).items():
                if fac.setdefault(f, a) != a or (a and kinds[f] == NEED_REPLICATION):
                    agree = False
        taken = [a for a in fac.values() for a in a]
        if agree and any(fac.get(f) for f in red) and len(taken) == len(set(taken)) and \
                not any(_clash([x], taken[i + 1:]) for i, x in enumerate(taken)):
            cands.append(fac)
    if not cands:     # 3. the result decides, reductions keep free operand axes
        fac = base()
        for f in red:
            free = used + [a for g in red if g in fac for a in fac[g]]
            opts = [[a for a in p[f] if not _clash([a], free)] for p in pf
                    if p is not None and f in p]
            if opts:
                fac[f] = max(opts, key=ax.total_size)
        cands.append(fac)
    best = None
    for fac in cands:
        pl = _evaluate(op, rule, fac, ins, outs, mesh)
        cost = sum(c.buffer for c in pl.comms())
        if best is None or cost < best[0]:
            best = (cost, pl)
    return best[1]


def _io_dims(op, in_dims, out_dims, mesh):
    ins = [None if type(v) is Lit else
           dims(v.sharding if in_dims is None else in_dims[i], v.aval.ndim, mesh)
           for i, v in enumerate(op.inputs)]
    outs = [dims(v.sharding if out_dims is None else out_dims[i], v.aval.ndim, mesh)
            for i, v in enumerate(op.outputs)]
    return ins, outs


def _evaluate(op, rule, fac, ins, outs, mesh) -> Plan:
    sizes = rule.sizes
    pl = Plan()
    pl.rule, pl.factors = rule, fac
    pl.targets, pl.operand_comms, need = [], [], []
    for v, m, d in zip(op.inputs, rule.operands, ins):
        if d is None:
            pl.targets.append(None)
            pl.operand_comms.append([])
            need.append(None)
            continue
        t = _unproj(m, fac, sizes)
        need.append(t)
        same = t == d
        pl.targets.append(None if same else t)
        pl.operand_comms.append([] if same else reshard(v.aval, d, t, mesh))
    pl.computed = [_unproj(m, fac, sizes) for m in rule.results]
    avals = [v.aval for v in op.outputs]
    pl.reduce = reduction(rule, need, avals, pl.computed, mesh)
    pl.result_comms = [reshard(a, c, o, mesh) if c != o else []
                       for a, c, o in zip(avals, pl.computed, outs)]
    return pl


def flops(op, pl: Plan) -> float:
    """Per-device flops: the product of the op's factor sizes over the devices its
    factors are split on (one multiply-add, 2 flops, per point for contractions)."""
    rule = pl.rule
    work = prod(rule.sizes) / prod(ax.total_size(pl.factors.get(f, ()))
                                   for f in range(len(rule.sizes)))
    n_tensors = sum(1 for m in rule.operands if m)
    return work * (2 if n_tensors > 1 and REDUCTION in rule.kinds else 1)


def op_cost(op, in_dims=None, out_dims=None, mesh=None, hw=CPU, seen=None,
            rules=None) -> Cost:
    """Cost of one op under the given shardings (see `plan`). `seen`: a set of
    (operand, target dims) already resharded earlier in the program, not paid again;
    `rules`: a dict caching factor rules across calls (propagate's cached_rule)."""
    rule = default_rule(op) if rules is None else cached_rule(op, rules)
    if rule is None:
        return Cost()
    ins, outs = _io_dims(op, in_dims, out_dims, mesh)
    pl = _plan(op, rule, ins, outs, mesh)
    comm = []
    grouped = _grouped_operand(op, rule, ins, outs, mesh) if seen is not None else None
    for i, (v, t, cs) in enumerate(zip(op.inputs, pl.targets, pl.operand_comms)):
        if t is None or not cs:
            continue
        if seen is not None:
            key = (id(v), _key(t), grouped if i == (grouped or (None,))[0] else None)
            if key in seen:
                continue
            seen.add(key)
        comm += cs
    comm += pl.reduce + [c for cs in pl.result_comms for c in cs]
    fl = flops(op, pl)
    touched = sum(local_bytes(v.aval, t if t is not None else d, mesh)
                  for v, t, d in zip(op.inputs, pl.targets, ins) if d is not None)
    touched += sum(local_bytes(v.aval, d, mesh) for v, d in zip(op.outputs, outs))
    if op.prim.traits & Trait.ANNOTATION:    # XLA emits no kernel for these
        fl = touched = 0
    return Cost(max(fl / hw.flops_per_s, touched / hw.mem_bw), comm,
                sum(map(hw.comm_time, comm)), fl)


def _key(d):
    return tuple(tuple(x) for x in d)


def _grouped_operand(op, rule, ins, outs, mesh):
    """(operand index, axes) of the operand a contraction whose operands both keep sharded
    non-contracting dims in the result is grouped on by XLA's dot partitioner, which
    then reshards that operand per device group, out of reach of its reshard cache: a
    reshard there is paid again even when another op already made the same one. XLA
    groups on the lhs when lhs_nc * |rhs shard| < rhs_nc * |lhs shard| (n_c: the
    partitions of an operand's non-contracting dims; dot_handler.cc
    LhsIsBestMatchForNonContractingPartitioning), else on the rhs. None otherwise."""
    if len(rule.operands) != 2 or len(rule.results) != 1 or REDUCTION not in rule.kinds \
            or None in ins:
        return None
    sizes = rule.sizes
    res = _factors_of(rule.results[0], outs[0], sizes)
    own = [{f for d in m for f in d} for m in rule.operands]
    kept = {f for d in rule.results[0] for f in d}
    if any(res.get(f) for f in own[0] & own[1] & kept):     # batch grouping comes first
        return None
    nc, axes = [], []
    for i, (m, d) in enumerate(zip(rule.operands, ins)):
        p = _factors_of(m, d, sizes)
        fs = sorted((own[i] - own[1 - i]) & kept)
        a = [x for f in fs for x in p.get(f, ())]
        if ax.total_size(a) == 1 or any(p.get(f, []) != res.get(f, []) for f in fs):
            return None
        nc.append(ax.total_size(a))
        axes.append(tuple(a))
    b = [local_bytes(v.aval, d, mesh) for v, d in zip(op.inputs, ins)]
    i = 0 if nc[0] * b[1] < nc[1] * b[0] else 1
    return i, axes[i]


def reshard_cost(aval, src, dst, mesh, hw=CPU) -> Cost:
    """The collectives (and their time) to turn `aval` sharded `src` into `dst`."""
    n = len(aval.shape)
    comm = reshard(aval, dims(src, n, mesh), dims(dst, n, mesh), mesh)
    return Cost(0.0, comm, sum(map(hw.comm_time, comm)))


# ---------------------------------------------------------------- programs


class Breakdown:
    """A program's predicted cost: `ops` [(op, Cost)] (a loop body's ops with `runs`
    its trip count), `returns` [(value, Cost)] (reshards to the output shardings), and
    per call: compute_s, comm_s, total_s, flops, collective_bytes (as shardc.report
    counts them), sent_bytes."""

    def __init__(self, ops, returns):
        self.ops, self.returns = ops, returns
        every = [c for _, c in ops + returns]
        self.compute_s = sum(c.compute_s * c.runs for c in every)
        self.comm_s = sum(c.comm_s * c.runs for c in every)
        self.flops = sum(c.flops * c.runs for c in every)
        self.collective_bytes = sum(c.comm_bytes for c in every)
        self.sent_bytes = sum(c.sent_bytes for c in every)

    @property
    def total_s(self) -> float:
        return self.compute_s + self.comm_s

    def by_kind(self) -> dict:
        """Collective bytes per call by kind."""
        out = {}
        for _, c in self.ops + self.returns:
            for m in c.comm:
                out[m.kind] = out.get(m.kind, 0) + m.buffer * c.runs
        return out

    def __str__(self):
        kinds = ", ".join(f"{k} {v} B" for k, v in self.by_kind().items()) or "none"
        return (f"predicted step: {self.total_s * 1e3:.3f} ms (compute "
                f"{self.compute_s * 1e3:.3f} ms, {self.flops:.3g} flops; communication "
                f"{self.comm_s * 1e3:.3f} ms, {self.collective_bytes} B: {kinds})")


def region_runs(op) -> list:
    """How many times each region of a region op runs per call of the op: a scan's
    body `length` times; a cond's branches 1 each (`program_cost` takes the costliest);
    a while body 1 (its trip count is unknown)."""
    n = op.params.get("length")
    n = n if isinstance(n, int) else 1
    return [n] * len(op.regions)


def program_cost(program, hw=CPU) -> Breakdown:
    """The predicted cost of a propagated program (every value has its sharding)."""
    mesh = program.mesh
    rows = []
    _visit(program, mesh, hw, 1, set(), rows, {})
    rets = []
    for v, s in zip(program.outputs, program.out_shardings):
        if type(v) is not Lit and s is not None and v.sharding != s:
            c = reshard_cost(v.aval, v.sharding, s, mesh, hw)
            if c.comm:
                rets.append((v, c))
    return Breakdown(rows, rets)


def _visit(p, mesh, hw, runs, seen, rows, rules):
    for op in p.ops:
        c = op_cost(op, mesh=mesh, hw=hw, seen=seen, rules=rules)
        c.runs = runs
        rows.append((op, c))
        if not op.regions:
            continue
        subs = []
        for r, n in zip(op.regions, region_runs(op)):
            sub = []
            _visit(r, mesh, hw, runs * n, seen, sub, rules)
            subs.append(sub)
        if op.prim.traits & Trait.BRANCHES:     # one branch runs: count the costliest
            subs = [max(subs, key=lambda s: sum(c.total_s * c.runs for _, c in s))]
        for sub in subs:
            rows += sub
