"""shardc.numpy's and shardc.lax's structural functions on typed PRNG keys (inside
shardc.jit and eagerly) against jax's on its key arrays: the same keys in the same
places, the same comparisons; arithmetic on keys stays an error."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp

C = np.array([[True, False, True], [False, True, True]])
I = np.array([[0], [1]])

# (np, lax, random, keys of shape (2, 3)) -> keys (or a pytree of them, or bools)
FUNCTIONS = {
    "concatenate": lambda n, L, R, k: n.concatenate([k, k[:1]]),
    "concat_axis_none": lambda n, L, R, k: n.concatenate([k, k], axis=None),
    "stack_last": lambda n, L, R, k: n.stack([k, k], -1),
    "hstack": lambda n, L, R, k: n.hstack([k, k]),
    "vstack": lambda n, L, R, k: n.vstack([k, k]),
    "dstack": lambda n, L, R, k: n.dstack([k, k]),
    "column_stack": lambda n, L, R, k: n.column_stack([k[0], k[1]]),
    "block": lambda n, L, R, k: n.block([[k, k]]),
    "append": lambda n, L, R, k: n.append(k, k, 0),
    "insert": lambda n, L, R, k: n.insert(k, 1, k[0], axis=0),
    "delete": lambda n, L, R, k: n.delete(k, 1, 1),
    "split": lambda n, L, R, k: n.split(k, 3, axis=1),
    "array_split": lambda n, L, R, k: n.array_split(k, 2, 1),
    "unstack": lambda n, L, R, k: n.unstack(k),
    "reshape": lambda n, L, R, k: n.reshape(k, -1),
    "ravel": lambda n, L, R, k: n.ravel(k),
    "transpose": lambda n, L, R, k: n.transpose(k),
    "swapaxes": lambda n, L, R, k: n.swapaxes(k, 0, 1),
    "moveaxis": lambda n, L, R, k: n.moveaxis(k, 0, -1),
    "squeeze": lambda n, L, R, k: n.squeeze(k[:1]),
    "expand_dims": lambda n, L, R, k: n.expand_dims(k, 1),
    "broadcast_to": lambda n, L, R, k: n.broadcast_to(k[0], (2, 3)),
    "broadcast_arrays": lambda n, L, R, k: n.broadcast_arrays(k, k[0]),
    "atleast_3d": lambda n, L, R, k: n.atleast_3d(k),
    "flip": lambda n, L, R, k: n.flip(k),
    "fliplr": lambda n, L, R, k: n.fliplr(k),
    "rot90": lambda n, L, R, k: n.rot90(k),
    "roll": lambda n, L, R, k: n.roll(k, 1),
    "tile": lambda n, L, R, k: n.tile(k, (2, 1)),
    "repeat": lambda n, L, R, k: n.repeat(k, 2, axis=1),
    "take": lambda n, L, R, k: n.take(k, np.array([0, 4])),
    "take_axis": lambda n, L, R, k: n.take(k, np.array([2, 0]), axis=1),
    "take_along_axis": lambda n, L, R, k: n.take_along_axis(k, I, 1),
    "where": lambda n, L, R, k: n.where(C, k, k[::-1]),
    "select": lambda n, L, R, k: n.select([C], [k], k[::-1]),
    "diagonal": lambda n, L, R, k: n.diagonal(k),
    "triu": lambda n, L, R, k: n.triu(k),
    "pad_edge": lambda n, L, R, k: n.pad(k, 1, mode="edge"),
    "resize": lambda n, L, R, k: n.resize(k, (7,)),
    "meshgrid": lambda n, L, R, k: n.meshgrid(k[0], k[1]),
    "full": lambda n, L, R, k: n.full((2,), k[0, 0]),
    "zeros_like": lambda n, L, R, k: n.zeros_like(k),
    "copy": lambda n, L, R, k: n.copy(k),
    "equal": lambda n, L, R, k: n.equal(k, k[::-1]),
    "not_equal": lambda n, L, R, k: n.not_equal(k, k[:, ::-1]),
    "array_equal": lambda n, L, R, k: (n.array_equal(k, k), n.array_equal(k, k[::-1])),
    "lax.rev": lambda n, L, R, k: L.rev(k, (0,)),
    "lax.concatenate": lambda n, L, R, k: L.concatenate([k, k], 1),
    "lax.transpose": lambda n, L, R, k: L.transpose(k, (1, 0)),
    "lax.reshape": lambda n, L, R, k: L.reshape(k, (3, 2)),
    "lax.broadcast_in_dim": lambda n, L, R, k: L.broadcast_in_dim(k[0], (2, 3), (1,)),
    "lax.collapse": lambda n, L, R, k: L.collapse(k, 0, 2),
    "lax.slice": lambda n, L, R, k: L.slice(k, (0, 0), (1, 2)),
    "lax.dynamic_slice": lambda n, L, R, k: L.dynamic_slice(k, (0, 1), (1, 2)),
    "lax.dynamic_index_in_dim": lambda n, L, R, k: L.dynamic_index_in_dim(k, 1, 1),
    "lax.dynamic_update_slice": lambda n, L, R, k: L.dynamic_update_slice(k, k[:1],
                                                                          (1, 0)),
    "lax.dynamic_update_index_in_dim": lambda n, L, R, k: L.dynamic_update_index_in_dim(
        k, k[0], 1, 0),
    "lax.select_n": lambda n, L, R, k: L.select_n(C, k, k[::-1]),
    "lax.ne": lambda n, L, R, k: L.ne(k, k[::-1]),
    "with_split": lambda n, L, R, k: n.stack([R.fold_in(k[0, 0], 3), k[1, 2]]),
}


def _data(tree):
    return jax.tree.map(lambda a: (a.shape, str(a.dtype), np.asarray(
        jax.random.key_data(a) if jnp.issubdtype(a.dtype, jax.dtypes.prng_key) else a)),
        tree, is_leaf=lambda a: hasattr(a, "dtype"))


def _keys():
    return jax.random.split(jax.random.key(7), 6).reshape(2, 3)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_key_function_as_jax(name):
    f = FUNCTIONS[name]
    want = jax.jit(lambda k: f(jnp, jax.lax, jax.random, k))(_keys())
    got = shardc.jit(lambda k: f(snp, shardc.lax, shardc.random, k))(_keys())
    assert jax.tree.structure(got) == jax.tree.structure(want)
    np.testing.assert_equal(_data(got), _data(want))
    eager = f(snp, shardc.lax, shardc.random, _keys())     # jax key arrays in, out
    np.testing.assert_equal(_data(eager), _data(want))


def test_sharded_keys_keep_their_sharding(mesh2x4):
    keys = jax.device_put(jax.random.split(jax.random.key(1), 16).reshape(8, 2),
                          NamedSharding(mesh2x4, P("x", None)))
    f = lambda n, k: n.concatenate([k, n.flip(k, 0)], axis=1)     # noqa: E731
    got, want = shardc.jit(lambda k: f(snp, k))(keys), jax.jit(lambda k: f(jnp, k))(keys)
    np.testing.assert_equal(_data(got), _data(want))
    assert got.sharding.is_equivalent_to(want.sharding, 2)


def test_arithmetic_and_mixed_impls_on_keys_are_errors():
    k = shardc.random.key(0)
    with pytest.raises(Exception, match="key"):
        shardc.jit(lambda k: snp.add(shardc.random.split(k, 2), 1))(k)
    with pytest.raises(TypeError, match="mode='edge'"):
        shardc.jit(lambda k: snp.pad(shardc.random.split(k, 2), 1))(k)
    with pytest.raises(TypeError, match="does not accept dtypes"):   # (jax's error)
        shardc.jit(lambda k: snp.equal(shardc.random.split(k, 2), 0))(k)
    rbg = jax.random.key(0, impl="rbg")
    with pytest.raises(TypeError, match="different PRNG implementations"):
        shardc.jit(lambda a, b: snp.stack([a, b]))(k, rbg)


C3 = np.array([True, False, True])
NON_KEY_ELEMENTS = {
    # an operand that becomes elements of the result must be keys: jax's ValueError
    # (shardc made keys of a number's bits)
    "where": lambda n, lax, k: n.where(C3, k, 0),
    "select_default": lambda n, lax, k: n.select([C3], [k], default=0),
    "insert": lambda n, lax, k: n.insert(k, 1, 0),
    "append": lambda n, lax, k: n.append(k, np.zeros(2, np.uint32)),
    "concatenate": lambda n, lax, k: n.concatenate([k, np.zeros(2, np.uint32)]),
    "stack": lambda n, lax, k: n.stack([k, np.zeros(3, np.uint32)]),
    "array": lambda n, lax, k: n.array([k[0], 0]),
    "select_n": lambda n, lax, k: lax.select_n(C3, k, np.zeros(3, np.uint32)),
    "dynamic_update_slice": lambda n, lax, k: lax.dynamic_update_slice(
        k, np.zeros(1, np.uint32), (0,)),
}


@pytest.mark.parametrize("name", sorted(NON_KEY_ELEMENTS))
def test_non_key_elements_among_keys_are_errors(name):
    f = NON_KEY_ELEMENTS[name]
    with pytest.raises(Exception):
        f(jnp, jax.lax, jax.random.split(jax.random.key(0), 3))      # jax refuses it too
    with pytest.raises(ValueError, match="mixes PRNG keys"):
        f(snp, shardc.lax, shardc.random.split(shardc.random.key(0), 3))


def test_keys_with_keys_and_fill_values_still_work():
    kj, ks = jax.random.split(jax.random.key(0), 3), shardc.random.split(shardc.random.key(0), 3)
    for f in (lambda n, k: n.where(C3, k, k[::-1]), lambda n, k: n.insert(k, 1, k[0]),
              lambda n, k: n.full_like(k, 0), lambda n, k: n.stack([k, k])):
        np.testing.assert_equal(_data(f(snp, ks)), _data(f(jnp, kj)))
