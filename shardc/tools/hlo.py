"""Read XLA's HLO text: instructions, their shapes and bytes, device groups, source lines.

`parse(text)` gives a Module of Instrs (every computation, entry marked). Shapes are
HLO types (`f32[32,256]{1,0}`, tuples `(f32[2], s32[])`); `type_bytes` sizes them.
`device_groups(instr)` expands any replica-group spelling XLA prints (explicit lists,
iota `[2,4]<=[8]`, mesh axes `mesh['a'=2,'b'=4] {'b'}`) to lists of partition ids.
`Module.loc(instr)` is the user's source line from the op metadata (the StackFrames
table, or source_file/source_line), if lowering carried one.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

_BYTES = {"pred": 1, "s2": 1, "u2": 1, "s4": 1, "u4": 1, "s8": 1, "u8": 1,
          "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4, "u32": 4, "f32": 4,
          "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16, "token": 0}
_ARRAY_RE = re.compile(r"\b([a-z]+[0-9]*(?:e\d+m\d+\w*)?)\[([^\]]*)\]")


@dataclass
class Instr:
    """One HLO instruction: `name = type opcode(operands), attrs`."""
    name: str
    opcode: str
    type: str
    operands: list
    attrs: str
    computation: str
    entry: bool
    metadata: dict = field(default_factory=dict)


class Module:
    """All instructions of an HLO module, by name and in order, with source locations."""

    def __init__(self, instrs, frames):
        self.instrs = instrs
        self.by_name = {i.name: i for i in instrs}
        self._frames = frames

    def loc(self, instr):
        """(file, line) of the user code the instruction came from, or None."""
        md = instr.metadata
        if "source_file" in md and "source_line" in md:
            return md["source_file"], int(md["source_line"])
        fid = md.get("stack_frame_id")
        return self._frames.get(int(fid)) if fid is not None else None


# ---------------------------------------------------------------- shapes


def array_types(type_text: str):
    """[(dtype, dims)] for each array in an HLO type (a tuple gives several)."""
    out = []
    for dt, dims in _ARRAY_RE.findall(type_text):
        shape = tuple(int(d.lstrip("<=")) for d in dims.split(",") if d.strip())
        out.append((dt, shape))
    return out


def dtype_bytes(dt: str) -> int:
    if dt in _BYTES:
        return _BYTES[dt]
    m = re.match(r"f(\d+)", dt)   # f8e4m3fn, f8e5m2, ...
    return max(1, int(m.group(1)) // 8) if m else 4


def type_bytes(type_text: str) -> int:
    """Bytes of all arrays in an HLO type."""
    return sum(dtype_bytes(dt) * int(np.prod(shape, dtype=np.int64))
               for dt, shape in array_types(type_text))


# ---------------------------------------------------------------- parsing


def _close(s: str, i: int) -> int:
    """Index just past the bracket group that opens at s[i]."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    stack, quote = [], False
    for j in range(i, len(s)):
        ch = s[j]
        if ch == '"' and (j == 0 or s[j - 1] != "\\"):
            quote = not quote
        if quote:
            continue
        if ch in pairs:
            stack.append(pairs[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
            if not stack:
                return j + 1
    return len(s)


_INSTR_RE = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*")
_COMP_RE = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s*(?:\(.*\))?\s*(?:->.*)?\{\s*$")


def _parse_instr(line, comp, entry):
    m = _INSTR_RE.match(line)
    if not m:
        return None
    rest = line[m.end():]
    if rest.startswith("("):
        end = _close(rest, 0)
    else:
        end = rest.find(" ")
        if end < 0:
            return None
    ty, rest = rest[:end], rest[end:].lstrip()
    if rest.startswith("{"):                    # a layout after a tuple type, rare
        rest = rest[_close(rest, 0):].lstrip()
    paren = rest.find("(")
    if paren <= 0:
        return None
    opcode = rest[:paren].strip()
    close = _close(rest, paren)
    operands = [_operand_name(x) for x in _split(rest[paren + 1:close - 1])]
    attrs = rest[close:].lstrip(", ")
    return Instr(m.group(1), opcode, ty, [o for o in operands if o], attrs, comp, entry,
                 _metadata(attrs))


def _split(s):
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def _operand_name(tok):
    m = re.search(r"%([\w.\-]+)\s*$", tok)
    if m:
        return m.group(1)
    m = re.fullmatch(r"[\w.\-]+", tok.strip())
    return tok.strip() if m else None


def _metadata(attrs):
    i = attrs.find("metadata={")
    if i < 0:
        return {}
    body = attrs[i + len("metadata="):_close(attrs, i + len("metadata="))][1:-1]
    return {k: (v[1:-1] if v.startswith('"') else v)
            for k, v in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)', body)}


def _tables(text):
    """{stack frame id: (file, line)} from the FileNames/FileLocations/StackFrames tables."""
    files, locs, frames, section = {}, {}, {}, None
    for line in text.splitlines():
        s = line.strip()
        if s in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            section = s
            continue
        if not s or section is None:
            if not s:
                continue
            section = None
            continue
        m = re.match(r"^(\d+)\s+(.*)$", s)
        if not m:
            section = None
            continue
        key, body = int(m.group(1)), m.group(2)
        kv = dict(re.findall(r"(\w+)=(-?\d+)", body))
        if section == "FileNames":
            files[key] = body.strip().strip('"')
        elif section == "FileLocations":
            locs[key] = (int(kv.get("file_name_id", 0)), int(kv.get("line", 0)))
        elif section == "StackFrames":
            frames[key] = int(kv.get("file_location_id", 0))
    out = {}
    for fid, lid in frames.items():
        if lid in locs and locs[lid][0] in files:
            out[fid] = (files[locs[lid][0]], locs[lid][1])
    return out


def parse(text: str) -> Module:
    """Parse HLO module text (as `Compiled.as_text()` prints it)."""
    instrs, comp, entry = [], None, False
    for line in text.splitlines():
        if not line.strip() or line.startswith("HloModule"):
            continue
        if line.strip() == "}":
            comp = None
            continue
        if comp is None:
            m = _COMP_RE.match(line)
            if m and "=" not in line.split("(")[0]:
                comp, entry = m.group(2), bool(m.group(1))
            continue
        ins = _parse_instr(line, comp, entry)
        if ins is not None:
            instrs.append(ins)
    return Module(instrs, _tables(text))


# ---------------------------------------------------------------- device groups


def _attr(attrs, key):
    """The raw text of attribute `key=...` (bracket-balanced), or None."""
    m = re.search(rf"(?:^|[\s,]){re.escape(key)}=", attrs)
    if not m:
        return None
    i = m.end()
    if attrs.startswith("mesh[", i):
        j = _close(attrs, i + 4)
        dm = re.match(r",\s*device_ids=", attrs[j:])
        if dm:
            j = _close(attrs, j + dm.end())
        bm = re.match(r"\s*\{", attrs[j:])
        if bm:
            j = _close(attrs, j + bm.end() - 1)
        return attrs[i:j]
    if attrs[i] in "{[(":
        j = _close(attrs, i)
        im = re.match(r"<=\[[\d,]*\](?:T\([\d,]*\))?", attrs[j:])
        return attrs[i:j + (im.end() if im else 0)]
    j = attrs.find(",", i)
    return attrs[i:j if j >= 0 else len(attrs)]


def _ints(s):
    return [int(x) for x in re.findall(r"-?\d+", s)]


def _iota(dims_text, reshape_text, perm_text):
    reshape = _ints(reshape_text)
    arr = np.arange(int(np.prod(reshape, dtype=np.int64))).reshape(reshape)
    if perm_text:
        arr = arr.transpose(_ints(perm_text))
    return arr.reshape(_ints(dims_text))


def _mesh_groups(text):
    """Expand `mesh['a'=2,'b'=4](, device_ids=(...))? {'b', 'a':(1)2}` to groups."""
    m = re.match(r"mesh\[(.*?)\]", text)
    axes = [(n, int(s)) for n, s in re.findall(r"'?([\w.\-]+)'?=(\d+)", m.group(1))]
    names, sizes = [n for n, _ in axes], [s for _, s in axes]
    dm = re.search(r"device_ids=\((.*)\)\s*\{", text)
    if dm:
        im = re.fullmatch(r"\[([\d,]*)\](?:T\(([\d,]*)\))?", dm.group(1).strip())
        if im:
            ids = _iota(",".join(map(str, sizes)), im.group(1), im.group(2))
        else:
            ids = np.array(_ints(dm.group(1))[-int(np.prod(sizes)):]).reshape(sizes)
    else:
        ids = np.arange(int(np.prod(sizes))).reshape(sizes)
    body = text[text.rindex("{") + 1:text.rindex("}")]
    refs = []   # (axis index, pre, size) per grouped axis, in the printed order
    for name, pre, size in re.findall(r"'?([\w.\-]+)'?(?::\((\d+)\)(\d+))?", body):
        if not name or name not in names:
            continue
        k = names.index(name)
        refs.append((k, int(pre) if pre else 1, int(size) if size else sizes[k]))
    # Split each mesh dim into pieces (major first) so every grouped (sub-)axis is one.
    pieces, grouped = [], {}
    for k, n in enumerate(sizes):
        cuts = sorted((pre, size, r) for r, (kk, pre, size) in enumerate(refs) if kk == k)
        done = 1
        for pre, size, r in cuts:
            if pre > done:
                pieces.append(pre // done)
                done = pre
            grouped[r] = len(pieces)
            pieces.append(size)
            done *= size
        if done < n or not cuts:
            pieces.append(n // done)
    ids = ids.reshape(pieces)
    order = [grouped[r] for r in range(len(refs))]
    rest = [d for d in range(len(pieces)) if d not in order]
    per_group = int(np.prod([pieces[d] for d in order], dtype=np.int64))
    return ids.transpose(rest + order).reshape(-1, per_group).tolist()


def groups_from_text(text, num_devices):
    """Device groups from a printed replica_groups value."""
    text = text.strip()
    if text.startswith("mesh["):
        return _mesh_groups(text)
    m = re.fullmatch(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
    if m:
        return _iota(m.group(1), m.group(2), m.group(3)).tolist()
    groups = [_ints(g) for g in re.findall(r"\{([\d,\s]*)\}", text)]
    groups = [g for g in groups if g]
    return groups or [list(range(num_devices))]


def device_groups(instr, num_devices):
    """The groups of partition ids a collective runs over (all devices if none given)."""
    text = _attr(instr.attrs, "replica_groups")
    if text is None:
        return [list(range(num_devices))]
    return groups_from_text(text, num_devices)


def source_target_pairs(instr):
    text = _attr(instr.attrs, "source_target_pairs")
    if text is None:
        return []
    return [tuple(_ints(p)) for p in re.findall(r"\{(\d+\s*,\s*\d+)\}", text)]
