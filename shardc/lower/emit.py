"""Lowering: a propagated Program -> StableHLO text with Shardy (`sdy`) shardings.

Ops are written in MLIR's generic form, one line each, straight from strings: no
MLIR objects are built, which keeps lowering fast. Every function argument, op
result and function result carries a closed `sdy.sharding`; `runtime.pretty()`
gives the pretty-printed, verified form for people.

Each primitive's `lower(ctx, *operands, **params)` returns its result names; it
emits ops with `ctx.op(...)`, which attaches the op's decided shardings.
"""
from __future__ import annotations

import re

import numpy as np

from ..ir import dtypes
from ..errors import ShardcError
from ..ir.program import Aval, Lit, Program, quote
from ..ir.sharding import Sharding
from .template import NO_TEMPLATE, Template, template_key
from .types_text import tensor_type

MESH = "@mesh"


def dim_text(d, open_=False) -> str:
    items = [f'"{a}"' if type(a) is str else f'"{a.name}":({a.pre}){a.size}' for a in d]
    if open_:
        items.append("?")
    return "{" + ", ".join(items) + "}"


def sharding_body(sh: Sharding) -> str:
    opens = sh.open or (False,) * sh.rank
    body = f"{MESH}, [" + ", ".join(dim_text(d, o) for d, o in zip(sh.dims, opens)) + "]"
    if sh.unreduced:
        body += ", unreduced={" + ", ".join(f'"{a}"' for a in sh.unreduced) + "}"
    return body


def sharding_attr(sh: Sharding) -> str:
    return f"#sdy.sharding<{sharding_body(sh)}>"


_PER_VALUE: dict = {}


def sharding_per_value(shs) -> str:
    key = tuple(shs)
    t = _PER_VALUE.get(key)
    if t is None:
        t = "#sdy.sharding_per_value<[" + ", ".join(f"<{sharding_body(s)}>" for s in shs) + "]>"
        if len(_PER_VALUE) < 4096:
            _PER_VALUE[key] = t
    return t


_LOCS: dict = {}


def _loc(op_name, loc) -> str:
    if loc is None or not loc.line:
        return ""
    key = (op_name, loc)
    t = _LOCS.get(key)
    if t is None:
        where = f'{quote(loc.file)}:{loc.line}:0'
        lib = loc.lib
        if lib is not None:     # the library's line called from the user's
            where = (f'callsite({quote(lib.file)}:{lib.line}:0 at {quote(loc.file)}'
                     f'({where}))')
        scope = loc.scope
        t = f' loc({quote(scope + "/" + op_name)}({where}))' if scope else \
            f' loc("{op_name}"({where}))'
        if len(_LOCS) < 4096:
            _LOCS[key] = t
    return t


_DENSE: dict = {}


def dense(value, aval: Aval) -> str:
    """A typed `dense<...>` literal; floats as exact bit patterns."""
    tv = type(value)
    if tv is int or tv is bool or tv is complex or tv is float and value == value:  # memoized
        key = (tv, value.hex() if tv is float else repr(value), aval)    # (-0.0 is not 0.0)
        t = _DENSE.get(key)
        if t is None:
            t = f"{_dense(value, aval)} : {tensor_type(aval)}"
            if len(_DENSE) < 4096:
                _DENSE[key] = t
        return t
    return f"{_dense(value, aval)} : {tensor_type(aval)}"


def _splat(arr) -> bool:
    """All elements bit-identical: -0.0 == 0.0 compares equal but is not the same
    constant."""
    if not arr.size:
        return False
    raw = np.ascontiguousarray(arr).view(np.uint8).reshape(arr.size, -1)
    return bool((raw == raw[0]).all())


def _dense(value, aval: Aval) -> str:
    arr = np.asarray(value, dtype=aval.dtype)
    if arr.dtype == dtypes.bool_:
        if arr.ndim == 0 or (arr == arr.flat[0]).all():
            return f"dense<{'true' if arr.flat[0] else 'false'}>"
        return 'dense<"0x' + arr.astype(np.uint8).tobytes().hex().upper() + '">'
    if arr.dtype in _SUB_BYTE:      # 2- and 4-bit types: MLIR packs their raw data
        wide = arr.astype(np.float32 if dtypes.is_float(arr.dtype) else np.int8)
        if _splat(wide):
            return f"dense<{wide.flat[0].item()!r}>"
        return f"dense<{wide.tolist()!r}>"
    if dtypes.is_complex(arr.dtype):    # raw bytes; one element's worth is a splat
        if _splat(arr):
            arr = arr.flat[0:1]
        return 'dense<"0x' + np.ascontiguousarray(arr).tobytes().hex().upper() + '">'
    if _splat(arr):
        x = arr.flat[0]
        if dtypes.is_int(arr.dtype):
            return f"dense<{int(x)}>"
        bits = arr.flat[0:1].view(np.dtype(f"u{arr.itemsize}"))[0]
        return f"dense<0x{int(bits):0{2 * arr.itemsize}X}>"
    return 'dense<"0x' + np.ascontiguousarray(arr).tobytes().hex().upper() + '">'


_SUB_BYTE = frozenset([dtypes.int2, dtypes.uint2, dtypes.int4, dtypes.uint4,
                       *(d for d, m in dtypes.SMALL_FLOATS.items() if m.startswith("f4"))])


class LowerCtx:
    """What a lowering rule sees: its op's types and shardings, and an emitter."""
    __slots__ = ("lowering", "ir_op", "in_avals", "out_avals", "out_shardings", "in_shardings",
                 "mesh", "lines", "indent")

    def __init__(self, lowering, op, lines, indent):
        self.lowering = lowering
        self.ir_op = op
        self.in_avals = [v.aval for v in op.inputs]
        self.out_avals = [v.aval for v in op.outputs]
        self.in_shardings = [v.sharding for v in op.inputs]
        self.out_shardings = [v.sharding for v in op.outputs]
        self.mesh = lowering.program.mesh
        self.lines = lines
        self.indent = indent

    def fresh(self) -> str:
        return self.lowering.fresh()

    def op(self, name, operands, in_types, out_types, props=None, sharding=None,
           regions=None, attrs=None, carried=None) -> list[str]:
        """Emit one generic-form op; returns its result names.

        `sharding` is a Sharding per result (default: this IR op's result shardings,
        when the result types match), or False for ops inside reduction bodies.
        `carried` (a while): each operand's Sharding (None: unknown), whose partial sums
        its result keeps."""
        low = self.lowering
        n = low.n
        low.n = n + len(out_types)
        res = [f"%{i}" for i in range(n, n + len(out_types))]
        if sharding is None:
            sharding = self.out_shardings if len(out_types) == len(self.out_shardings) else None
            if sharding is None:
                raise ShardcError(f"internal: lowering of {self.ir_op.prim.name} must give the "
                                  f"sharding of its helper op {name}")
        parts = [self.indent]
        if res:
            parts.append(f"{', '.join(res)} = ")
        parts.append(f'"{name}"({", ".join(operands)})')
        if props:
            parts.append(" <{" + ", ".join([f"{k} = {v}" for k, v in props.items()]) + "}>")
        if regions:
            parts.append(" (" + ", ".join(regions) + ")")
        shard = sharding is not False and out_types and not low.sources_only
        if attrs:
            extra = dict(attrs)
            if shard:
                extra["sdy.sharding"] = sharding_per_value(sharding)
            parts.append(" {" + ", ".join([f"{k} = {v}" for k, v in extra.items()]) + "}")
        elif shard:
            parts.append(" {sdy.sharding = " + sharding_per_value(sharding) + "}")
        if len(out_types) == 1:
            outs = out_types[0]
        else:
            outs = f"({', '.join(out_types)})" if out_types else "()"
        parts.append(f" : ({', '.join(in_types)}) -> {outs}")
        op = self.ir_op
        parts.append(_loc(op.prim.name, op.loc))
        self.lines.append("".join(parts))
        types = low.types
        for r, t in zip(res, out_types):
            types[r] = t
        if name == "stablehlo.while" and not low.sources_only:
            res = self._behind_barriers(res, out_types, carried)
        return res

    def _behind_barriers(self, res, out_types, carried=None):
        """Each while result through an open sharding constraint, which fixes nothing.
        XLA folds a no-op user of a while result (a same-shape reshape or convert, a
        transpose pair) by moving that user's sharding onto the while, a tuple, and
        then rejects the module ("Number of tile assignment dimensions ... input rank");
        behind a single-result op the sharding lands there instead. A carry of partial
        sums (explicit mode's unreduced axes) stays partial sums through it, or XLA
        reduces the while's result and the loop adds up the whole value again."""
        out = []
        carried = carried or [None] * len(res)
        for r, t, s in zip(res, out_types, carried):
            rank = _DIMS.match(t).group(1).count("x")
            # (partial sums: the operand's own sharding; open dims would let XLA drop them)
            sh = Sharding(s.dims, None, s.unreduced) if s is not None and s.unreduced \
                and s.rank == rank else Sharding(((),) * rank, [True] * rank)
            (c,) = self.op("sdy.sharding_constraint", [r], [t], [t],
                           {"sharding": sharding_attr(sh)}, sharding=False)
            out.append(c)
        return out

    def op1(self, name, operands, props=None, sharding=None, out_aval=None, attrs=None):
        """A single-result op on this IR op's operand types (by name lookup)."""
        types = [self.lowering.types[o] for o in operands]
        out = tensor_type(out_aval or self.out_avals[0])
        (r,) = self.op(name, operands, types, [out], props, sharding, attrs=attrs)
        self.lowering.types[r] = out
        return r

    def held(self, r, aval: Aval, sharding, always=False) -> str:
        """`r` behind a constraint where `sharding` is partial sums (explicit mode's
        unreduced axes): XLA re-propagates the shardings of ops in a loop body and
        reduces what no constraint holds (a step's y, a slice of xs, a loop constant
        passed through), and the loop then adds up whole values. `always`: behind one
        in any case."""
        if sharding is None or not (always or sharding.unreduced):
            return r
        t = tensor_type(aval)
        return self.op("sdy.sharding_constraint", [r], [t], [t],
                       {"sharding": sharding_attr(sharding)}, sharding=False)[0]

    def carry_in(self, r, aval: Aval, sharding) -> str:
        """A loop body's block argument `r` (a carry) held at its own sharding, in a
        program of partial sums: where the body casts it to partial sums (a gradient
        rule's cast to its primal's type), XLA otherwise takes that for the carry's own
        sharding and feeds the reduced value the body yields back in as partial sums."""
        if sharding is None or not self.lowering.program.meta.get("unreduced") or \
                self.lowering.sources_only:
            return r
        t = tensor_type(aval)
        return self.op("sdy.sharding_constraint", [r], [t], [t],
                       {"sharding": sharding_attr(sharding)}, sharding=False)[0]

    def constant(self, value, aval: Aval, sharding=None) -> str:
        t = tensor_type(aval)
        sh = [sharding or Sharding.replicated(aval.ndim)]
        (r,) = self.op("stablehlo.constant", [], [], [t], {"value": dense(value, aval)}, sh)
        self.lowering.types[r] = t
        return r

    def region(self, args_avals, body) -> str:
        """A region `^bb0(args): ... stablehlo.return` built by body(ctx, *arg_names)."""
        names = [self.fresh() for _ in args_avals]
        head = ", ".join(f"{n}: {tensor_type(a)}" for n, a in zip(names, args_avals))
        for n, a in zip(names, args_avals):
            self.lowering.types[n] = tensor_type(a)
        saved_lines, saved_indent = self.lines, self.indent
        inner = []
        self.lines, self.indent = inner, saved_indent + "    "
        try:
            rets = body(self, *names)
        finally:
            self.lines, self.indent = saved_lines, saved_indent
        types = [self.lowering.types[r] for r in rets]
        inner.append(f'{saved_indent}    "stablehlo.return"({", ".join(rets)}) : '
                     f'({", ".join(types)}) -> ()')
        return "{\n" + f"{saved_indent}  ^bb0({head}):\n" + "\n".join(inner) + \
            f"\n{saved_indent}}}"


class Lowering:
    def __init__(self, program: Program, sources_only=False):
        self.program = program
        self.n = 0
        self.types: dict[str, str] = {}
        # sources_only: annotate only arguments, constraints and fixed results, leaving
        # every other decision to XLA's own Shardy (used to test propagation against it)
        self.sources_only = sources_only
        # a cond's branches are lowered sources_only too (ops/control.py); `oracle` says
        # the whole program is, where a lowering may not add constraints of its own either
        self.oracle = sources_only
        self.channels = 0
        self.manual: tuple = ()      # the mesh axes manual where ops are being lowered
        self.templates: dict = {}    # see body()
        self.host_calls: list = []   # see host_call()

    def next_channel(self) -> int:
        self.channels += 1
        return self.channels

    def host_call(self, fn) -> int:
        """The index naming host function `fn` in this program's list of them (what the
        runtime hands XLA): numbered in program order, so equal traces lower to equal
        text and share an executable, each run calling its own trace's functions."""
        for i, f in enumerate(self.host_calls):
            if f is fn:
                return i
        self.host_calls.append(fn)
        return len(self.host_calls) - 1

    def fresh(self) -> str:
        self.n += 1
        return f"%{self.n - 1}"

    def body(self, p: Program, names: dict, indent: str) -> list[str]:
        """The lines of `p`'s ops. An op's text is a function of its signature (Op.sig:
        primitive, params, operand types), its literal operands, the shardings of its
        operands and results, its location and the indent -- up to the SSA names -- so
        the first op of each kind is lowered by its rule and recorded as a template,
        and the ops like it are written by filling in their names (Template)."""
        lines = []
        templates = self.templates
        types = self.types
        for op in p.ops:
            key = template_key(op, (indent, self.manual) if self.manual else indent)
            if key is not None:
                tpl = templates.get(key)
                if tpl is not None:
                    if tpl is not NO_TEMPLATE:
                        tpl.apply(self, op, names, lines)
                        continue
                    key = None
            start, n0, ch0 = len(lines), self.n, self.channels
            ctx = LowerCtx(self, op, lines, indent)
            operands = []
            for v in op.inputs:
                if isinstance(v, Lit):
                    operands.append(ctx.constant(v.value, v.aval))
                else:
                    operands.append(names[id(v)])
            rule = op.prim.lower
            if rule is None:
                raise ShardcError(f"op {op.prim.name} has no lowering", op.loc)
            res = rule(ctx, *operands, **op.params)
            if isinstance(res, str):
                res = [res]
            # (in a cond's branch, sources_only: partial sums alone, or XLA reduces them)
            if op.outputs and op.prim.source_of is None and not self.oracle and (
                    op.outputs[0].aval.ts is not None and not self.sources_only or any(
                        v.sharding is not None and v.sharding.unreduced for v in op.outputs)):
                res = _pin_types(ctx, op, res, self.sources_only)
            for v, r in zip(op.outputs, res):
                names[id(v)] = r
                types.setdefault(r, tensor_type(v.aval))
            if key is not None:
                tpl = None
                if self.channels == ch0:       # channel ids must be unique
                    tpl = Template.record(
                        self, op, [names[id(v)] for v in op.inputs if type(v) is not Lit],
                        lines[start:], n0, res)
                templates[key] = tpl if tpl is not None else NO_TEMPLATE
        return lines

    def module(self, name="main") -> str:
        p = self.program
        names = {}
        args = []
        donate = p.meta.get("donate") or [False] * len(p.inputs)
        in_memory = p.meta.get("in_memory") or [None] * len(p.inputs)
        kept = p.meta.get("kept")   # (jit's keep_unused=False: the others are not passed)
        for k, i in enumerate(range(len(p.inputs)) if kept is None else kept):
            v = p.inputs[i]
            n = f"%arg{k}"
            names[id(v)] = n
            self.types[n] = tensor_type(v.aval)
            attrs = f"sdy.sharding = {sharding_attr(v.sharding)}"
            if donate[i]:
                attrs += ", jax.buffer_donor = true"
            if in_memory[i]:
                attrs = f'mhlo.memory_kind = "{in_memory[i]}", ' + attrs
            args.append(f"{n}: {tensor_type(v.aval)} {{{attrs}}}")
        body = self.body(p, names, "    ")
        rets, ret_types = [], []
        fixed = p.meta.get("fixed_out") or [True] * len(p.outputs)
        out_memory = p.meta.get("out_memory") or [None] * len(p.outputs)
        moved = p.meta.get("out_moved") or [False] * len(p.outputs)
        for i, v in enumerate(p.outputs):
            sh = p.out_shardings[i]
            t = tensor_type(v.aval)
            r = names[id(v)]
            mem = out_memory[i]
            if (mem or moved[i]) and p.meta.get("platform", "cpu") != "cpu" and \
                    not self.sources_only:
                # as jax: XLA moves a result to the memory this call names
                r = self.fresh()
                body.append(f'    {r} = "stablehlo.custom_call"({names[id(v)]}) <{{api_version = '
                            '1 : i32, call_target_name = "annotate_device_placement", '
                            f'has_side_effect = true}}> {{mhlo.frontend_attributes = '
                            f'{{_xla_buffer_placement = "{mem or "device"}"}}}} : ({t}) -> {t}')
            rets.append(r)
            extra = f'mhlo.memory_kind = "{mem}", ' if mem else ""
            if self.sources_only and (not fixed[i] or sh is None):
                ret_types.append(f"{t} {{{extra[:-2]}}}" if extra else t)
            else:
                ret_types.append(f"{t} {{{extra}sdy.sharding = {sharding_attr(sh)}}}")
        mesh = p.mesh
        mesh_axes = ", ".join(f'"{n}"={s}' for n, s in mesh.axes)
        out = [
            f"module @{_sym(p.name)} attributes {{mhlo.num_partitions = {mesh.size} : i32, "
            f"mhlo.num_replicas = 1 : i32}} {{",
            f"  sdy.mesh {MESH} = <[{mesh_axes}]>",
            f"  func.func public @{name}({', '.join(args)}) -> ({', '.join(ret_types)}) {{",
            *body,
            f'    "func.return"({", ".join(rets)}) : '
            f'({", ".join(tensor_type(v.aval) for v in p.outputs)}) -> ()',
            "  }",
            "}",
        ]
        return "\n".join(out) + "\n"


_DIMS = re.compile(r"tensor<((?:\d+x)*)")


def _pin_types(ctx, op, res, partial_only=False):
    """Explicit mode: a sharding constraint on each typed result, as jax lowers types
    (XLA re-propagates shardings inside a function; only constraints hold): a scalar's
    too where it is partial sums, or XLA reduces it, and an untyped one's (a gradient
    rule's) where it is partial sums (`partial_only`: those alone)."""
    out = []
    for v, r in zip(op.outputs, res):
        if v.sharding is None or not (v.sharding.unreduced or not partial_only and
                                      v.aval.ts is not None and v.aval.shape):
            out.append(r)
            continue
        t = tensor_type(v.aval)
        (r,) = ctx.op("sdy.sharding_constraint", [r], [t], [t],
                      {"sharding": sharding_attr(v.sharding)}, sharding=False)
        out.append(r)
    return out


def _sym(name: str) -> str:
    s = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return ("jit_" + s) if s else "jit"


def lower(program: Program, sources_only=False, host_calls=None) -> str:
    """StableHLO text for a propagated program. `host_calls`: a list to receive the
    host functions (debug.print, callbacks) the text names by index, which the runtime
    needs to compile it."""
    low = Lowering(program, sources_only)
    if host_calls is not None:
        low.host_calls = host_calls
    return low.module()
