"""linear_transpose's backward pass, and its check that the function is linear.

The backward pass of a linear function is its transpose; of any other function it is
the transpose of the linearization at the placeholder primals, a silently wrong answer.
jax refuses such functions (ops without transpose rules); shardc's rules are VJPs, so
it checks the traced programs instead. f is affine (its transpose then that of its
linear part, as jax's) exactly when its Jacobian does not depend on its inputs:

- no op computing the transposed values reads a value that depends on the inputs
  (sin's rule reads cos(x); mul's reads the other factor; select's its predicate);
- no op without a gradient (floor, sign, a comparison, argmax) reads the inputs on the
  way to the outputs (its cotangent is dropped, not transposed).
"""
from __future__ import annotations

from ..errors import ShardcTypeError
from ..ir import dtypes
from ..ir.primitive import Trait, nondiff
from ..ir.rules import Edge
from ..ir.program import Lit


def transpose(ops, builder, out_vals, cts, wrt, level, name):
    """The cotangents of `wrt` (the inputs of the traced linear function `ops`) for the
    cotangents `cts` of `out_vals`; an error naming the op if the function is not linear."""
    from .ad import backward
    ints = bool(wrt) and all(dtypes.is_int(w.aval.dtype) for w in wrt)
    dep = _depends(ops, wrt)
    _check_forward(ops, out_vals, dep, name)
    first, emitted = len(builder.program.ops), []
    res = backward(ops, builder, out_vals, cts, wrt, level, ints=ints, emitted=emitted)
    _check_backward(builder.program.ops, first, res, dep, emitted, name)
    return res


def _depends(ops, wrt):
    """ids of the values that depend on `wrt` through `ops` (not into regions)."""
    dep = {id(w) for w in wrt}
    for op in ops:
        if any(type(v) is not Lit and id(v) in dep for v in op.inputs):
            dep.update(id(v) for v in op.outputs)
    return dep


def _block_args(op):
    """{id(operand): [block arguments it is]} from the op's data flow (regions are
    closed: what a body reads from outside is an operand)."""
    inner = {id(a) for r in op.regions for a in r.inputs}
    got: dict = {}
    for e in (op.prim.data_flow(op) if op.prim.data_flow is not None else ()):
        if isinstance(e, Edge) and id(e.inner) in inner:
            got.setdefault(id(e.outer), []).append(e.inner)
    return got


def _used_operands(op):
    """The operands an op reads on the way to its results: for an op with regions, those
    whose block arguments its regions read (cond's backward is passed every primal)."""
    if not op.regions:
        return [v for v in op.inputs if type(v) is not Lit]
    live = set()
    for r in op.regions:
        live |= _live_args(r)
    args = _block_args(op)
    return [v for v in op.inputs if type(v) is not Lit and (
        id(v) not in args or any(id(a) in live for a in args[id(v)]))]


def _live_args(region):
    live = {id(v) for v in region.outputs if type(v) is not Lit}
    for op in reversed(region.ops):
        if any(id(v) in live for v in op.outputs) or op.prim.effectful:
            live.update(id(v) for v in _used_operands(op))
    return {id(a) for a in region.inputs if id(a) in live}


def _check_forward(ops, out_vals, dep, name):
    """No op without a gradient reads what depends on the inputs on the way to
    `out_vals` (regions searched, with what depends on the inputs inside them)."""
    live = {id(v) for v in out_vals if type(v) is not Lit}
    for op in reversed(ops):
        if not any(id(v) in live for v in op.outputs):
            continue
        reads = _used_operands(op)
        if any(id(v) in dep for v in reads):
            if op.prim.vjp is nondiff:
                raise _not_linear(name, op)
            for r, inner in _region_deps(op, dep):
                _check_forward(r.ops, r.outputs, inner, name)
        live.update(id(v) for v in reads)


def _region_deps(op, dep):
    """Per region: the ids of its values that depend on the inputs, given `dep` outside.
    A loop's carries are its bodies' first results and arguments: what a result carried
    depends on, the next iteration's argument does."""
    args = _block_args(op)
    seeds = {id(a) for v in op.inputs if id(v) in dep for a in args.get(id(v), ())}
    carried: set = set()
    while True:
        deps = [(r, _depends(r.ops, [a for k, a in enumerate(r.inputs)
                                     if id(a) in seeds or k in carried]))
                for r in op.regions]
        if not op.prim.traits & Trait.LOOP:
            return deps
        n = op.params.get("num_carry", len(op.outputs))
        more = {k for r, d in deps for k, v in enumerate(r.outputs[:n])
                if len(r.outputs) >= n and type(v) is not Lit and id(v) in d}
        if more <= carried:
            return deps
        carried |= more


def _check_backward(prog_ops, first, res, dep, emitted, name):
    """The ops from `first` on that compute `res` read nothing in `dep`."""
    owner = {}
    for op, lo, hi in emitted:
        for k in range(lo, hi):
            owner.setdefault(k, op)
    need = set()
    for r in res:
        if r is None or not hasattr(r, "value"):
            continue
        if id(r.value) in dep:         # the input itself passed back (f(x) = x * x ...)
            raise _not_linear(name, None)
        need.add(id(r.value))
    for k in range(len(prog_ops) - 1, first - 1, -1):
        op = prog_ops[k]
        if not any(id(v) in need for v in op.outputs):
            continue
        for v in _used_operands(op):
            if id(v) in dep:
                raise _not_linear(name, owner.get(k))
            need.add(id(v))


def _not_linear(name, op):
    where = f": {op.prim.name} here makes it non-linear" if op is not None else ""
    return ShardcTypeError(
        f"linear_transpose: {name} is not linear in its inputs{where}. linear_transpose "
        "transposes linear functions only (for the transpose of a function's "
        "linearization at a point, use vjp)", op.loc if op is not None else None)
