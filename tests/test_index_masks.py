"""Indexing with concrete boolean masks and nested sequences under jit, as jax's: a mask
that is a NumPy array (not a traced value) has a static number of Trues, so it becomes
its np.nonzero; a scalar bool adds a dim of size 1 (True) or 0 (False); a tuple or
list inside the index tuple is an integer array; .at[] takes them all as x[] does."""
import jax
import numpy as np
import pytest

import shardc

X = np.arange(32, dtype=np.float32).reshape(8, 4)
M = np.array([True, False, False, True, True, False, True, False])
M2 = np.arange(32).reshape(8, 4) % 3 == 0
COLS = np.array([True, False, True, True])

SAME_AS_JAX = {
    "rows": lambda a: a[M],
    "2d": lambda a: a[M2],
    "rows_slice": lambda a: a[M, 1:3],
    "cols": lambda a: a[:, COLS],
    "ellipsis_cols": lambda a: a[..., COLS],
    "rows_int": lambda a: a[M, 2],
    "rows_new_axis_array": lambda a: a[M, None, [0, 1, 2, 3]],
    "all_false": lambda a: a[np.zeros(8, bool)],
    "scalar_true": lambda a: a[True],
    "scalar_false": lambda a: a[False],
    "0d_array": lambda a: a[np.array(True)],
    "trailing_true": lambda a: a[..., True],
    "int_ellipsis_false": lambda a: a[1, ..., False],
    "true_with_array": lambda a: a[True, [0, 1]],
    "mask_then_true": lambda a: a[M2, True],
    "set": lambda a: a.at[M].set(0.0),
    "add_2d": lambda a: a.at[M2].add(1.0),
    "get": lambda a: a.at[M, 2].get(),
    "nested_tuple": lambda a: a[((1, 2),)],
    "two_tuples": lambda a: a[(1, 2), (0, 3)],
    "tuple_slice": lambda a: a[(7, 2), :2],
    "nested_lists": lambda a: a[[[1], [2]], [0, 1]],
    "set_nested_tuple": lambda a: a.at[((1, 2),)].set(0.0),
    "at_true_set": lambda a: a.at[True].set(1.0),
    "at_false_add": lambda a: a.at[False].add(1.0),
    "at_true_get": lambda a: a.at[True].get(),
    "at_int_true_mul": lambda a: a.at[1, True].multiply(2.0),
    "at_true_cols_add": lambda a: a.at[True, :, np.array([0, 2])].add(1.0),
    "at_false_int_set": lambda a: a.at[False, 1].set(-1.0),
}


@pytest.mark.parametrize("name", sorted(SAME_AS_JAX))
def test_static_index_as_jax(name):
    fn = SAME_AS_JAX[name]
    want = jax.jit(fn)(X)
    got = shardc.jit(fn)(X)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_traced_scalar_in_index_sequence():
    fn = lambda a, i: a[[i, 0], 1:]       # noqa: E731
    np.testing.assert_array_equal(np.asarray(shardc.jit(fn)(X, 3)),
                                  np.asarray(jax.jit(fn)(X, 3)))


@pytest.mark.parametrize("index", ["none_then_true", "bool_then_int"])
def test_scalar_bools_as_numpy(index):
    # jax.jit gets these two wrong (a shape (1, 1, 1, 4); an internal assertion): NumPy
    fn = {"none_then_true": lambda a: a[None, True],
          "bool_then_int": lambda a: a[np.bool_(True), 1]}[index]
    np.testing.assert_array_equal(np.asarray(shardc.jit(fn)(X)), fn(X))


def test_concrete_jax_array_mask():
    # jax.jit refuses a closed-over jax.Array mask (not concrete to its tracer); its
    # value is known at trace time, as eager jax uses it
    mask = jax.numpy.asarray(M)
    got = shardc.jit(lambda a: a[mask])(X)
    np.testing.assert_array_equal(np.asarray(got), X[M])


def test_mask_of_wrong_shape_is_jax_error():
    with pytest.raises(IndexError, match=r"did not match shape .* index 0: got \(3,\), "
                                         r"expected \[8\]"):
        shardc.jit(lambda a: a[np.ones(3, bool)])(X)


def test_traced_mask_still_refused():
    with pytest.raises(shardc.ShardcError, match="data-dependent shape"):
        shardc.jit(lambda a: a[a > 3])(X)


@pytest.mark.parametrize("case", ["jax_mask_true", "list_mask_true", "true_then_mask"])
def test_scalar_bools_next_to_other_masks(case):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    m = np.arange(6).reshape(2, 3) % 2 == 0
    mj, mt = jax.numpy.asarray(m), m.tolist()
    fn = {"jax_mask_true": lambda a: a[mj, True],
          "list_mask_true": lambda a: a[mt, True],
          "true_then_mask": lambda a: a[..., True, np.ones((3, 4), bool)]}[case]
    want = jax.jit(fn)(x)
    got = shardc.jit(fn)(x)
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
