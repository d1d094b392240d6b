"""A flax model and an optax optimizer, trained under `shardc.jit` on a (2, 4) mesh.

The model is a pre-LayerNorm MLP block written with flax.linen; the step is plain
JAX (`jax.value_and_grad`, `tx.update`, `optax.apply_updates`) with
optax.chain(clip_by_global_norm, adamw(warmup_cosine_decay_schedule)). shardc imports
the JAX code it calls, propagates shardings and compiles the step itself. The
parameters are sharded Megatron-style over "model" (the first Dense column-parallel,
the second row-parallel), the batch over "data". The losses and the output
shardings are checked against `jax.jit` of the same step, and the report ties the
all-reduce of the row-parallel Dense's partial sums to its line in flax.

    python examples/flax_optax_train.py

The CLI reads the same step (its arguments come from `train_step_args` below):

    shardc report examples/flax_optax_train.py:train_step
"""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import shardc  # noqa: E402
from shardc.report import report  # noqa: E402

BATCH, SEQ, D, HIDDEN, CLASSES, STEPS = 16, 8, 64, 256, 10, 4
mesh = jax.make_mesh((2, 4), ("data", "model"),
                     axis_types=(jax.sharding.AxisType.Auto,) * 2)


class Block(nn.Module):
    """LayerNorm -> Dense(HIDDEN) -> gelu -> Dense(D), residual; then a classifier."""

    @nn.compact
    def __call__(self, x):
        h = nn.LayerNorm(name="norm")(x)
        h = nn.Dense(HIDDEN, name="up")(h)        # column-parallel: kernel P(None, "model")
        h = nn.gelu(h)
        x = x + nn.Dense(D, name="down")(h)       # row-parallel: kernel P("model", None)
        return nn.Dense(CLASSES, name="head")(x.mean(axis=1))


model = Block()
schedule = optax.warmup_cosine_decay_schedule(0.0, 3e-3, warmup_steps=2, decay_steps=50)
tx = optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule))

# Megatron sharding, by parameter path: "up" splits its outputs, "down" its inputs.
RULES = {("up", "kernel"): P(None, "model"), ("up", "bias"): P("model"),
         ("down", "kernel"): P("model", None)}


def param_sharding(path, _leaf):
    names = tuple(getattr(k, "key", getattr(k, "name", None)) for k in path)
    spec = next((s for key, s in RULES.items() if names[-len(key):] == key), P())
    return NamedSharding(mesh, spec)


def train_step(params, opt_state, x, y):
    def loss_fn(p):
        logits = model.apply(p, x)
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def init_state():
    """Parameters and optimizer state, placed with the Megatron shardings (the adam
    moments follow their parameters: optax builds them with zeros_like)."""
    params = jax.jit(model.init)(jax.random.key(0), jnp.zeros((BATCH, SEQ, D)))
    params = jax.device_put(params, jax.tree_util.tree_map_with_path(param_sharding, params))
    opt_state = jax.jit(tx.init)(params)
    return params, opt_state


def batches():
    rng = np.random.default_rng(0)
    rows = NamedSharding(mesh, P("data"))
    for _ in range(STEPS):
        x = rng.standard_normal((BATCH, SEQ, D), dtype=np.float32)
        y = rng.integers(0, CLASSES, BATCH).astype(np.int32)
        yield jax.device_put(x, rows), jax.device_put(y, rows)


def train_step_args():
    """Example arguments for `shardc ir|report examples/flax_optax_train.py:train_step`:
    shapes, dtypes and shardings (ShapeDtypeStructs; arrays would do as well)."""
    params, opt_state = init_state()
    x, y = next(batches())
    return jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding),
                        (params, opt_state, x, y))


def main():
    params, opt_state = init_state()
    data = list(batches())
    step = shardc.jit(train_step)
    ref = jax.jit(train_step)
    state, ref_state = (params, opt_state), (params, opt_state)
    losses, ref_losses = [], []
    for x, y in data:
        *state, loss = step(*state, x, y)
        *ref_state, ref_loss = ref(*ref_state, x, y)
        losses.append(float(loss))
        ref_losses.append(float(ref_loss))
    print("shardc.jit losses:", " ".join(f"{v:.5f}" for v in losses))
    print("jax.jit losses:   ", " ".join(f"{v:.5f}" for v in ref_losses))
    print("losses match jax.jit:", np.allclose(losses, ref_losses, rtol=1e-4, atol=1e-5))
    print("loss fell:", losses[-1] < losses[0])
    leaves = jax.tree.leaves(state)
    ref_leaves = jax.tree.leaves(ref_state)
    print("parameters match jax.jit:", all(
        np.allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5)
        for a, b in zip(leaves, ref_leaves)))
    print("output shardings equal jax.jit's:", all(
        a.sharding.is_equivalent_to(b.sharding, a.ndim) for a, b in zip(leaves, ref_leaves)))
    p = state[0]["params"]
    print(f"up kernel: {p['up']['kernel'].sharding.spec}, "
          f"down kernel: {p['down']['kernel'].sharding.spec}")

    # Which collectives XLA inserted, and the line (in flax or in this file) behind each.
    r = report(step.lower(params, opt_state, *data[0]).compile())
    for c in r.collectives:
        print(f"collective: {c}")


if __name__ == "__main__":
    main()
