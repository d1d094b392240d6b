"""XLA's own Shardy as a propagation oracle.

Lower a shardc program with only its *sources* annotated (arguments, constraints,
fixed results), let XLA's Shardy propagate, and read back the result shardings."""
from jax._src.lib import xla_client as xc

from shardc.runtime import backend as runtime
from shardc.lower.emit import lower


def hlo_sharding(sh, rank, mesh):
    """shardc's Sharding as an HloSharding over the mesh's devices in order, sub-axes
    included (a NamedSharding cannot say y:(1)2, so jax's conversion would drop them)."""
    import numpy as np
    if sh is None or rank == 0 or not any(sh.dims):
        return xc.HloSharding.replicate()
    refs = [[(a, 1, mesh.sizes[a]) if isinstance(a, str) else (a.name, a.pre, a.size)
             for a in d] for d in sh.dims]
    # split each mesh axis into pieces at every sub-axis boundary (major piece first)
    cuts = {n: {1, s} for n, s in mesh.axes}
    for d in refs:
        for n, pre, size in d:
            cuts[n] |= {pre, pre * size}
    pieces, shape = [], []          # pieces: (axis, pre, size), in device-array order
    for n, s in mesh.axes:
        bounds = sorted(cuts[n])
        for lo, hi in zip(bounds, bounds[1:]):
            pieces.append((n, lo, hi // lo))
            shape.append(hi // lo)
    devices = np.arange(mesh.size).reshape(shape)
    order, tiles = [], []
    for d in refs:
        n_tile = 1
        for n, pre, size in d:
            for k, (pn, ppre, psize) in enumerate(pieces):
                if pn == n and pre <= ppre and ppre * psize <= pre * size:
                    order.append(k)
            n_tile *= size
        tiles.append(n_tile)
    rest = [k for k in range(len(pieces)) if k not in order]
    rep = int(np.prod([pieces[k][2] for k in rest])) if rest else 1
    arr = devices.transpose(order + rest).reshape(tiles + ([rep] if rep > 1 else []))
    op = xc.OpSharding()
    op.type = xc.OpSharding.Type.OTHER
    op.tile_assignment_dimensions = list(arr.shape)
    op.tile_assignment_devices = [int(x) for x in arr.flat]
    op.replicate_on_last_tile_dim = rep > 1
    return xc.HloSharding.from_proto(op)


def shardy_result_shardings(traced):
    """[(shardc's HloSharding, Shardy's HloSharding)] for each result of a Traced."""
    text = lower(traced.program, sources_only=True)
    exe = runtime.compile(text, traced.mesh.devices)
    pairs = []
    for o, s, v in zip(exe.get_output_shardings(), traced.program.out_shardings,
                       traced.program.outputs):
        ours = hlo_sharding(s, v.aval.ndim, traced.program.mesh)
        pairs.append((ours, xc.HloSharding.from_proto(o)))
    return pairs


def shardy_for_text(ir_text):
    """Propagate IR text with shardc and with XLA; returns the result-sharding pairs."""
    import shardc
    from shardc.propagate import passes
    from shardc.runtime.meshes import MeshInfo
    from shardc.ir.parse import parse_program

    class _T:
        pass
    p = parse_program(ir_text)
    passes.prepare(p)
    passes.propagate(p)
    t = _T()
    t.program = p
    t.mesh = MeshInfo(shardc.make_mesh([s for _, s in p.mesh.axes], p.mesh.names,
                                       axis_types=(shardc.AxisType.Auto,) * len(p.mesh.names)))
    return shardy_result_shardings(t)
