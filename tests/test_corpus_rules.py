"""Factor rules the propagation corpus (tests/ir/cases) found wrong, end to end: shardc.jit's
output shardings and values against jax.jit's."""
import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import shardc

from helpers import same_sharding


@pytest.mark.parametrize("spec,dim", [(P("x", "y"), 0), (P("x", "y"), 1), (P(None, "y"), 1),
                                      (P("y", None), 0)])
def test_approx_max_k_keeps_the_reduced_dims_sharding(mesh2x4, spec, dim):
    """approx_top_k's rule was top_k's (the reduced dim unsharded); jax.jit, and XLA on
    shardc's own lowering (a sort, then slices), keep the operand's sharding there."""
    a = np.random.default_rng(0).standard_normal((8, 16)).astype(np.float32)
    x = jax.device_put(a, NamedSharding(mesh2x4, spec))
    ours = shardc.jit(lambda v: shardc.lax.approx_max_k(v, 4, reduction_dimension=dim))(x)
    ref = jax.jit(lambda v: jax.lax.approx_max_k(v, 4, reduction_dimension=dim))(x)
    for o, r in zip(ours, ref):
        np.testing.assert_array_equal(np.asarray(o), np.asarray(r))
        assert same_sharding(o.sharding, r.sharding, 2), (o.sharding, r.sharding)
