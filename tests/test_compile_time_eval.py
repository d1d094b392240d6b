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


def test_collectives_stay_traced_inside_shard_map(mesh8):
    """axis_index has no operands yet names the shard_map's axis: it is not folded (it
    was, to an internal error). jax 0.10.2 folds it and raises "unbound axis name"."""
    def body(np_, lax_):
        def f(a):
            with jax.ensure_compile_time_eval():
                i = lax_.axis_index("x")
            return a + i
        return f
    x = np.zeros(8, np.float32)
    from jax.sharding import PartitionSpec as P
    ours = shardc.jit(shardc.shard_map(body(snp, shardc.lax), mesh=mesh8, in_specs=P("x"),
                                       out_specs=P("x")))(x)
    np.testing.assert_array_equal(ours, np.arange(8))
    with pytest.raises(NameError, match="unbound axis name"):
        jax.jit(jax.shard_map(body(jnp, jax.lax), mesh=mesh8, in_specs=P("x"),
                              out_specs=P("x")))(x)
