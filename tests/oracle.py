"""XLA's own Shardy as a propagation oracle.

Lower a shardc program with only its *sources* annotated (arguments, constraints,
fixed results), let XLA's Shardy propagate, and read back the result shardings."""
from jax._src.lib import xla_client as xc

from shardc.runtime import backend as runtime
from shardc.lower.emit import lower


def shardy_result_shardings(traced):
    """[(shardc's HloSharding, Shardy's HloSharding)] for each result of a Traced."""
    text = lower(traced.program, sources_only=True)
    exe = runtime.compile(text, traced.mesh.devices)
    pairs = []
    for o, s, v in zip(exe.get_output_shardings(), traced.program.out_shardings,
                       traced.program.outputs):
        ours = traced.mesh.named(s)._to_xla_hlo_sharding(v.aval.ndim)
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
    t.mesh = MeshInfo(shardc.make_mesh([s for _, s in p.mesh.axes], p.mesh.names))
    return shardy_result_shardings(t)
