"""shardc's SSA IR: values, ops, programs; a deterministic printer and its parser.

    mesh <data=2, model=4>
    func @layer(%x: f32[64,256] [{data}, {}], %w: f32[256,1024] [{}, {model}]) -> (f32[64,1024]) {
      %0: f32[64,1024] [{data}, {model}] = dot_general(%x, %w) {contracting=((1,), (0,)), batch=((), ())} loc("layer.py":12)
      %1: f32[64,1024] [{data}, {model}] = max(%0, 0.0:~f32) loc("layer.py":12)
      return %1
    }

A type is `dtype[dims]` (`~` in front marks JAX's weak type of Python scalars); a
sharding (see sharding.py) follows it once known. Scalars may appear inline as
literals (`0.0:~f32`). Ops with regions print their blocks indented under them.
"""
from __future__ import annotations

import os

import numpy as np

from . import dtypes
from ..errors import UNKNOWN, Loc, lib_path
from .sharding import MeshShape, Sharding, unreduced_text


_KEEP = object()


class Aval:
    """Shape, dtype and weak-typedness of an array (JAX's ShapedArray), and in explicit
    sharding mode its sharding on the mesh's explicit axes (`ts`, a closed Sharding
    naming only explicit axes; None outside explicit mode and for rank-0 values).

    Immutable and interned: equal avals are usually the same object, so the dicts
    keyed by them (type strings, shape rules, sharding rules) find them by identity."""
    __slots__ = ("shape", "dtype", "weak", "ts", "_hash")

    def __new__(cls, shape, dtype, weak=False, ts=None):
        shape = tuple(shape)
        key = (shape, dtype, weak, ts)
        a = _AVALS.get(key)
        if a is None:
            a = object.__new__(cls)
            a.shape = shape
            a.dtype = dtype
            a.weak = weak
            a.ts = ts
            a._hash = hash(key)
            if len(_AVALS) >= 65536:
                _AVALS.clear()
            _AVALS[key] = a
        return a

    def __reduce__(self):
        return Aval, (self.shape, self.dtype, self.weak, self.ts)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def update(self, shape=None, dtype=None, weak=None, ts=_KEEP):
        """A changed copy; a new shape drops the type's sharding unless `ts` is given."""
        if ts is _KEEP:
            ts = self.ts if shape is None or tuple(shape) == self.shape else None
        return Aval(self.shape if shape is None else shape,
                    self.dtype if dtype is None else dtype,
                    self.weak if weak is None else weak, ts)

    def strong(self):
        return self if not self.weak else Aval(self.shape, self.dtype, False, self.ts)

    def bare(self):
        """Without the explicit-mode sharding (what shape rules see)."""
        return self if self.ts is None else Aval(self.shape, self.dtype, self.weak)

    def __eq__(self, o):
        return (type(o) is Aval and self._hash == o._hash and self.shape == o.shape
                and self.dtype == o.dtype and self.weak == o.weak and self.ts == o.ts)

    def __hash__(self):
        return self._hash

    def __str__(self):
        ts = self.ts
        if ts is None:
            dims = ",".join(map(str, self.shape))
        else:   # jax's form: f32[8@x,16], f32[8@(x,y)]
            dims = ",".join(str(n) + _at(axes) for n, axes in zip(self.shape, ts.dims))
            if ts.unreduced or ts.reduced:
                return ("~" if self.weak else "") + f"{dtypes.short_name(self.dtype)}" \
                    f"[{dims}]{unreduced_text(ts.unreduced, ts.reduced)}"
        return ("~" if self.weak else "") + f"{dtypes.short_name(self.dtype)}[{dims}]"

    __repr__ = __str__


def _at(axes):
    if not axes:
        return ""
    if len(axes) == 1:
        return f"@{axes[0]}"
    return "@(" + ",".join(map(str, axes)) + ")"


_AVALS: dict = {}


class Value:
    """An SSA value. `sharding` is None until propagation decides it; `why` says how."""
    __slots__ = ("aval", "sharding", "name", "why")

    def __init__(self, aval: Aval, sharding: Sharding | None = None, name=None):
        self.aval = aval
        self.sharding = sharding
        self.name = name
        self.why = None

    def __repr__(self):
        return f"Value({self.name or hex(id(self))}: {self.aval} {self.sharding or ''})"


class Lit:
    """A scalar constant used inline as an operand."""
    __slots__ = ("value", "aval")
    sharding = None

    def __init__(self, value, aval: Aval):
        self.value = value
        self.aval = aval

    def __str__(self):
        return f"{_fmt_scalar(self.value)}:{self.aval}".replace("[]", "")

    # Read as a Python or NumPy value, a literal is its scalar (an object's default
    # truthiness would make every literal True)
    def __array__(self, dtype=None, copy=None):
        return np.asarray(self.value, self.aval.dtype if dtype is None else dtype)

    def __bool__(self):
        return bool(self.value)

    def __int__(self):
        return int(self.value)

    def __float__(self):
        return float(self.value)

    def __complex__(self):
        return complex(self.value)


class Op:
    """An operation. `sig` (set by the tracer): an int naming the op's primitive, params
    and operand types, shared by all ops traced with the same ones (core.abstract_eval's
    memo), so later stages can cache per-op facts cheaply; None if unknown. A pass that
    changes an op's primitive, params or operand types must reset it."""
    __slots__ = ("prim", "inputs", "outputs", "params", "loc", "regions", "sig")

    def __init__(self, prim, inputs, outputs, params, loc=UNKNOWN, regions=()):
        self.prim = prim
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.params = params
        self.loc = loc
        self.regions = tuple(regions)
        self.sig = None

    def __repr__(self):
        return f"Op({self.prim.name} @ {self.loc})"


class Program:
    """A function: inputs, ops in order, outputs. `out_shardings[i]` fixes output i."""
    __slots__ = ("name", "inputs", "ops", "outputs", "mesh", "out_shardings", "meta")

    def __init__(self, name="fun", inputs=None, ops=None, outputs=None, mesh=None):
        self.name = name
        self.inputs = inputs if inputs is not None else []
        self.ops = ops if ops is not None else []
        self.outputs = outputs if outputs is not None else []
        self.mesh: MeshShape | None = mesh
        self.out_shardings: list = [None] * len(self.outputs)
        self.meta: dict = {}

    def __str__(self):
        return print_program(self)

    def walk(self):
        """All ops, including those inside regions, outer first."""
        for op in self.ops:
            yield op
            for r in op.regions:
                yield from r.walk()


# ---------------------------------------------------------------- printer


def _fmt_scalar(v):
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, complex):     # 1.5-2j (parse.py reads it back with complex())
        r = repr(v)
        return r[1:-1] if r.startswith("(") else r
    return str(v)


def fmt_param(v) -> str:
    if isinstance(v, np.dtype):
        return dtypes.short_name(v)
    if isinstance(v, Sharding):
        return str(v)
    if isinstance(v, np.ndarray):
        aval = Aval(v.shape, v.dtype)
        if v.size <= 16:
            body = "[" + ", ".join(_fmt_scalar(x) for x in v.ravel().tolist()) + "]"
        else:
            body = "0x" + np.ascontiguousarray(v).tobytes().hex()
        return f"array({aval}, {body})"
    if isinstance(v, (tuple, list)):
        inner = ", ".join(fmt_param(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, str):
        return repr(v)
    if v is None or isinstance(v, (bool, int, float, complex, np.generic)):
        if isinstance(v, np.generic):
            v = v.item()
        return {None: "None", True: "True", False: "False"}.get(v, None) \
            if isinstance(v, bool) or v is None else _fmt_scalar(v)
    if isinstance(v, MeshShape):
        return str(v)
    if callable(v):
        name = getattr(v, "ir_name", None)
        return f"<callback {name}>" if isinstance(name, str) else "<callback>"
    return repr(v)


# Callables a parameter may hold that the text can name (checkpoint's standard policies):
# name -> the callable, or for a parameterized one (`f(args)` in the text) its factory.
# Such a callable carries its text in `ir_name`; others print as `<callback>`, which
# the parser reads as None (the text cannot hold an arbitrary function).
NAMED_CALLBACKS: dict = {}


def named_callback(name, fn, args=None):
    """`fn`, printable in the IR as `<callback name>` (or `name(args...)`, rebuilt by
    the parser as NAMED_CALLBACKS[name](*args) when `args` is given)."""
    fn.ir_name = name if args is None else \
        f"{name}({', '.join(fmt_param(a) for a in args)})"
    return fn


def fmt_loc(loc: Loc) -> str:
    if loc is UNKNOWN or loc is None:
        return ""
    lib = loc.lib
    via = "" if lib is None else f' in {quote(lib_path(lib.file))}:{lib.line}'
    where = f'{quote(os.path.basename(loc.file))}:{loc.line}{via}'
    scope = loc.scope
    return f' loc({quote(scope)}({where}))' if scope else f' loc({where})'


def quote(s: str) -> str:
    """`s` as a string literal of the IR and of MLIR: a quote, backslash or control
    character in a file or scope name (jax.named_scope takes any string) must not end
    the literal or the line. Escapes are MLIR's: \\" \\\\ \\n and \\XX per UTF-8 byte."""
    if s.isprintable() and '"' not in s and "\\" not in s:
        return f'"{s}"'
    out = []
    for c in s:
        if c in '"\\':
            out.append("\\" + c)
        elif c == "\n":
            out.append("\\n")
        elif not c.isprintable():
            out.extend(f"\\{b:02X}" for b in c.encode())
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


class _Namer:
    def __init__(self):
        self.names = {}
        self.used = set()
        self.n = 0

    def define(self, v, preferred=None):
        name = preferred
        if not name or name in self.used:
            while str(self.n) in self.used:
                self.n += 1
            name = str(self.n)
            self.n += 1
        self.used.add(name)
        self.names[id(v)] = name
        return "%" + name

    def ref(self, v):
        if isinstance(v, Lit):
            return str(v)
        return "%" + self.names.get(id(v), "<undefined>")


def value_names(p: "Program") -> list:
    """[(value, printed name without the %)] in the order print_program defines them
    (arguments, then each op's results, a region's arguments before its body)."""
    namer, out = _Namer(), []

    def walk(q, named_inputs):
        for v in q.inputs:
            out.append((v, namer.define(v, v.name if named_inputs else None)[1:]))
        for op in q.ops:
            for v in op.outputs:
                out.append((v, namer.define(v)[1:]))
            for r in op.regions:
                walk(r, True)
    walk(p, True)
    return out


def type_text(aval, explicit) -> str:
    """A value's type as printed. On a mesh with Explicit axes an array with no type
    sharding (left to propagation: out_sharding='s operand, auto_axes) is marked
    `{auto}`, since jax's form `f32[8]` there is a replicated type."""
    if explicit and aval.ts is None and aval.shape:
        return f"{aval}{{auto}}"
    return str(aval)


def _typed(v, name, show_sharding=True, explicit=False):
    s = f"{name}: {type_text(v.aval, explicit)}"
    if show_sharding is True:
        sh = v.sharding
    else:   # False, or {id(value): sharding} (a Snapshot's)
        sh = show_sharding.get(id(v)) if show_sharding else None
    if sh is not None:
        s += f" {sh}"
    return s


class Snapshot:
    """A program as it is now, printed only when asked for (`text()`).

    The passes after a snapshot replace lists (a program's ops and outputs, an op's
    operands) rather than edit them, and give values new shardings; so a snapshot keeps
    references to the current lists and the shardings set so far, which costs far less
    than printing a program that is usually never looked at."""
    __slots__ = ("tree", "shardings", "_text")

    def __init__(self, p: Program):
        self.shardings = {}
        self.tree = self._take(p)
        self._text = None

    def _take(self, p):
        sh = self.shardings
        for v in p.inputs:
            if v.sharding is not None:
                sh[id(v)] = v.sharding
        ops = list(p.ops)
        ins = []
        regions = {}
        for op in ops:
            ins.append(op.inputs)
            for v in op.outputs:
                if v.sharding is not None:
                    sh[id(v)] = v.sharding
            if op.regions:
                regions[id(op)] = tuple(self._take(r) for r in op.regions)
        return (p, p.inputs, ops, ins, regions, p.outputs, list(p.out_shardings))

    def _program(self, tree):
        p, inputs, ops, ins, regions, outputs, out_shardings = tree
        q = Program(p.name, list(inputs), [
            Op(op.prim, i, op.outputs, op.params, op.loc,
               [self._program(r) for r in regions.get(id(op), ())])
            for op, i in zip(ops, ins)], list(outputs), p.mesh)
        q.out_shardings = list(out_shardings)
        q.meta.update((k, p.meta[k]) for k in _MEMORY_META if k in p.meta)
        return q

    def text(self) -> str:
        if self._text is None:
            self._text = print_program(self._program(self.tree), shardings=self.shardings)
        return self._text


_MEMORY_META = ("in_memory", "out_memory", "out_moved")


def memory_texts(p: Program):
    """The ` memory=<kind>` suffixes of the arguments and results (jit's meta): each
    one not in device memory, and a result out_shardings moves back to the device."""
    ins = p.meta.get("in_memory") or ()
    outs = p.meta.get("out_memory") or ()
    moved = p.meta.get("out_moved") or ()
    return ([f" memory={m}" if m and m != "device" else ""
             for m in list(ins) + [None] * (len(p.inputs) - len(ins))],
            [f" memory={m}" if m and m != "device" else
             " memory=device" if i < len(moved) and moved[i] else ""
             for i, m in enumerate(list(outs) + [None] * (len(p.outputs) - len(outs)))])


def print_program(p: Program, explain=None, shardings=True) -> str:
    """The program's text. `explain(value) -> str` adds a provenance comment per value.
    `shardings`: show them (True), not (False), or a {id(value): sharding} to use."""
    namer = _Namer()
    lines = []
    if p.mesh is not None:
        lines.append(f"mesh {p.mesh}")
    explicit = p.mesh is not None and bool(p.mesh.explicit)
    in_mem, out_mem = memory_texts(p)
    args = ", ".join(_typed(v, namer.define(v, v.name), shardings, explicit) + m
                     for v, m in zip(p.inputs, in_mem))
    outs = []
    for i, v in enumerate(p.outputs):
        s = type_text(v.aval, explicit)
        fixed = p.out_shardings[i] if i < len(p.out_shardings) else None
        if fixed is not None and shardings is not False:
            s += f" {fixed}"
        outs.append(s + out_mem[i])
    lines.append(f"func @{p.name}({args}) -> ({', '.join(outs)}) {{")
    if explain:
        for v in p.inputs:
            note = explain(v)
            if note:
                lines.append(f"  // {namer.ref(v)}: {note}")
    _print_body(p, namer, lines, "  ", explain, shardings, explicit)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _print_body(p, namer, lines, ind, explain, shardings, explicit):
    for op in p.ops:
        outs = ", ".join(_typed(v, namer.define(v), shardings, explicit)
                         for v in op.outputs)
        ins = ", ".join(namer.ref(v) for v in op.inputs)
        params = ""
        if op.params:
            params = " {" + ", ".join(f"{k}={fmt_param(val)}"
                                      for k, val in op.params.items()) + "}"
        head = f"{outs} = " if op.outputs else ""
        line = f"{ind}{head}{op.prim.name}({ins}){params}{fmt_loc(op.loc)}"
        if op.regions:
            lines.append(line + " {")
            for r in op.regions:
                bargs = ", ".join(_typed(v, namer.define(v, v.name), shardings, explicit)
                                  for v in r.inputs)
                lines.append(f"{ind}^({bargs}):")
                for v in r.inputs if explain else ():
                    note = explain(v)
                    if note:
                        lines.append(f"{ind}  // {namer.ref(v)}: {note}")
                _print_body(r, namer, lines, ind + "  ", explain, shardings, explicit)
            lines.append(f"{ind}}}")
        else:
            lines.append(line)
        if explain:
            for v in op.outputs:
                note = explain(v)
                if note:
                    lines.append(f"{ind}  // {namer.ref(v)}: {note}")
    lines.append(f"{ind}return " + ", ".join(namer.ref(v) for v in p.outputs))
