"""Eager mode: shardc.numpy / shardc.nn on concrete arrays run at once and return
jax.Arrays whose values, dtypes, weak types and shardings equal jax.numpy's."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import Case, assert_close, compare_cases, data, sample

EAGER = {
    # elementwise
    "sin": lambda m, x, y: m.sin(x),
    "add": lambda m, x, y: x + y,
    "scalar": lambda m, x, y: 2 * x - 1.5,
    "divide_int": lambda m, x, y: m.divide(m.round(x).astype(m.int32), 3),
    "where": lambda m, x, y: m.where(x > y, x, 0.0),
    "clip": lambda m, x, y: m.clip(x, -1, 1),
    "power": lambda m, x, y: m.power(m.abs(x), y),
    "erf_rsqrt": lambda m, x, y: (m.erf(x), m.rsqrt(m.abs(y) + 1)),
    "compare": lambda m, x, y: (x <= y, m.logical_not(x > 0)),
    # reductions
    "sum0": lambda m, x, y: m.sum(x, axis=0),
    "mean_kd": lambda m, x, y: m.mean(x, axis=1, keepdims=True),
    "max_argmax": lambda m, x, y: (m.max(x), m.argmax(x, axis=0)),
    "var_std": lambda m, x, y: (m.var(x, axis=1), m.std(y)),
    "cumsum": lambda m, x, y: m.cumsum(x, axis=1),
    "any": lambda m, x, y: m.any(x > 1, axis=0),
    # shapes
    "reshape_T": lambda m, x, y: x.reshape(4, 32).T,
    "concat": lambda m, x, y: m.concatenate([x, y], axis=0),
    "stack_split": lambda m, x, y: m.split(m.stack([x, y], axis=1), 2, axis=0),
    "pad": lambda m, x, y: m.pad(x, ((1, 1), (0, 2))),
    "expand_squeeze": lambda m, x, y: m.squeeze(m.expand_dims(x, 1), 1),
    "broadcast": lambda m, x, y: m.broadcast_to(x[:, :1], (8, 16)),
    "astype": lambda m, x, y: (x.astype(m.bfloat16), x.astype(m.int32), m.astype(y, bool)),
    # products
    "matmul": lambda m, x, y: x @ y.T,
    "einsum": lambda m, x, y: m.einsum("ij,ik->jk", x, y),
    "dot_vec": lambda m, x, y: m.dot(x, y[0]),
    # indexing
    "slices": lambda m, x, y: (x[1:5, ::-2], x[3], x[None, ..., 2]),
    "gather": lambda m, x, y: x[np.array([3, 0, -1])],
    "gather_cols": lambda m, x, y: x[:, np.array([[1, 2], [3, 15]])],
    # nn
    "relu_gelu": lambda m, x, y: (m.nn.relu(x), m.nn.gelu(y)),
    "softmax": lambda m, x, y: (m.nn.softmax(x), m.nn.log_softmax(x, axis=0)),
    "logsumexp": lambda m, x, y: m.nn.logsumexp(x, axis=1),
    "sigmoid_silu": lambda m, x, y: (m.nn.sigmoid(x), m.nn.silu(y)),
}


@pytest.mark.parametrize("layout", sample(["2d", "single", "rows"], 2))
def test_eager_ops(mesh2x4, layout):
    """Every function on committed sharded arrays (and on single-device arrays)."""
    x, y = data((8, 16), np.float32), data((8, 16), np.float32, seed=1)
    specs = {"2d": [P("x", "y"), P("x", "y")], "rows": [P("x", None), P(None, ("x", "y"))],
             "single": [None, None]}[layout]
    compare_cases([Case(n, fn, [x, y], specs) for n, fn in EAGER.items()],
                  mesh2x4 if layout != "single" else None, eager=True)


def test_eager_dtypes(mesh2x4):
    cases = []
    for dt in (np.bool_, np.int32, np.uint32, np.float16, "bfloat16"):
        x = data((8, 16), dt, "small")
        name = np.dtype(jnp.bfloat16 if dt == "bfloat16" else dt).name
        cases += [Case(f"{name}-{n}", fn, [x, x], [P("x", "y")] * 2) for n, fn in [
            ("add", lambda m, x, y: m.add(x, y)), ("sum", lambda m, x, y: m.sum(x, axis=0)),
            ("max", lambda m, x, y: m.max(x, axis=1)), ("T", lambda m, x, y: x.T),
            ("getitem", lambda m, x, y: x[2:, 1]), ("weak", lambda m, x, y: x * 2)]]
    compare_cases(cases, mesh2x4, eager=True)


CREATION = {
    "zeros": lambda m: m.zeros((3, 4)),
    "ones_int": lambda m: m.ones(5, m.int32),
    "full": lambda m: m.full((2, 2), 1.5),
    "full_weak": lambda m: m.full((2,), 3),
    "arange": lambda m: m.arange(10),
    "arange_float": lambda m: m.arange(0.0, 2.0, 0.25),
    "eye": lambda m: m.eye(4, k=1),
    "iota": lambda m: m.iota(m.int32, 6),
    "asarray": lambda m: m.asarray([1.0, 2.0]),
    "zeros_like": lambda m: m.zeros_like(np.ones((2, 3), np.int32)),
}


@pytest.mark.parametrize("name", sorted(CREATION))
def test_eager_creation(name):
    """Creation functions outside jit give jax.Arrays (as jax.numpy's)."""
    from helpers import namespaces
    ours_m, ref_m, _ = namespaces()
    got, want = CREATION[name](ours_m), CREATION[name](ref_m)
    assert isinstance(got, jax.Array), type(got)
    assert_close(got, want, name)
    assert got.weak_type == want.weak_type, (got.weak_type, want.weak_type)


def test_eager_numpy_inputs():
    """NumPy inputs become jax.Arrays (replicated on the default device)."""
    a = data((4, 8), np.float32)
    for fn in (lambda m: m.sin(a), lambda m: m.sum(a, axis=0), lambda m: a @ m.ones((8, 2))):
        got, want = fn(snp), fn(jnp)
        assert isinstance(got, jax.Array)
        assert_close(got, want)


def test_eager_matches_jit(mesh2x4):
    """The same function eagerly and under shardc.jit: equal values and shardings."""
    x = jax.device_put(data((8, 16), np.float32), NamedSharding(mesh2x4, P("x", "y")))

    def f(x):
        return snp.tanh(x @ x.T) + snp.sum(x, axis=1, keepdims=True)
    eager, jitted = f(x), shardc.jit(f)(x)
    assert_close(eager, jitted)
    assert eager.sharding.is_equivalent_to(jitted.sharding, 2), (eager.sharding, jitted.sharding)


def test_eager_errors(mesh2x4):
    x = jax.device_put(data((8, 16), np.float32), NamedSharding(mesh2x4, P("x", None)))
    with pytest.raises(shardc.ShardcError, match="test_eager.py"):
        snp.add(x, np.ones((3, 5), np.float32))
    with pytest.raises(shardc.ShardcError, match="cannot reshape"):
        snp.reshape(x, (3, 5))


def test_engine_eager_errors_name_the_line():
    with pytest.raises(shardc.ShardcError, match=r"test_eager.py:\d+: cannot reshape"):
        snp.reshape(np.ones((8, 16), np.float32), (3, 5))
