"""jax.nn's activations whose derivatives at their kinks are fixed by a custom_jvp
(relu6: 0 at x == 0 and x == 6) and those built on them: first and second order, and
forward mode, against jax (maximum and minimum split ties, so shardc's were 0.5)."""
import jax
import numpy as np
import pytest

import shardc

PTS = np.array([-3.0, 0.0, 3.0, 6.0, 1.5, -4.0], np.float32)


@pytest.mark.parametrize("name", ["relu6", "hard_sigmoid", "hard_silu", "hard_swish"])
def test_kink_derivatives_match_jax(name):
    for m_grad in ("grad", "jvp"):
        got, want = (
            m.jit(m.vmap(m.grad(getattr(m.nn, name))))(PTS) if m_grad == "grad" else
            m.jit(lambda x: m.jvp(getattr(m.nn, name), (x,), (x * 0 + 1,))[1])(PTS)
            for m in (shardc, jax))
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    f = lambda m: m.jit(m.vmap(m.grad(m.grad(getattr(m.nn, name)))))(PTS)  # noqa: E731
    np.testing.assert_allclose(np.asarray(f(shardc)), np.asarray(f(jax)), atol=1e-6)
    assert shardc.nn.relu6.__name__ == "relu6"
