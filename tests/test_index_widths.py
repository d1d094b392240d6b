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
IDX = {np.uint8: [[0, 1], [255, 200], [3, 7]], np.uint16: [[0, 299], [300, 65535], [3, 7]],
       np.int8: [[-1, 0], [-128, 127], [5, -3]]}


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
