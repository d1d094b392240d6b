"""Forward mode (jvp, jacfwd) through a shard_map whose body holds a while loop (which
has no reverse mode): a shard_map of the body's forward pass, against jax."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp


def _loop(lax, np_, x, n=3):
    return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, np_.sin(c[1]) * 1.5),
                          (0, x))[1]


# (shard_map, lax, numpy, mesh) -> (function of x, y, in_specs)
BODIES = {
    "split": lambda sm, L, N, m: (sm(lambda x, y: _loop(L, N, x) * y, mesh=m,
                                     in_specs=(P("x"), P("x")), out_specs=P("x"))),
    "psum_replicated_out": lambda sm, L, N, m: sm(
        lambda x, y: L.psum(_loop(L, N, x * y).sum(), "x"), mesh=m,
        in_specs=(P("x"), P("x")), out_specs=P()),
    "int_and_float_outs": lambda sm, L, N, m: sm(
        lambda x, y: (_loop(L, N, x) + y, L.while_loop(lambda i: i < 4, lambda i: i + 1, 0)),
        mesh=m, in_specs=(P("x"), P("x")), out_specs=(P("x"), P())),
    "replicated_in": lambda sm, L, N, m: sm(
        lambda x, y: _loop(L, N, x) * y[:2].sum(), mesh=m, in_specs=(P("x"), P()),
        out_specs=P("x")),
    "unchecked": lambda sm, L, N, m: sm(lambda x, y: _loop(L, N, x) * y, mesh=m,
                                        in_specs=(P("x"), P("x")), out_specs=P("x"),
                                        check_vma=False),
}


@pytest.mark.parametrize("name", sorted(BODIES))
def test_jvp_of_shard_map_with_while_as_jax(name):
    mesh = jax.make_mesh((8,), ("x",), axis_types=(AxisType.Auto,))
    x = jax.device_put(np.arange(16, dtype=np.float32) / 10, NamedSharding(mesh, P("x")))
    y = jax.device_put(np.linspace(1, 2, 16, dtype=np.float32), NamedSharding(mesh, P("x")))
    fj = BODIES[name](jax.shard_map, jax.lax, jnp, mesh)
    fs = BODIES[name](shardc.shard_map, shardc.lax, snp, mesh)
    tx, ty = x * 0.5 + 1, -y
    want = jax.jit(lambda *a: jax.jvp(fj, a[:2], a[2:]))(x, y, tx, ty)
    got = shardc.jit(lambda *a: shardc.jvp(fs, a[:2], a[2:]))(x, y, tx, ty)
    _same(got, want)
    # a tangent for x only
    _same(shardc.jvp(lambda x: fs(x, y), (x,), (tx,)), jax.jvp(lambda x: fj(x, y), (x,), (tx,)))


def _same(got, want):
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert (g.dtype, g.shape) == (w.dtype, w.shape)      # float0 for an int output
        if g.dtype != jax.dtypes.float0:
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-6, atol=1e-6)


def test_jacfwd_of_partially_manual_shard_map_with_while():
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    x = jax.device_put(np.arange(8, dtype=np.float32).reshape(2, 4) / 7,
                       NamedSharding(mesh, P("x", "y")))

    def make(sm, L, N):
        return sm(lambda a: _loop(L, N, a), mesh=mesh, in_specs=P("x"), out_specs=P("x"),
                  axis_names={"x"})
    want = jax.jit(jax.jacfwd(lambda a: make(jax.shard_map, jax.lax, jnp)(a).sum(0)))(x)
    got = shardc.jit(shardc.jacfwd(lambda a: make(shardc.shard_map, shardc.lax,
                                                  snp)(a).sum(0)))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-6, atol=1e-6)
