"""Automatic sharding: shardc.AUTO chooses the parameters' shardings of a train step.

A two-layer MLP's SGD step on a (data=2, model=4) mesh, the batch split over `data`
and every parameter left to the search, within a memory budget. The search weighs
each choice's compute, collectives and peak memory from the IR alone, explain() says
why each parameter got its sharding, and the report puts the prediction beside what
XLA compiled. The step then runs, and matches jax.jit.
"""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import shardc  # noqa: E402
import shardc.numpy as snp  # noqa: E402
from shardc import P  # noqa: E402
from shardc.report import report  # noqa: E402

mesh = shardc.make_mesh((2, 4), ("data", "model"), axis_types=(shardc.AxisType.Auto,) * 2)
rng = np.random.default_rng(0)
params = {"w1": (rng.normal(size=(512, 2048)) / 23).astype(np.float32),
          "w2": (rng.normal(size=(2048, 512)) / 45).astype(np.float32)}
x = rng.normal(size=(16, 512)).astype(np.float32)


def step(m, nn, value_and_grad):
    def loss(p, x):
        return m.mean((nn.relu(x @ p["w1"]) @ p["w2"] - x) ** 2)

    def train(p, x):
        val, g = value_and_grad(loss)(p, x)
        return val, {k: p[k] - 0.1 * g[k] for k in p}
    return train


# 8 MiB of parameters: replicated they would not fit the 4 MiB budget per device
train = shardc.jit(step(snp, shardc.nn, shardc.value_and_grad),
                   in_shardings=(shardc.AUTO(mesh), P("data")),
                   out_shardings=shardc.AUTO(mesh), memory_budget=4 << 20)
with shardc.set_mesh(mesh):
    compiled = train.lower(params, x).compile()
    traced = train.trace(params, x)
for k, s in compiled.input_shardings[0][0].items():
    print(f"{k} chosen: {s.spec}")
print(traced.explain().split("\n\n")[-1])
print(report(compiled).text().split("\n\n")[-1])

loss, new = compiled(params, x)
want_loss, want = jax.jit(step(jnp, jax.nn, jax.value_and_grad))(params, x)
same = np.allclose(loss, want_loss, rtol=1e-5) and all(
    np.allclose(new[k], want[k], rtol=1e-4, atol=1e-6) for k in new)
print("matches jax.jit:", same)
