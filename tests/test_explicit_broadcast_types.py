"""Explicit mode: broadcast_in_dim, repeat and tile type their results as jax's do.

broadcast_in_dim gives each result dim its operand dim's axes (a size-1 dim's too, on
size-1 mesh axes: once dropped, since Shardy's factor rule reads the inserted dims as
a reshape's), and keeps partial sums; repeat and tile keep the operand's type and ask
for out_sharding= / a reshard where a repeated dim is sharded. Types traced side by
side with jax.jit's; values against jax and NumPy. Also repeat's total_repeat_length
(cut, extended, with traced repeats), which shardc refused before."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp

X = np.arange(256, dtype=np.float32).reshape(16, 1, 16)


def _types(mesh, make, *args):
    """The outputs' types (str(typeof)) and values of make(m, lax) under shardc.jit and
    jax.jit; an error's class name where one raised."""
    res = []
    for fw, m, lax in ((shardc, snp, shardc.lax), (jax, jnp, jax.lax)):
        with fw.set_mesh(mesh):
            try:
                out = fw.jit(make(m, lax))(*args)
            except Exception as e:      # noqa: BLE001 (compared with jax's)
                res.append((type(e), None))
                continue
        res.append((str(jax.typeof(out)), np.asarray(out)))
    return res


SIZE_ONE = {   # on a (1, 8) mesh, x sharding the size-1 dim
    "expand_dims": lambda m, lax: lambda a: m.expand_dims(a, 0),
    "newaxis": lambda m, lax: lambda a: a[..., None],
    "grow the size-1 dim": lambda m, lax: lambda a: m.broadcast_to(a, (16, 4, 16)),
    "leading dim": lambda m, lax: lambda a: lax.broadcast_in_dim(a, (2, 16, 1, 16), (1, 2, 3)),
    "repeat another dim": lambda m, lax: lambda a: m.repeat(a, 2, axis=2),
    "repeat by counts": lambda m, lax: lambda a: m.repeat(a, np.arange(16) % 3, axis=2),
    "tile another dim": lambda m, lax: lambda a: m.tile(a, (1, 1, 2)),
    "tile to a higher rank": lambda m, lax: lambda a: m.tile(a, (2, 1, 1, 3)),
}


@pytest.mark.parametrize("name", SIZE_ONE)
def test_size_one_axes_stay_in_types(name):
    mesh = jax.make_mesh((1, 8), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    x = jax.device_put(X, NamedSharding(mesh, P("y", "x", None)))
    (ts, got), (tj, want) = _types(mesh, SIZE_ONE[name], x)
    assert "1@x" in tj or "@x" in tj, tj
    assert ts == tj
    np.testing.assert_array_equal(got, want)


SHARDED = {    # on a (2, 4) mesh
    "repeat a free dim": (lambda m, lax: lambda a: m.repeat(a, 2, axis=1), P("x", None)),
    "repeat a sharded dim": (lambda m, lax: lambda a: m.repeat(a, 2, axis=1), P("x", "y")),
    "repeat flattened": (lambda m, lax: lambda a: m.repeat(a, 2), P("x", None)),
    "repeat with out_sharding": (lambda m, lax: lambda a: m.repeat(
        a, 2, axis=1, out_sharding=P("x", "y")), P("x", "y")),
    "repeat to a length": (lambda m, lax: lambda a: m.repeat(
        a, 3, axis=1, total_repeat_length=40), P("x", None)),
    "tile a free dim": (lambda m, lax: lambda a: m.tile(a, (1, 2)), P("x", None)),
    "tile a sharded dim": (lambda m, lax: lambda a: m.tile(a, (2, 1)), P("x", None)),
    "tile nothing": (lambda m, lax: lambda a: m.tile(a, (1, 1)), P("x", "y")),
}


@pytest.mark.parametrize("name", SHARDED)
def test_repeat_and_tile_types_and_errors(name):
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    make, spec = SHARDED[name]
    x = jax.device_put(np.arange(128, dtype=np.float32).reshape(8, 16),
                       NamedSharding(mesh, spec))
    (ts, got), (tj, want) = _types(mesh, make, x)
    if isinstance(tj, type):    # shardc's error is also the class jax raises
        assert isinstance(ts, type) and tj.__name__ in {c.__name__ for c in ts.__mro__}, ts
        return
    assert ts == tj
    if want is not None:
        np.testing.assert_array_equal(got, want)


def test_broadcast_keeps_partial_sums():
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    a = jax.device_put(np.arange(128, dtype=np.float32).reshape(8, 16) / 50,
                       NamedSharding(mesh, P(None, "x")))
    b = jax.device_put(np.arange(64, dtype=np.float32).reshape(16, 4) / 30,
                       NamedSharding(mesh, P("x", None)))
    seen = []
    for fw, m, lax in ((shardc, snp, shardc.lax), (jax, jnp, jax.lax)):
        def f(a, b):
            c = m.dot(a, b, out_sharding=P(None, None, unreduced={"x"}))
            d = lax.broadcast_in_dim(c, (2, 8, 4), (1, 2))
            seen.append(str(jax.typeof(d)))
            return fw.reshard(d, P(None, "x")) if fw is shardc else \
                jax.sharding.reshard(d, P(None, "x"))
        with fw.set_mesh(mesh):
            out = fw.jit(f)(a, b)
        seen.append((str(jax.typeof(out)), np.asarray(out)))
    assert seen[0] == seen[2] == "float32[2,8,4]{U:x}"
    assert seen[1][0] == seen[3][0]
    want = np.broadcast_to(np.asarray(a) @ np.asarray(b), (2, 8, 4))
    np.testing.assert_allclose(seen[1][1], want, rtol=1e-5)
    np.testing.assert_allclose(seen[3][1], want, rtol=1e-5)


A = np.arange(12, dtype=np.float32).reshape(3, 4)
LENGTHS = [   # (function of m, arguments): jax cuts the repeats or extends the last run
    (lambda m: lambda x: m.repeat(x, np.array([2, 0, 3]), axis=0, total_repeat_length=4), (A,)),
    (lambda m: lambda x: m.repeat(x, np.array([2, 0, 3]), axis=0, total_repeat_length=8), (A,)),
    (lambda m: lambda x: m.repeat(x, np.array([2, 1, 0]), axis=0, total_repeat_length=5), (A,)),
    (lambda m: lambda x: m.repeat(x, 2, axis=1, total_repeat_length=5), (A,)),
    (lambda m: lambda x: m.repeat(x, 2, axis=1, total_repeat_length=0), (A,)),
    (lambda m: lambda x: m.repeat(x, 3, total_repeat_length=40), (A,)),
    (lambda m: lambda x, r: m.repeat(x, r, axis=0, total_repeat_length=6),
     (A, np.array([1, 2, 3], np.int32))),
    (lambda m: lambda x, r: m.repeat(x, r, axis=1, total_repeat_length=7),
     (A, np.array([1, 0, 3, 1], np.int32))),
    (lambda m: lambda x, r: m.repeat(x, r, axis=1, total_repeat_length=7), (A, np.int32(2))),
    (lambda m: lambda x: m.repeat(x[0, 0], 3, axis=0), (A,)),
    (lambda m: lambda x: m.repeat(x[0, 0], 3, total_repeat_length=2), (A,)),
]


@pytest.mark.parametrize("k", range(len(LENGTHS)))
def test_repeat_total_repeat_length(k):
    make, args = LENGTHS[k]
    got, want = shardc.jit(make(snp))(*args), jax.jit(make(jnp))(*args)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    if all(isinstance(a, np.ndarray) and a.ndim for a in args[1:]) or len(args) == 1:
        np.testing.assert_array_equal(np.asarray(make(snp)(*args)), np.asarray(want))


def test_repeat_traced_counts_need_a_length():
    with pytest.raises(shardc.errors.ShardcError, match="total_repeat_length"):
        shardc.jit(lambda x, r: snp.repeat(x, r, axis=0))(A, np.array([1, 2, 3], np.int32))


GRADS = {
    "repeat": lambda m: lambda a: (m.sin(m.repeat(a, 3, 1, total_repeat_length=40)) ** 2).sum(),
    "tile": lambda m: lambda a: (m.sin(m.tile(a, (1, 2))) ** 2).sum(),
    "broadcast": lambda m: lambda a: (m.sin(m.broadcast_to(a[:, None], (8, 3, 16))) ** 2).sum(),
}


@pytest.mark.parametrize("name", GRADS)
def test_gradients_keep_the_operands_type(name):
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    x = jax.device_put(np.arange(128, dtype=np.float32).reshape(8, 16) / 100,
                       NamedSharding(mesh, P("x", None)))
    with shardc.set_mesh(mesh):
        got = shardc.jit(shardc.grad(GRADS[name](snp)))(x)
    with jax.set_mesh(mesh):
        want = jax.jit(jax.grad(GRADS[name](jnp)))(x)
    assert str(jax.typeof(got)) == str(jax.typeof(want)) == "float32[8@x,16]"
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_partial_sums_repeated_are_summed_once():
    # jax refuses repeat / tile of partial sums; shardc sums them first (right values)
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    a = jax.device_put(np.arange(128, dtype=np.float32).reshape(8, 16) / 50,
                       NamedSharding(mesh, P(None, "x")))
    b = jax.device_put(np.arange(64, dtype=np.float32).reshape(16, 4) / 30,
                       NamedSharding(mesh, P("x", None)))
    ref = np.asarray(a) @ np.asarray(b)

    def f(a, b):
        c = snp.dot(a, b, out_sharding=P(None, None, unreduced={"x"}))
        return shardc.reshard(snp.repeat(c, 2, axis=1), P()), \
            shardc.reshard(snp.tile(c, (1, 2)), P())
    with shardc.set_mesh(mesh):
        r, t = shardc.jit(f)(a, b)
    np.testing.assert_allclose(np.asarray(r), np.repeat(ref, 2, axis=1), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(t), np.tile(ref, (1, 2)), rtol=1e-5)
