"""jax's gradients of integer inputs inside shardc.jit: float0 tangents (no data) are
broadcast and summed by jax.grad(allow_int=True) and jax.vjp; their zeros are NumPy
float0 arrays, returned as jax.jit returns them, and the float gradients are jax's."""
import jax
import numpy as np
import pytest

import shardc

X = np.linspace(-1, 1, 4, dtype=np.float32)
I = np.arange(4, dtype=np.int32)

CASES = {
    "grad_allow_int": lambda x, i: jax.grad(lambda a, j: (a * j).sum(), argnums=(0, 1),
                                            allow_int=True)(x, i),
    "grad_dict": lambda x, i: jax.grad(lambda p: (p["w"] * p["step"]).sum(),
                                       allow_int=True)({"w": x, "step": i}),
    "vjp_int_input": lambda x, i: jax.vjp(lambda a, j: a * j, x, i)[1](x),
    "value_and_grad_twice": lambda x, i: jax.grad(
        lambda a, j: (a * j).sum() + (a * (j + 1)).sum(), argnums=(0, 1), allow_int=True)(x, i),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_float0_cotangents_as_jax(name):
    want = jax.jit(CASES[name])(X, I)
    got = shardc.jit(CASES[name])(X, I)
    wl, gl = jax.tree_util.tree_leaves(want), jax.tree_util.tree_leaves(got)
    assert len(wl) == len(gl)
    for w, g in zip(wl, gl):
        assert g.dtype == w.dtype and g.shape == w.shape
        if w.dtype != jax.dtypes.float0:
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)
