"""jit(..., keep_unused=False), jax's default: the arguments a program does not read are
dropped after tracing (the caller still passes them), so they neither place its result
nor are donated; keep_unused=True keeps them. Compared with jax.jit."""
import contextlib
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp

A = np.arange(16, dtype=np.float32)


def _where(o):
    """What a result's placement is: sharding kind, spec, devices, committed."""
    s = o.sharding
    return (type(s).__name__, getattr(s, "spec", None), sorted(d.id for d in o.devices()),
            o.committed)


def _cases(mesh):
    xs = lambda: jax.device_put(A, NamedSharding(mesh, P("x")))    # noqa: E731
    on3 = lambda: jax.device_put(A, jax.devices()[3])               # noqa: E731
    sh = lambda: NamedSharding(mesh, P("x"))                        # noqa: E731
    return {
        # (function, jit keywords, arguments (made per call), set_mesh)
        "no argument read": (lambda np_, x: np_.zeros(3), {}, lambda: (xs(),), False),
        "first unused": (lambda np_, x, y: y * 2, {}, lambda: (xs(), 1.0), False),
        "middle unused": (lambda np_, x, y, z: x + z, {}, lambda: (A, xs(), A), False),
        "last unused, sharded kept": (lambda np_, x, y: x * 2, {}, lambda: (xs(), A), False),
        "pytree leaf unused": (lambda np_, d: d["b"] * 2, {},
                               lambda: ({"a": xs(), "b": A},), False),
        "all unused, NumPy": (lambda np_, x, y: np_.ones(2), {}, lambda: (A, A), False),
        "committed to one device, unused": (lambda np_, x, y: y * 2, {},
                                            lambda: (on3(), 1.0), False),
        "on one device, unused, beside a sharded one": (lambda np_, x, y: y * 2, {},
                                                        lambda: (on3(), xs()), False),
        "on one device, read, beside an unused sharded one": (
            lambda np_, x, y: x * 2, {}, lambda: (on3(), xs()), False),
        "unused on a one-device mesh": (lambda np_, x, y: y * 2, {}, lambda: (jax.device_put(
            A, NamedSharding(jax.make_mesh((1,), ("x",)), P("x"))), 1.0), False),
        "Explicit mesh, unused": (lambda np_, x, y: y * 2, {}, lambda: (jax.device_put(
            A, NamedSharding(jax.make_mesh((8,), ("x",)), P("x"))), 1.0), False),
        "static and unused": (lambda np_, x, n, y: y * n, dict(static_argnums=2),
                              lambda: (xs(), 3, 1.0), False),
        "in_shardings on the unused one": (lambda np_, x, y: y * 2,
                                           {} if mesh is None else
                                           dict(in_shardings=(sh(), None)),
                                           lambda: (xs(), 1.0), False),
        "under set_mesh": (lambda np_, x: np_.zeros(3), {}, lambda: (xs(),), True),
        "keep_unused=True": (lambda np_, x, y: y * 2, dict(keep_unused=True),
                             lambda: (xs(), 1.0), False),
    }


@pytest.mark.parametrize("name", list(_cases(None)))
def test_results_are_placed_as_jax_places_them(mesh8, name):
    fun, kw, args, in_mesh = _cases(mesh8)[name]
    got = {}
    for jit, np_ in ((jax.jit, jnp), (shardc.jit, snp)):
        f = jit(lambda *a, np_=np_: fun(np_, *a), **kw)
        with jax.set_mesh(mesh8) if in_mesh else contextlib.nullcontext():
            out = jax.tree.leaves(f(*args()))
            c = f.lower(*args()).compile()
        got[jit] = ([_where(o) for o in out], [np.asarray(o) for o in out],
                    [s is None for s in jax.tree.leaves(c.input_shardings,
                                                        is_leaf=lambda s: s is None)])
    (jw, jv, jn), (sw, sv, sn) = got[jax.jit], got[shardc.jit]
    assert sw == jw
    assert sn == jn      # (a dropped argument's input sharding is None)
    for a, b in zip(sv, jv):
        np.testing.assert_array_equal(a, b)


def test_dropped_arguments_are_not_in_the_program_nor_donated(mesh8):
    def make(jit):
        a = jax.device_put(A, NamedSharding(mesh8, P("x")))
        b = jax.device_put(A + 1, NamedSharding(mesh8, P("x")))
        return jit(lambda x, y, z: y * 2, donate_argnums=(0, 1)), (a, b, np.float32(3))
    for jit in (jax.jit, shardc.jit):
        f, (a, b, c) = make(jit)
        assert _main_args(f.lower(a, b, c).as_text()) == ["tensor<16xf32>"]     # y only
        out = f(a, b, c)
        np.testing.assert_array_equal(np.asarray(out), 2 * (A + 1))
        assert (a.is_deleted(), b.is_deleted()) == (False, True), jit
    f = shardc.jit(lambda x, y, z: y * 2, keep_unused=True)
    assert _main_args(f.lower(A, A, c).as_text()) == ["tensor<16xf32>"] * 2 + ["tensor<f32>"]


def _main_args(text):
    """The types of a module's @main arguments."""
    line = next(ln for ln in text.splitlines() if "@main(" in ln)
    return re.findall(r"%arg\d+: (tensor<[^>]*>)", line.split(") -> ")[0])


def test_cached_calls_skip_dropped_arguments(mesh8):
    # the C++ dispatch passes the executable only the kept leaves: the second and
    # later calls never come back to Python, with each call's own values; a dropped
    # argument is not read, so it may even be deleted (as with jax.jit)
    x = jax.device_put(A, NamedSharding(mesh8, P("x")))
    f = shardc.jit(lambda x, unused, z: x * z)
    c = f.lower(x, x, 1.0).compile()
    misses = []
    miss = f._cache_miss
    f._dispatch = shardc.api.jit.runtime.dispatcher(
        "f", lambda *a, **k: (misses.append(1), miss(*a, **k))[1])
    u = jax.device_put(A, NamedSharding(mesh8, P("x")))
    for i in range(5):
        if i == 4:
            u.delete()
        for g in (f, c):
            out = g(x, u, np.float32(i))
            np.testing.assert_array_equal(np.asarray(out), A * i)
            assert out.sharding.spec == P("x")
        assert len(misses) == 1 or i == 4


def test_an_unused_auto_argument_still_reports_a_sharding(mesh8):
    f = shardc.jit(lambda x, y: y * 2, in_shardings=(shardc.AUTO(mesh8), shardc.AUTO(mesh8)))
    z = np.ones((8, 4), np.float32)
    lowered = f.lower(z, z)
    assert len(_main_args(lowered.as_text())) == 1
    c = lowered.compile()
    (sx, sy), _ = c.input_shardings
    assert isinstance(sx, NamedSharding) and isinstance(sy, NamedSharding)
    np.testing.assert_array_equal(np.asarray(c(z, z)), 2 * z)


def test_an_argument_on_another_device_is_an_error_only_if_read(mesh8):
    on3 = jax.device_put(A, jax.devices()[3])
    xs = jax.device_put(A, NamedSharding(mesh8, P("x")))
    for f in (shardc.jit(lambda x, y: x + y), shardc.jit(lambda x, y: y, keep_unused=True)):
        with pytest.raises(shardc.errors.ShardcError, match="committed to device"):
            f(on3, xs)


def test_arguments_committed_to_two_devices_are_an_error_if_read():
    """As jax.jit: two read arguments committed to different single devices are refused
    (shardc ran on the last one's device); unread, or uncommitted, they are not."""
    put = lambda i: jax.device_put(A, jax.devices()[i])     # noqa: E731
    for m in (jax, shardc):
        add, first = m.jit(lambda x, y: x + y), m.jit(lambda x, y: x * 2)
        assert add(put(1), put(1)).devices() == {jax.devices()[1]}
        with pytest.raises((ValueError, shardc.errors.ShardcError),
                           match="incompatible devices"):
            add(put(1), put(2))     # after a call on one device: not from a cache
        assert first(put(1), put(2)).devices() == {jax.devices()[1]}
        assert add(put(1), A).devices() == {jax.devices()[1]}
    for n in (jnp, snp):      # an eager op too
        assert n.add(put(1), put(1)).devices() == {jax.devices()[1]}
        with pytest.raises((ValueError, shardc.errors.ShardcError),
                           match="incompatible devices"):
            n.add(put(1), put(2))


def test_eager_transforms_of_calls_with_more_dropped_arguments():
    # an eager transform's program is shared by traces of equal text: one that drops
    # more arguments has the same text, and takes as many leaves as its call has
    g = lambda x, *unused: x * 2      # noqa: E731
    b = A.reshape(8, 2)
    for n in (2, 3):
        np.testing.assert_array_equal(np.asarray(shardc.vmap(g)(*[b] * n)), 2 * b)
        np.testing.assert_array_equal(
            np.asarray(shardc.grad(lambda x, *u: snp.sum(x * 2))(*[A] * n)), 2 + 0 * A)


def test_a_deleted_argument_is_named_by_its_position(mesh8):
    f = shardc.jit(lambda u, v, x: x * 2)
    x = jax.device_put(A, NamedSharding(mesh8, P("x")))
    f(A, A, x)
    x.delete()
    for g in (f, f.lower(A, A, A).compile()):
        with pytest.raises(shardc.errors.ShardcError, match="argument 2 has been deleted"):
            g(A, A, x)
