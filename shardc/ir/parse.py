"""Parser for the IR text that ir.print_program writes; they round-trip."""
from __future__ import annotations

import re

import numpy as np

from . import dtypes
from .primitive import PRIMITIVES
from ..errors import UNKNOWN, Loc, ShardcError
from .program import NAMED_CALLBACKS, Aval, Lit, Op, Program, Value
from .sharding import MeshShape, Sharding, parse_sharding, parse_unreduced

_DIM = r"\d+(?:@(?:\w+|\([\w,]+\)))?"       # 8, 8@x, 8@(x,y)
_TYPE = rf"~?[a-z][a-z0-9]*\[(?:{_DIM}(?:,{_DIM})*)?\](?:\{{[UR]:[\w, :R]+\}}|\{{auto\}})?"
_TYPE_RE = re.compile(rf"^({_TYPE})\s*(\[.*\])?$")
_MEMORY_RE = re.compile(r"\s+memory=(pinned_host|unpinned_host|device)\s*$")
_STR = r'"((?:[^"\\]|\\[n"\\]|\\[0-9A-Fa-f]{2})*)"'  # a literal as program.quote writes
_WHERE = rf'{_STR}:(\d+)(?: in {_STR}:(\d+))?'      # "f.py":12 in "lib.py":3
_LOC_RE = re.compile(rf'\s*loc\((?:{_STR}\({_WHERE}\)|{_WHERE})\)\s*$')  # scope optional


def _unquote(s):
    """The string a literal matched by _STR stands for (program.quote inverted)."""
    if s is None or "\\" not in s:
        return s
    out, i = bytearray(), 0
    while i < len(s):
        c, nxt = s[i], s[i + 1:i + 2]
        if c != "\\":
            out += c.encode()
            i += 1
        elif nxt in ('n', '"', "\\"):
            out += b"\n" if nxt == "n" else nxt.encode()
            i += 2
        else:                                   # \XX: one UTF-8 byte
            out.append(int(s[i + 1:i + 3], 16))
            i += 3
    return out.decode(errors="replace")


def _uncomment(line):
    """`line` without its '//' comment; a '//' inside a string literal (a scope such as
    "a//b") is not one."""
    cut = line.find("//")
    if cut < 0 or '"' not in line[:cut]:
        return line[:cut] if cut >= 0 else line
    m = re.match(r'(?:[^"/]|/(?!/)|' + _STR + r')*', line)
    return line[:m.end()]


class ParseError(ShardcError):
    pass


def _err(msg, lineno, col=1):
    """A ParseError at IR line `lineno`, column `col` (1-based): 'line 3:5: ...'."""
    e = ParseError(f"line {lineno}:{col}: {msg}", UNKNOWN)
    e.line, e.col = lineno, col
    return e


def _col(raw, token):
    """The 1-based column of `token` in the line `raw` (of its text if not found)."""
    i = raw.find(token) if token else -1
    return i + 1 if i >= 0 else len(raw) - len(raw.lstrip()) + 1


def _malformed(e, lineno, raw):
    """A ParseError for an exception from a malformed line (a bad number, a missing
    ':' or '='...), at that line: never a bare KeyError or ValueError."""
    msg = e.args[0] if isinstance(e, KeyError) and e.args else e
    return _err(f"malformed line {raw.strip()!r}: {msg}", lineno, _col(raw, None))


def parse_type(text: str, explicit: bool = False) -> Aval:
    """A printed type. `explicit` (a mesh with Explicit axes): an array's type is its
    sharding there, so `f32[8]` is replicated; `f32[8]{auto}` has no type sharding."""
    text = text.strip()
    auto = text.endswith("{auto}")
    if auto:
        text = text[:-len("{auto}")]
    text, unreduced, reduced = parse_unreduced(text)
    weak = text.startswith("~")
    text = text.lstrip("~")
    name, sep, dims = text.partition("[")
    if not sep or not text.endswith("]"):
        raise ValueError(f"bad type {text!r}: expected e.g. f32[4,8]")
    shape, ts = [], []
    for d in re.findall(r"\d+(?:@\([\w,]+\)|@\w+)?", dims[:-1]):
        n, _, axes = d.partition("@")
        shape.append(int(n))
        ts.append(tuple(a for a in axes.strip("()").split(",") if a))
    shape = tuple(shape)
    if len(shape) != len([d for d in dims[:-1].split(",") if d]) and "(" not in dims:
        raise ValueError(f"bad type {text!r}: expected e.g. f32[4,8] or f32[4@x,8]")
    if any(d < 0 for d in shape):
        raise ValueError(f"bad type {text!r}: negative dimension")
    try:
        dtype = dtypes.from_short_name(name)
    except KeyError:
        raise ValueError(f"unknown element type {name!r} in {text!r}") from None
    typed = "@" in dims or unreduced or reduced or explicit and shape and not auto
    return Aval(shape, dtype, weak, Sharding(ts, None, unreduced, reduced) if typed else None)


def _split_top(s: str, sep=","):
    """Split on `sep` outside brackets/quotes."""
    out, depth, cur, quote = [], 0, [], None
    for ch in s:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _match(s: str, i: int) -> int:
    """Index just past the bracket group opening at s[i]."""
    depth, quote = 0, None
    for j in range(i, len(s)):
        ch = s[j]
        if quote:
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
        elif ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
            if depth == 0:
                return j + 1
    raise ValueError(f"unbalanced brackets in {s!r} (is the text cut short?)")


def _typed_decl(text, explicit=False):
    """'%x: f32[2] [{a}]' -> (name, aval, sharding|None); `explicit`: see parse_type"""
    name, rest = text.split(":", 1)
    m = _TYPE_RE.match(rest.strip())
    if not m:
        raise ValueError(f"bad type {rest.strip()!r}")
    sh = m.group(2)
    if sh and _match(sh, 0) != len(sh):
        raise ValueError(f"unbalanced brackets in {sh!r}")
    sh = parse_sharding(sh) if sh else None
    return name.strip()[1:], parse_type(m.group(1), explicit), sh


def parse_value(s: str):
    """A printed parameter value (see ir.fmt_param)."""
    s = s.strip()
    if s.startswith("(") and s.endswith(")"):
        return tuple(parse_value(x) for x in _split_top(s[1:-1]))
    if s.startswith("["):
        return parse_sharding(s)
    if s.startswith("array("):
        ty, body = _split_top(s[len("array("):-1])
        aval = parse_type(ty)
        if body.startswith("0x"):
            return np.frombuffer(bytes.fromhex(body[2:]), aval.dtype).reshape(aval.shape).copy()
        vals = [parse_value(x) for x in _split_top(body[1:-1])]
        return np.array(vals, dtype=aval.dtype).reshape(aval.shape)
    if s.startswith("<") and s.endswith(">"):
        if s == "<callback>":
            return None
        if s.startswith("<callback "):
            return _callback(s[len("<callback "):-1].strip())
        if "=" not in s and s != "<>":     # a Python object the text names, not holds
            return Opaque(s[1:-1])
        axes, explicit = [], []
        for k, v in (x.split("=") for x in _split_top(s[1:-1])):
            size, _, kind = v.strip().partition(" ")
            axes.append((k.strip(), int(size)))
            if kind.strip() == "explicit":
                explicit.append(k.strip())
            elif kind.strip():
                raise ValueError(f"bad mesh axis {k}={v}: expected name=size or "
                                 "name=size explicit")
        return MeshShape(tuple(axes), explicit)
    if s[0] in "'\"":
        return s[1:-1]
    words = {"True": True, "False": False, "None": None, "true": True, "false": False,
             "inf": float("inf"), "-inf": float("-inf"), "nan": float("nan")}
    if s in words:
        return words[s]
    try:
        return dtypes.from_short_name(s)
    except KeyError:
        pass
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        pass
    try:
        return complex(s)
    except ValueError:
        raise ValueError(f"could not convert {s!r} to a number") from None


class Opaque:
    """A parameter printed as `<name>` (a custom_vjp's bwd function): the parsed program
    propagates and lowers, and whatever needs the object itself says why it is absent."""

    def __init__(self, name):
        object.__setattr__(self, "name", name)

    def __repr__(self):
        return f"<{self.name}>"

    def __getattr__(self, attr):
        if attr.startswith("__"):       # (copy, pickle and hasattr probe these)
            raise AttributeError(attr)
        from ..errors import ShardcError
        raise ShardcError(f"the IR text names the Python object <{self.name}> but cannot "
                          "hold it (a custom_vjp's backward function): transform the "
                          "traced function instead of the parsed text")


def _callback(text):
    """A named callback (see program.named_callback): 'dots_saveable' or
    'save_only_these_names('a', 'b')'."""
    name, paren, args = text.partition("(")
    fn = NAMED_CALLBACKS.get(name.strip())
    if fn is None:
        raise ValueError(f"unknown callback {name.strip()!r} (known: "
                         f"{', '.join(sorted(NAMED_CALLBACKS)) or 'none'})")
    if not paren:
        return fn
    if not args.endswith(")"):
        raise ValueError(f"bad callback {text!r}")
    return fn(*parse_value("(" + args[:-1] + ",)" if args[:-1].strip() else "()"))


def _parse_params(s: str) -> dict:
    out = {}
    for item in _split_top(s):
        k, v = item.split("=", 1)
        out[k.strip()] = parse_value(v)
    return out


def _operand(text, env, lineno, raw=""):
    text = text.strip()
    if text.startswith("%"):
        if text[1:] not in env:
            raise _err(f"use of undefined value {text}", lineno, _col(raw, text))
        return env[text[1:]]
    val, ty = text.rsplit(":", 1)
    aval = parse_type(ty + ("[]" if not ty.endswith("]") else ""))
    v = parse_value(val)
    return Lit(dtypes_cast(v, aval.dtype), aval)


def dtypes_cast(v, dtype):
    if dtype == dtypes.bool_:
        return bool(v)
    if dtypes.is_complex(dtype):
        return complex(v)
    return int(v) if dtypes.is_int(dtype) else float(v)


def parse_program(text: str) -> Program:
    """Parse IR text into a Program (shardings and locations included). Any mistake in
    the text is a ParseError naming its line and column. The IR line of each op is in
    `program.meta["ir_lines"]` (op -> line), for errors found later (the verifier's)."""
    lines = [(i + 1, _uncomment(ln).rstrip()) for i, ln in enumerate(text.splitlines())]
    lines = [(n, ln) for n, ln in lines if ln.strip()]
    cur = [lines[0] if lines else (1, "")]      # the line being parsed, for errors
    try:
        return _parse_program(lines, cur)
    except ParseError:
        raise
    except ShardcError as e:     # a bad sharding, say
        raise _err(e.message, cur[0][0], _col(cur[0][1], None)) from None
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
        raise _malformed(e, *cur[0]) from None


def _parse_program(lines, cur) -> Program:
    mesh = None
    pos = 0
    if lines and lines[0][1].startswith("mesh "):
        body = lines[0][1][len("mesh "):].strip()
        mesh = parse_value(body)
        if not isinstance(mesh, MeshShape):
            raise _err("expected a mesh like 'mesh <x=2, y=4>'", lines[0][0])
        if any(n < 1 for _, n in mesh.axes) or len(set(mesh.names)) != len(mesh.names):
            raise _err(f"bad mesh {mesh}: axis sizes must be positive, names distinct",
                       lines[0][0], _col(lines[0][1], "<"))
        pos = 1
    if pos >= len(lines):
        raise _err("expected 'func @name(...) -> (...) {'", lines[-1][0] if lines else 1)
    lineno, head = cur[0] = lines[pos]
    m = re.match(r"^func @([\w.]+)\((.*)\) -> \((.*)\) \{$", head.strip())
    if not m:
        raise _err("expected 'func @name(...) -> (...) {'", lineno, _col(head, None))
    prog = Program(m.group(1), mesh=mesh)
    prog.meta["ir_lines"] = {}
    ex = mesh is not None and bool(mesh.explicit)
    env: dict[str, Value] = {}
    in_memory = []
    for decl in _split_top(m.group(2)):
        decl, kind = _memory(decl)
        in_memory.append(kind)
        name, aval, sh = _typed_decl(decl, ex)
        _define(env, name, lineno, head)
        v = Value(aval, sh, name=name)
        env[name] = v
        prog.inputs.append(v)
    out_decls = _split_top(m.group(3))
    pos = _parse_body(prog, lines, pos + 1, env, cur, prog.meta["ir_lines"], ex)
    if pos != len(lines):
        raise _err("text after the end of the function", lines[pos][0])
    cur[0] = (lineno, head)
    prog.out_shardings = []
    out_memory = []
    for d in out_decls:
        d, kind = _memory(d)
        out_memory.append(kind)
        mm = _TYPE_RE.match(d)
        if not mm:
            raise _err(f"bad result type {d!r}", lineno, _col(head, d))
        parse_type(mm.group(1))
        _, _, sh = _typed_decl(f"%r: {d}", ex)
        prog.out_shardings.append(sh)
    if len(prog.out_shardings) != len(prog.outputs):
        raise _err(f"the function declares {len(prog.out_shardings)} results but returns "
                   f"{len(prog.outputs)}", lineno, _col(head, "->"))
    if any(in_memory) or any(out_memory):
        prog.meta["in_memory"] = in_memory
        # jit's meta: device memory is None, and a result moved there is marked moved
        prog.meta["out_memory"] = [None if k == "device" else k for k in out_memory]
        prog.meta["out_moved"] = [k == "device" for k in out_memory]
    return prog


def _memory(decl):
    """'%x: f32[2] [{a}] memory=pinned_host' -> ('%x: f32[2] [{a}]', 'pinned_host')"""
    m = _MEMORY_RE.search(decl)
    return (decl, None) if m is None else (decl[:m.start()], m.group(1))


def _define(env, name, lineno, raw):
    if name in env:
        raise _err(f"value %{name} defined twice (each value is assigned once)", lineno,
                   _col(raw, f"%{name}"))


def _parse_body(prog, lines, pos, env, cur, ir_lines, ex):
    """Parse ops until the closing '}' of this block; returns the position after it."""
    while pos < len(lines):
        lineno, raw = cur[0] = lines[pos]
        line = raw.strip()
        pos += 1
        if line == "}":
            return pos
        if line.startswith("^("):
            return pos - 1   # next region of the enclosing op
        if line.startswith("return"):
            names = line[len("return"):].strip()
            prog.outputs = [_operand(x, env, lineno, raw) for x in _split_top(names)] \
                if names else []
            continue
        pos = _parse_op(prog, line, lineno, lines, pos, env, cur, ir_lines, ex)
    raise _err("missing '}' (is the text cut short?)", lines[-1][0] if lines else 1,
               len(lines[-1][1]) + 1 if lines else 1)


def _parse_op(prog, line, lineno, lines, pos, env, cur, ir_lines, ex):
    raw = lines[pos - 1][1]
    opens_region = line.endswith("{") and not line.endswith("{}")
    if opens_region:
        line = line[:-1].rstrip()
    results = []
    if line.startswith("%"):
        lhs, eq, line = line.partition(" = ")
        if not eq:
            raise _err("expected '%name: type = op(...)'", lineno, _col(raw, None))
        results = [_typed_decl(d, ex) for d in _split_top(lhs)]
        for name, _, _ in results:
            _define(env, name, lineno, raw)
    loc = UNKNOWN
    lm = _LOC_RE.search(line)
    if lm:
        scope = _unquote(lm.group(1))
        file, line_no, lib_file, lib_line = lm.groups()[1:5] if scope is not None else \
            lm.groups()[5:9]
        lib = Loc(_unquote(lib_file), int(lib_line)) if lib_file is not None else None
        loc = Loc(_unquote(file), int(line_no), lib, scope)
        line = line[:lm.start()]
    paren = line.find("(")
    if paren < 0:
        raise _err("expected an op like 'exp(%a)'", lineno, _col(raw, line.strip()))
    prim_name = line[:paren].strip()
    if prim_name not in PRIMITIVES:
        raise _err(f"unknown op {prim_name!r}", lineno, _col(raw, prim_name))
    end = _match(line, paren)
    operands = [_operand(x, env, lineno, raw) for x in _split_top(line[paren + 1:end - 1])]
    rest = line[end:].strip()
    params = _parse_params(rest[1:-1]) if rest.startswith("{") else {}
    outs = [Value(aval, sh) for _, aval, sh in results]
    regions = []
    while opens_region:
        if pos >= len(lines):
            raise _err(f"missing '}}' closing the op {prim_name} (is the text cut short?)",
                       lineno, _col(raw, prim_name))
        lineno2, rline = cur[0] = lines[pos]
        rline = rline.strip()
        if rline == "}":
            pos += 1
            break
        if not rline.startswith("^("):
            raise _err("expected a region '^(...):'", lineno2)
        region = Program(f"{prim_name}_region")
        for decl in _split_top(rline[2:rline.rindex(")")]):
            name, aval, sh = _typed_decl(decl, ex)
            _define(env, name, lineno2, rline)
            v = Value(aval, sh, name=name)
            env[name] = v
            region.inputs.append(v)
        pos = _parse_body(region, lines, pos + 1, env, cur, ir_lines, ex)
        regions.append(region)
        if pos < len(lines) and lines[pos - 1][1].strip() == "}":
            break
    op = Op(PRIMITIVES[prim_name], operands, outs, params, loc, regions)
    prog.ops.append(op)
    ir_lines[op] = lineno
    for (name, _, _), v in zip(results, outs):
        env[name] = v
    return pos
