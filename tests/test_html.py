"""Notebook views: _repr_html_ of traced, lowered and compiled programs; device tiles of
arrays and shardings of any rank; the opt-in IPython formatters."""
import re

import numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
from shardc.tools import html
from shardc.debug import html_formatters, layout


def put(mesh, shape, spec):
    return shardc.device_put(np.ones(shape, np.float32), NamedSharding(mesh, spec))


def mlp(x, w1, w2):
    return shardc.nn.relu(x @ w1) @ w2


def tiles(markup):
    """Device labels of the tiles in a tiles_html drawing, in order."""
    return re.findall(r'<div title="devices ([^;"]*);', markup)


def test_stages_render_ir_provenance_and_report(mesh2x4):
    args = [put(mesh2x4, (16, 32), P("x", None)), put(mesh2x4, (32, 64), P(None, "y")),
            put(mesh2x4, (64, 32), P("y", None))]
    traced = shardc.jit(mlp).trace(*args)
    h = traced._repr_html_()
    x_span = f'<span style="color:{html.AXIS_COLORS[0]};font-weight:600">x</span>'
    y_span = f'<span style="color:{html.AXIS_COLORS[1]};font-weight:600">y</span>'
    # the IR, each axis in its colour, with the explain() provenance beside each value
    assert f"[{{{x_span}}}, {{{y_span}}}] = dot_general(%x, %w1)" in h
    assert "from argument w1 via dot_general@test_html.py:" in h
    assert 'title="%0: dim 0 {x} from argument x via dot_general@test_html.py:' in h
    # parameter blocks are not coloured as shardings
    assert "{contracting=((1,), (0,)), batch=((), ())}" in h
    # tiles of the 3 arguments and the result
    assert h.count("per device") == 4 and tiles(h)[:2] == ["0–3", "4–7"]

    lowered = traced.lower()
    h = lowered._repr_html_()
    assert "sdy.sharding" in h and f'{{<span style="color:{html.AXIS_COLORS[0]}' in h

    h = lowered.compile()._repr_html_()
    assert "collectives XLA inserted: 1" in h and ">all-reduce</span>" in h
    assert "partitioned HLO (XLA)" in h and "HloModule" in h


def test_layout_any_rank(mesh2x4):
    x = put(mesh2x4, (4, 8, 16), P("x", None, "y"))
    h = layout(x)._repr_html_()
    # two panels (dim 0 split in two), each one row of 4 column tiles
    assert h.count("dims [0] = ") == 2
    assert tiles(h) == ["0", "1", "2", "3", "4", "5", "6", "7"]
    assert "per device (2, 8, 4)" in h
    assert "dim 2: 12:16" in h
    text = repr(layout(x))
    assert text.startswith("shape (4, 8, 16)") and "[dim 0: 2:4]" in text

    # rank 4, both leading dims sharded: one small panel per (dim 0, dim 1) tile
    h4 = layout((2, 4, 3, 3), NamedSharding(mesh2x4, P("x", "y")))._repr_html_()
    assert h4.count("dims [0, 1] = ") == 8 and tiles(h4) == [str(i) for i in range(8)]
    assert "dims [0, 1] = [1:2], [3:4]" in h4

    assert tiles(layout((), NamedSharding(mesh2x4, P()))._repr_html_()) == ["0–7"]
    assert tiles(layout((8,), NamedSharding(mesh2x4, P(("x", "y"))))._repr_html_()) == \
        [str(i) for i in range(8)]


def test_sharding_alone_one_tile_per_shard(mesh2x4):
    h = layout(NamedSharding(mesh2x4, P("y", "x")))._repr_html_()
    assert h.startswith('<div') and "NamedSharding" in h
    assert tiles(h) == ["0", "4", "1", "5", "2", "6", "3", "7"]


def test_html_formatters_register_for_arrays_and_shardings(mesh2x4):
    class Formatter:
        def __init__(self):
            self.types = {}

        def for_type(self, t, f):
            self.types[t] = f

    class IPython:
        class display_formatter:
            formatters = {"text/html": Formatter()}

    assert html_formatters(IPython) is True
    fmt = IPython.display_formatter.formatters["text/html"]
    x = put(mesh2x4, (8, 8), P("x", "y"))
    h = fmt.types[type(x).__mro__[1]](x)
    assert tiles(h) == [str(i) for i in range(8)] and "Array(" in h
    assert html_formatters() is False          # not inside IPython
