"""Data- and tensor-parallel training of an MLP on synthetic data, with shardc.grad.

Mesh (data=2, model=4): the batch is split over `data`; the first layer's weight by
columns and the second's by rows over `model` (Megatron-style). The backward pass is
propagated like the forward: every gradient comes out sharded like its parameter.
"""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402  (pytrees only)
import numpy as np  # noqa: E402

import shardc  # noqa: E402
import shardc.numpy as snp  # noqa: E402
from shardc import NamedSharding, P  # noqa: E402

mesh = shardc.make_mesh((2, 4), ("data", "model"), axis_types=(shardc.AxisType.Auto,) * 2)
rng = np.random.default_rng(0)


def put(a, *spec):
    return shardc.device_put(np.asarray(a, np.float32), NamedSharding(mesh, P(*spec)))


# synthetic regression data: y = tanh(x @ A) @ B + noise
d_in, d_hidden, d_out, n = 32, 128, 8, 256
A = rng.normal(size=(d_in, 16)) / np.sqrt(d_in)
B = rng.normal(size=(16, d_out))
x_all = rng.normal(size=(n, d_in))
y_all = np.tanh(x_all @ A) @ B + 0.01 * rng.normal(size=(n, d_out))

params = {
    "w1": put(rng.normal(size=(d_in, d_hidden)) / np.sqrt(d_in), None, "model"),
    "b1": put(np.zeros(d_hidden), "model"),
    "w2": put(rng.normal(size=(d_hidden, d_out)) / np.sqrt(d_hidden), "model", None),
    "b2": put(np.zeros(d_out)),
}


def loss_fn(p, x, y):
    h = shardc.nn.relu(x @ p["w1"] + p["b1"])
    pred = h @ p["w2"] + p["b2"]
    return snp.mean((pred - y) ** 2)


@shardc.jit
def train_step(p, x, y):
    loss, grads = shardc.value_and_grad(loss_fn)(p, x, y)   # the backward pass's line
    new = jax.tree_util.tree_map(lambda w, g: w - 0.05 * g, p, grads)
    return new, loss, grads


LINE = next(i for i, ln in enumerate(open(__file__), 1) if "the backward pass's line" in ln
            and "LINE" not in ln)
batch = 64
losses = []
for step in range(40):
    i = (step * batch) % n
    x = put(x_all[i:i + batch], "data", None)
    y = put(y_all[i:i + batch], "data", None)
    params, loss, grads = train_step(params, x, y)
    losses.append(float(loss))
    if step % 5 == 0 or step == 39:
        print(f"step {step:2d}  loss {losses[-1]:.4f}")

print("\nparameter and gradient shardings:")
for k in params:
    print(f"  {k}: param {params[k].sharding.spec}, grad {grads[k].sharding.spec}")
print("\nloss fell:", losses[-1] < 0.5 * losses[0], f"({losses[0]:.3f} -> {losses[-1]:.3f})")
print("gradients sharded like parameters:",
      all(grads[k].sharding.is_equivalent_to(params[k].sharding, params[k].ndim)
          for k in params))

ir = train_step.trace(params, x, y).ir
grad_line = f'loc("train_mlp.py":{LINE})'
backward = [ln.strip() for ln in ir.splitlines() if grad_line in ln]
print(f"\nthe training step's IR: {ir.count(' = ')} ops, {len(backward)} of them the backward "
      f"pass (from line {LINE}); its matmuls:")
for ln in backward:
    if "dot_general" in ln:
        print(" ", ln.split(" loc(")[0])
