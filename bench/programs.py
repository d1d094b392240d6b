"""The benchmark programs, each written once against a numpy-like module `m` and an
`nn`-like namespace, so the same body runs under shardc (shardc.numpy, shardc.nn,
shardc.jit) and under jax (jax.numpy, jax.nn, jax.jit).

A `Program` bundles the body, its mesh, its inputs (NumPy pytrees, made
deterministically) and their PartitionSpecs (a pytree matching the inputs).
`frameworks()` gives the two sides; `build(...)` gives a fresh jitted function.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, Callable

import numpy as np

# ---------------------------------------------------------------- frameworks


@dataclasses.dataclass(frozen=True)
class Framework:
    """One side of the comparison: its numpy module, nn namespace and jit, and (for the
    programs that loop, remat or differentiate) its lax, checkpoint and value_and_grad."""
    name: str
    m: Any
    nn: Any
    jit: Callable
    lax: Any = None
    checkpoint: Callable | None = None
    checkpoint_policies: Any = None
    value_and_grad: Callable | None = None
    grad: Callable | None = None
    vmap: Callable | None = None
    random: Any = None


def _shardc_random():
    """shardc.random, or None while shardc has none (its programs then say so)."""
    import importlib
    try:
        return importlib.import_module("shardc.random")
    except ImportError:
        return None


def frameworks() -> dict[str, Framework]:
    import jax
    import jax.numpy as jnp

    import shardc
    import shardc.numpy as snp
    return {"shardc": Framework("shardc", snp, shardc.nn, shardc.jit, shardc.lax,
                                getattr(shardc, "checkpoint", None),
                                getattr(shardc, "checkpoint_policies", None),
                                getattr(shardc, "value_and_grad", None),
                                getattr(shardc, "grad", None), getattr(shardc, "vmap", None),
                                _shardc_random()),
            "jax": Framework("jax", jnp, jax.nn, jax.jit, jax.lax, jax.checkpoint,
                             jax.checkpoint_policies, jax.value_and_grad, jax.grad,
                             jax.vmap, jax.random)}


# ---------------------------------------------------------------- programs


@dataclasses.dataclass
class Program:
    name: str
    body: Callable                      # body(m, nn, *args)
    mesh_shape: tuple
    axis_names: tuple
    make_inputs: Callable[[], tuple]    # () -> tuple of NumPy pytrees
    specs: Any                          # PartitionSpec pytree per argument, or a
                                        # function of the inputs giving them
    compile_and_run: bool = True        # False: measure lower/propagate only
    chain: bool = False                 # a chain_N program: also propagate_s
    note: str = ""
    takes_fw: bool = False              # body(fw, *args): it needs fw.lax, fw.checkpoint...
    eager_ops: dict | None = None       # name -> op(m, *args), each timed run eagerly
    needs: tuple = ()                   # Framework fields the body uses (vmap, random...)
    out_specs: Any = None               # PartitionSpec pytree: jit's out_shardings
    runs: int | None = None             # fewer timed runs for a program that runs long

    def missing(self, fw: Framework) -> list:
        """What `fw` lacks of what this program needs (e.g. ["vmap"])."""
        return [n for n in self.needs if getattr(fw, n) is None]

    def fresh(self, fw: Framework):
        """A new jitted function (a fresh closure, so no cache of either side helps)."""
        body, m, nn = self.body, fw.m, fw.nn
        if self.takes_fw:
            def fn(*args):
                return body(fw, *args)
        else:
            def fn(*args):
                return body(m, nn, *args)
        fn.__name__ = self.name
        fn.__qualname__ = self.name
        if self.out_specs is None:
            return fw.jit(fn)
        import jax
        from jax.sharding import NamedSharding, PartitionSpec

        import shardc
        mesh = shardc.make_mesh(self.mesh_shape, self.axis_names,
                                axis_types=(shardc.AxisType.Auto,) * len(self.axis_names))
        out = jax.tree.map(lambda s: NamedSharding(mesh, s), self.out_specs,
                           is_leaf=lambda s: isinstance(s, PartitionSpec))
        return fw.jit(fn, out_shardings=out)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _normal(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _P(*a):
    from jax.sharding import PartitionSpec
    return PartitionSpec(*a)


# -- seed_layer: JAX's sharded-computation tutorial, x sharded on the batch over 8.

def seed_layer(m, nn, x, weights, bias):
    return nn.sigmoid(x @ weights + bias)


def _seed_inputs():
    r = _rng(0)
    return (_normal(r, (1024, 512)), _normal(r, (512, 256), 0.05), _normal(r, (256,)))


# -- mlp_tp: a 2-layer MLP, Megatron-style (column- then row-parallel).

def mlp_tp(m, nn, x, w1, b1, w2, b2):
    h = nn.relu(x @ w1 + b1)
    return h @ w2 + b2


def _mlp_inputs():
    r = _rng(1)
    d, f = 256, 1024
    return (_normal(r, (128, d)), _normal(r, (d, f), 1 / math.sqrt(d)), _normal(r, (f,), 0.1),
            _normal(r, (f, d), 1 / math.sqrt(f)), _normal(r, (d,), 0.1))


# -- transformer_block: pre-norm causal attention + MLP; heads/hidden on `model`.

def rms_norm(m, x, g, eps=1e-6):
    return x / m.sqrt(m.mean(x * x, axis=-1, keepdims=True) + eps) * g


def transformer_block(m, nn, x, p):
    s, dh = x.shape[1], p["wq"].shape[2]
    h = rms_norm(m, x, p["g1"])
    q = m.einsum("bsd,dhk->bshk", h, p["wq"])
    k = m.einsum("bsd,dhk->bshk", h, p["wk"])
    v = m.einsum("bsd,dhk->bshk", h, p["wv"])
    scores = m.einsum("bshk,bthk->bhst", q, k) / math.sqrt(dh)
    causal = m.arange(s)[:, None] >= m.arange(s)[None, :]
    scores = m.where(causal, scores, -1e9)
    att = nn.softmax(scores, axis=-1)
    o = m.einsum("bhst,bthk->bshk", att, v)
    x = x + m.einsum("bshk,hkd->bsd", o, p["wo"])
    h = rms_norm(m, x, p["g2"])
    h = nn.gelu(h @ p["w1"])
    return x + h @ p["w2"]


_TB = dict(b=8, s=128, d=256, h=8, k=32, f=1024)


def _tb_inputs():
    r = _rng(2)
    b, s, d, h, k, f = (_TB[c] for c in "bsdhkf")
    p = {"g1": np.ones((d,), np.float32), "g2": np.ones((d,), np.float32),
         "wq": _normal(r, (d, h, k), d ** -0.5), "wk": _normal(r, (d, h, k), d ** -0.5),
         "wv": _normal(r, (d, h, k), d ** -0.5), "wo": _normal(r, (h, k, d), (h * k) ** -0.5),
         "w1": _normal(r, (d, f), d ** -0.5), "w2": _normal(r, (f, d), f ** -0.5)}
    return (_normal(r, (b, s, d)), p)


def _tb_specs():
    return (_P("data", None, None),
            {"g1": _P(), "g2": _P(), "wq": _P(None, "model", None),
             "wk": _P(None, "model", None), "wv": _P(None, "model", None),
             "wo": _P("model", None, None), "w1": _P(None, "model"), "w2": _P("model", None)})


# -- deep_mlp: residual MLP layers with RMS norm, Megatron-sharded weights.

DEEP_LAYERS = 48


def deep_mlp(m, nn, x, params):
    for layer in params:
        h = rms_norm(m, x, layer["g"])
        h = nn.relu(h @ layer["w1"])
        x = x + h @ layer["w2"]
    return x


_DM = dict(b=32, d=128, f=256)


def _dm_inputs():
    r = _rng(3)
    b, d, f = _DM["b"], _DM["d"], _DM["f"]
    params = [{"g": np.ones((d,), np.float32), "w1": _normal(r, (d, f), d ** -0.5),
               "w2": _normal(r, (f, d), f ** -0.5 / 4)} for _ in range(DEEP_LAYERS)]
    return (_normal(r, (b, d)), params)


def _dm_specs():
    return (_P("data", None),
            [{"g": _P(), "w1": _P(None, "model"), "w2": _P("model", None)}
             for _ in range(DEEP_LAYERS)])


# -- train_step: value and gradient of deep_mlp's loss, SGD, FSDP-sharded params.
#    Only built when the framework has gradients (shardc.value_and_grad).

def train_step(m, nn, params, x, value_and_grad):
    def loss(ps, x):
        y = deep_mlp(m, nn, x, ps)
        return m.mean(y * y)
    val, grads = value_and_grad(loss)(params, x)
    new = [{k: p[k] - 0.01 * g[k] for k in p} for p, g in zip(params, grads)]
    return val, new


def _ts_specs():
    # FSDP: every weight's first dim sharded over all 8 devices; batch too.
    return ([{"g": _P(), "w1": _P("fsdp", None), "w2": _P("fsdp", None)}
             for _ in range(DEEP_LAYERS)], _P("fsdp", None))


def _ts_inputs():
    x, params = _dm_inputs()
    return (params, x)


# -- deep_mlp_scan, train_step_scan, train_step_remat: the same layers as one
#    lax.scan over weights stacked on a leading (unsharded) layer dim.

def mlp_layer(m, nn, x, p):
    """One deep_mlp layer as a scan body: (carry, layer params) -> (carry, None)."""
    h = rms_norm(m, x, p["g"])
    h = nn.relu(h @ p["w1"])
    return x + h @ p["w2"], None


def deep_mlp_scan(fw, x, stacked, remat=False):
    def layer(x, p):
        return mlp_layer(fw.m, fw.nn, x, p)
    if remat:
        layer = fw.checkpoint(layer, policy=fw.checkpoint_policies.nothing_saveable)
    x, _ = fw.lax.scan(layer, x, stacked)
    return x


def _stack(layers):
    return {k: np.stack([p[k] for p in layers]) for k in layers[0]}


def _dms_inputs():
    x, params = _dm_inputs()
    return (x, _stack(params))


def _dms_specs():
    return (_P("data", None), {"g": _P(None, None), "w1": _P(None, None, "model"),
                               "w2": _P(None, "model", None)})


def train_step_scan(fw, params, x, remat=False):
    m = fw.m

    def loss(ps, x):
        y = deep_mlp_scan(fw, x, ps, remat=remat)
        return m.mean(y * y)
    val, grads = fw.value_and_grad(loss)(params, x)
    return val, {k: params[k] - 0.01 * grads[k] for k in params}


def _tss_inputs():
    x, params = _dm_inputs()
    return (_stack(params), x)


def _tss_specs():
    return ({"g": _P(None, None), "w1": _P(None, "fsdp", None),
             "w2": _P(None, "fsdp", None)}, _P("fsdp", None))


def _train_step_remat(fw, params, x):
    return train_step_scan(fw, params, x, remat=True)


# -- chain_N: long chains of elementwise / matmul / reshape ops.

CHAIN_B, CHAIN_D = 16, 64
CHAIN_BLOCK = 6   # ops per block below


def chain(m, nn, x, w, n_ops):
    b, d = x.shape
    for _ in range(max(1, n_ops // CHAIN_BLOCK)):
        y = m.tanh(x)
        y = y @ w
        y = m.reshape(y, (b, d // 4, 4))
        y = y * 0.5
        y = m.reshape(y, (b, d))
        x = x + y
    return x


def _chain_inputs():
    r = _rng(4)
    return (_normal(r, (CHAIN_B, CHAIN_D)), _normal(r, (CHAIN_D, CHAIN_D), CHAIN_D ** -0.5))


def _chain(n: int, label: str) -> Program:
    def body(m, nn, x, w):
        return chain(m, nn, x, w, n)
    return Program(label, body, (2, 4), ("data", "model"), _chain_inputs,
                   (_P("data", None), _P(None, "model")), compile_and_run=n <= 1000,
                   chain=True, note=f"{n} ops requested")


# -- eager_ops: one op at a time on sharded arrays, no jit: what a notebook or a
# debugging session pays per op (shardc: a cached one-op program per signature; jax:
# its own apply_primitive).

EAGER_OPS = {
    "sin": lambda m, x, y: m.sin(x),
    "add": lambda m, x, y: m.add(x, y),
    "sum": lambda m, x, y: m.sum(x),
    "matmul": lambda m, x, y: m.matmul(x, y),
}


def eager_ops(m, nn, x, y):
    return tuple(op(m, x, y) for op in EAGER_OPS.values())


def _eager_inputs():
    r = _rng(7)
    return (_normal(r, (64, 64)), _normal(r, (64, 64)))


# -- vmap_mlp: per-example gradients of an MLP's loss (DP-SGD's first step):
#    vmap(grad(loss)) over a batch sharded over 8 devices, weights replicated.

def vmap_mlp(fw, params, x, y):
    m, nn = fw.m, fw.nn

    def loss(p, xi, yi):
        h = nn.relu(xi @ p["w1"] + p["b1"])
        d = h @ p["w2"] + p["b2"] - yi
        return m.mean(d * d)
    return fw.vmap(fw.grad(loss), in_axes=(None, 0, 0))(params, x, y)


def _vm_inputs():
    r = _rng(11)
    params = {"w1": _normal(r, (128, 256), 0.05), "b1": _normal(r, (256,), 0.1),
              "w2": _normal(r, (256, 32), 0.05), "b2": _normal(r, (32,), 0.1)}
    return (params, _normal(r, (64, 128)), _normal(r, (64, 32)))


def _vm_specs():
    return ({"w1": _P(), "b1": _P(), "w2": _P(), "b2": _P()}, _P("data", None),
            _P("data", None))


# -- random_init: a 64M-element parameter tree drawn with random.normal and
#    truncated_normal under jit, each leaf made sharded (out_shardings): with
#    partitionable threefry every device draws only its own shard, no collective.

RANDOM_INIT = {"embed": ((8192, 2048), "normal", 0.02, _P("model", "fsdp")),
               "w_in": ((2048, 8192), "truncated_normal", 0.02, _P("fsdp", "model")),
               "w_out": ((8192, 2048), "truncated_normal", 0.01, _P("model", "fsdp")),
               "unembed": ((2048, 8192), "normal", 0.02, _P("fsdp", "model"))}


def random_init(fw, key):
    r = fw.random
    keys = r.split(key, len(RANDOM_INIT))
    out = {}
    for k, (name, (shape, dist, scale, _)) in zip(keys, RANDOM_INIT.items()):
        draw = r.normal(k, shape) if dist == "normal" else \
            r.truncated_normal(k, -2.0, 2.0, shape)
        out[name] = draw * scale
    return out


def _ri_inputs():
    return (np.array([0, 42], np.uint32),)      # the raw key PRNGKey(42)


# -- flax_block, flax_train_step: a flax.linen transformer block (issue 18: import JAX
#    programs), the *same* Python function given to shardc.jit and jax.jit: flax and
#    optax code run on shardc's tracers and are translated into shardc ops. Sizes as
#    transformer_block's; Megatron shardings (heads and MLP hidden on `model`).

FLAX = dict(b=8, s=128, d=256, h=8, f=1024)


@functools.lru_cache(maxsize=None)
def _flax_model():
    """The block's module, made once (as a user's model is); its params are inputs."""
    import flax.linen as fnn
    import jax.numpy as jnp

    class Block(fnn.Module):
        """Pre-LayerNorm causal self-attention + GELU MLP, residuals."""
        @fnn.compact
        def __call__(self, x):
            d, h, f = FLAX["d"], FLAX["h"], FLAX["f"]
            y = fnn.LayerNorm()(x)
            mask = fnn.make_causal_mask(jnp.ones(x.shape[:2], jnp.int32))
            x = x + fnn.MultiHeadDotProductAttention(num_heads=h, qkv_features=d)(
                y, y, mask=mask)
            y = fnn.LayerNorm()(x)
            y = fnn.gelu(fnn.Dense(f, name="mlp_in")(y))
            y = fnn.Dense(d, name="mlp_out")(y)
            return x + y
    return Block()


def _flax_tx():
    import optax
    return optax.adamw(1e-3, weight_decay=1e-4)


def flax_block(fw, params, x):
    return _flax_model().apply(params, x)


def flax_train_step(fw, params, opt, x, y):
    """One adamw step on the block's mean-square loss: jax.value_and_grad, tx.update and
    optax.apply_updates on both sides (shardc imports jax's differentiation)."""
    import jax
    import optax
    model, tx = _flax_model(), _flax_tx()

    def loss(p):
        d = model.apply(p, x) - y
        return (d * d).mean()
    val, grads = jax.value_and_grad(loss)(params)
    updates, opt = tx.update(grads, opt, params)
    return val, optax.apply_updates(params, updates), opt


# Megatron: attention heads and the MLP's hidden dim on `model`, keyed on
# (module, param) -- the last two names of a leaf's path, in params and in optax's
# mu / nu alike; everything else (LayerNorms, out biases, step counts) replicated.
_FLAX_SPECS = {("query", "kernel"): (None, "model", None), ("key", "kernel"): (None, "model", None),
               ("value", "kernel"): (None, "model", None), ("query", "bias"): ("model", None),
               ("key", "bias"): ("model", None), ("value", "bias"): ("model", None),
               ("out", "kernel"): ("model", None, None), ("mlp_in", "kernel"): (None, "model"),
               ("mlp_in", "bias"): ("model",), ("mlp_out", "kernel"): ("model", None)}


def _flax_spec_tree(tree):
    import jax

    def spec(path, leaf):
        names = tuple(getattr(k, "key", getattr(k, "name", None)) for k in path)[-2:]
        return _P(*_FLAX_SPECS.get(names, ()))
    return jax.tree_util.tree_map_with_path(spec, tree)


@functools.lru_cache(maxsize=None)
def _flax_state():
    """(params, x) as NumPy; init jitted (eagerly it compiles every op: 3.7 s)."""
    import jax
    x = _normal(_rng(12), (FLAX["b"], FLAX["s"], FLAX["d"]))
    params = jax.jit(_flax_model().init)(jax.random.key(0), x)
    return jax.tree.map(np.asarray, params), x


def _fb_inputs():
    params, x = _flax_state()
    return (params, x)


def _fb_specs(inputs):
    return (_flax_spec_tree(inputs[0]), _P("data", None, None))


def _fts_inputs():
    import jax
    params, x = _flax_state()
    opt = jax.tree.map(np.asarray, _flax_tx().init(params))
    y = _normal(_rng(13), x.shape)
    return (params, opt, x, y)


def _fts_specs(inputs):
    params, opt, _, _ = inputs
    return (_flax_spec_tree(params), _flax_spec_tree(opt), _P("data", None, None),
            _P("data", None, None))


def has_grad() -> bool:
    import shardc
    return hasattr(shardc, "value_and_grad")


def all_programs() -> dict[str, Program]:
    """Every benchmark program by name, in table order."""
    progs = [
        Program("seed_layer", seed_layer, (8,), ("batch",), _seed_inputs,
                (_P("batch", None), _P(), _P())),
        Program("mlp_tp", mlp_tp, (2, 4), ("data", "model"), _mlp_inputs,
                (_P("data", None), _P(None, "model"), _P("model"), _P("model", None), _P())),
        Program("transformer_block", transformer_block, (2, 4), ("data", "model"),
                _tb_inputs, _tb_specs()),
        Program("deep_mlp", deep_mlp, (2, 4), ("data", "model"), _dm_inputs, _dm_specs()),
    ]
    if has_grad():
        def ts_body(m, nn, params, x):
            import jax

            import shardc
            vg = jax.value_and_grad if m.__name__.startswith("jax") else shardc.value_and_grad
            return train_step(m, nn, params, x, vg)
        progs.append(Program("train_step", ts_body, (8,), ("fsdp",), _ts_inputs,
                             _ts_specs()))
    progs.append(Program("deep_mlp_scan", deep_mlp_scan, (2, 4), ("data", "model"),
                         _dms_inputs, _dms_specs(), takes_fw=True))
    if has_grad():
        progs += [Program("train_step_scan", train_step_scan, (8,), ("fsdp",), _tss_inputs,
                          _tss_specs(), takes_fw=True),
                  Program("train_step_remat", _train_step_remat, (8,), ("fsdp",),
                          _tss_inputs, _tss_specs(), takes_fw=True,
                          note="layer bodies checkpoint(policy=nothing_saveable)")]
    progs.append(Program("vmap_mlp", vmap_mlp, (8,), ("data",), _vm_inputs, _vm_specs(),
                         takes_fw=True, needs=("vmap", "grad"),
                         note="per-example grads: vmap(grad(loss), in_axes=(None, 0, 0))"))
    progs.append(Program("random_init", random_init, (2, 4), ("fsdp", "model"), _ri_inputs,
                         (_P(),), takes_fw=True, needs=("random",),
                         out_specs={k: v[3] for k, v in RANDOM_INIT.items()}, runs=3,
                         note="64M f32 from normal / truncated_normal, out_shardings"))
    progs.append(Program("eager_ops", eager_ops, (2, 4), ("data", "model"), _eager_inputs,
                         (_P("data", "model"), _P("data", "model")), eager_ops=EAGER_OPS,
                         note="f32[64,64] x, y both P(data, model); ops run eagerly"))
    progs += [Program("flax_block", flax_block, (2, 4), ("data", "model"), _fb_inputs,
                      _fb_specs, takes_fw=True,
                      note="flax.linen block, the same function under both jits"),
              Program("flax_train_step", flax_train_step, (2, 4), ("data", "model"),
                      _fts_inputs, _fts_specs, takes_fw=True,
                      note="flax block + jax.value_and_grad + optax.adamw")]
    progs += [_chain(1_000, "chain_1k"), _chain(10_000, "chain_10k"),
              _chain(100_000, "chain_100k")]
    return {p.name: p for p in progs}


def place(prog: Program, mesh, inputs):
    """device_put each input pytree with its spec pytree (NamedSharding on `mesh`)."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    out = []
    specs = prog.specs(inputs) if callable(prog.specs) else prog.specs
    for arg, spec in zip(inputs, specs):
        out.append(jax.tree.map(lambda s, a: jax.device_put(a, NamedSharding(mesh, s)),
                                spec, arg, is_leaf=lambda s: isinstance(s, PartitionSpec)))
    return tuple(out)
