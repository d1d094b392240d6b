"""pure_callback and io_callback against jax's: values, output shardings, vmap's methods,
gradients (an error, or custom_jvp around the call), shard_map, effects and ordering,
the checks of what the function returns, and jax code that calls them inside shardc.jit."""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax.experimental import io_callback as jax_io_callback  # noqa: E402
from jax.sharding import NamedSharding, SingleDeviceSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import shardc  # noqa: E402
import shardc.numpy as snp  # noqa: E402
from shardc.experimental import io_callback  # noqa: E402

SDS = jax.ShapeDtypeStruct


def host_sin(x):
    return np.sin(np.asarray(x))


@pytest.fixture(scope="module")
def mesh():
    return jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)


def test_pure_callback_in_jit_matches_jax(mesh):
    def f(x, np_, pc):
        y = pc(host_sin, SDS(x.shape, x.dtype), x)
        z = pc(lambda a, b: (np.asarray(a) * 2, np.asarray(b).sum()),
               (SDS(x.shape, x.dtype), SDS((), x.dtype)), y, b=x)
        return np_.cos(z[0]) + z[1]
    x = jax.device_put(np.arange(32, dtype=np.float32).reshape(8, 4),
                       NamedSharding(mesh, P("x", "y")))
    got = shardc.jit(lambda x: f(x, snp, shardc.pure_callback))(x)
    want = jax.jit(lambda x: f(x, jnp, jax.pure_callback))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    assert got.sharding.is_equivalent_to(want.sharding, 2)
    np.testing.assert_allclose(np.asarray(got), np.cos(2 * np.sin(np.asarray(x)))
                               + np.asarray(x).sum(), rtol=1e-5)


def test_pure_callback_eagerly():
    out = shardc.pure_callback(host_sin, SDS((3,), np.float32), np.ones(3, np.float32))
    assert isinstance(out, jax.Array) and out.dtype == np.float32
    np.testing.assert_allclose(np.asarray(out), np.sin(np.ones(3)), rtol=1e-6)


@pytest.mark.parametrize("method", ["sequential", "sequential_unrolled", "expand_dims",
                                    "broadcast_all", "legacy_vectorized"])
def test_vmap_methods_match_jax(method):
    seen_shapes = {}

    def g(x, y, pc, who):
        def host(a, b):
            seen_shapes.setdefault(who, []).append((np.shape(a), np.shape(b)))
            return np.asarray(a) + np.asarray(b)
        return pc(host, SDS(x.shape, x.dtype), x, y, vmap_method=method)
    xs = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.full(4, 0.5, np.float32)
    got = shardc.jit(shardc.vmap(lambda x, y: g(x, y, shardc.pure_callback, "s"),
                                 in_axes=(0, None)))(xs, y)
    want = jax.jit(jax.vmap(lambda x, y: g(x, y, jax.pure_callback, "j"),
                            in_axes=(0, None)))(xs, y)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert seen_shapes["s"] == seen_shapes["j"]      # what the function was called with


def test_vmap_needs_a_method_and_a_known_one():
    f = shardc.vmap(lambda x: shardc.pure_callback(host_sin, SDS((), np.float32), x))
    with pytest.raises(shardc.ShardcError, match="vmap_method=None") as e:
        f(np.ones(3, np.float32))
    assert "test_callbacks_io.py" in str(e.value)
    with pytest.raises(ValueError, match="vmap_method must be"):
        shardc.pure_callback(host_sin, SDS((), np.float32), 1.0, vmap_method="bogus")


def test_gradient_is_an_error_naming_the_line_and_custom_jvp_works():
    def f(x):
        return shardc.pure_callback(host_sin, SDS((), np.float32), x)
    with pytest.raises(ValueError, match="Pure callbacks do not support JVP") as e:
        shardc.grad(f)(1.0)
    assert "test_callbacks_io.py" in str(e.value)

    def make(pc, custom_jvp, cos):
        @custom_jvp
        def s(x):
            return pc(host_sin, SDS(x.shape, x.dtype), x)

        @s.defjvp
        def s_jvp(primals, tangents):
            (x,), (t,) = primals, tangents
            return s(x), cos(x) * t
        return s
    s1 = make(shardc.pure_callback, shardc.custom_jvp, snp.cos)
    s2 = make(jax.pure_callback, jax.custom_jvp, jnp.cos)
    x = np.linspace(0, 1, 5, dtype=np.float32)
    got = shardc.jit(shardc.grad(lambda x: s1(x).sum()))(x)
    want = jax.jit(jax.grad(lambda x: s2(x).sum()))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_unused_pure_call_is_dropped_unused_io_call_runs():
    calls = []

    def count(x):
        calls.append(1)
        return np.asarray(x)

    def f(x):
        shardc.pure_callback(count, SDS((), np.float32), x)
        io_callback(count, SDS((), np.float32), x)
        return x + 1
    traced = shardc.jit(f).trace(np.float32(1))
    assert "pure_callback" not in traced.propagate().ir and "io_callback" in traced.ir
    shardc.jit(f)(np.float32(1))
    assert len(calls) == 1


def test_ordered_io_callback_runs_in_program_order_through_loops():
    def run(io, fori, where):
        def rec(tag, v):
            where.append((int(tag), float(v)))
            return np.asarray(v) * 2

        def f(x):
            a = io(rec, SDS((), np.float32), 0, x, ordered=True)

            def body(i, c):
                return io(rec, SDS((), np.float32), 1, c, ordered=True)
            b = fori(0, 3, body, a)
            io(lambda t, v: where.append((int(t), float(v))), None, 2, b + 1, ordered=True)
            return b
        return f
    got, want = [], []
    r1 = shardc.jit(run(io_callback, shardc.lax.fori_loop, got))(np.float32(1))
    r2 = jax.jit(run(jax_io_callback, jax.lax.fori_loop, want))(np.float32(1))
    assert float(r1) == float(r2) == 16.0
    assert got == want == [(0, 1.0), (1, 2.0), (1, 4.0), (1, 8.0), (2, 17.0)]


def test_io_callback_vmap_loops_and_ordered_vmap_raises():
    got, want = [], []

    def f(io, log):
        def rec(v):
            log.append(float(v))
            return np.asarray(v) + 1
        return lambda x: io(rec, SDS((), np.float32), x)
    xs = np.arange(4, dtype=np.float32)
    a = shardc.jit(shardc.vmap(f(io_callback, got)))(xs)
    b = jax.jit(jax.vmap(f(jax_io_callback, want)))(xs)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert got == want == [0.0, 1.0, 2.0, 3.0]
    g = shardc.vmap(lambda x: io_callback(np.asarray, SDS((), np.float32), x, ordered=True))
    with pytest.raises(shardc.ShardcError, match="Cannot `vmap` ordered IO callback"):
        g(xs)


def test_pure_callback_in_shard_map_runs_per_block(mesh):
    blocks = []

    def body(x, pc):
        def host(b):
            blocks.append(np.shape(b))
            return np.asarray(b) * 10
        return pc(host, SDS(x.shape, x.dtype), x)
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    specs = dict(mesh=mesh, in_specs=P("x", "y"), out_specs=P("x", "y"))
    got = shardc.jit(shardc.shard_map(lambda b: body(b, shardc.pure_callback), **specs))(x)
    n = len(blocks)
    want = jax.jit(jax.shard_map(lambda b: body(b, jax.pure_callback), **specs))(x)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    assert blocks[:n] == blocks[n:] == [(4, 1)] * 8


def test_sharding_names_the_device(mesh):
    dev = mesh.devices.flat[3]
    f = shardc.jit(lambda x: shardc.pure_callback(host_sin, SDS((8,), np.float32), x,
                                                  sharding=SingleDeviceSharding(dev)),
                   in_shardings=NamedSharding(mesh, P("x")))
    x = np.linspace(0, 1, 8, dtype=np.float32)
    assert "device_ids=[3]" in f.lower(x).as_text()
    np.testing.assert_allclose(np.asarray(f(x)), np.sin(x), rtol=1e-6)
    other = SingleDeviceSharding(jax.devices()[0])
    g = shardc.jit(lambda x: shardc.pure_callback(host_sin, SDS((8,), np.float32), x,
                                                  sharding=other))
    with pytest.raises(ValueError, match="not in the device assignment"):
        g(jax.device_put(x, jax.devices()[5]))


def test_what_the_function_returns_is_checked_at_the_users_line():
    def wrong_shape(x):
        return np.zeros(3, np.float32)
    f = shardc.jit(lambda x: shardc.pure_callback(wrong_shape, SDS((2,), np.float32), x))
    with pytest.raises(shardc.ShardcError, match=r"Incorrect output shape.*\(2,\).*\(3,\)") \
            as e:
        f(np.ones(2, np.float32))
    assert "test_callbacks_io.py" in str(e.value) and "pure_callback(wrong_shape)" in str(e.value)
    g = shardc.jit(lambda x: shardc.pure_callback(lambda v: np.asarray(v, np.int32),
                                                  SDS((2,), np.float32), x))
    with pytest.raises(shardc.ShardcError, match="Incorrect output dtype"):
        g(np.ones(2, np.float32))
    with pytest.raises(ValueError, match="64-bit"):
        shardc.jit(lambda x: shardc.pure_callback(host_sin, SDS((2,), np.float64), x))(
            np.ones(2, np.float32))
    # the program still runs afterwards
    h = shardc.jit(lambda x: shardc.pure_callback(host_sin, SDS((2,), np.float32), x))
    np.testing.assert_allclose(np.asarray(h(np.ones(2, np.float32))), np.sin(np.ones(2)),
                               rtol=1e-6)


def test_jax_code_calling_callbacks_inside_shardc_jit(mesh):
    log = []

    def f(x):
        y = jax.pure_callback(host_sin, SDS(x.shape, x.dtype), x, vmap_method="sequential")
        z = jax.vmap(lambda r: jax.pure_callback(host_sin, SDS(r.shape, r.dtype), r,
                                                 vmap_method="expand_dims"))(y)
        jax_io_callback(lambda v: log.append(float(v)), None, z.sum(), ordered=True)
        return jnp.tanh(z)
    x = jax.device_put(np.arange(8, dtype=np.float32).reshape(2, 4) / 8,
                       NamedSharding(mesh, P("x")))
    got = shardc.jit(f)(x)
    want = jax.jit(f)(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    assert len(log) == 2 and log[0] == pytest.approx(log[1], rel=1e-6)


@pytest.mark.parametrize("kind", ["debug", "io"])
@pytest.mark.parametrize("unroll", [2, 3, True])
def test_ordered_callbacks_keep_their_order_in_an_unrolled_scan(kind, unroll):
    # the steps unrolled into one loop trip shared no token: [1, 0, 3, 2, 5, 4]
    def run(jit, lax, np_):
        log = []

        def cb(i):
            log.append(int(i))
            return np.int32(0)

        def body(c, i):
            if kind == "debug":
                jax.debug.callback(cb, i, ordered=True)
            else:
                jax_io_callback(cb, jax.ShapeDtypeStruct((), jnp.int32), i, ordered=True)
            return c, None
        jit(lambda x: lax.scan(body, x, np_.arange(6), unroll=unroll))(np.float32(0))
        jax.effects_barrier()
        return log
    assert run(shardc.jit, shardc.lax, snp) == run(jax.jit, jax.lax, jnp) == list(range(6))
