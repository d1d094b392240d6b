"""jax code under shardc.jit doing shape ops on typed key arrays, as jax.jit runs it:
indexing with a traced index (keys[i] in a fori_loop body), .at[].set, take, ==, !=,
stack, unstack. Each is the op on the keys' uint32 data, whose last dim is the key."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc

KEYS = jax.random.split(jax.random.key(0), 4)
data = jax.random.key_data

CASES = {
    "fori_index": lambda ks: jax.lax.fori_loop(
        0, 4, lambda i, c: c + jax.random.normal(ks[i], (3,)), jnp.zeros(3)),
    "scan_index": lambda ks: jax.lax.scan(lambda c, i: (c, data(ks[i])), 0, jnp.arange(4))[1],
    "at_set": lambda ks: data(jax.lax.fori_loop(
        0, 4, lambda i, k: k.at[i].set(jax.random.fold_in(k[i], i)), ks)),
    "dynamic_update": lambda ks: data(jax.lax.dynamic_update_slice(ks, ks[:1], (2,))),
    "rev": lambda ks: data(jax.lax.rev(ks, (0,))),
    "where": lambda ks: data(jnp.where(jnp.array([True, False, True, False]), ks, ks[::-1])),
    "gather": lambda ks: data(ks[jnp.array([2, 0])]),
    "take": lambda ks: data(jnp.take(ks, jnp.array([3, 1]), axis=0)),
    "eq": lambda ks: ks == ks[jnp.array([0, 0, 2, 1])],
    "ne": lambda ks: ks != ks[jnp.array([0, 0, 2, 1])],
    "stack": lambda ks: data(jnp.stack([ks[0], ks[1]], axis=-1)),
    "unstack": lambda ks: [data(k) for k in jnp.unstack(ks.reshape(2, 2), axis=-1)],
    "concat": lambda ks: data(jnp.concatenate([ks, ks[:1]])),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_key_shape_ops_as_jax(name):
    f = CASES[name]
    got, want = shardc.jit(f)(KEYS), jax.jit(f)(KEYS)
    got, want = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
