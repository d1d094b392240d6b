"""Profile shardc's hot paths on the benchmark programs with cProfile.

    python -m bench.profile lower deep_mlp [--repeat 5] [--top 25] [--sort tottime]
    python -m bench.profile propagate chain_10k
    python -m bench.profile call transformer_block [--repeat 2000]
    python -m bench.profile lower chain_10k --pstats /tmp/out.pstats

`lower`: fresh shardc.jit -> trace -> propagate -> StableHLO text, `repeat` times.
`propagate`: only shardc.passes.propagate inside those lowerings (the rest unprofiled).
`call`: the cached call f(*args) on placed inputs, `repeat` times (each blocked on).
For a sampling profile of the same workload, add --plain (no cProfile) and run e.g.
`py-spy record -r 500 --format raw -o /tmp/p.txt -- python -m bench.profile lower
chain_10k --plain`, then `python -m bench.profile summarize /tmp/p.txt` for stage
shares and the top functions by self time.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys

os.environ.setdefault("XLA_FLAGS", "")
if "--xla_force_host_platform_device_count" not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] += " --xla_force_host_platform_device_count=8"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.profile")
    ap.add_argument("what", choices=("lower", "propagate", "call", "summarize"))
    ap.add_argument("program", help="a program name (or, for summarize, a py-spy raw file)")
    ap.add_argument("--plain", action="store_true", help="no cProfile (for py-spy)")
    ap.add_argument("--gc-off", action="store_true",
                    help="disable Python's cyclic GC during the workload (to see its share)")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--sort", default="tottime")
    ap.add_argument("--pstats", default=None, help="also dump raw stats to this file")
    opts = ap.parse_args(argv)
    if opts.what == "summarize":
        return summarize(opts.program, opts.top)

    import jax

    import shardc
    from shardc.propagate import passes

    from . import programs as P
    prog = P.all_programs()[opts.program]
    fw = P.frameworks()["shardc"]
    mesh = shardc.make_mesh(prog.mesh_shape, prog.axis_names,
                            axis_types=(shardc.AxisType.Auto,) * len(prog.axis_names))
    args = P.place(prog, mesh, prog.make_inputs())
    prof = cProfile.Profile() if not opts.plain else _NoProfile()
    if opts.gc_off:
        import gc
        gc.collect()
        gc.disable()

    if opts.what in ("lower", "propagate"):
        n = opts.repeat or 5
        prog.fresh(fw).trace(*args).lower()     # warm-up
        if opts.what == "propagate":
            orig = passes.propagate

            def profiled(p, *a, **k):
                prof.enable()
                try:
                    return orig(p, *a, **k)
                finally:
                    prof.disable()
            passes.propagate = profiled

            def _workload():
                for _ in range(n):
                    prog.fresh(fw).trace(*args)
            _workload()
            passes.propagate = orig
        else:
            def _workload():
                for _ in range(n):
                    prog.fresh(fw).trace(*args).lower()
            prof.enable()
            _workload()
            prof.disable()
    else:
        n = opts.repeat or 1000
        f = prog.fresh(fw)
        jax.block_until_ready(f(*args))
        block = jax.block_until_ready

        def _workload():
            for _ in range(n):
                block(f(*args))
        prof.enable()
        _workload()
        prof.disable()

    if opts.plain:
        return
    st = pstats.Stats(prof, stream=sys.stdout)
    if opts.pstats:
        st.dump_stats(opts.pstats)
    st.strip_dirs().sort_stats(opts.sort).print_stats(opts.top)


class _NoProfile:
    def enable(self):
        pass

    def disable(self):
        pass


# stage of a sample: the first of these frames (innermost first) found in its stack
STAGES = (("emit (lower.py)", "lower (shardc/lower.py"),
          ("verify", "verify (shardc/verify.py"),
          ("print traced IR", "print_program (shardc/ir.py"),
          ("propagate: setup", "setup (shardc/propagate.py"),
          ("propagate: finish", "_finish (shardc/propagate.py"),
          ("propagate: return edges", "_return_edges (shardc/propagate.py"),
          ("propagate: sweep", "_sweep (shardc/propagate.py"),
          ("propagate (passes)", "propagate (shardc/passes.py"),
          ("prepare", "prepare (shardc/passes.py"),
          ("trace", "full_trace (shardc/core.py"),
          ("execute (jaxlib)", "__call__ (shardc/runtime.py"),
          ("call: prepare args", "_prepare (shardc/jit.py"),
          ("call: place args", "place (shardc/runtime.py"),
          ("call: block_until_ready", "block_until_ready (jax/"),
          ("call: jit fast path", "__call__ (shardc/jit.py"))


def summarize(path, top=25):
    """Stage shares and top self-time functions from py-spy's --format raw output."""
    import collections
    stages, self_t, total = collections.Counter(), collections.Counter(), 0
    for line in open(path):
        stack, _, n = line.rstrip().rpartition(" ")
        if not stack or "_workload (" not in stack:
            continue
        n = int(n)
        total += n
        frames = stack.split(";")
        stage = "other"
        for f in reversed(frames):
            hit = next((name for name, key in STAGES if key in f), None)
            if hit:
                stage = hit
                break
        stages[stage] += n
        leaf = frames[-1]
        self_t[leaf.split(" (")[0] + " (" + leaf.split(" (")[-1].rsplit(":", 1)[0].split("/")[-1]
               + ")"] += n
    print(f"{total} samples in the measured workload")
    for k, v in stages.most_common():
        print(f"  {100 * v / total:5.1f}%  {k}")
    print("top self time:")
    for k, v in self_t.most_common(top):
        print(f"  {100 * v / total:5.1f}%  {k}")


if __name__ == "__main__":
    main()
