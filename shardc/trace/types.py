"""Explicit sharding mode: each traced value's type carries its sharding on the mesh's
Explicit axes (`Aval.ts`), computed at trace time as jax's sharding-in-types does.

An op's result type comes from its factor rule -- the table propagation uses: every
factor takes the axes its operands' dims give it (the "consensus": unsharded if none
does, the common axes if they agree, an error if two differ); a reduction factor
sharded on two operands is ambiguous (which result dim should hold the partial sums?),
so it needs `out_sharding=`; a result dim gets its factors' axes, major first, and an
axis may shard only one dim. Unreduced and reduced axes follow the op's
`prim.type_partial` (trace/ur_rules.py). Region ops (cond, scan, shard_map, ...) take their
results' types from their bodies along their data-flow edges. A primitive may state its
own rule as `prim.type_rule(in_avals, out_avals, mesh, explicit, **params) -> [Sharding |
None]`, or tune the generic one: `prim.type_whole` ("drop", "keep" or "error": what a
sharded dim the op needs whole does) and `prim.type_partial` (ur_rules.py).
"""
from __future__ import annotations

import threading

import jax

from ..errors import ShardingTypeError
from ..ir.program import Lit
from ..ir.primitive import Trait
from ..ir.rules import NEED_REPLICATION, REDUCTION
from ..ir.sharding import Sharding
from .ur_rules import each_partial_axes, partial_axes

EMPTY = frozenset()


class _Modes(threading.local):
    def __init__(self):
        self.stack = []         # ("auto" | "explicit", axes) from auto_axes / explicit_axes
        self.lenient = 0        # > 0: an out_sharding= will set the result's type


_modes = _Modes()
ANY_LENIENT = [0]     # lenient scopes open in any thread (a cheap first test for eager ops)


def explicit_axes_of(builder) -> frozenset:
    """The mesh axes that are Explicit where `builder` traces now."""
    slot = builder.meshes
    mesh = slot.info.shape if slot is not None else None
    stack = _modes.stack
    if mesh is None:
        return EMPTY
    ex = _jax_context(mesh)
    if not ex and not stack:
        return EMPTY
    for mode, axes in stack:
        ex = ex - axes if mode == "auto" else ex | (axes & frozenset(mesh.names))
    b = builder
    while b is not None and ex:
        if b.manual is not None:
            ex = ex - frozenset(b.manual.axes)
        b = b.parent
    return ex


def _jax_context(mesh) -> frozenset:
    """The program mesh's Explicit axes, as jax code shardc runs changed them: jax's
    auto_axes / explicit_axes set jax's abstract mesh context, whose axis types then
    differ from the mesh's (jax's tracers above shardc's, as jax.grad's, read them)."""
    am = jax.sharding.get_abstract_mesh()
    if am.empty or am.axis_names != mesh.names or am.axis_sizes != tuple(mesh.sizes.values()):
        return mesh.explicit
    ex = set(mesh.explicit)
    for n, t in zip(am.axis_names, am.axis_types):
        if t == jax.sharding.AxisType.Auto:
            ex.discard(n)
        elif t == jax.sharding.AxisType.Explicit:
            ex.add(n)
    return frozenset(ex)


class axis_mode:
    """`with axis_mode("auto", axes):` traces with `axes` Auto (auto_axes), or with
    "explicit" Explicit (explicit_axes)."""

    def __init__(self, mode, axes):
        self.entry = (mode, frozenset(axes))

    def __enter__(self):
        _modes.stack.append(self.entry)

    def __exit__(self, *exc):
        _modes.stack.pop()


class lenient:
    """Inside, results are left untyped (and so not pinned): the caller's
    `out_sharding=` reshard gives the value its type next, and an ambiguous or
    conflicting operand sharding is no error."""

    def __enter__(self):
        _modes.lenient += 1
        ANY_LENIENT[0] += 1

    def __exit__(self, *exc):
        _modes.lenient -= 1
        ANY_LENIENT[0] -= 1


def is_lenient() -> bool:
    return _modes.lenient > 0


def restrict(sh: Sharding | None, explicit, rank) -> Sharding | None:
    """`sh` on the explicit axes only (None: replicated)."""
    if sh is None:
        return replicated(rank)
    return Sharding([tuple(a for a in d if type(a) is str and a in explicit)
                     for d in sh.dims], None, [a for a in sh.unreduced if a in explicit],
                    [a for a in sh.reduced if a in explicit])


def replicated(rank):
    return Sharding.replicated(rank) if rank else None


def typed(aval, ts):
    """`aval` with type sharding `ts` (rank-0 values carry none)."""
    if not aval.shape and (ts is None or not (ts.unreduced or ts.reduced)):
        ts = None
    return aval if aval.ts == ts else aval.update(ts=ts)


def without_dim(aval, d):
    """`aval` with dim `d` removed (a scan's slice, a vmapped example), keeping the
    type's sharding of the other dims."""
    shape = aval.shape[:d] + aval.shape[d + 1:]
    ts = aval.ts
    if ts is not None:
        ts = Sharding(ts.dims[:d] + ts.dims[d + 1:], None, ts.unreduced, ts.reduced)
        if not shape and not (ts.unreduced or ts.reduced):
            ts = None
    return aval.update(shape=shape, ts=ts)


def operand_ts(v):
    """An operand's type sharding (literals and untyped values: replicated)."""
    if type(v) is Lit:
        return None
    return v.aval.ts


def infer(prim, in_vals, out_avals, params, mesh, explicit, loc):
    """The result avals of `prim` with their type shardings."""
    if _modes.lenient > 0:
        return list(out_avals)      # out_sharding= sets the type next
    rule_fn = getattr(prim, "type_rule", None)
    try:
        if rule_fn is not None:
            ts = rule_fn([v.aval for v in in_vals], out_avals, mesh, explicit, **params)
        else:
            ts = from_factors(prim, in_vals, out_avals, params, mesh, explicit)
    except ShardingTypeError as e:
        if e.loc != loc:
            raise ShardingTypeError(e.message, loc) from None
        raise
    return [typed(a, t if t is not None else replicated(a.ndim))
            for a, t in zip(out_avals, ts)]


def _visible(ts, explicit):
    """A type sharding as seen where only `explicit` axes are Explicit."""
    if ts is None or all(a in explicit for d in ts.dims for a in d):
        return ts
    return restrict(ts, explicit, len(ts.dims))


def _spec(ts, rank):
    from jax.sharding import PartitionSpec
    if ts is None:
        return PartitionSpec(*([None] * rank))
    return PartitionSpec(*[None if not d else d[0] if len(d) == 1 else tuple(d)
                           for d in ts.dims])


def _split(axes, factors, sizes, mesh, what):
    """A dim's axes given to its factors, major first (jax's split of a reshape)."""
    if len(factors) == 1:
        return {factors[0]: tuple(axes)}
    out = {f: [] for f in factors}
    it = iter(axes)
    a = next(it, None)
    for f in factors:
        left = sizes[f]
        while left > 1 and a is not None:
            n = mesh.sizes[a]
            if left % n:
                raise ShardingTypeError(
                    f"{what}: mesh axis {a!r} (size {n}) does not evenly split a "
                    f"dimension of size {left}; pass out_sharding= or reshard the operand")
            out[f].append(a)
            left //= n
            a = next(it, None)
    if a is not None:
        raise ShardingTypeError(f"{what}: the operand's sharding {tuple(axes)} does not fit "
                                "the result's dimensions; pass out_sharding= or reshard")
    return {f: tuple(v) for f, v in out.items()}


def from_factors(prim, in_vals, out_avals, params, mesh, explicit):
    """Result type shardings by the op's factor rule (see the module doc)."""
    name = prim.name
    in_avals = [v.aval.bare() for v in in_vals]
    in_ts = [_visible(operand_ts(v), explicit) for v in in_vals]
    if all(t is None for t in in_ts):
        return [None] * len(out_avals)
    parts = each_partial_axes(in_ts) if getattr(prim, "type_partial", None) == "each" \
        else [partial_axes(prim, in_vals, in_ts)] * len(out_avals)
    rule_fn = prim.sharding_rule
    rule = rule_fn(in_avals, list(out_avals), **params) if rule_fn is not None else None
    if rule is None:    # (replicated: but partial sums and reduced axes still hold)
        return [Sharding([()] * a.ndim, None, u, r) if u or r else None
                for a, (u, r) in zip(out_avals, parts)]
    # a dim the op needs whole (need_replication): its result dim is unsharded (the op
    # gathers it), unless the op says "keep" (concatenate, as jax) or "error" (sort)
    whole = getattr(prim, "type_whole", "drop")
    nf = len(rule.sizes)
    fax = [()] * nf
    count = [0] * nf
    specs = [_spec(t, a.ndim) for t, a in zip(in_ts, in_avals)]
    for i, (mapping, ts) in enumerate(zip(rule.operands, in_ts)):
        if ts is None:
            continue
        for d, factors in enumerate(mapping):
            axes = ts.dims[d]
            if not axes or not factors:
                continue
            for f, a in _split(axes, factors, rule.sizes, mesh, name).items():
                if not a:
                    continue
                if rule.kinds[f] == NEED_REPLICATION and whole == "error":
                    raise ShardingTypeError(
                        f"{name}: operand {i} must be unsharded along dimension {d}, which "
                        f"the op needs whole (e.g. the sorted dimension), but its type is "
                        f"sharded {specs[i]}; reshard it first (shardc.reshard(x, P(...)))")
                count[f] += 1
                if not fax[f]:
                    fax[f] = a
                elif fax[f] != a:
                    what = "contracting dimensions" if rule.kinds[f] == REDUCTION else \
                        "dimensions"
                    raise ShardingTypeError(
                        f"{name}: its operands' {what} have incompatible shardings "
                        f"{', '.join(map(str, specs))}; reshard one operand so they agree "
                        "(shardc.reshard(x, P(...))) or pass out_sharding=")
    for f in range(nf):
        if rule.kinds[f] == REDUCTION and count[f] > 1:
            raise ShardingTypeError(
                f"{name}: contracting dimensions are sharded (operands "
                f"{', '.join(map(str, specs))}) and it is ambiguous how the output should "
                "be sharded. Specify the output sharding with out_sharding= (P(...), "
                "possibly with unreduced=) or reshard an operand first")
    outs = []
    for mapping, aval, (unreduced, reduced) in zip(rule.results, out_avals, parts):
        dims, used = [], set()
        for d, factors in enumerate(mapping):
            axes, gap = [], False
            for f in factors:
                kind = rule.kinds[f]
                a = () if kind == REDUCTION or (kind == NEED_REPLICATION and
                                                whole != "keep") else fax[f]
                if a and gap:
                    raise ShardingTypeError(
                        f"{name}: the result's dimension {d} would be sharded on "
                        f"{a} inside an unsharded part, which no layout holds; pass "
                        "out_sharding= or reshard the operand")
                axes += a
                gap = gap or not a      # jax's merge: sharded dims after an unsharded one
            for x in axes:
                if x in used:
                    raise ShardingTypeError(
                        f"{name}: mesh axis {x!r} would shard more than one dimension of "
                        f"the result (operands {', '.join(map(str, specs))}); pass "
                        "out_sharding= or reshard an operand")
                used.add(x)
            n = 1
            for x in axes:
                n *= mesh.sizes[x]
            if aval.shape[d] % n:
                raise ShardingTypeError(
                    f"{name}: the result's dimension {d} (size {aval.shape[d]}) would be "
                    f"sharded on {tuple(axes)} ({n} shards), which does not divide it; "
                    "pass out_sharding= or reshard the operand")
            dims.append(tuple(axes))
        outs.append(Sharding(dims, None, unreduced, reduced))
    return outs


def check_partial_sums(b, v, axes, what, loc=None):
    """Where a value is claimed to be partial sums over mesh `axes` (a dot's
    out_sharding= with unreduced=; the cotangent of a value reduced over them), it must
    not be a whole value, or XLA adds up its copies: a dot_general whose contracting
    dims are not sharded on exactly those axes, identically in both operands (jax's
    rule), a reduction or a constant is whole, and so are sums and layout changes of
    whole values, as is an argument not typed unreduced. Raises ShardingTypeError for
    those; what this cannot see into (a region op's result) passes."""
    axes = frozenset(axes)
    if _partial_over(b, v, axes, 12) is False:
        raise ShardingTypeError(
            f"{what}: the value is not partial sums over mesh axes {sorted(axes)}: only a "
            "dot_general whose contracting dimensions are sharded on exactly those axes "
            "(identically in both operands), or a sum of such values, is (jax: "
            "out_sharding's unreduced axes should be equal to the contracting specs). "
            "Shard the contraction on those axes, or name the axes it is sharded on", loc)


def whole_value(b, v, axes):
    """Whether `v` is known to be a whole value, not partial sums over mesh `axes`."""
    return _partial_over(b, v, frozenset(axes), 12) is False


def mark_partial(b, v, axes, partial, depth=12):
    """Value `v`, partial sums over `axes` (_partial_over), and the values it is made of
    that are too (a dot's result before its transpose): their shardings say so, as jax
    types them, so XLA does not reduce them on the way (it would, then take the sums for
    partial sums again). Records them in `partial` (id -> axes)."""
    if type(v) is Lit or id(v) in partial or depth == 0:
        return
    ts = v.aval.ts
    if ts is not None and (ts.unreduced or ts.reduced) or \
            _partial_over(b, v, axes, depth) is not True:
        return
    partial[id(v)] = axes
    if v.sharding is None:
        n = v.aval.ndim
        v.sharding = Sharding([()] * n, [True] * n, axes)
    op = producer(b, v)
    if op is not None and not op.regions and not op.prim.traits & Trait.SHARDED_RESULTS:
        for x in op.inputs:
            mark_partial(b, x, axes, partial, depth - 1)


def producer(b, v):
    """The op of builder `b` that made value `v` (None: an argument or block argument)."""
    return next((o for o in reversed(b.program.ops) if any(w is v for w in o.outputs)), None)


def _ts_or_constraint(b, v):
    """A value's type sharding; for an untyped one (a gradient rule's), the sharding a
    closed constraint that made it gives."""
    ts = operand_ts(v)
    if ts is not None or type(v) is Lit:
        return ts
    op = producer(b, v)
    sh = op.params.get("sharding") if op is not None and \
        op.prim.traits & Trait.SHARDED_RESULTS else None
    return sh if isinstance(sh, Sharding) and sh.open is None else None


def _partial_over(b, v, axes, depth):
    """True: partial sums over `axes`; False: a whole value; None: cannot tell."""
    if type(v) is Lit:
        return False
    if depth == 0:
        return None
    ts = v.aval.ts
    if ts is not None and frozenset(ts.unreduced) == axes:
        return True
    if ts is not None and frozenset(ts.reduced) & axes:     # (replicated over them)
        return False
    op = producer(b, v)
    if op is None:      # an argument or block argument: its type said
        return False
    if op.regions:
        return None
    t = op.prim.traits
    if t & Trait.CONSTANT:
        return False
    if t & Trait.CONTRACTION and "contracting" in op.params:
        (lc, rc) = op.params["contracting"]
        lt, rt = (_ts_or_constraint(b, x) for x in op.inputs[:2])
        if lt is None or rt is None:    # (an untyped operand: cannot tell)
            return None
        ls = [tuple(lt.dims[i]) for i in lc]
        rs = [tuple(rt.dims[i]) for i in rc]
        return ls == rs and frozenset(a for d in ls for a in d) == axes
    if t & Trait.SHARDED_RESULTS:        # a constraint: partial sums if it says so
        want = op.params.get("sharding")
        if want is not None and frozenset(want.unreduced) == axes:
            return True
        if want is not None and frozenset(want.reduced) & axes:
            return False
        inner = _partial_over(b, op.inputs[0], axes, depth - 1)
        return False if inner is True and want is not None and not want.unreduced \
            else inner
    ins = [_partial_over(b, x, axes, depth - 1) for x in op.inputs]
    if getattr(op.prim, "type_partial", None) == "sum":    # all partial, or all whole
        return True if all(i is True for i in ins) else \
            False if all(i is False for i in ins) or (True in ins and False in ins) \
            else None
    if t & Trait.REDUCE:
        # a sum over dims sharded on the axes is typed whole (XLA reduces it)
        src = operand_ts(op.inputs[0]) if op.inputs else None
        summed = {a for d in op.params.get("axes", ()) if src is not None
                  for a in src.dims[d]}
        return ins[0] if ins and (ins[0] is True or not summed & axes) else False
    if t & Trait.FUSED or (t & Trait.ALIAS):
        return ins[0] if ins else None
    # elementwise products and others: partial in one operand and whole in the rest is
    # partial (a scaling); whole in all is whole
    if ins and all(i is False for i in ins):
        return False
    if ins.count(True) == 1 and all(i is not None for i in ins):
        return True
    return None


def of_region_op(op, mesh, explicit):
    """Result types of a region op: its body results' types along its data-flow edges
    (a stacked result adds an unsharded leading dim; shard_map's results are sharded
    as their out_specs say on explicit axes)."""
    flow = op.prim.data_flow(op) if op.prim.data_flow is not None else None
    if not flow:
        return None
    outs = {id(v): i for i, v in enumerate(op.outputs)}
    ts = [None] * len(op.outputs)
    for e in flow:
        i = outs.get(id(getattr(e, "outer", None)))
        if i is None:
            continue
        aval = op.outputs[i].aval
        inner = getattr(e.inner, "aval", None)
        t = inner.ts if inner is not None else None
        if e.manual:
            # the out_spec's axes, then the axes the body's type kept (a partial
            # shard_map's free Explicit axes), as jax's _unshard_shaped_array
            out = restrict(e.spec, explicit, aval.ndim)
            if out is not None and t is not None and t.rank == out.rank:
                out = Sharding([d + tuple(a for a in k if a in explicit and a not in d)
                                for d, k in zip(out.dims, t.dims)], None,
                               out.unreduced, out.reduced)
            ts[i] = out
            continue
        if t is not None and e.stacked:
            t = Sharding(((),) + t.dims, None, t.unreduced, t.reduced)    # (as jax's ys)
        ts[i] = t if t is not None else replicated(aval.ndim)
    return ts
