"""shardc.ensure_compile_time_eval (jax's own): inside a trace, ops on constants run at
trace time, so Python can branch on their values; ops on traced values stay traced."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp

X = np.linspace(0.0, 1.0, 6, dtype=np.float32)


def program(np_, random, seen):
    def f(x):
        with shardc.ensure_compile_time_eval():
            y = np_.sin(3.0) * 2                # concrete
            k = random.randint(random.key(0), (4, 4), 0, 100)
            n = (k @ k).sum()
            if y > 0:                           # Python branches on it
                y = y + n
            w = x * 2                           # traced: it reads the argument
        seen.append((type(y), type(w)))
        return x + y + w
    return f


def test_constants_are_concrete_and_match_jax():
    ours, theirs = [], []
    got = shardc.jit(program(snp, shardc.random, ours))(X)
    want = jax.jit(program(jnp, jax.random, theirs))(X)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got.dtype == want.dtype
    (y_t, w_t), = ours
    assert issubclass(y_t, jax.Array) and not issubclass(y_t, jax.core.Tracer)
    assert issubclass(w_t, jax.core.Tracer)


def test_jax_code_inside_shardc_jit():
    def g(x):
        with jax.ensure_compile_time_eval():
            y = jnp.cos(1.0) + 1
            if y > 1:
                y = y * 10
        return x + y
    np.testing.assert_allclose(shardc.jit(g)(X), jax.jit(g)(X), rtol=1e-6)


def test_without_it_a_branch_on_a_traced_value_is_an_error():
    def h(x):
        y = snp.sin(3.0)
        return x + (1 if y > 0 else 2)
    with pytest.raises(Exception, match="(?i)concrete|bool|traced"):
        shardc.jit(h)(X)
    assert shardc.ensure_compile_time_eval is jax.ensure_compile_time_eval
