"""Narrow index dtypes (int8, uint8, uint16) into a dim longer than they can count: the
arithmetic with the dim's size (i + n for a negative index, comparing with n, clamping
to n - 1) is done in a dtype that holds n, as jax widens them, in jit and eagerly."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp

X = np.arange(600, dtype=np.float32).reshape(300, 2)
IDX = {np.uint8: [[0, 1], [255, 200], [3, 7]], np.int8: [[-1, 0], [-128, 127], [5, -3]]}


def _same(got, want):
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("dt", [np.uint8, np.int8])
def test_take_along_axis(dt):
    i = np.array(IDX[dt], dt)

    def f(m):
        return lambda a, i: (m.take_along_axis(a, i, axis=0),
                             m.take_along_axis(a, i, axis=0, mode="clip"),
                             m.take_along_axis(a, i, axis=0, fill_value=-1.0),
                             m.take_along_axis(a, i, axis=0, mode="promise_in_bounds"))
    want = jax.jit(f(jnp))(X, i)
    _same(f(jnp)(X, i), want)
    _same(shardc.jit(f(snp))(X, i), want)
    _same(f(snp)(X, i), want)


def test_take_int8_into_a_longer_axis():
    """A negative int8 index counts from the end of the whole axis, as NumPy's (jax's take
    adds the axis size in int8: -1 read x[43] of 300; its x[i] raises), clip and wrap
    likewise."""
    x = np.arange(300, dtype=np.float32) * 2
    i = np.array([-1, -128, 127, 5, -3], np.int8)

    def f(m):
        return lambda a, i: (m.take(a, i), m.take(a, i, mode="clip"),
                             m.take(a, i, mode="wrap"), m.asarray(a)[i],
                             m.asarray(a).reshape(150, 2)[i // 2, i % 2])
    want = (np.take(x, i), np.take(x, i, mode="clip"), np.take(x, i, mode="wrap"), x[i],
            x.reshape(150, 2)[i // 2, i % 2])
    _same(shardc.jit(f(snp))(x, i), want)
    eager = (snp.take(x, i), snp.take(x, i, mode="clip"), snp.take(x, i, mode="wrap"))
    _same(eager, want)      # (eagerly, x[i] is jax's own)
    _same([jax.jit(lambda a, i: jnp.take(a, i, mode="clip"))(x, i)], want[1:2])


def test_take_uint8_constants_into_a_longer_axis():
    """NumPy uint8 indices (a scalar, an array) into an axis longer than 255, eagerly and
    as constants under jit (their bounds were computed in uint8: 300 overflowed)."""
    x = np.arange(600, dtype=np.float32).reshape(2, 300)
    i = np.array([[255, 3], [200, 0]], np.uint8)

    def f(m):
        return lambda a: (m.take(a, i, axis=1), m.take(a, np.uint8(200), axis=1),
                          m.take(a, i, axis=1, mode="clip"), m.take(a, i[0]),
                          m.asarray(a)[:, i], m.asarray(a)[i[0] % 2, i[1]])
    want = jax.jit(f(jnp))(x)
    _same(f(jnp)(x), want)
    _same(shardc.jit(f(snp))(x), want)
    _same(f(snp)(x), want)


def _updates(m, mode):
    kw = {} if mode is None else dict(mode=mode)
    return lambda a, i, s, v: (
        m.asarray(a).at[i].set(v, **kw), m.asarray(a).at[i].add(v, **kw),
        m.asarray(a).at[i].multiply(v, **kw), m.asarray(a).at[i].min(v, **kw),
        m.asarray(a).at[i].max(v, **kw), m.asarray(a).at[i].get(**kw),
        m.asarray(a).at[s].add(1.0, **kw), m.asarray(a).at[s].get(**kw),
        m.asarray(a).at[i].apply(lambda t: t * 3, **kw))


@pytest.mark.parametrize("dt,n,mode", [(np.uint8, 300, None), (np.uint8, 300, "clip"),
                                       (np.uint8, 300, "fill"), (np.uint16, 70000, None)])
def test_at_updates_with_unsigned_indices_into_a_longer_axis(dt, n, mode):
    """.at[i] with an unsigned index (traced, and a NumPy constant) into an axis longer
    than its dtype counts: the index was cut to min(i, n) in its own dtype (300 -> 44
    in uint8), so .at[u8].set / add / multiply / min wrote element 44 for index 100."""
    x = np.arange(n, dtype=np.float32)
    i = np.array([0, 5, 100, 255, 200] if dt == np.uint8 else [0, 5, 65535, 300, 9], dt)
    s, v = dt(200), np.arange(2, 7, dtype=np.float32)
    want = jax.jit(_updates(jnp, mode))(x, i, s, v)
    _same(shardc.jit(_updates(snp, mode))(x, i, s, v), want)
    _same(shardc.jit(lambda a, v: _updates(snp, mode)(a, i, s, v))(x, v), want)


def test_at_updates_with_int8_indices_into_a_longer_axis():
    """As with the int32 indices of the same values (jax's own raises here: it adds the
    axis size to a negative index as an int8 constant)."""
    x = np.arange(300, dtype=np.float32)
    i, v = np.array([-1, -128, 127, 5, -3], np.int8), np.arange(2, 7, dtype=np.float32)
    want = jax.jit(_updates(jnp, None))(x, i.astype(np.int32), np.int32(-100), v)
    _same(shardc.jit(_updates(snp, None))(x, i, np.int8(-100), v), want)


def test_lax_gather_scatter_with_uint8_indices_into_a_longer_dim():
    """lax.gather / scatter* in every mode (and segment_sum) with uint8 indices into a
    dim of 300: their bounds and past-the-end starts were uint8 constants (raised
    'Python integer 299 out of bounds for uint8')."""
    x = np.arange(600, dtype=np.float32).reshape(300, 2)
    i = np.array([[255], [100], [3], [250]], np.uint8)
    u, u2 = np.arange(1, 9, dtype=np.float32).reshape(4, 2), np.ones((4, 60, 2), np.float32)
    dn = jax.lax.ScatterDimensionNumbers((1,), (0,), (0,))
    dn2 = jax.lax.ScatterDimensionNumbers((1, 2), (), (0,))         # windows of 60 rows
    gdn = jax.lax.GatherDimensionNumbers((1,), (0,), (0,))
    gdn2 = jax.lax.GatherDimensionNumbers((1, 2), (), (0,))

    def f(lax, ops):
        def g(a, i):
            outs = [ops.segment_sum(u, i[:, 0], num_segments=300)]
            for mode in ["fill", "clip", "promise_in_bounds"]:
                outs += [lax.scatter_add(a, i, u, dn, mode=mode),
                         lax.scatter(a, i, u2, dn2, mode=mode),
                         lax.scatter_mul(a, i, u, dn, mode=mode),
                         lax.gather(a, i, gdn, (1, 2), mode=mode),
                         lax.gather(a, i, gdn2, (60, 2), mode=mode)]
            return outs
        return g
    # (jax's reference with the same indices as int32: XLA:CPU's classic emitters, which
    # the tests use, mis-scatter jax's own uint8 ones into row 43 = 299 % 256)
    _same(shardc.jit(f(shardc.lax, shardc.ops))(x, i),
          jax.jit(f(jax.lax, jax.ops))(x, i.astype(np.int32)))
