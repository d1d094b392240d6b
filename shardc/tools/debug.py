"""Seeing shardings: inspect inside jit, and draw which devices hold which tile."""
from __future__ import annotations

import itertools

import jax
import numpy as np

from ..trace import core
from ..ops.special import inspect_sharding_p


def inspect_array_sharding(x, *, callback):
    """Call `callback(sharding)` with the sharding shardc decides for `x`.

    Inside shardc.jit it is called once, when the program is compiled; outside, now."""
    if core.is_tracer(x):
        inspect_sharding_p.bind(x, callback=callback)
        return None
    callback(x.sharding)
    return None


def device_tiles(shape, sharding):
    """{tile ((start, stop) per dim): sorted device ids} for every tile of the array."""
    tiles = {}
    for dev, idx in sharding.devices_indices_map(tuple(shape)).items():
        key = tuple((s.start or 0, s.stop if s.stop is not None else n)
                    for s, n in zip(idx, shape))
        tiles.setdefault(key, []).append(dev.id)
    return {k: sorted(v) for k, v in tiles.items()}


def _grid(tiles, shape, lead_key, rows_dim, cols_dim):
    """Cell text per (row tile, col tile) of one 2-D panel."""
    def bounds(d):
        if d is None:
            return [(0, 1)]
        return sorted({t[d] for t in tiles})
    rows, cols = bounds(rows_dim), bounds(cols_dim)
    cells = []
    for r in rows:
        line = []
        for c in cols:
            devs = []
            for t, ds in tiles.items():
                if lead_key is not None and t[:len(lead_key)] != lead_key:
                    continue
                if rows_dim is not None and t[rows_dim] != r:
                    continue
                if cols_dim is not None and t[cols_dim] != c:
                    continue
                devs += ds
            line.append(_label(sorted(set(devs))))
        cells.append(line)
    return cells


def _label(ids):
    if len(ids) > 2 and ids == list(range(ids[0], ids[-1] + 1)):
        return f"{ids[0]}-{ids[-1]}"
    return ",".join(map(str, ids))


def _box(cells, width):
    ncols = len(cells[0])
    top = "┌" + "┬".join("─" * width for _ in range(ncols)) + "┐"
    mid = "├" + "┼".join("─" * width for _ in range(ncols)) + "┤"
    bot = "└" + "┴".join("─" * width for _ in range(ncols)) + "┘"
    out = [top]
    for i, row in enumerate(cells):
        out.append("│" + "│".join(c.center(width) for c in row) + "│")
        out.append(mid if i < len(cells) - 1 else bot)
    return out


def sharding_diagram(shape, sharding) -> str:
    """Text drawing of the tiles of an array of `shape` under `sharding`, any rank.

    The last two dims are rows and columns; each combination of tiles of the leading
    dims is one panel (small multiples)."""
    shape = tuple(shape)
    tiles = device_tiles(shape, sharding)
    rank = len(shape)
    rows_dim = rank - 2 if rank >= 2 else None
    cols_dim = rank - 1 if rank >= 1 else None
    lead = list(range(rank - 2)) if rank > 2 else []
    header = f"{sharding_summary(shape, sharding)}"
    width = 3 + max(len(_label(sorted(ds))) for ds in tiles.values())
    lines = [header]
    lead_tiles = [sorted({t[d] for t in tiles}) for d in lead]
    for combo in itertools.product(*lead_tiles) if lead else [None]:
        cells = _grid(tiles, shape, tuple(combo) if combo is not None else None,
                      rows_dim, cols_dim)
        if combo is not None:
            where = ", ".join(f"dim {d}: {a}:{b}" for d, (a, b) in zip(lead, combo))
            lines.append(f"[{where}]")
        lines += _box(cells, width)
    return "\n".join(lines)


def sharding_summary(shape, sharding) -> str:
    spec = getattr(sharding, "spec", None)
    return f"shape {tuple(shape)}, {spec if spec is not None else sharding}"


def visualize_sharding(shape, sharding, *, file=None):
    """Print which devices hold which tile (any rank; no extra package needed);
    `sharding_diagram` returns the same text."""
    print(sharding_diagram(shape, sharding), file=file)


def visualize_array_sharding(arr, **kwargs):
    return visualize_sharding(arr.shape, arr.sharding, **kwargs)


_ = (jax, np)


# ---------------------------------------------------------------- notebooks


class Layout:
    """How an array is laid out over devices; shows as device tiles in notebooks."""

    def __init__(self, shape, sharding):
        self.shape, self.sharding = shape, sharding

    def __repr__(self):
        if self.shape is None:
            return repr(self.sharding)
        return sharding_diagram(self.shape, self.sharding)

    def _repr_html_(self):
        from . import html
        if self.shape is None:
            return html.sharding_tiles_html(self.sharding)
        return html.tiles_html(self.shape, self.sharding)


def layout(x, sharding=None) -> Layout:
    """A displayable layout: of a jax.Array, of a shape with a `sharding`, or of a
    NamedSharding alone (one tile per shard). Any rank: leading dims become small
    multiples. In a notebook, `shardc.debug.layout(x)` draws the tiles."""
    if sharding is None and isinstance(x, jax.sharding.NamedSharding):
        return Layout(None, x)
    if sharding is None:
        return Layout(tuple(x.shape), x.sharding)
    return Layout(tuple(x), sharding)


def html_formatters(ipython=None) -> bool:
    """Draw every jax.Array and NamedSharding a notebook cell returns as device tiles
    (IPython's HTML formatter; their text form is kept). False outside IPython."""
    if ipython is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        ipython = get_ipython()
    if ipython is None:
        return False
    import html
    fmt = ipython.display_formatter.formatters["text/html"]
    fmt.for_type(jax.Array, lambda a: layout(a)._repr_html_() + "<pre>"
                 + html.escape(repr(a)) + "</pre>")
    fmt.for_type(jax.sharding.NamedSharding, lambda s: layout(s)._repr_html_())
    return True
