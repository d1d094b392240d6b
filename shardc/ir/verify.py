"""The IR verifier: SSA well-formedness, types re-derived from shape rules, shardings.

Regions are checked as any op: each one's block arguments and yields are typed, and the
op's shape rule, given those types (`regions=`), checks them against the operands and
gives the result types; then the region's own ops are verified in its scope."""
from __future__ import annotations

import inspect

from .primitive import RegionType, abstract_eval
from ..errors import ShardcError
from .program import Lit, Program, Value
from .sharding import axis_name


class VerifyError(ShardcError):
    """The IR is malformed: a shardc bug, or hand-written IR text with a mistake.
    `op` is the op at fault (None for the signature or the return)."""

    def __init__(self, message, loc=None, op=None):
        super().__init__(message, loc)
        self.op = op


_SIGS: dict = {}    # primitive -> (min, max operands (None: any), required, allowed params)


def signature(prim):
    """What `prim` takes, from its shape rule's parameters: how many operands (positional
    parameters; elementwise ops say so in `prim.nargs`, their rule takes *avals) and
    which params (keyword-only ones but `regions`, which the verifier passes to ops
    with regions; allowed None: any)."""
    out = _SIGS.get(prim)
    if out is None:
        try:
            ps = list(inspect.signature(prim.shape_rule).parameters.values())
        except (TypeError, ValueError):
            ps = None
        if ps is None:
            out = (0, None, frozenset(), None)
        else:
            P = inspect.Parameter
            pos = [p for p in ps if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
            kw = [p for p in ps if p.kind == P.KEYWORD_ONLY and
                  not (prim.has_regions and p.name == "regions")]
            lo, hi = sum(p.default is p.empty for p in pos), len(pos)
            if any(p.kind == P.VAR_POSITIONAL for p in ps):
                lo, hi = 0, None
            n = prim.nargs
            if n is not None:
                lo = hi = n
            allowed = None if any(p.kind == P.VAR_KEYWORD for p in ps) else \
                frozenset(p.name for p in kw)
            out = (lo, hi, frozenset(p.name for p in kw if p.default is p.empty), allowed)
        _SIGS[prim] = out
    return out


def _check_signature(op):
    lo, hi, required, allowed = signature(op.prim)
    n = len(op.inputs)
    if n < lo or (hi is not None and n > hi):
        want = f"{lo}" if lo == hi else f"{lo} to {hi}" if hi is not None else f"{lo}+"
        raise VerifyError(f"op {op.prim.name} takes {want} operand{'s' * (want != '1')}, "
                          f"got {n}", op.loc, op)
    missing = required.difference(op.params)
    if missing:
        raise VerifyError(f"op {op.prim.name} needs the parameter(s) {sorted(missing)}",
                          op.loc, op)
    if allowed is not None and not allowed.issuperset(op.params):
        raise VerifyError(f"op {op.prim.name} has unknown parameter(s) "
                          f"{sorted(set(op.params) - allowed)}", op.loc, op)


def _check_sharding(v, mesh, where, loc, need_closed, op=None):
    sh = v.sharding
    if sh is None:
        if need_closed:
            raise VerifyError(f"{where}: value {v.aval} has no sharding after propagation", loc, op)
        return
    if sh.rank != v.aval.ndim:
        raise VerifyError(f"{where}: sharding {sh} has rank {sh.rank} but the value is {v.aval}",
                          loc, op)
    if need_closed and sh.open is not None:
        raise VerifyError(f"{where}: sharding {sh} is still open after propagation", loc, op)
    seen = set()
    for d in sh.dims:
        for a in d:
            n = axis_name(a)
            if mesh is not None and n not in mesh.sizes:
                raise VerifyError(f"{where}: unknown mesh axis {n!r} in {sh}", loc, op)
            key = a
            if key in seen:
                raise VerifyError(f"{where}: mesh axis {a} used twice in {sh}", loc, op)
            seen.add(key)


def verify(p: Program, propagated=False, mesh=None, scope=None, _ok=None, types=True) -> None:
    """Raise VerifyError if `p` is malformed; `propagated` also requires closed shardings.

    `types=False` skips re-deriving result types from the shape rules: for checking
    after a pass that only assigns shardings (propagation), on a program whose types
    were verified before it."""
    mesh = mesh if mesh is not None else p.mesh
    defined = set(scope or ())      # values (they hash by identity)
    # (sharding, rank) pairs already found valid on this mesh: values share shardings
    ok = {} if _ok is None else _ok
    for v in p.inputs:
        if v in defined:
            raise VerifyError(f"input {v.name} defined twice", None)
        defined.add(v)
        _check_sharding(v, mesh, f"argument {v.name}", None, propagated)
    add = defined.add
    for op in p.ops:
        prim = op.prim
        for v in op.inputs:
            if v not in defined and type(v) is not Lit:
                raise VerifyError(f"op {prim.name} uses a value before it is defined", op.loc,
                                  op)
        if types and op.sig is None:    # (a traced op's shape rule took these operands)
            _check_signature(op)
        if len(op.regions) != prim.num_regions and not (prim.num_regions < 0 and op.regions):
            raise VerifyError(f"op {prim.name} owns {prim.num_regions} region(s), got "
                              f"{len(op.regions)}", op.loc, op)
        if types:
            if prim.sharded_results and \
                    any(v.sharding is None for v in op.outputs):
                given = op.params.get("sharding")
                raise VerifyError(f"op {prim.name}: its result needs a sharding (it is a "
                                  "source of propagation" +
                                  (f": the constraint's, {given})" if given else ")"),
                                  op.loc, op)
            params = op.params
            if op.regions:
                params = {**params, "regions": tuple(
                    RegionType(tuple(v.aval.bare() for v in r.inputs),
                               tuple(v.aval.bare() for v in r.outputs)) for r in op.regions)}
            try:   # (shape rules see types without their explicit-mode shardings)
                avals = abstract_eval(prim, [v.aval.bare() for v in op.inputs], params,
                                      op.loc)
            except VerifyError:
                raise
            except ShardcError as e:
                raise VerifyError(f"op {prim.name}: {e.message}", op.loc, op) from None
            outs = op.outputs
            if prim.multiple_results:
                bad = len(avals) != len(outs) or any(a != v.aval.bare()
                                                     for a, v in zip(avals, outs))
            else:
                bad = len(outs) != 1 or avals != outs[0].aval.bare()
            if bad:
                avals = list(avals) if prim.multiple_results else [avals]
                got = [v.aval for v in outs]
                raise VerifyError(f"op {prim.name}: result types {got} do not match the op's "
                                  f"shape rule, which gives {avals}", op.loc, op)
        for r in op.regions:
            rmesh = r.mesh if r.mesh is not None else mesh
            verify(r, propagated, rmesh, defined, ok if rmesh is mesh else None, types)
        for v in op.outputs:
            if v in defined:
                raise VerifyError(f"op {prim.name} redefines a value", op.loc, op)
            add(v)
            sh = v.sharding
            if sh is None:
                if not propagated:
                    continue
            elif ok.get(sh) == v.aval.ndim and (not propagated or sh.open is None):
                continue
            _check_sharding(v, mesh, f"op {prim.name}", op.loc, propagated, op)
            if sh is not None:
                ok[sh] = v.aval.ndim
    for v in p.outputs:
        if not isinstance(v, Lit) and v not in defined:
            raise VerifyError("the return uses an undefined value", None)
    for i, (s, v) in enumerate(zip(p.out_shardings or (), p.outputs)):
        if s is not None and not propagated:
            _check_sharding(Value(v.aval, s), mesh, f"result {i}", None, False)
    if propagated:
        for s, v in zip(p.out_shardings, p.outputs):
            if s is None or s.rank != v.aval.ndim:
                raise VerifyError(f"result {v.aval} has no valid sharding after propagation",
                                  None)
