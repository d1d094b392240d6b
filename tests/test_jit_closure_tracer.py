"""A jit whose function closes over a value traced by an enclosing transformation (jit,
grad, vmap) while its own arguments are concrete: as jax, the call is traced into the
enclosing trace (shardc refused it). Values against jax."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp
from shardc.trace.core import Tracer

X = np.arange(12, dtype=np.float32).reshape(4, 3)
Y = np.linspace(0.5, 2.0, 3, dtype=np.float32)

CASES = {
    "vmap": (lambda m, j: m.vmap(lambda a: j(lambda z: z * a)(Y)), (X,)),
    "grad": (lambda m, j: m.grad(lambda a: j(lambda z: (z * a * a).sum())(Y)), (X[1],)),
    "jit": (lambda m, j: m.jit(lambda a: j(lambda z: z * a + 1)(Y)), (X,)),
    "jit(grad)": (lambda m, j: m.jit(m.grad(lambda a: j(lambda z: m.numpy.sin(z * a).sum())(
        Y))), (X[2],)),
    # the same jit object called twice in one trace, each closing over its own value
    "vmap(twice)": (lambda m, j: m.vmap(lambda a: j(lambda z: z - a)(Y) * j(
        lambda z: z + a * 2)(Y)), (X,)),
}


class _Shardc:
    jit, grad, vmap, numpy = shardc.jit, shardc.grad, shardc.vmap, snp


class _Jax:
    jit, grad, vmap, numpy = jax.jit, jax.grad, jax.vmap, jnp


@pytest.mark.parametrize("name", list(CASES))
def test_jit_closing_over_an_outer_tracer_matches_jax(name):
    build, args = CASES[name]
    got = build(_Shardc, shardc.jit)(*args)
    want = build(_Jax, jax.jit)(*args)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


def test_a_jit_called_on_constants_inside_a_trace_is_traced_into_it():
    # (it ran at trace time, and crashed placing a NumPy argument inside a trace)
    inner = shardc.jit(lambda z: z * 3)
    seen = []
    outer = shardc.jit(lambda a: seen.append(type(inner(Y))) or inner(Y) + a)
    np.testing.assert_allclose(np.asarray(outer(X)), X + Y * 3)
    assert seen == [Tracer]
    assert "mul" in outer.trace(X).ir
    # called outside any trace, the same jit object stages and caches its own program
    np.testing.assert_allclose(np.asarray(inner(Y)), Y * 3)
    assert inner._cache


def test_under_ensure_compile_time_eval_a_jit_on_constants_runs_now():
    inner = shardc.jit(lambda z: z * 3)

    def f(m, a):
        with jax.ensure_compile_time_eval():
            k = int(inner(np.int32(4)) if m is shardc else jax.jit(lambda z: z * 3)(4))
        return a * k
    np.testing.assert_allclose(np.asarray(shardc.jit(lambda a: f(shardc, a))(X)),
                               np.asarray(jax.jit(lambda a: f(jax, a))(X)))


def test_lowering_a_jit_that_closes_over_a_tracer_is_a_clear_error():
    def f(a):
        return shardc.jit(lambda z: z * a).lower(Y)
    with pytest.raises(shardc.ShardcError, match="closes over a value traced by an outer"):
        shardc.jit(f)(X[0])
