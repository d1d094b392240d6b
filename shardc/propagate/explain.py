"""Why each value is sharded the way it is: provenance chains, printed beside the IR."""
from __future__ import annotations

from ..ir.program import Program, print_program
from . import axes as ax
from .cost import conflict_cost, describe
from .engine import Source, Why


SEARCH = "the sharding search (shardc.AUTO)"


def _own_why(v):
    return v.why


def chain(v, dim, limit=6, why_of=_own_why):
    """[(op, loc) hops..., origin] for one dim of one value; origin is a Source or None.
    `why_of(value)`: its per-dim provenance (the value's own, or an Assignment's)."""
    whys, origin = chain_whys(v, dim, why_of)
    return [w.op for w in whys], origin


def chain_whys(v, dim, why_of=_own_why):
    """As chain, but each hop is its Why (op, the value it copied from, its dim)."""
    hops = []
    seen = set()
    whys = why_of(v)
    why = whys[dim] if whys else None
    while isinstance(why, Why) and len(hops) < 64:
        key = (id(why.op), id(why.src), why.src_dim)
        if key in seen:
            break
        seen.add(key)
        hops.append(why)
        src_whys = why_of(why.src) if why.src is not None else None
        if why.src_dim is None or not src_whys:
            return hops, None
        why = src_whys[why.src_dim]
    return hops, why if isinstance(why, Source) else None


def _hop_text(why):
    """One hop of a chain as explain prints it."""
    return hop_crossing(why) or op_text(why.op)


def hop_crossing(why):
    """A control-flow op's boundary hop: which way it crossed and as what (a scan's
    stacked xs / ys: the per-iteration slices); None for other hops."""
    op = why.op
    rop = getattr(op, "region_op", None)
    role = getattr(op, "role", None)
    if rop is None or role is None:     # (ops that name no roles: shard_map, custom_vjp)
        return None
    name = op_text(rop)
    if hasattr(op, "sources"):      # a Flow: its owner and targets hold one sharding
        yields = {id(v) for r in rop.regions for v in r.outputs}
        if why.src is op.outputs[0]:
            if all(id(v) in yields for v in op.sources):
                return f"{role} of {name}, back to what its body yields"
            return f"{role} of {name}, from its body's argument"
        return f"{role} {'leaving' if id(why.src) in yields else 'entering'} the {name} body"
    arg = any(v is op.inner for r in rop.regions for v in r.inputs)
    if why.src is op.outer:       # the inside took it from outside
        if arg:
            return f"slice of {role} of {name}" if op.stacked else \
                f"{role} entering the {name} body"
        return f"{role} of {name}, back to what its body yields"
    if not arg:
        return f"{role} of {name}, stacked from its body's slices" if op.stacked else \
            f"{role} leaving the {name} body"
    return f"{role} of {name}, from its body's " + ("slice" if op.stacked else "argument")


def op_text(op):
    """`dot_general@train.py:12`: an op and its user line."""
    loc = getattr(op, "loc", None)
    where = f"@{loc.short()}" if loc is not None and getattr(loc, "line", 0) else ""
    return f"{op.prim.name}{where}"


def explain_value(v, limit=4, sharding=None, why_of=_own_why, origin_text=str) -> str:
    """One line: for each sharded dim, the origin and the ops it came through.
    `sharding`, `why_of`: the value's (default) or an Assignment's; `origin_text(source)`:
    how an origin is named."""
    sharding = v.sharding if sharding is None else sharding
    if sharding is None or not why_of(v):
        return ""
    parts = []
    for d, axes in enumerate(sharding.dims):
        if not axes:
            continue
        hops, origin = chain_whys(v, d, why_of=why_of)
        axes_txt = "{" + ", ".join(map(str, axes)) + "}"
        src = origin_text(origin) if origin is not None else "propagation"
        if hops:
            path = " <- ".join(_hop_text(w) for w in hops[:limit])
            rest = hops[limit:]
            # past the limit, still show where it crossed into a loop or branch body
            j = next((k for k, w in enumerate(rest) if hop_crossing(w)), None)
            if j is not None:
                path += " <- ..." * (j > 0) + " <- " + hop_crossing(rest[j])
                rest = rest[j + 1:]
            if rest:
                path += f" <- ... ({len(rest)} more)"
            parts.append(f"dim {d} {axes_txt} from {src} via {path}")
        else:
            parts.append(f"dim {d} {axes_txt} from {src}")
    return "; ".join(parts) if parts else "replicated: no sharding reached it"


def explain_program(p: Program) -> str:
    """The IR with a `//` provenance comment under every value, then the conflicts."""
    searched = _searched_inputs(p)
    srcs = p.meta.get("sources", {})
    sources = {id(srcs[v]) for v in searched if v in srcs}
    by_search = f", chosen by {SEARCH}"

    def origin_text(src):
        return f"{src}{by_search}" if id(src) in sources else str(src)

    # a constraint the search put in (auto=True) decides its operand and result too
    # when it replicates them
    fixed = {}
    for op in p.ops:
        if op.params.get("auto") and op.prim.sharded_results:
            where = f" at {op.loc.short()}" if op.loc is not None and op.loc.line else ""
            for v in op.inputs[:1] + op.outputs[:1]:
                fixed[v] = f"replicated, chosen by {SEARCH}{where}"

    conflicted = {id(c.value) for c in p.meta.get("conflicts", [])}

    def explain(v):
        text = explain_value(v, origin_text=origin_text)
        if v.sharding is not None and not any(v.sharding.dims):
            if v in searched:
                return "replicated" + by_search
            if id(v) in conflicted and v not in fixed:
                return "replicated: shardings reached it but conflicted (see below)"
            return fixed.get(v, text)
        return text
    text = print_program(p, explain=explain)
    lines = []
    for c in p.meta.get("conflicts", []):
        comms = conflict_cost(c, p.mesh) if p.mesh is not None else []
        cost = f" (resharding it: {describe(comms)})" if comms else ""
        lines.append(
            f"// conflict at {op_text(c.op)}: dim {c.dim} of a {c.value.aval} wanted "
            f"{ax.refs_text(c.wanted)} but kept {ax.refs_text(c.kept)}: {c.reason}{cost}")
    return text + ("\n".join(lines) + "\n" if lines else "")


def _searched_inputs(p):
    """The inputs whose sharding the sharding search chose (its Solution, in
    meta["auto"], has `input_shardings`: {input index: sharding})."""
    chosen = getattr(p.meta.get("auto"), "input_shardings", None) or {}
    return {p.inputs[i] for i in chosen if i < len(p.inputs)}
