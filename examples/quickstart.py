"""shardc in five minutes: elementwise, a reduction, a constraint and a dense layer.

Run with `make demo`. Uses 8 simulated CPU devices when there is no accelerator.
"""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import numpy as np  # noqa: E402

import shardc  # noqa: E402
import shardc.numpy as snp  # noqa: E402
from shardc import NamedSharding, P  # noqa: E402

mesh = shardc.make_mesh((2, 4), ("data", "model"), axis_types=(shardc.AxisType.Auto,) * 2)
print(f"mesh: {dict(mesh.shape)} over {mesh.size} devices\n")

x = shardc.device_put(np.arange(64 * 256, dtype=np.float32).reshape(64, 256) / 1e4,
                      NamedSharding(mesh, P("data", "model")))


# 1. Elementwise: the result keeps the argument's sharding.
@shardc.jit
def scaled_tanh(x):
    return snp.tanh(x) * 2.0


y = scaled_tanh(x)
print("== elementwise ==")
print(scaled_tanh.trace(x).ir)
print("result sharding:", y.sharding.spec, "\n")


# 2. A reduction over the 'data'-sharded axis: the result is sharded on 'model'
#    (XLA all-reduces the partial sums over 'data').
@shardc.jit
def column_sums(x):
    return x.sum(axis=0)


s = column_sums(x)
print("== reduction ==")
print(column_sums.trace(x).ir)
print("result sharding:", s.sharding.spec)
print("matches NumPy:", np.allclose(np.asarray(s), np.asarray(x).sum(0), rtol=1e-5), "\n")


# 3. A constraint: ask for the intermediate to be sharded on 'data' only.
@shardc.jit
def constrained(x):
    h = snp.exp(x)
    h = shardc.with_sharding_constraint(h, NamedSharding(mesh, P("data", None)))
    return h * 2


print("== constraint ==")
print(constrained.trace(x).explain())
print("result sharding:", constrained(x).sharding.spec, "\n")


# 4. A dense layer: x sharded on the batch, w on the output features.
@shardc.jit
def layer(x, w, b):
    return shardc.nn.relu(x @ w + b)


xb = shardc.device_put(np.ones((64, 256), np.float32), NamedSharding(mesh, P("data", None)))
w = shardc.device_put(np.full((256, 1024), 0.01, np.float32),
                      NamedSharding(mesh, P(None, "model")))
b = np.zeros(1024, np.float32)
out = layer(xb, w, b)
print("== dense layer ==")
print(layer.trace(xb, w, b).ir)
print("result:", np.asarray(out)[0, :4], "sharding:", out.sharding.spec)
print("matches NumPy:", np.allclose(np.asarray(out), np.maximum(np.ones((64, 256)) @ np.full(
    (256, 1024), 0.01) + b, 0), rtol=1e-5))
print("\nStableHLO (first lines):")
print("\n".join(layer.lower(xb, w, b).as_text().splitlines()[:8]))
