"""`<<`, `>>`, divmod() and round() on traced arrays, against jax.jit."""
import jax
import numpy as np
import pytest

import shardc

FUNS = {
    "lshift": lambda a, b: a << b,
    "rshift": lambda a, b: a >> b,
    "rlshift": lambda a, b: 3 << b,
    "rrshift": lambda a, b: 100 >> b,
    "lshift_const": lambda a, b: a << 2,
    "divmod": lambda a, b: divmod(a, b),
    "rdivmod": lambda a, b: divmod(17, b),
    "round": lambda a, b: round(a),
    "round_ndigits": lambda a, b: round(a, 1),
}


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int8, np.float32])
@pytest.mark.parametrize("name", list(FUNS))
def test_int_operators_match_jax(name, dtype):
    f = FUNS[name]
    a = np.array([-7, 5, 100, 3, -1, 0, 8, 64]).astype(dtype)
    b = np.array([1, 2, 3, 0, 1, 2, 5, 3]).astype(dtype)
    if dtype == np.float32:
        a, b = a + 0.55, b + 0.5
    try:
        want = jax.jit(f)(a, b)
    except TypeError:     # shifts of floats
        with pytest.raises(TypeError, match="integer"):
            shardc.jit(f)(a, b)
        return
    got = shardc.jit(f)(a, b)
    for w, g in zip(jax.tree.leaves(want), jax.tree.leaves(got)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_shift_numpy_functions():
    import shardc.numpy as snp
    x = np.arange(-4, 4, dtype=np.int32)
    for name in ("left_shift", "right_shift", "bitwise_left_shift", "bitwise_right_shift"):
        got = shardc.jit(lambda a: getattr(snp, name)(a, 1))(x)
        np.testing.assert_array_equal(np.asarray(got), getattr(jax.numpy, name)(x, 1))
