"""The jax.nn names issue 16 added (shardc/api/nn_more.py, nn.py's new parameters,
nn_init.py) vs jax.nn under jax.jit: values, dtypes, weak types and output shardings under
three layouts; gradients vs jax.grad; initializers vs jax's (with shardc.random)."""
import importlib

import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
from helpers import Case, compare_cases, data, namespaces

LAYOUTS = [("rep", P()), ("d0", P("x", None)), ("2d", P("x", "y"))]
A = data((8, 16), np.float32) * 3

ACT = {
    "softplus": lambda nn, x: nn.softplus(x),
    "soft_sign": lambda nn, x: nn.soft_sign(x),
    "sparse_plus": lambda nn, x: nn.sparse_plus(x),
    "sparse_sigmoid": lambda nn, x: nn.sparse_sigmoid(x),
    "celu": lambda nn, x: nn.celu(x, 1.5),
    "elu": lambda nn, x: nn.elu(x),
    "selu": lambda nn, x: nn.selu(x),
    "leaky_relu": lambda nn, x: nn.leaky_relu(x, 0.2),
    "relu6": lambda nn, x: nn.relu6(x),
    "hard_sigmoid": lambda nn, x: nn.hard_sigmoid(x),
    "hard_silu": lambda nn, x: nn.hard_silu(x),
    "hard_swish": lambda nn, x: nn.hard_swish(x),
    "hard_tanh": lambda nn, x: nn.hard_tanh(x),
    "log_sigmoid": lambda nn, x: nn.log_sigmoid(x),
    "glu": lambda nn, x: nn.glu(x),
    "glu_axis0": lambda nn, x: nn.glu(x, axis=0),
    "squareplus": lambda nn, x: nn.squareplus(x, 2),
    "mish": lambda nn, x: nn.mish(x),
    "identity": lambda nn, x: nn.identity(x),
    "tanh": lambda nn, x: nn.tanh(x),
    "log1mexp": lambda nn, x: nn.log1mexp(abs(x) + 0.01),
    "logmeanexp": lambda nn, x: nn.logmeanexp(x, axis=1),
    "logmeanexp_where": lambda nn, x: nn.logmeanexp(x, axis=0, where=x > -1, keepdims=True),
    "logsumexp_b": lambda nn, x: nn.logsumexp(x, axis=1, b=x[::-1]),
    "logsumexp_sign": lambda nn, x: nn.logsumexp(x, axis=0, b=x, return_sign=True),
    "logsumexp_where": lambda nn, x: nn.logsumexp(x, axis=1, where=x > 0),
    "softmax_where": lambda nn, x: nn.softmax(x, where=x > -1),
    "log_softmax_where": lambda nn, x: nn.log_softmax(x, axis=0, where=x < 1),
    "standardize": lambda nn, x: nn.standardize(x),
    "standardize_stable": lambda nn, x: nn.standardize(x, axis=0, algorithm="stable"),
    "standardize_given": lambda nn, x: nn.standardize(x, mean=0.5, variance=2.0),
    "standardize_where": lambda nn, x: nn.standardize(x, where=x > -2, epsilon=1e-3),
    "one_hot": lambda nn, x: nn.one_hot((abs(x) * 2).astype(np.int32), 7, axis=0),
}


def _nn(m):
    return m.nn


@pytest.mark.parametrize("lid,spec", LAYOUTS)
def test_activations(mesh2x4, lid, spec):
    cases = [Case(f"{n}-{lid}", lambda m, a, fn=fn: fn(m.nn, a), [A], [spec],
                  numpy_ref=False) for n, fn in ACT.items()]
    compare_cases(cases, mesh2x4)


@pytest.mark.parametrize("dt", [np.float16, "bfloat16", np.int32])
def test_activation_dtypes(mesh2x4, dt):
    x = data((8, 16), dt)
    names = [n for n in ACT if n not in ("one_hot", "log1mexp")]
    if dt == np.int32:    # jax.nn's composites that accept integers
        names = [n for n in names if n in ("softplus", "relu6", "leaky_relu", "hard_tanh",
                                           "identity", "tanh", "celu", "elu", "selu",
                                           "sparse_sigmoid", "log_sigmoid", "hard_sigmoid",
                                           "squareplus", "mish", "logsumexp_b")]
    compare_cases([Case(f"{n}-{dt}", lambda m, a, fn=ACT[n]: fn(m.nn, a), [x], [P("x", "y")],
                        numpy_ref=False) for n in names], mesh2x4)


def test_eager(mesh2x4):
    compare_cases([Case(n, lambda m, a, fn=ACT[n]: fn(m.nn, a), [A], [P("x", "y")],
                        numpy_ref=False) for n in ("softplus", "glu", "standardize",
                                                   "logsumexp_sign")],
                  mesh2x4, eager=True)


def _qkv(B=2, T=8, S=8, N=4, K=2, H=8, dtype=np.float32):
    q = data((B, T, N, H), dtype, seed=1)
    k = data((B, S, K, H), dtype, seed=2)
    v = data((B, S, K, H), dtype, seed=3)
    return q, k, v


ATTN = {
    "plain": lambda nn, q, k, v: nn.dot_product_attention(q, k, v),
    "causal": lambda nn, q, k, v: nn.dot_product_attention(q, k, v, is_causal=True),
    "scale": lambda nn, q, k, v: nn.dot_product_attention(q, k, v, scale=0.3,
                                                          implementation="xla"),
    "bias_mask": lambda nn, q, k, v: nn.dot_product_attention(
        q, k, v, bias=q[:, :, :, :1].reshape(2, 1, 8, 1) * 0.5,
        mask=(q[:, :, :1, :1] > -1).reshape(2, 1, 8, 1)),
    "bias_heads": lambda nn, q, k, v: nn.dot_product_attention(
        q, k, v, bias=q.transpose(0, 2, 1, 3)[..., :8] * 0.1),
    "window": lambda nn, q, k, v: nn.dot_product_attention(q, k, v, local_window_size=2),
    "window_lr": lambda nn, q, k, v: nn.dot_product_attention(q, k, v, is_causal=True,
                                                              local_window_size=(3, 0)),
    "seq_lengths": lambda nn, q, k, v: nn.dot_product_attention(
        q, k, v, query_seq_lengths=np.array([5, 8], np.int32),
        key_value_seq_lengths=np.array([8, 3], np.int32)),
    "residual": lambda nn, q, k, v: nn.dot_product_attention(q, k, v, is_causal=True,
                                                             return_residual=True),
    "3d": lambda nn, q, k, v: nn.dot_product_attention(q[0], k[0], v[0]),
}


@pytest.mark.parametrize("lid,spec", [("rep", P()), ("batch", P("x")),
                                      ("heads", P("x", None, "y"))])
def test_dot_product_attention(mesh2x4, lid, spec):
    q, k, v = _qkv()
    kspec = P(*spec[:2]) if len(spec) > 2 else spec      # K=2 heads: not split over y
    compare_cases([Case(f"{n}-{lid}", lambda m, q, k, v, fn=fn: fn(m.nn, q, k, v),
                        [q, k, v], [spec, kspec, kspec], numpy_ref=False)
                   for n, fn in ATTN.items()], mesh2x4)


@pytest.mark.parametrize("dt", ["bfloat16"])    # (jax's f16 path cannot compile on CPU)
def test_dot_product_attention_half(mesh2x4, dt):
    q, k, v = _qkv(dtype=dt)
    compare_cases([Case(f"{n}-{dt}", lambda m, q, k, v, fn=ATTN[n]: fn(m.nn, q, k, v),
                        [q, k, v], [P("x")] * 3, numpy_ref=False)
                   for n in ("plain", "causal", "residual")], mesh2x4)


def test_attention_errors(mesh2x4):
    q, k, v = _qkv()
    bad = {
        "heads": lambda m, q, k, v: m.nn.dot_product_attention(q[:, :, :3], k, v),
        "mask_dtype": lambda m, q, k, v: m.nn.dot_product_attention(
            q, k, v, mask=q[:, :, :1, :1].reshape(2, 1, 8, 1)),
        "impl": lambda m, q, k, v: m.nn.dot_product_attention(q, k, v, implementation="x"),
    }
    compare_cases([Case(n, fn, [q, k, v], [P()] * 3, numpy_ref=False)
                   for n, fn in bad.items()], mesh2x4)


GRADS = {n: ACT[n] for n in ("softplus", "soft_sign", "sparse_plus", "celu", "elu", "selu",
                             "leaky_relu", "relu6", "hard_silu", "hard_tanh", "log_sigmoid",
                             "glu", "squareplus", "mish", "logmeanexp", "logsumexp_b",
                             "logsumexp_where", "softmax_where", "log_softmax_where",
                             "standardize", "standardize_where")}


@pytest.mark.parametrize("name", sorted(GRADS) + ["attention", "attention_causal_window"])
def test_grad(mesh2x4, name):
    x = jax.device_put(data((8, 16), np.float32, "any", 9) * 2,
                       NamedSharding(mesh2x4, P("x", "y")))
    q, k, v = _qkv()
    ours_m, ref_m, _ = namespaces(mesh2x4)
    if name.startswith("attention"):
        kw = {"is_causal": True, "local_window_size": 3} if "causal" in name else {}

        def loss(nn):
            return lambda q, k, v: (nn.dot_product_attention(q, k, v, **kw) ** 2).sum()
        got = shardc.jit(shardc.grad(loss(ours_m.nn), argnums=(0, 1, 2)))(q, k, v)
        want = jax.jit(jax.grad(loss(ref_m.nn), argnums=(0, 1, 2)))(q, k, v)
    else:
        fn = GRADS[name]

        def loss(nn):
            return lambda a: sum((o * o).sum() for o in jax.tree_util.tree_leaves(fn(nn, a)))
        got = [shardc.jit(shardc.grad(loss(ours_m.nn)))(x)]
        want = [jax.jit(jax.grad(loss(ref_m.nn)))(np.asarray(x))]
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=3e-4, atol=3e-4)


def test_names_and_initializers_module():
    import shardc.nn.initializers as ini
    assert shardc.nn.initializers is ini
    for n in ("zeros", "ones", "constant", "uniform", "normal", "truncated_normal",
              "variance_scaling", "glorot_uniform", "glorot_normal", "xavier_uniform",
              "lecun_normal", "lecun_uniform", "he_normal", "he_uniform", "kaiming_normal",
              "orthogonal", "delta_orthogonal"):
        assert callable(getattr(ini, n)), n
    np.testing.assert_array_equal(ini.zeros(None, (2, 3)), np.zeros((2, 3), np.float32))
    np.testing.assert_array_equal(ini.constant(2.5)(None, (2,)), np.full(2, 2.5, np.float32))
    assert ini.ones(None, (2,), np.int8).dtype == np.int8


def _shardc_random():
    try:
        return importlib.import_module("shardc.random")
    except ImportError:
        pytest.skip("shardc.random is built by the random helper; these run after the merge")


INITS = [
    ("normal", lambda I: I.normal(0.5), (16, 8)),
    ("uniform", lambda I: I.uniform(2.0), (16, 8)),
    ("truncated_normal", lambda I: I.truncated_normal(1.0, lower=-1.0), (16, 8)),
    ("glorot_uniform", lambda I: I.glorot_uniform(), (16, 8)),
    ("glorot_normal", lambda I: I.glorot_normal(), (3, 16, 8)),
    ("lecun_normal", lambda I: I.lecun_normal(in_axis=0, out_axis=1), (16, 8)),
    ("he_uniform", lambda I: I.he_uniform(), (4, 4, 16, 8)),
    ("variance_scaling", lambda I: I.variance_scaling(0.5, "fan_geo_avg", "normal"), (16, 8)),
    ("orthogonal", lambda I: I.orthogonal(2.0), (16, 8)),
    ("orthogonal_col0", lambda I: I.orthogonal(column_axis=0), (8, 16)),
    ("delta_orthogonal", lambda I: I.delta_orthogonal(), (3, 3, 8, 8)),
]


@pytest.mark.parametrize("name,make,shape", INITS, ids=[i[0] for i in INITS])
def test_initializers_match_jax(name, make, shape):
    r = _shardc_random()
    import jax.nn.initializers as J
    import shardc.nn.initializers as S
    key, jkey = r.key(0), jax.random.key(0)
    got = shardc.jit(lambda k: make(S)(k, shape))(key)
    want = jax.jit(lambda k: make(J)(k, shape))(jkey)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
