"""Bugs the differential fuzzer found (fuzz/control.py's programs), each against jax.jit."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp

from helpers import same_sharding



def _both(make, *xs, grad=False):
    """make(m, L) -> fn, under shardc.jit and jax.jit (optionally the grad of its sum)."""
    outs = []
    for jit, m, L, g in [(shardc.jit, snp, shardc.lax, shardc.grad),
                         (jax.jit, jnp, jax.lax, jax.grad)]:
        f = make(m, L)
        if grad:
            f = g(lambda *a, f=f, m=m: m.sum(f(*a)))
        outs.append(jit(f)(*xs))
    return outs


ZERO_TRIP = {
    "fori": lambda m, L: lambda x: L.fori_loop(2, 2, lambda i, c: m.sin(c) * x, x),
    "scan_length0": lambda m, L: lambda x: L.scan(lambda c, _: (m.sin(c) * x, c), x, None,
                                                  length=0)[0],
    "scan_xs0": lambda m, L: lambda x: L.scan(lambda c, xx: (m.sin(c) * xx, c), x[0],
                                              x[:0])[0],
    "scan_ys0": lambda m, L: lambda x: L.scan(lambda c, xx: (c, m.sin(c) * xx), x[0],
                                              x[:0])[1].sum(0),
}


@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("case", sorted(ZERO_TRIP))
def test_zero_length_scan(case, grad):
    """fuzz seed 4000621: a zero-trip fori_loop (a scan of length 0) under grad made XLA
    reject the residual buffers; with xs or ys even the forward scan failed."""
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    x = jax.device_put(np.arange(8, dtype=np.float32).reshape(4, 2) - 3,
                       NamedSharding(mesh, P("y")))
    got, ref = _both(ZERO_TRIP[case], x, grad=grad)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-6)
    if not grad:    # (jax's gradient here is a constant, which it leaves replicated)
        assert same_sharding(got.sharding, ref.sharding, got.ndim)


YS_WEAK = {
    "bool_max": lambda m: lambda c, e: (c, m.maximum(e > 2, 0.5)),
    "int_times_py": lambda m: lambda c, e: (c, e * 2),
    "weak_carry": lambda m: lambda c, e: (c + 1.0, c),
}


@pytest.mark.parametrize("case", sorted(YS_WEAK))
def test_scan_ys_keep_weak_type(case):
    """fuzz seed 6000693 (lax.map of maximum(bool, 0.5)): jax's stacked ys keep the body's
    weak type; shardc made them strong."""
    x = np.arange(6, dtype=np.int32)
    got, ref = [jit(lambda v, m=m, L=L: L.scan(YS_WEAK[case](m), 0.0, v))(x)
                for jit, m, L in [(shardc.jit, snp, shardc.lax), (jax.jit, jnp, jax.lax)]]
    for g, r in zip(got, ref):
        assert (g.dtype, g.weak_type) == (r.dtype, r.weak_type)
        np.testing.assert_array_equal(np.asarray(g), np.asarray(r))


@pytest.mark.parametrize("batch_size", [None, 2, 4])
def test_map_keeps_weak_type(batch_size):
    x = np.array([True, False, True, True, False, True])
    got, ref = [jit(lambda v, m=m, L=L: L.map(lambda e: m.maximum(e, 0.5), v,
                                               batch_size=batch_size))(x)
                for jit, m, L in [(shardc.jit, snp, shardc.lax), (jax.jit, jnp, jax.lax)]]
    assert (got.dtype, got.weak_type) == (ref.dtype, ref.weak_type)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))


FOLDED_USER = {
    # a transpose pair XLA folds away, right after a while_loop and a scan's carry
    "while_TT": lambda m, L: lambda x: L.while_loop(
        lambda c: c[0] < 3, lambda c: (c[0] + 1, m.sin(c[1]) * 2), (0, x))[1].T.T,
    "scan_carry_TT": lambda m, L: lambda x: L.scan(
        lambda c, a: (c + a, c * a), x, x)[0].T.T,
    # vmap moves the residual stack's batch dim out and back (fuzz seed 13001039149)
    "vmap_grad_scan": lambda m, L: (shardc.vmap if m is snp else jax.vmap)(
        (shardc.grad if m is snp else jax.grad)(lambda v: L.scan(
            lambda c, _: (m.tanh(c), ()), v, None, length=2)[0].sum())),
}


@pytest.mark.parametrize("case", sorted(FOLDED_USER))
def test_a_folded_user_of_a_while_result_compiles(case):
    """XLA folds a no-op user of a while result by moving its sharding onto the while (a
    tuple) and then rejected the module; vmap(grad(scan)) of a sharded input hit it."""
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    x = jax.device_put(np.arange(24, dtype=np.float32).reshape(4, 6) / 10 - 1,
                       NamedSharding(mesh, P(None, "x")))
    got, ref = _both(FOLDED_USER[case], x)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=1e-5)
    assert same_sharding(got.sharding, ref.sharding, got.ndim)


def test_clipped_scatter_max_gradient_is_the_finite_difference():
    # (fuzz seed 21003063124) indices past the end are clipped onto row 0, so the update
    # 0 replaces x's negative entries there: their gradient is 0. jax 0.10.2's is 1 (its
    # JVP counts the ties with a FILL_OR_DROP scatter, which drops the clipped indices);
    # shardc follows the function, checked by central differences
    x = np.array([[1.525, -4.03, -0.144, 3.868]], np.float32)

    def f(v):
        return v.at[snp.array([3, 2, 1, 3])].max(0.0, mode="clip").sum()
    got = np.asarray(shardc.jit(shardc.grad(f))(x))
    eps, fd = 1e-2, np.zeros_like(x)
    for j in range(x.shape[1]):
        e = np.zeros_like(x)
        e[0, j] = eps
        fd[0, j] = (float(shardc.jit(f)(x + e)) - float(shardc.jit(f)(x - e))) / (2 * eps)
    np.testing.assert_allclose(got, fd, atol=1e-3)
    np.testing.assert_array_equal(got, [[1.0, 0.0, 0.0, 1.0]])
