"""One dense layer, three ways: automatic, constrained and manual (shard_map).

The seed tutorial's layer `sigmoid(x @ w + b)` with x and w split over a mesh of 8
devices. shardc propagates shardings in the first two; in the third we write the
per-device program and its all-reduce ourselves. All three agree.
"""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

from functools import partial  # noqa: E402

import numpy as np  # noqa: E402

import shardc  # noqa: E402
from shardc import NamedSharding, P  # noqa: E402

mesh = shardc.make_mesh((8,), ("x",), axis_types=(shardc.AxisType.Auto,))
rng = np.random.default_rng(0)
x = shardc.device_put(rng.normal(size=(64,)).astype(np.float32), NamedSharding(mesh, P("x")))
w = shardc.device_put(rng.normal(size=(64, 16)).astype(np.float32),
                      NamedSharding(mesh, P("x", None)))
b = shardc.device_put(rng.normal(size=(16,)).astype(np.float32), NamedSharding(mesh, P()))


# 1. Automatic: shardc decides every intermediate's sharding from the arguments'.
@shardc.jit
def layer(x, w, b):
    return shardc.nn.sigmoid(x @ w + b)


# 2. Constrained: pin the output to be replicated; propagation fills in the rest.
@shardc.jit
def layer_constrained(x, w, b):
    y = shardc.nn.sigmoid(x @ w + b)
    return shardc.with_sharding_constraint(y, NamedSharding(mesh, P()))


# 3. Manual: each device multiplies its slices; psum adds the partial products.
@shardc.jit
@partial(shardc.shard_map, mesh=mesh, in_specs=(P("x"), P("x", None), P(None)),
         out_specs=P(None))
def layer_sharded(x, w, b):
    return shardc.nn.sigmoid(shardc.lax.psum(x @ w, "x") + b)


results = {}
for name, f in [("automatic", layer), ("constrained", layer_constrained),
                ("manual", layer_sharded)]:
    print(f"== {name} ==")
    print(f.trace(x, w, b).ir)
    out = f(x, w, b)
    results[name] = np.asarray(out)
    print("output sharding:", out.sharding.spec, "\n")

want = 1 / (1 + np.exp(-(np.asarray(x) @ np.asarray(w) + np.asarray(b))))
for name, r in results.items():
    print(f"{name:12s} matches NumPy: {np.allclose(r, want, rtol=1e-5, atol=1e-6)}")
print("all three agree:", all(np.allclose(r, results["manual"], rtol=1e-5, atol=1e-6)
                              for r in results.values()))
