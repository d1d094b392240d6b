"""Measurements: stage timings, cached-call and run times, collectives, memory.

Every timer returns seconds from time.perf_counter. Repeated measurements of
shardc and jax are interleaved (shardc, jax, shardc, jax, ...) so that the load of
a shared machine drifts over both sides alike; results are medians.
"""
from __future__ import annotations

import contextlib
import gc
import re
import statistics
import time

import jax

# ---------------------------------------------------------------- timing helpers


def median(xs):
    return statistics.median(xs) if xs else None


@contextlib.contextmanager
def shardc_stage_timer():
    """Record how long shardc's prepare and propagate passes take.

    `Traced.propagate()` (the Propagated stage) calls `passes.prepare(program)` then
    `passes.propagate_assignment(program)` (which `passes.propagate` also goes
    through); we wrap both module attributes for the duration, timing the real calls on
    the real program. Yields a dict that collects lists of seconds under
    "prepare"/"propagate" (and the op count of the last propagated program under "ops")."""
    from shardc.propagate import passes
    rec = {"prepare": [], "propagate": [], "ops": None}
    orig_prepare, orig_propagate = passes.prepare, passes.propagate_assignment

    def prepare(p, *a, **k):
        t = time.perf_counter()
        try:
            return orig_prepare(p, *a, **k)
        finally:
            rec["prepare"].append(time.perf_counter() - t)

    def propagate(p, *a, **k):
        rec["ops"] = sum(1 for _ in p.walk())
        t = time.perf_counter()
        try:
            return orig_propagate(p, *a, **k)
        finally:
            rec["propagate"].append(time.perf_counter() - t)

    passes.prepare, passes.propagate_assignment = prepare, propagate
    try:
        yield rec
    finally:
        passes.prepare, passes.propagate_assignment = orig_prepare, orig_propagate


def lower_shardc(prog, fw, args):
    """Python function -> StableHLO text with a fresh shardc.jit: (seconds, Lowered,
    stage breakdown). The breakdown splits the time into trace, prepare, propagate and
    emit (StableHLO text emission), one stage at a time as jax's AOT stages."""
    f = prog.fresh(fw)
    with shardc_stage_timer() as rec:
        t0 = time.perf_counter()
        propagated = f.trace(*args).propagate()
        t2 = time.perf_counter()
        lowered = propagated.lower()
        text = lowered.text
        t3 = time.perf_counter()
    assert isinstance(text, str)
    prep = sum(rec["prepare"])
    prop = sum(rec["propagate"])
    # the propagate stage's overhead outside the two passes (gc pause) counts as trace,
    # as it did when f.trace ran them: the stages add up to the total
    stages = {"trace_s": (t2 - t0) - prep - prop, "prepare_s": prep, "propagate_s": prop,
              "emit_s": t3 - t2, "ir_ops": rec["ops"]}
    return t3 - t0, lowered, stages


def lower_jax(prog, fw, args):
    """Python function -> lowered StableHLO module with a fresh jax.jit."""
    f = prog.fresh(fw)
    t0 = time.perf_counter()
    lowered = f.trace(*args).lower()
    t1 = time.perf_counter()
    return t1 - t0, lowered


def compile_timed(lowered):
    t0 = time.perf_counter()
    compiled = lowered.compile()
    return time.perf_counter() - t0, compiled


def call_us(fns, args, n=300, rounds=6):
    """Median dispatch time (µs) of a cached call `f(*args)`, per framework.

    `fns` is {name: jitted function}, already called once (compiled, cached), and
    `args` are already placed on devices. Each sample times only `f(*args)` returning
    -- the time until control comes back to Python, which is what a user feels as
    dispatch overhead, since jax and shardc both dispatch asynchronously -- and then
    blocks on the outputs outside the timed region, so no sample queues behind the
    previous one's computation. Frameworks alternate in `rounds` chunks of n/rounds
    calls each."""
    out = {k: [] for k in fns}
    per = max(1, n // rounds)
    block = jax.block_until_ready
    pc = time.perf_counter
    for _ in range(rounds):
        for name, f in fns.items():
            samples = out[name]
            gc.collect()
            for _ in range(per):
                t = pc()
                r = f(*args)
                samples.append(pc() - t)
                block(r)
    return {k: median(v) * 1e6 for k, v in out.items()}


def stream_us(fns, args, per=10, rounds=101):
    """Median time (µs) per call of `f(*args)` in a stream of `per` calls back to back,
    waiting once at the end: the cost per op of an eager loop (dispatch and run
    overlap, as they do for a user). The two frameworks alternate every chunk (first
    one, then the other), so drifting load hits both alike; medians are over `rounds`
    chunks, and "ratio" is the median over rounds of first / second side's chunk."""
    out = {k: [] for k in fns}
    block = jax.block_until_ready
    pc = time.perf_counter
    names = list(fns)
    gc.collect()
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            f = fns[name]
            t = pc()
            for _ in range(per):
                o = f(*args)
            block(o)
            out[name].append((pc() - t) / per)
    res = {k: median(v) * 1e6 for k, v in out.items()}
    a, b = (out[n] for n in names[:2])
    res["ratio"] = median([x / y for x, y in zip(a, b)])
    return res


def paired_call_us(fns, args, n=600):
    """call_us with the two frameworks' calls interleaved one by one (each waited for
    outside the timed region): medians per side, and "ratio", the median of each call's
    ratio to the other side's call next to it."""
    out = {k: [] for k in fns}
    block = jax.block_until_ready
    pc = time.perf_counter
    names = list(fns)
    gc.collect()
    for i in range(n):
        for name in (names if i % 2 == 0 else names[::-1]):
            f = fns[name]
            t = pc()
            r = f(*args)
            out[name].append(pc() - t)
            block(r)
    res = {k: median(v) * 1e6 for k, v in out.items()}
    a, b = (out[k] for k in names[:2])
    res["ratio"] = median([x / y for x, y in zip(a, b)])
    return res


def run_s(compiled, args, min_iters=10, max_iters=200, budget_s=1.0):
    """Median wall time of one run of each compiled executable on placed inputs,
    waiting for the outputs (block_until_ready). Frameworks alternate every iteration;
    the number of iterations adapts to the program's run time within `budget_s`."""
    block = jax.block_until_ready
    pc = time.perf_counter
    for c in compiled.values():   # warm-up
        block(c(*args))
    t = pc()
    for c in compiled.values():
        block(c(*args))
    one = max(pc() - t, 1e-6)
    iters = int(min(max_iters, max(min_iters, budget_s / one)))
    out = {k: [] for k in compiled}
    for _ in range(iters):
        for name, c in compiled.items():
            t = pc()
            block(c(*args))
            out[name].append(pc() - t)
    return {k: median(v) for k, v in out.items()}


# ---------------------------------------------------------------- StableHLO

_SHLO_GENERIC = re.compile(r'"(stablehlo\.[a-z_]+)"')
_SHLO_PRETTY = re.compile(r'\b(stablehlo\.[a-z_]+)\b')


def stablehlo_op_count(text: str) -> int:
    """Ops in a StableHLO module's text (generic or pretty form), region terminators
    (stablehlo.return) included; the module's sdy.mesh is not an op."""
    names = _SHLO_GENERIC.findall(text)
    if not names:
        names = [n for n in _SHLO_PRETTY.findall(text)]
    return len(names)


# ---------------------------------------------------------------- collectives

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all",
               "collective-permute", "ragged-all-to-all", "collective-broadcast")

_DTYPE_BYTES = {"pred": 1, "s2": 0.25, "u2": 0.25, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1,
                "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
                "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
_ARRAY = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,]*)\]")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?(%?[\w.\-]+)\s*=\s*(.*?)\s([a-z][\w\-]*)\((.*)$")
_NAME = re.compile(r"%[\w.\-]+")


def _arrays(shape_text):
    """[(dtype, dims, bytes)] for every array in a (possibly tuple) HLO shape."""
    out = []
    for dt, dims in _ARRAY.findall(shape_text):
        if dt not in _DTYPE_BYTES and not dt.startswith("f8"):
            continue
        n = 1
        for d in dims.split(",") if dims else ():
            n *= int(d)
        out.append((dt, dims, n * _DTYPE_BYTES.get(dt, 1)))
    return out


def _operand_names(rest):
    depth, end = 1, len(rest)
    for i, c in enumerate(rest):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                end = i
                break
    return _NAME.findall(rest[:end])


def list_collectives(hlo_text: str, mesh=None):
    """Collectives in XLA's partitioned HLO text: shardc.report.collectives when it is
    there (it also names the mesh axes), else the bench-local parser below. Both count
    bytes the same way."""
    try:
        from shardc.tools.report import collectives
    except ImportError:
        collectives = None
    if collectives is not None:
        try:
            return [{"kind": c.kind, "name": c.name, "shape": c.type, "bytes": int(c.bytes),
                     "axes": tuple(c.axes)} for c in collectives(hlo_text, mesh)]
        except Exception:   # an in-progress report module must not break the bench
            pass
    return parse_collectives(hlo_text)


def parse_collectives(hlo_text: str):
    """Collectives in XLA's partitioned HLO text: dicts with kind, name, shape and the
    per-device bytes the collective moves.

    Bytes: all-reduce its buffer, all-gather its (gathered) output, reduce-scatter its
    (unscattered) input, all-to-all and collective-permute their buffer -- i.e. the
    larger of operand and result sizes. Async pairs count once, at their `-start`.
    A collective inside a loop body is counted once (statically)."""
    shapes = {}
    found = []
    for line in hlo_text.splitlines():
        m = _INSTR.match(line)
        if not m:
            continue
        name, shape, opcode, rest = m.groups()
        name = name if name.startswith("%") else "%" + name
        shapes[name] = shape
        base = opcode[:-6] if opcode.endswith("-start") else opcode
        if base not in COLLECTIVES or opcode.endswith("-done"):
            continue
        found.append((name, shape, opcode, base, rest))
    out = []
    for name, shape, opcode, base, rest in found:
        ops = [a for o in _operand_names(rest) for a in _arrays(shapes.get(o, ""))]
        res = _arrays(shape)
        in_bytes = sum(a[2] for a in ops)
        if opcode.endswith("-start"):
            # async results are tuples (operands..., outputs..., context scalars)
            res = res[len(ops):] if len(res) > len(ops) else res
            res = [a for a in res if a[1] != ""] or res
        out_bytes = sum(a[2] for a in res)
        out.append({"kind": base, "name": name, "shape": shape.strip(),
                    "bytes": int(max(in_bytes, out_bytes))})
    return out


def collective_bytes(hlo_text: str, mesh=None) -> int:
    return sum(c["bytes"] for c in list_collectives(hlo_text, mesh))


def peak_bytes(compiled) -> int | None:
    """Per-device peak memory from the executable's memory analysis."""
    ma = compiled.memory_analysis()
    if ma is None:
        return None
    peak = getattr(ma, "peak_memory_in_bytes", None)
    if peak:
        return int(peak)
    return int(ma.argument_size_in_bytes + ma.output_size_in_bytes +
               ma.temp_size_in_bytes - ma.alias_size_in_bytes)


def temp_bytes(compiled) -> int | None:
    """Per-device temporaries (XLA's one temp allocation, packed by its heap
    simulation). On the CPU backend peak_memory_in_bytes is arguments + outputs only
    (train_step: 3.2 MB peak next to 25 MB of temps), so activations, residuals and
    what remat saves show up here and not in peak_bytes."""
    ma = compiled.memory_analysis()
    return None if ma is None else int(ma.temp_size_in_bytes)
