"""Solve times of the automatic-sharding ILP (shardc/auto/solve.py) on GPT-style train
steps: `python -m bench.auto_solve [layers ...]` traces each step (not timed), solves
it with every parameter free on the (2, 4) mesh and prints the problem's size and time;
`python -m bench.auto_solve --compare layers` puts the realized choice beside the hand
strategies (data parallel, FSDP, Megatron, 2-D) by the cost model.

The step: `layers` pre-norm transformer blocks (bench.programs.transformer_block: d=512,
8 heads of 64, MLP 2048, causal attention) on a batch of 8 sequences of 256, the mean
square of the output as the loss, value_and_grad and SGD, as bench.programs.train_step.
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

GPT = dict(b=8, s=256, d=512, h=8, k=64, f=2048)


def gpt_train_step(m, nn, params, x, value_and_grad):
    from bench.programs import transformer_block

    def loss(ps, x):
        for p in ps:
            x = transformer_block(m, nn, x, p)
        return m.mean(x * x)
    val, grads = value_and_grad(loss)(params, x)
    return val, [{k: p[k] - 0.01 * g[k] for k in p} for p, g in zip(params, grads)]


def gpt_shapes(layers, **over):
    """ShapeDtypeStruct pytrees (params, x) of the step; `over` changes sizes."""
    import jax
    c = dict(GPT, **over)
    b, s, d, h, k, f = (c[n] for n in "bsdhkf")

    def sd(*shape):
        return jax.ShapeDtypeStruct(shape, np.float32)
    layer = {"g1": sd(d), "g2": sd(d), "wq": sd(d, h, k), "wk": sd(d, h, k), "wv": sd(d, h, k),
             "wo": sd(h, k, d), "w1": sd(d, f), "w2": sd(f, d)}
    return [dict(layer) for _ in range(layers)], sd(b, s, d)


def trace_gpt(layers, mesh, x_spec=None, **over):
    """The traced (unpropagated) program of the step and the indices of its parameters
    (every input but x, which is sharded `x_spec`: a PartitionSpec, None replicated)."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    import shardc
    params, x = gpt_shapes(layers, **over)
    x = jax.ShapeDtypeStruct(x.shape, x.dtype,
                             sharding=NamedSharding(mesh, x_spec or PartitionSpec()))

    def step(params, x):
        return gpt_train_step(shardc.numpy, shardc.nn, params, x, shardc.value_and_grad)
    program = shardc.jit(step).trace(params, x)._program
    n = len(jax.tree.leaves(params))
    return program, list(range(n))


def hand_specs(name):
    """A hand strategy's PartitionSpec per parameter name (x is batch-sharded on data)."""
    from jax.sharding import PartitionSpec as P
    dm = ("data", "model")
    if name == "dp":
        return lambda k, nd: P()
    if name == "fsdp":
        return lambda k, nd: P(dm) if nd > 1 else P()
    mega = {"wq": (None, "model"), "wk": (None, "model"), "wv": (None, "model"),
            "wo": ("model",), "w1": (None, "model"), "w2": ("model",)}
    two_d = {"wq": ("data", "model"), "wk": ("data", "model"), "wv": ("data", "model"),
             "wo": ("model", None, "data"), "w1": ("data", "model"), "w2": ("model", "data")}
    table = mega if name == "megatron" else two_d
    return lambda k, nd: P(*table.get(k, ()))


def compare(layers, mesh, hw=None):
    """(strategy, predicted seconds, collective bytes, peak bytes) per hand strategy and
    AUTO, each program propagated (AUTO's realized from the solver's choice)."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    import shardc
    from shardc.auto import costmodel as cm
    from shardc.auto.memory import peak_memory
    from shardc.auto.solve import solve
    from shardc.propagate import passes
    hw = hw or cm.CPU
    rows = []
    params, x = gpt_shapes(layers)
    x = jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=NamedSharding(mesh, PartitionSpec("data")))

    def step(params, x):
        return gpt_train_step(shardc.numpy, shardc.nn, params, x, shardc.value_and_grad)
    for name in ("dp", "fsdp", "megatron", "2-d", "auto"):
        if name == "auto":
            t = shardc.jit(step).trace(params, x)
            sol = solve(t._program, list(range(len(jax.tree.leaves(params)))), hw=hw)
            p = sol.apply(t._program)
        else:
            spec = hand_specs(name)
            ps = [{k: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=NamedSharding(
                mesh, spec(k, len(a.shape)))) for k, a in layer.items()} for layer in params]
            p = shardc.jit(step).trace(ps, x)._program
        passes.prepare(p)
        passes.propagate(p)
        b = cm.program_cost(p, hw)
        rows.append((name, b.total_s, b.collective_bytes, peak_memory(p, hw)))
    return rows


def main(argv):
    os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
    from jax.sharding import PartitionSpec

    import shardc
    from shardc.auto.solve import solve
    mesh = shardc.make_mesh((2, 4), ("data", "model"), axis_types=(shardc.AxisType.Auto,) * 2)
    if argv and argv[0] == "--compare":
        for name, secs, nbytes, peak in compare(int(argv[1]), mesh):
            print(f"{name:9s} {secs * 1e3:10.3f} ms {nbytes / 2**20:10.1f} MiB collectives "
                  f"{peak / 2**20:8.1f} MiB peak")
        return
    for layers in [int(a) for a in argv] or [12, 48]:
        t0 = time.perf_counter()
        program, auto = trace_gpt(layers, mesh, PartitionSpec("data"))
        traced = time.perf_counter() - t0
        sol = solve(program, auto)
        print(f"{layers:3d} layers: {len(program.ops):6d} ops traced in {traced:.1f} s; "
              f"solved in {sol.solve_s:.2f} s: {sol.groups} groups in {sol.classes} classes, "
              f"{sol.variables} variables, {sol.constraint_rows} constraints "
              f"({', '.join(f'{k} {v:.2f} s' for k, v in sol.times.items())}); "
              f"objective {sol.objective * 1e3:.3f} ms, LP bound {sol.bound * 1e3:.3f} ms")
        print(" ", sol.predicted)
        print("  layer 0:", {k: str(sol.input_shardings[i]) for i, k in zip(auto, sorted(
            gpt_shapes(1)[0][0]))})


if __name__ == "__main__":
    main(sys.argv[1:])
