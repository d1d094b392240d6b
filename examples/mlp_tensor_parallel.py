"""A Megatron-style tensor-parallel MLP on a (data=2, model=4) mesh.

The first weight is split by columns and the second by rows over `model`, the batch
over `data`: shardc propagates those choices through the network, and XLA inserts one
all-reduce, after the second matmul.
"""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import numpy as np  # noqa: E402

import shardc  # noqa: E402
import shardc.numpy as snp  # noqa: E402
from shardc import NamedSharding, P  # noqa: E402
from shardc.tools.report import collectives  # noqa: E402

mesh = shardc.make_mesh((2, 4), ("data", "model"), axis_types=(shardc.AxisType.Auto,) * 2)
rng = np.random.default_rng(0)


def put(a, *spec):
    return shardc.device_put(a.astype(np.float32), NamedSharding(mesh, P(*spec)))


x = put(rng.normal(size=(32, 128)), "data", None)
w1 = put(rng.normal(size=(128, 512)) / 11, None, "model")
b1 = put(np.zeros(512), "model")
w2 = put(rng.normal(size=(512, 128)) / 22, "model", None)
b2 = put(np.zeros(128))


@shardc.jit
def mlp(x, w1, b1, w2, b2):
    h = shardc.nn.gelu(x @ w1 + b1)      # [data, model]: no communication
    y = h @ w2 + b2                      # contracts over model: partial sums
    return snp.tanh(y)


print(mlp.trace(x, w1, b1, w2, b2).explain())
out = mlp(x, w1, b1, w2, b2)
print("output sharding:", out.sharding.spec)

xn, w1n, w2n = (np.asarray(a, np.float64) for a in (x, w1, w2))
h = xn @ w1n
h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
print("matches NumPy:", np.allclose(np.asarray(out), np.tanh(h @ w2n), rtol=1e-4, atol=1e-5))

compiled = mlp.lower(x, w1, b1, w2, b2).compile()
for c in collectives(compiled.as_text(), mesh):
    print(f"collective: {c}")
