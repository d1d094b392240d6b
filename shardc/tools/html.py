"""Notebook views (`_repr_html_`): the IR with each mesh axis in its own colour and
each value's provenance beside it; layouts as grids of device tiles (any rank: the
last two dims are rows and columns, leading dims give small multiples); the report.

Plain HTML with inline styles (no scripts), so it renders in Jupyter, VS Code and
static exports alike.
"""
from __future__ import annotations

import html as _html
import itertools
import re

import numpy as np

AXIS_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf",
               "#8c564b", "#e377c2")
TILE_COLORS = ("#dbe9f6", "#fde0c5", "#d9f0d3", "#e8dff5", "#fbe3e8", "#d5f0f0",
               "#f3ecd1", "#e6e6e6", "#cfe3c9", "#f6d8d8", "#dcd6ef", "#fff2b3")
_BOX = ("font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;"
        "font-size:12px;line-height:1.45")
_MAX_PANELS = 16


def esc(s) -> str:
    return _html.escape(str(s), quote=True)


def axis_colors(names) -> dict:
    """{axis name: colour}, in mesh order."""
    return {n: AXIS_COLORS[i % len(AXIS_COLORS)] for i, n in enumerate(names)}


def _axis_span(name, colors, text=None):
    c = colors.get(name)
    t = esc(text if text is not None else name)
    return f'<span style="color:{c};font-weight:600">{t}</span>' if c else t


def color_axes(escaped: str, colors: dict) -> str:
    """Colour mesh axis names inside sharding braces `{data, model:(1)2}` of a line
    that is already HTML-escaped; parameter blocks (`{k=v}`) are left alone."""
    def group(m):
        body = re.sub(r"\b(\w+)((?::\(\d+\)\d+)?)",
                      lambda a: _axis_span(a.group(1), colors, a.group(0))
                      if a.group(1) in colors else a.group(0), m.group(1))
        return "{" + body + "}"
    return re.sub(r"\{([^{}=]*)\}", group, escaped)


def legend(mesh_axes) -> str:
    colors = axis_colors([n for n, _ in mesh_axes])
    chips = " ".join(f'{_axis_span(n, colors)}<span style="opacity:.7">={s}</span>'
                     for n, s in mesh_axes)
    return f'<span style="{_BOX}">mesh &lt;{chips}&gt;</span>'


# ---------------------------------------------------------------- the IR


def ir_rows(text: str):
    """[(code line, [notes])] from printed IR; `// %v: note` lines attach above."""
    rows, tail = [], []
    for line in text.rstrip("\n").splitlines():
        s = line.strip()
        if s.startswith("//") and rows and not s.startswith("// conflict"):
            note = s[2:].strip()
            rows[-1][1].append(note)
        elif s.startswith("// conflict"):
            tail.append(s[2:].strip())
        else:
            rows.append((line, []))
    return rows, tail


def ir_html(text: str, mesh_axes, title=None) -> str:
    """Printed IR (with or without `.explain()` notes) as a coloured two-column table."""
    colors = axis_colors([n for n, _ in mesh_axes])
    rows, conflicts = ir_rows(text)
    has_notes = any(notes for _, notes in rows)
    out = [f'<div style="{_BOX}">']
    if title:
        out.append(f'<div style="font-weight:600;margin-bottom:4px">{esc(title)} '
                   f'&nbsp; {legend(mesh_axes)}</div>')
    out.append('<div style="overflow-x:auto"><table style="border-collapse:collapse">')
    if has_notes:
        out.append('<tr style="font-size:12px"><th style="text-align:left">IR</th>'
                   '<th style="text-align:left;padding-left:16px;min-width:360px">'
                   'why: where each sharding came from &lt;- the ops it went through'
                   '</th></tr>')
    code_td = 'style="white-space:pre;text-align:left;padding:0 4px;vertical-align:top"'
    note_td = ('style="text-align:left;padding:0 4px 0 16px;color:#555;vertical-align:top;'
               'font-size:11px;min-width:360px;white-space:normal"')
    for code, notes in rows:
        code_html = color_axes(esc(code), colors)
        if code.startswith("mesh <"):
            code_html = re.sub(r"\b(\w+)=", lambda m: _axis_span(m.group(1), colors) + "=",
                               esc(code))
        tip = esc(" | ".join(notes)) if notes else ""
        notes_html = [color_axes(esc(n), colors) for n in notes]
        if code.lstrip().startswith("func @") or not has_notes:
            # the signature is long: give it the whole row, its notes a row each
            span = ' colspan="2"' if has_notes else ""
            out.append(f'<tr title="{tip}"><td {code_td}{span}>{code_html}</td></tr>')
            out += [f'<tr><td {code_td}></td><td {note_td}>{n}</td></tr>' for n in notes_html]
            continue
        out.append(f'<tr title="{tip}"><td {code_td}>{code_html}</td>'
                   f'<td {note_td}>{"<br>".join(notes_html)}</td></tr>')
    out.append("</table></div>")
    for c in conflicts:
        out.append(f'<div style="color:#b35900">{color_axes(esc(c), colors)}</div>')
    out.append("</div>")
    return "".join(out)


# ---------------------------------------------------------------- device tiles


def _label(ids):
    if len(ids) > 2 and ids == list(range(ids[0], ids[-1] + 1)):
        return f"{ids[0]}–{ids[-1]}"
    return ",".join(map(str, ids))


def _panel(tiles, rows_dim, cols_dim, lead, colors, size=(220, 140)):
    """One CSS grid: tiles whose leading-dim bounds are `lead`."""
    sel = {t: d for t, d in tiles.items() if t[:len(lead)] == lead}

    def bounds(dim):
        return [(0, 1)] if dim is None else sorted({t[dim] for t in sel})
    rows, cols = bounds(rows_dim), bounds(cols_dim)
    fr = lambda bs: " ".join(f"{max(b - a, 1)}fr" for a, b in bs)  # noqa: E731
    w = size[0] if cols_dim is not None else 60
    h = size[1] if rows_dim is not None else 36
    cells = []
    for r in rows:
        for c in cols:
            devs = sorted({d for t, ds in sel.items() for d in ds
                           if (rows_dim is None or t[rows_dim] == r)
                           and (cols_dim is None or t[cols_dim] == c)})
            bg = colors.get(tuple(devs), "#eee")
            tip = []
            if rows_dim is not None:
                tip.append(f"dim {rows_dim}: {r[0]}:{r[1]}")
            if cols_dim is not None:
                tip.append(f"dim {cols_dim}: {c[0]}:{c[1]}")
            cells.append(f'<div title="devices {esc(_label(devs))}; {esc(", ".join(tip))}" '
                         f'style="background:{bg};border:1px solid #fff;display:flex;'
                         f'align-items:center;justify-content:center;overflow:hidden;'
                         f'font-size:11px;color:#222">{esc(_label(devs))}</div>')
    return (f'<div style="display:grid;grid-template-columns:{fr(cols)};'
            f'grid-template-rows:{fr(rows)};width:{w}px;height:{h}px;'
            f'border:1px solid #999">{"".join(cells)}</div>')


def tiles_html(shape, sharding, caption=None) -> str:
    """The device tiles of an array of `shape` under a jax `sharding`, any rank."""
    from .debug import device_tiles
    shape = tuple(int(n) for n in shape)
    tiles = device_tiles(shape, sharding)
    sets = sorted({tuple(v) for v in tiles.values()})
    colors = {s: TILE_COLORS[i % len(TILE_COLORS)] for i, s in enumerate(sets)}
    rank = len(shape)
    rows_dim = rank - 2 if rank >= 2 else None
    cols_dim = rank - 1 if rank >= 1 else None
    lead_dims = list(range(rank - 2)) if rank > 2 else []
    combos = list(itertools.product(*[sorted({t[d] for t in tiles}) for d in lead_dims]))
    small = len(combos) > 1
    size = (220, 140) if not small else (120, 80)
    panels = []
    for combo in combos[:_MAX_PANELS]:
        grid = _panel(tiles, rows_dim, cols_dim, tuple(combo), colors, size)
        label = ", ".join(f"[{a}:{b}]" for a, b in combo)
        cap = f'<div style="font-size:10px;color:#555">dims {esc(lead_dims)} = {esc(label)}</div>' \
            if combo else ""
        panels.append(f'<div style="margin:0 6px 6px 0">{cap}{grid}</div>')
    if len(combos) > _MAX_PANELS:
        panels.append(f'<div style="align-self:center">… {len(combos) - _MAX_PANELS} '
                      'more panels</div>')
    if caption is None:
        caption = summary(shape, sharding)
    return (f'<div style="{_BOX};display:inline-block;margin:4px 12px 8px 0;'
            f'vertical-align:top"><div>{caption}</div>'
            f'<div style="display:flex;flex-wrap:wrap">{"".join(panels)}</div></div>')


def summary(shape, sharding) -> str:
    """'shape (64, 256) · P('data', None) · per device (32, 256)' (HTML-escaped)."""
    spec = getattr(sharding, "spec", None)
    try:
        local = sharding.shard_shape(tuple(shape))
    except Exception:
        local = None
    mesh = getattr(sharding, "mesh", None)
    colors = axis_colors(mesh.axis_names) if mesh is not None else {}
    spec_html = esc(spec if spec is not None else type(sharding).__name__)
    for n, c in colors.items():
        spec_html = spec_html.replace(f"&#x27;{n}&#x27;", _axis_span(n, colors, f"'{n}'"))
    parts = [f"<b>{esc(tuple(shape))}</b>", spec_html]
    if local is not None:
        parts.append(f"per device {esc(tuple(local))}")
    return " · ".join(parts)


def sharding_tiles_html(sharding) -> str:
    """A sharding without an array: one tile per shard of each dimension."""
    spec = getattr(sharding, "spec", ())
    mesh = sharding.mesh
    shape = []
    for e in spec:
        axes = () if e is None else (e,) if isinstance(e, str) else tuple(e)
        shape.append(int(np.prod([mesh.shape[a] for a in axes], dtype=np.int64)))
    cap = f"{type(sharding).__name__} · {summary(shape, sharding).split(' · ')[1]} · " \
          f"mesh {esc(dict(mesh.shape))}"
    return tiles_html(tuple(shape), sharding, caption=cap)


# ---------------------------------------------------------------- stages


def _values_tiles(traced, limit=8) -> str:
    p, mesh = traced.program, traced.mesh
    if mesh.mesh is None:
        return ""
    items = [(f"%{v.name}", v.aval.shape, v.sharding) for v in p.inputs]
    items += [(f"result {i}", v.aval.shape, s)
              for i, (v, s) in enumerate(zip(p.outputs, p.out_shardings))]
    out = []
    for label, shape, sh in items[:limit]:
        if sh is None:
            continue
        named = mesh.named(sh)
        out.append(tiles_html(shape, named, caption=f"<b>{esc(label)}</b> "
                              + summary(shape, named)))
    more = f"<div>… {len(items) - limit} more</div>" if len(items) > limit else ""
    return "<div>" + "".join(out) + more + "</div>"


def traced_html(traced) -> str:
    axes = traced.mesh.shape.axes
    body = ir_html(traced.explain(), axes, title=f"@{traced.program.name}: traced and "
                   "propagated")
    tiles = _details("device tiles of arguments and results", _values_tiles(traced), True)
    return f"<div>{body}{tiles}</div>"


def _details(summary_text, inner, open_=False) -> str:
    return (f'<details{" open" if open_ else ""}><summary style="{_BOX};cursor:pointer">'
            f'{esc(summary_text)}</summary>{inner}</details>')


def _pre(text, colors=None) -> str:
    """Preformatted text; quoted mesh axis names (`"data"`, as in sdy) coloured."""
    t = esc(text)
    for n in colors or {}:
        t = t.replace(f"&quot;{n}&quot;", _axis_span(n, colors, f'"{n}"'))
    return f'<pre style="{_BOX};white-space:pre;overflow-x:auto">{t}</pre>'


def lowered_html(lowered) -> str:
    traced = lowered.traced
    colors = axis_colors(traced.mesh.shape.names)
    return (f'<div><div style="{_BOX};font-weight:600">@{esc(traced.program.name)}: '
            f'StableHLO with Shardy shardings &nbsp; {legend(traced.mesh.shape.axes)}</div>'
            f'{_pre(lowered.as_text(), colors)}'
            f'{_details("shardc IR (with provenance)", traced_html(traced))}</div>')


def compiled_html(compiled) -> str:
    from .report import report
    r = report(compiled)
    return (f"<div>{report_html(r)}"
            f"{_details('partitioned HLO (XLA)', _pre(compiled.as_text()))}</div>")


def report_html(r) -> str:
    """The report's tables: ops (with the collectives each line caused), collectives,
    per-device memory and cost."""
    from .report import _times, fmt_bytes, hlo_short_type, where_text
    colors = axis_colors([n for n, _ in r.mesh])
    th = 'style="text-align:left;padding:1px 8px;border-bottom:1px solid #999"'
    td = 'style="text-align:left;padding:1px 8px;white-space:nowrap"'

    def table(head, rows):
        h = "".join(f"<th {th}>{esc(x)}</th>" for x in head)
        b = "".join("<tr>" + "".join(f"<td {td}>{c}</td>" for c in row) + "</tr>"
                    for row in rows)
        return f'<table style="border-collapse:collapse">{"<tr>" + h + "</tr>"}{b}</table>'

    def axes_html(axes):
        return "{" + ", ".join(_axis_span(a.split(":")[0], colors, a) for a in axes) + "}"

    def where(loc):
        return esc(where_text(loc))
    ops = [(esc(o.name), esc(o.op), esc(o.type), color_axes(esc(o.sharding), colors),
            esc(o.local), esc(fmt_bytes(o.bytes)), where(o.loc),
            ", ".join(f'<span style="color:#b30000">{esc(c.kind)}</span>{axes_html(c.axes)}'
                      f'{esc(_times(c))}' for c in o.collectives)) for o in r.rows]
    looped = any(c.loops for c in r.collectives)    # then a column: how often each runs
    colls = [(f'<span style="color:#b30000">{esc(c.kind)}</span>', esc(hlo_short_type(c.type)),
              esc(fmt_bytes(c.bytes)), axes_html(c.axes), where(c.loc), esc(c.op),
              esc("%" + c.name)) + ((esc(c.per_iteration() or "once"),) if looped else ())
             for c in r.collectives]
    total = sum(c.bytes for c in r.collectives)
    parts = [f'<div style="{_BOX}"><div style="font-weight:600">@{esc(r.name)} &nbsp; '
             f'{legend(r.mesh)}</div>',
             table(("value", "op", "type", "sharding", "per device", "bytes", "line",
                    "collectives"), ops),
             f'<div style="margin-top:6px;font-weight:600">collectives XLA inserted: '
             f'{len(colls)}{f" ({esc(fmt_bytes(total))} per device)" if colls else ""}</div>']
    if colls:
        parts.append(table(("collective", "type", "bytes", "mesh axes", "line", "op", "hlo") +
                           (("runs",) if looped else ()), colls))
    if r.memory:
        parts.append("<div>memory per device: " + esc(", ".join(
            f"{k.replace('_', ' ')} {fmt_bytes(v)}" for k, v in r.memory.items())) + "</div>")
    if r.cost:
        parts.append("<div>cost per device: " + esc(", ".join(
            f"{k} {v:.4g}" for k, v in r.cost.items())) + "</div>")
    if r.auto is not None:
        from .autoreport import parts as auto_parts
        title, rows, notes = auto_parts(r.auto, fmt_bytes)
        parts += [f'<div style="margin-top:6px;font-weight:600">{esc(title)}</div>',
                  table(rows[0], [[esc(x) for x in row] for row in rows[1:]])]
        parts += [f"<div>{esc(n)}</div>" for n in notes]
    parts.append("</div>")
    return "".join(parts)


def _install():
    """Notebook views of jit's stages (the API layer knows nothing of HTML)."""
    from ..api.jit import Compiled, Lowered, Propagated, Traced
    Traced._repr_html_ = traced_html
    Propagated._repr_html_ = traced_html
    Lowered._repr_html_ = lowered_html
    Compiled._repr_html_ = compiled_html


_install()
