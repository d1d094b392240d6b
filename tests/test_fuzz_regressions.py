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
