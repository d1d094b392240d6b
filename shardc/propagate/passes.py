"""IR-to-IR passes around propagation: clean-up before it, export after it.

prepare():   dead-code elimination, size-1 mesh axes dropped, constants split per
             use, fully closed constraints copied onto the constrained value
             (Shardy's import passes, so shardc decides as XLA/JAX would).
propagate(): the propagation stage (engine.assign), the export rules for results,
             then the assignment written onto the program.
The verifier (verify.py) runs after each (after propagate() it checks shardings and
SSA form: propagation changes nothing else).
"""
from __future__ import annotations

from . import axes as ax
from ..ir.primitive import PropKind, Trait
from ..ir.program import Lit, Op, Program, Value
from .engine import Source
from .engine import assign
from ..ir.sharding import Sharding, axis_name
from ..ir.verify import verify


def dce(p: Program) -> None:
    """Drop ops whose results nobody uses (unless they have effects)."""
    live = set(p.outputs)        # values (and literals) hash by identity
    kept = []
    for op in reversed(p.ops):
        if not _needed(op, live):
            continue
        if op.prim.drop_results is not None:
            op.prim.drop_results(op, live)
        kept.append(op)
        live.update(op.inputs)
        for r in op.regions:
            dce(r)
    kept.reverse()
    p.ops = kept


def used_inputs(p: Program) -> list:
    """The positions of the inputs the program reads (jit's keep_unused=False keeps
    only these), by dce's liveness; an op with regions reads all its operands."""
    live = set(p.outputs)
    for op in reversed(p.ops):
        if _needed(op, live):
            live.update(op.inputs)
    return [i for i, v in enumerate(p.inputs) if v in live]


def _needed(op, live) -> bool:
    return op.prim.effectful or bool(op.regions and _has_effect(op)) or \
        any(v in live for v in op.outputs)


def _has_effect(op) -> bool:
    """An op with regions is kept when an op inside is effectful (debug.print in a cond)."""
    return any(o.prim.effectful and not o.prim.traits & Trait.SHARDING_GROUP or
               o.regions and _has_effect(o) for r in op.regions for o in r.ops)


def _drop_size_one_axes(sh: Sharding | None, mesh) -> Sharding | None:
    if sh is None:
        return None
    # (an Explicit size-1 axis stays: it is part of the value's type, as in jax)
    ones = {n for n, s in mesh.axes if s == 1 and n not in mesh.explicit}
    if not ones or not any(axis_name(a) in ones for d in sh.dims for a in d):
        return sh
    return Sharding([[a for a in d if axis_name(a) not in ones] for d in sh.dims],
                    sh.open, sh.unreduced, sh.reduced)


def split_constants(p: Program) -> None:
    """Give every user of a constant (or scalar broadcast) chain a private copy of it."""
    producer = {}
    const = set()
    for op in p.ops:
        for v in op.outputs:
            producer[id(v)] = op
        if op.regions:
            continue
        prim = op.prim
        if prim.constant:
            is_const = True
        elif prim.keeps_constant:
            for v in op.inputs:
                if type(v) is not Lit and id(v) not in const:
                    is_const = False
                    break
            else:
                is_const = True
        else:
            is_const = False
        # a scalar's broadcast is split too, as Shardy's
        if is_const or prim.prop_kind is PropKind.BROADCAST and op.inputs[0].aval.ndim == 0:
            for v in op.outputs:
                const.add(id(v))
    if not const:
        return
    new_ops = []
    groups: dict = {}       # sharding groups follow each clone (as in Shardy)
    for op in p.ops:
        if op.prim.sharding_group:
            groups.setdefault(id(op.inputs[0]), []).append(op)

    def clone(v, mapping):
        if isinstance(v, Lit) or v.aval.ndim == 0 or id(v) not in const:
            return v
        if id(v) in mapping:
            return mapping[id(v)]
        op = producer[id(v)]
        ins = [clone(u, mapping) for u in op.inputs]
        outs = [Value(o.aval, o.sharding) for o in op.outputs]
        new_ops.append(Op(op.prim, ins, outs, op.params, op.loc, op.regions))
        for o, n in zip(op.outputs, outs):
            mapping[id(o)] = n
            for g in groups.get(id(o), ()):
                new_ops.append(Op(g.prim, [n], [], g.params, op.loc))
        return mapping[id(v)]

    def fix(v):
        return clone(v, {}) if not isinstance(v, Lit) and id(v) in const else v

    for op in p.ops:
        if op.outputs and all(id(v) in const for v in op.outputs):
            new_ops.append(op)
            continue
        if op.prim.sharding_group and id(op.inputs[0]) in const:
            continue
        for v in op.inputs:
            if id(v) in const and type(v) is not Lit:
                op.inputs = [fix(v) for v in op.inputs]
                break
        new_ops.append(op)
    p.outputs = [fix(v) for v in p.outputs]
    p.ops = new_ops
    dce(p)


def fold_constants(p: Program, known: dict | None = None, defs: dict | None = None,
                   alias: dict | None = None) -> None:
    """Ops on operands known before propagation (scalar literals and constants, and
    what folds of them) give literals or simpler ops (each primitive's `fold` rule), as
    XLA's canonicalizer folds them before Shardy: a slice at a constant start may keep
    its sliced dims sharded where a dynamic_slice may not; an op that does nothing (a
    pad of zero widths) forwards its operand, so propagation meets what Shardy meets."""
    known = {} if known is None else known      # id(value) -> its scalar value
    defs = {} if defs is None else defs         # id(value) -> the op that makes it
    alias = {} if alias is None else alias      # id(value) -> the value it forwards
    for i, op in enumerate(p.ops):
        if alias:
            op.inputs = [alias.get(id(v), v) for v in op.inputs]
        for r in op.regions:
            fold_constants(r, known, defs, alias)
        prim = op.prim
        if prim.fold is not None:
            consts = [v.value if type(v) is Lit else known.get(id(v)) for v in op.inputs]
            out = prim.fold(op, consts, defs)
            if isinstance(out, Op):
                p.ops[i] = op = out
            elif out is not None:
                for v, r in zip(op.outputs, out):
                    if type(r) is Lit:
                        known[id(v)] = r.value
                    elif r is not None and r.aval == v.aval:
                        alias[id(v)] = r
        for v in op.outputs:
            defs[id(v)] = op
    if alias:
        p.outputs = [alias.get(id(v), v) for v in p.outputs]


def _constraints_of(op):
    """(operand, required sharding, source) pairs an op imposes on its operands
    (sharding constraints, shard_map's in_specs): the op's operand_constraints."""
    rule = op.prim.operand_constraints
    return rule(op) if rule is not None else []


def apply_constraints(p: Program, sources: dict) -> None:
    """A fully closed constraint on an unsharded value shards the value itself
    (Shardy's apply-sharding-constraints, including shard_map operands)."""
    wanted: dict = {}
    for op in p.ops:
        for v, s, _ in _constraints_of(op):
            if not isinstance(v, Lit):
                wanted.setdefault(id(v), []).append(s)
    for op in p.ops:
        for v, s, src in _constraints_of(op):
            if isinstance(v, Lit) or v.sharding is not None or s.open is not None or \
                    not v.aval.ndim:
                continue
            if any(o != s for o in wanted[id(v)]):
                continue
            v.sharding = s
            sources[v] = src or sources[op.outputs[0]]


def prepare(p: Program) -> Program:
    """Shardy's import passes on a traced program; records each source's origin."""
    mesh = p.mesh
    sources = p.meta.setdefault("sources", {})
    for i, v in enumerate(p.inputs):
        v.sharding = _drop_size_one_axes(v.sharding, mesh)
        if v.sharding is not None:
            sources[v] = Source("arg", f"argument {v.name or i}")
    p.out_shardings = [_drop_size_one_axes(s, mesh) for s in p.out_shardings]
    fold_constants(p)
    dce(p)
    split_constants(p)
    for op in p.walk():
        src = op.prim.source_of
        if src is not None:
            for v in op.outputs:
                v.sharding = _drop_size_one_axes(v.sharding, mesh)
                sources[v] = src(op)
    # a value's explicit type fixes it before any constraint on it can: a reshard of
    # it makes a new value and leaves the operand's type alone, as in jax
    _type_sources(p, sources)
    apply_constraints(p, sources)
    # (an argument's too: a jit's unreduced result passed to the next)
    unreduced = {v: v.sharding.unreduced for v in [*p.inputs, *(w for op in p.walk()
                                                                for w in op.outputs)]
                 if v.sharding is not None and v.sharding.unreduced}
    # a region's block argument typed partial sums (a scan or loop carry) is one too:
    # its body's uses (a step's y) must not see it whole
    for op in p.walk():
        for v in (w for r in op.regions for w in r.inputs):
            ts = v.aval.ts
            if ts is not None and ts.unreduced and v not in unreduced:
                unreduced[v] = ts.unreduced
    if unreduced:
        p.meta["unreduced"] = unreduced
    verify(p)
    return p


def _type_sources(p: Program, sources: dict) -> None:
    """Explicit mode: a value's type fixes its sharding on the explicit axes (closed
    when every mesh axis is Explicit; open, so Auto axes may still shard it, when some
    are Auto -- as jax lowers types to sharding constraints)."""
    mesh = p.mesh
    for v in p.inputs:
        src = sources.get(v)
        if v.aval.ts is not None and any(v.aval.ts.dims) and src is not None and \
                src.kind == "arg" and v.sharding is not None and \
                all(axis_name(a) in mesh.explicit for a in v.sharding.axes()):
            src.label = f"the type of {src.label}"
    mixed = mesh is not None and len(mesh.explicit) < len(mesh.names)
    replicated = {}
    for op in p.walk():
        for v in op.outputs:
            ts = v.aval.ts
            if ts is None or (v.sharding is not None and not (mixed and v.sharding.open)):
                continue
            if v.sharding is None:
                v.sharding = Sharding(ts.dims, [True] * len(ts.dims)) if mixed else ts
                sources[v] = Source("type", f"the type {v.aval}", op.loc)
            if mixed:       # open for the Auto axes only (jax's replicated={...})
                used = {axis_name(a) for a in ts.axes()}
                rest = tuple(n for n in mesh.names if n in mesh.explicit and n not in used)
                if rest:
                    replicated[v] = rest
    if replicated:
        p.meta["replicated"] = replicated


def evenly_sharded(sh: Sharding, shape, mesh, open_dims) -> Sharding:
    """Shardy's export of result shardings: keep only axes that divide each dim evenly,
    and drop sub-axes from dims propagation chose (open dims)."""
    if 0 in shape and all(open_dims):
        # nothing to split (and XLA returns each device the whole empty array)
        return Sharding.replicated(len(shape))
    dims = []
    for d, (n, axes) in enumerate(zip(shape, sh.dims)):
        refs = [ax.to_ref(a, mesh) for a in axes]
        if n % ax.total_size(refs):
            rem, kept = n, []
            for r in refs:
                from math import gcd
                g = gcd(r[2], rem)
                if g == 1:
                    break
                if g == r[2]:
                    kept.append(r)
                    rem //= g
                else:
                    kept.append((r[0], r[1], g))
                    break
            refs = kept
        if open_dims[d]:
            cut = next((k for k, r in enumerate(refs) if ax.from_ref(r, mesh) != r[0]), None)
            if cut is not None:
                refs = refs[:cut]
        dims.append([ax.from_ref(r, mesh) for r in refs])
    return Sharding(dims)


def propagate(p: Program) -> Program:
    """Propagate, then export the result shardings as XLA would; verifies the result.
    The stage itself (`assign`) leaves the IR alone; its assignment is then written
    onto `p` for the stages after it."""
    propagate_assignment(p)
    return p


def propagate_assignment(p: Program):
    """propagate(p), returning the Assignment it wrote onto `p` (result shardings as
    exported): the Propagated stage keeps it for users to look at."""
    a = assign(p)
    a.program = p
    p.meta["fixed_out"] = [s is not None for s in p.out_shardings]   # before apply()
    a.out_shardings = export_out_shardings(p, a.out_shardings)
    a.apply(p)
    # partial sums (unreduced axes) are no dims: propagation keeps them where set
    for v, axes in p.meta.get("unreduced", {}).items():
        if v.sharding is not None:
            v.sharding = Sharding(v.sharding.dims, v.sharding.open, axes)
    # propagation only assigns shardings: check them (and SSA form); the types were
    # verified after prepare()
    verify(p, propagated=True, types=False)
    return a


def export_out_shardings(p: Program, decided) -> list:
    """The result shardings XLA exports: `decided` (propagation's) made even, keeping
    sub-axes only where `p` fixed the result's sharding. A result the caller left free
    keeps its type's unreduced axes (its partial sums leave as they are, as jax's) and
    reduced ones (replicated values; only its sharding names them)."""
    out = []
    fixed = p.out_shardings
    for i, (v, s) in enumerate(zip(p.outputs, decided)):
        free = i >= len(fixed) or fixed[i] is None
        s = evenly_sharded(s, v.aval.shape, p.mesh, [free] * v.aval.ndim)
        ts = v.aval.ts
        if free and s is not None and ts is not None and (ts.unreduced or ts.reduced):
            s = Sharding(s.dims, s.open, ts.unreduced, ts.reduced)
        out.append(s)
    return out


def run_callbacks(p: Program, mesh) -> None:
    """Run the ops' after-propagation hooks (inspect_array_sharding's callbacks) with
    the decided shardings."""
    for op in p.walk():
        hook = op.prim.after_propagation
        if hook is not None:
            hook(op, mesh)


def propagate_text(text: str, explain=False) -> str:
    """IR text in, propagated IR text out (with provenance comments if `explain`)."""
    from .explain import explain_program
    from ..ir.program import print_program
    from ..ir.parse import parse_program
    p = parse_program(text)
    if p.mesh is None:
        from ..errors import ShardcError
        raise ShardcError("the IR has no `mesh <...>` line; propagation needs a mesh")
    prepare(p)
    propagate(p)
    return explain_program(p) if explain else print_program(p)
