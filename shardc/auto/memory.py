"""Peak memory per device of a sharded program, from liveness over its ops in order
(no compile), split as XLA's memory_analysis() splits it: arguments, outputs and
temporaries (the peak of everything else live at once), peak = their sum less the
donated arguments an output reuses.

A value is live from the op that defines it to its last use and takes its shard's
bytes, with what XLA does to buffers (checked on XLA:CPU, see the calibration test):
  * broadcasts, reshapes, transposes and converts are fused into the elementwise or
    reduce ops reading them, as is an elementwise op into its only reader, or into
    several when cheap (not one of XLA's expensive ops) and reading at most one
    full-size array: no buffer of their own; copies, reshapes and annotations of a
    value are that value's buffer;
  * an elementwise op (or an inlined body such as custom_vjp's) writes over an
    operand of its size that dies there (at the top level not over an all-reduce's
    result, nor over an operand a reduction it reads has read: the reduction runs in
    its kernel, softmax's exp(x - max(x)), which reads the operand twice);
  * an output's buffer exists for the whole call: XLA puts temporaries in it that
    fit and die before the output is written, or where it is written over them (the
    largest first, a kernel's result, not a collective's; each into the smallest,
    latest output it fits); in a body, an operand dying where an output is written
    becomes its buffer;
  * an operand resharded for an op (a gathered weight) is a new buffer, live until
    its last use (XLA's CSE gives every use of one value resharded one way the same
    buffer: a weight gathered for the forward pass is kept for the backward); an
    argument's reshard depends on nothing and is scheduled first; a reshard that is a
    local slice (no collective) is fused into an elementwise or reduce op reading it;
  * an op with sharded reduction factors writes a partial sum (over an operand
    dying there if one fits) that lives until its all-reduce, which runs out of
    place; the backend's combiner merges independent all-reduces over the same axes
    (`Hardware.combine_*`), so each partial lives until the last of its group.
A loop or cond body adds its own peak on top of what is live at the op; a scan reads
its stacked inputs (another scan's stacked results, the parameters) in place, no copy
in its loop state, and its stacked results are buffers as any op's.
"""
from __future__ import annotations

import dataclasses

from .costmodel import CPU, dims, local_bytes, plan
from ..ir.primitive import Trait
from ..ir.program import Lit, Op, Program
from ..ir.rules import Edge as FlowEdge
from ..propagate.factors import cached_rule


@dataclasses.dataclass
class Memory:
    """Per-device bytes: arguments, outputs, temporaries (their peak), `aliased` (donated
    arguments reused as outputs); `at`: the top-level op where the temporaries peak;
    `inside`: if `at` has bodies, ((body, its op where its own peak is), ...) from
    `at`'s body down (a loop's body peaks once per trip, on top of what is live at
    `at`)."""
    arguments: int
    outputs: int
    temporaries: int
    aliased: int = 0
    at: object = None
    inside: tuple = ()

    @property
    def peak(self) -> int:
        return self.arguments + self.outputs + self.temporaries - self.aliased

    def __str__(self):
        return (f"peak {self.peak} B per device: arguments {self.arguments}, outputs "
                f"{self.outputs}, temporaries {self.temporaries}"
                + (f", aliased {self.aliased}" if self.aliased else ""))


def _bytes(v, sharding, mesh) -> int:
    try:
        return local_bytes(v.aval, sharding, mesh)
    except (AttributeError, TypeError):   # a token or an opaque type: no data to count
        return 0


def memory_breakdown(program, hw=CPU) -> Memory:
    """Arguments, outputs and peak temporaries per device of a propagated program."""
    mesh = program.mesh
    args = sum(_bytes(v, v.sharding, mesh) for v in program.inputs)
    outs, out_sizes = 0, []
    for v, s in zip(program.outputs, program.out_shardings):
        n = _bytes(v, s if s is not None else v.sharding, mesh)
        outs += n
        out_sizes.append((v.aval, s if s is not None else v.sharding, n))
    aliased = 0
    donate = program.meta.get("donate") or ()
    for v, d in zip(program.inputs, donate):
        if not d:
            continue
        for i, (a, s, n) in enumerate(out_sizes):
            if a == v.aval and s == v.sharding:
                aliased += n
                out_sizes[i] = (None, None, 0)
                break
    view, origin = _without_annotations(program)
    skip = {id(v) for v in view.inputs} | {id(v) for v in view.outputs if type(v) is not Lit}
    # the outputs' buffers (not an alias of a donated argument's), which temporaries
    # may use before the outputs are written
    slots = [(n, v) for v, (a, s, n) in zip(view.outputs, out_sizes) if type(v) is not Lit and n]
    temps, at, inside = _peak(view, mesh, hw, skip, {}, slots)
    at = origin.get(id(at), at)
    return Memory(args, outs, temps, aliased, at, inside)


def _without_annotations(p):
    """`p` without its top-level sharding constraints that reshard nothing (XLA emits
    no code for them; the solver adds one per value it decides): a view, `p` is left
    alone; and {id(op in the view): op in `p`}."""
    same = {}
    for op in p.ops:
        if op.prim.sharded_results and type(op.inputs[0]) is not Lit and \
                op.inputs[0].sharding is not None and \
                op.inputs[0].sharding.dims == op.outputs[0].sharding.dims:
            same[id(op.outputs[0])] = same.get(id(op.inputs[0]), op.inputs[0])
    if not same:
        return p, {}
    ops, origin = [], {}
    for op in p.ops:
        if id(op.outputs[0]) in same if op.outputs else False:
            continue
        if any(id(v) in same for v in op.inputs):
            new = Op(op.prim, [same.get(id(v), v) for v in op.inputs], op.outputs,
                     op.params, op.loc, op.regions)
            origin[id(new)] = op
            op = new
        ops.append(op)
    view = Program(p.name, p.inputs, ops, [same.get(id(v), v) for v in p.outputs], p.mesh)
    view.out_shardings, view.meta = p.out_shardings, p.meta
    return view, origin


def peak_memory(program, hw=CPU) -> int:
    """Predicted peak bytes per device (as arguments + outputs + temporaries - aliased
    in XLA's memory_analysis())."""
    return memory_breakdown(program, hw).peak


def _uses(op):
    """Values an op reads, those its regions' ops read included (a body may read an
    outer value directly); a sharding group only annotates its operand (no kernel)."""
    if op.prim.sharding_group:
        return
    yield from op.inputs
    for r in op.regions:
        for o in r.walk():
            yield from o.inputs


def _cheap(op):
    """Fused into the elementwise or reduce kernel reading its result (XLA's loop and
    input fusion): never a buffer of its own (Trait.FUSED)."""
    return bool(op.prim.traits & Trait.FUSED)


def _fusible(op, rule):
    return not op.regions and (_cheap(op) or (rule is not None and rule.elementwise))


def _absorbs(op, rule):
    return not op.regions and ((rule is not None and rule.elementwise)
                               or bool(op.prim.traits & Trait.REDUCE))


def fused_reads(p, rules, skip=()):
    """(ids of the values of `p`'s ops XLA fuses into their readers, no buffer of their
    own; per op the values whose buffers it reads, through those). `rules`: per op its
    factor rule (or None)."""
    ops = p.ops
    made = {id(v): i for i, op in enumerate(ops) for v in op.outputs}
    users = {}
    for i, op in enumerate(ops):
        for v in _uses(op):
            if type(v) is not Lit:
                users.setdefault(id(v), set()).add(i)
    outs = {id(v) for v in p.outputs if type(v) is not Lit}
    # broadcasts and the like are fused into every consumer, other elementwise ops into
    # their only one (XLA keeps a result several kernels read)
    fused = {id(v) for i, op in enumerate(ops) if _fusible(op, rules[i]) for v in op.outputs
             if id(v) in users and id(v) not in outs and id(v) not in skip
             and (_cheap(op) or len(users[id(v)]) == 1
                  or not op.prim.traits & Trait.EXPENSIVE and _full_operands(op, made, ops) <= 1)
             and all(_absorbs(ops[j], rules[j]) for j in users[id(v)])}
    return fused, [_reads(op, fused, made, ops) for op in ops]


def _reduction(v, made, ops):
    """The index of the reduce op `v` is the result of, through broadcasts and the like,
    or None; None too for a reduction of a dot's result, which XLA:CPU computes in the
    dot's kernel with the elementwise ops reading both (no buffer of the dot's)."""
    while id(v) in made:
        op = ops[made[id(v)]]
        if op.prim.traits & Trait.REDUCE:
            u = op.inputs[0]
            if type(u) is not Lit and id(u) in made and \
                    ops[made[id(u)]].prim.traits & Trait.CONTRACTION:
                return None
            return made[id(v)]
        if not _cheap(op) or not op.inputs or type(op.inputs[0]) is Lit:
            return None
        v = op.inputs[0]
    return None


def _full_operands(op, made, ops):
    """How many operands of op's result's shape it reads that are not broadcasts or the
    like: XLA recomputes a cheap op in each reader only when that adds no such read (a
    sum of two activations, a residual, is kept)."""
    shape = op.outputs[0].aval.shape if op.outputs else None
    return sum(1 for u in op.inputs if type(u) is not Lit and u.aval.shape == shape
               and not (id(u) in made and _cheap(ops[made[id(u)]])))


def _into_slots(ops, size, span, late, slots, into):
    """XLA's buffer assignment puts a temporary in an output's buffer when it fits and
    dies before the output is written (or where it is, an operand the output's
    elementwise op overwrites: `into`): values by size, largest first, each into the
    first output buffer it fits in beside those already there. A kernel's result may
    go there, a collective's (a gather, an all-reduce) not. Those are dropped from
    `size`."""
    made = {id(v): i for i, op in enumerate(ops) for v in op.outputs}
    free = [(nbytes, 2 * made[id(v)], [], into.get(id(v), ())) for nbytes, v in slots
            if id(v) in made]
    # XLA makes the outputs' buffers largest first, those defined earlier first, and
    # tries the last made first: a temporary goes to the smallest, latest output it
    # fits (two gradients dying at their own updates: only the first fits beside the
    # other, in the second update's buffer; the other is a temporary)
    free.sort(key=lambda f: (f[0], -f[1]))
    kernels = [k for k in size if type(k) is tuple and type(k[0]) is str
               and k[0] != "reduced" and k not in late]
    for k in sorted(kernels, key=lambda k: (-size[k], span[k])):
        start, end = span[k]
        for nbytes, until, taken, dying in free:
            if size[k] <= nbytes and (end <= until or k in dying and end <= until + 1) and \
                    all(end <= a or start >= b for a, b in taken):
                taken.append((start, end))
                size.pop(k)
                break


def _peak(p, mesh, hw, skip, cache, slots=()):
    """(peak bytes of the buffers live at once inside `p`, not counting `skip`, the op
    where it is reached, and where in that op's bodies: Memory.inside)."""
    ops = p.ops
    n = len(ops)
    rules = [cached_rule(op, cache) for op in ops]
    fused, reads = fused_reads(p, rules, skip)
    made = {id(v): i for i, op in enumerate(ops) for v in op.outputs}
    outs = {id(v) for v in p.outputs if type(v) is not Lit}
    last_use = {}
    for i, vs in enumerate(reads):
        for v in vs:
            last_use[id(v)] = i
    first, last, size, buf_of = {}, {}, {}, {}

    def buffer(key, nbytes, at):
        if key not in size:
            size[key], first[key] = nbytes, at
        last[key] = max(last.get(key, at), at)

    buf_end = {}       # per buffer: the last use of any value in it
    params = {id(v) for v in p.inputs}
    for v in p.inputs:                     # a body's block arguments
        if id(v) not in skip:
            buffer(id(v), _bytes(v, v.sharding, mesh), 0)
            buf_of[id(v)] = id(v)
            buf_end[id(v)] = last_use.get(id(v), 0)
    extra = [0] * (n + 1)
    inner = [()] * (n + 1)      # per op with bodies: where the largest body peaks
    masks, groups, open_ = {}, [], {}
    into_output = set()
    into_slot = {}      # per output: the buffers dying where it is written
    # all-reduce results: at the top level XLA writes no kernel's result over one (an
    # output's buffer, or a temporary, takes it)
    summed = set()
    for i, op in enumerate(ops):
        for v in reads[i]:
            b = buf_of.get(id(v))
            if b is not None:
                last[b] = max(last[b], i)
        mask = 0
        for v in op.inputs:
            mask |= masks.get(id(v), 0)
        inline = op.regions and not op.prim.traits & _OWN_BUFFERS
        if op.regions:     # an inlined body's arguments and results are the op's own
            peaks = [(_peak(r, mesh, hw, _ends(r) if inline else set(), cache), r)
                     for r in op.regions]
            (extra[i], b_at, b_in), r = max(peaks, key=lambda t: t[0][0])
            inner[i] = ((r, b_at),) + b_in if b_at is not None else ()
            if not inline:
                extra[i] += _resharded_operands(op, mesh)
        pl = plan(op, mesh=mesh, rule=rules[i]) if rules[i] is not None else None
        reduced = pl is not None and pl.reduce
        taken, partials = set(), {}

        # a reduction of an operand read here runs in this op's kernel (softmax's
        # exp(x - max(x))): the kernel reads the operand twice, and writes no result
        # over it. Not a division's divisor: XLA multiplies by its reciprocal, made in
        # a kernel of its own
        twice = set() if op.prim.traits & Trait.RECIPROCAL else {
            buf_of.get(id(w)) for u in reads[i] for r in [_reduction(u, made, ops)]
            if r is not None for w in reads[r]}

        def over(nbytes):
            """The buffer of an operand dying here that the result can overwrite."""
            for u in reads[i]:
                bu = buf_of.get(id(u))
                if bu is not None and buf_end.get(bu) == i and size[bu] == nbytes \
                        and bu not in taken and id(u) not in outs and bu not in twice \
                        and not (slots and bu in summed):
                    return bu
            return None

        for k, v in enumerate(op.outputs):
            if reduced:    # the op writes its partial sum; the all-reduce, the value
                c = local_bytes(v.aval, pl.computed[k], mesh)
                partials[k] = over(c) or ("partial", i, k)
                buffer(partials[k], c, i)
                taken.add(partials[k])
            if id(v) in fused:
                continue
            if id(v) in skip:      # an output: an operand dying here may become its buffer
                if rules[i] is not None and rules[i].elementwise:
                    into = {buf_of.get(id(u)) for u in reads[i]
                            if buf_end.get(buf_of.get(id(u))) == i}
                    into_output.update(into)
                    into_slot[id(v)] = into
                continue
            u = op.inputs[0] if len(op.inputs) == 1 else None
            if op.prim.traits & Trait.ALIAS and type(u) is not Lit and id(u) not in fused and \
                    u.sharding == v.sharding:     # the operand's buffer, not a copy
                if id(u) in buf_of:
                    buf_of[id(v)] = b = buf_of[id(u)]
                    buf_end[b] = max(buf_end[b], last_use.get(id(v), i))
                continue
            nbytes = _bytes(v, v.sharding, mesh)
            b = None if reduced else \
                over(nbytes) if inline or (rules[i] and rules[i].elementwise) else None
            if b is None:
                b = ("value", i, k)
                buffer(b, nbytes, i)
            taken.add(b)
            buf_of[id(v)] = b
            buf_end[b] = max(buf_end.get(b, i), last_use.get(id(v), i))
            if reduced:
                summed.add(b)
        if pl is None:
            for v in op.outputs:
                masks[id(v)] = mask
            continue
        for v, t, cs in zip(op.inputs, pl.targets, pl.operand_comms):
            if t is not None and not cs and _absorbs(op, rules[i]):
                continue     # a local slice, fused into the elementwise or reduce kernel
            if t is not None:    # an argument's reshard depends on nothing: XLA runs it first
                key = (id(v), tuple(map(tuple, t)))
                buffer(key, local_bytes(v.aval, t, mesh), 0 if id(v) in params else i)
                last[key] = max(last[key], i)     # and it lives until its last use here
        for k, (v, c) in enumerate(zip(op.outputs, pl.computed)):
            if pl.result_comms[k] and not reduced:     # computed one way, then resharded
                buffer(("computed", i, k), local_bytes(v.aval, c, mesh), i)
        if reduced:
            mask |= _combine(op, i, pl, mesh, hw, mask, open_, groups, partials, buf_of)
        for v in op.outputs:
            masks[id(v)] = mask
    # positions in half steps: an op at 2i; an all-reduce's result, and a value sliced
    # from it, after its partial sums are gone (2g+1)
    late = {}
    for g in groups:        # partial sums live until their (combined) all-reduce runs
        at = max(m[0] for m in g)
        for i, k, nbytes, resliced, key, value in g:
            if key is not None:
                last[key] = max(last[key], at)
            if resliced:       # its result, which the value is then sliced from
                buffer(("reduced", i, k), nbytes, at)
            if value is not None and value in size:
                late[value] = 2 * at + resliced
    for v in p.outputs:
        b = buf_of.get(id(v)) if type(v) is not Lit else None
        if b is not None:
            last[b] = n
    span = {k: (late.get(k, 2 * first[k]), max(2 * last[k], late.get(k, 2 * first[k])) + 1)
            for k in size}
    if slots:      # the outputs' buffers hold what XLA puts there
        _into_slots(ops, size, span, late, slots, into_slot)
    else:          # an operand dying where an output is written becomes its buffer
        for b in into_output:
            size.pop(b, None)
    live = [0] * (2 * n + 3)
    for key, nbytes in size.items():
        start, end = span[key]
        live[start] += nbytes
        live[end] -= nbytes
    best, at, inside, cur = 0, None, (), 0
    for i in range(2 * n + 2):
        cur += live[i]
        if cur + extra[i // 2] > best:
            best, at = cur + extra[i // 2], ops[i // 2] if i // 2 < n else None
            inside = inner[i // 2]
    return best, at, inside


_OWN_BUFFERS = Trait.LOOP | Trait.BRANCHES    # bodies with buffers of their own


def _resharded_operands(op, mesh) -> int:
    """Bytes of a loop's (or cond's) operands sharded unlike the block arguments they
    enter as (a scan's xs but for its stacked dim): each is resharded into a buffer
    of its own before the op, live through it."""
    if op.prim.data_flow is None:
        return 0
    args = {id(v) for r in op.regions for v in r.inputs}
    ins = {id(v) for v in op.inputs if type(v) is not Lit}
    done, total = set(), 0
    for e in op.prim.data_flow(op):
        if type(e) is not FlowEdge or id(e.outer) not in ins or id(e.inner) not in args \
                or e.outer.sharding is None or e.inner.sharding is None:
            continue
        want = dims(e.inner.sharding, e.inner.aval.ndim, mesh)
        want = [[]] + want if e.stacked else want
        k = (id(e.outer), tuple(map(tuple, want)))
        if k in done or want == dims(e.outer.sharding, e.outer.aval.ndim, mesh):
            continue
        done.add(k)
        total += local_bytes(e.outer.aval, want, mesh)
    return total


def _ends(r):
    return {id(v) for v in r.inputs} | {id(v) for v in r.outputs if type(v) is not Lit}


def _reads(op, fused, made, ops):
    """The buffers' values op reads: through producers fused into it, their operands."""
    out, stack, seen = [], [v for v in _uses(op) if type(v) is not Lit], set()
    while stack:
        v = stack.pop()
        if id(v) in seen:
            continue
        seen.add(id(v))
        if id(v) in fused:
            stack += [u for u in ops[made[id(v)]].inputs if type(u) is not Lit]
        else:
            out.append(v)
    return out


def _combine(op, i, pl, mesh, hw, mask, open_, groups, partials, buf_of):
    """Put op i's all-reduces in a combined group (XLA's all-reduce combiner: same
    axes, none depending on another, within the backend's limits); returns op i's bit
    for the dependency masks of the values downstream."""
    bit = 1 << i
    key = pl.reduce[0].axes
    # (op, result, bytes, sliced from the all-reduce's result?, partial sum's buffer,
    # the value's buffer)
    members = [(i, k, local_bytes(v.aval, c, mesh), c != dims(v.sharding, v.aval.ndim, mesh),
                partials.get(k), buf_of.get(id(v)))
               for k, (v, c) in enumerate(zip(op.outputs, pl.computed))]
    g = open_.get(key)
    if g is not None:
        gmask, nbytes, group = g
        new = nbytes + sum(m[2] for m in members)
        if not mask & gmask and new <= hw.combine_bytes and \
                len(group) + len(members) <= hw.combine_count:
            group += members
            open_[key] = (gmask | bit, new, group)
            return bit
    group = list(members)
    groups.append(group)
    open_[key] = (bit, sum(m[2] for m in members), group)
    return bit
