"""JAX's multi-process data-parallel training program (a flax model, optax adam), on
shardc: the same program with `jax.jit` replaced by `shardc.jit`.

    shardc launch -n 2 --devices-per-process 4 examples/multiprocess_optax_train.py

Each process loads only its part of every batch and builds the global batch with
`jax.make_array_from_process_local_data`; the parameters are replicated, the batch is
split over all 8 devices, and the gradients' sum over the batch is an all-reduce
across both processes. The one other change: `shardc.distributed.initialize()` stands
for `jax.distributed.initialize()`, which it calls with the coordinator that `shardc
launch` set (on Slurm, Open MPI or a TPU pod either works as is). Without `shardc
launch` it runs as one process on 8 devices. Every process prints its losses: they are
the same global values.
"""
import os

os.environ.setdefault("SHARDC_CPU_DEVICES", "8")   # one process: 8 simulated devices

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import shardc  # noqa: E402

if "SHARDC_PROCESS_ID" in os.environ:     # started by `shardc launch`
    shardc.distributed.initialize()       # (jax.distributed.initialize() on a cluster)

GLOBAL_BATCH, STEPS = 64, 5
mesh = jax.make_mesh((jax.device_count(),), ("batch",),
                     axis_types=(jax.sharding.AxisType.Auto,))
data_sharding = NamedSharding(mesh, P("batch"))


class MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        x = x.reshape((x.shape[0], -1))
        x = nn.relu(nn.Dense(64)(x))
        return nn.Dense(10)(x)


model = MLP()
optimizer = optax.adam(1e-3)


@shardc.jit                                # was: @jax.jit
def train_step(params, opt_state, batch):
    def loss_fn(params):
        logits = model.apply(params, batch["images"])
        return optax.softmax_cross_entropy_with_integer_labels(logits, batch["labels"]).mean()
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = optimizer.update(grads, opt_state)
    params = optax.apply_updates(params, updates)
    return params, opt_state, loss


def global_batch(step):
    """Batch `step` of a synthetic MNIST-like data set: 28x28 images whose label is
    (roughly) the sign pattern of a few pixels, so the model can learn it."""
    rng = np.random.default_rng(step)
    images = rng.standard_normal((GLOBAL_BATCH, 28, 28, 1)).astype(np.float32)
    labels = (images[:, 0, :10, 0] > 0).argmax(axis=1).astype(np.int32)
    return {"images": images, "labels": labels}


def local_part(batch):
    """This process's rows: as if each process read only its own shard from disk."""
    idx = data_sharding.addressable_devices_indices_map((GLOBAL_BATCH,)).values()
    lo, hi = min(i[0].start for i in idx), max(i[0].stop for i in idx)
    return {k: v[lo:hi] for k, v in batch.items()}


params = model.init(jax.random.key(0), jnp.zeros((1, 28, 28, 1)))
opt_state = optimizer.init(params)
losses = []
for step in range(STEPS):
    batch = jax.tree.map(lambda a: jax.make_array_from_process_local_data(data_sharding, a),
                         local_part(global_batch(step)))
    params, opt_state, loss = train_step(params, opt_state, batch)
    losses.append(float(loss))
print(f"process {jax.process_index()} of {jax.process_count()}: losses "
      + " ".join(f"{v:.6f}" for v in losses))
