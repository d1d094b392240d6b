"""Batching rules of the decompositions and of conv_general_dilated: shardc.vmap vs
jax.vmap (under jit), each operand batched or not, and a batch-sharded mapped dim."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import data


def spd(n=4, batch=(4,), seed=0):
    a = data((*batch, n, n), np.float32, seed=seed)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=np.float32)).astype(np.float32)


def R(*shape, seed=0):
    return data(shape, np.float32, seed=seed)


def _check(f_ours, f_ref, args, in_axes=0, mesh=None, specs=None, tol=2e-5):
    if mesh is not None:
        args = [jax.device_put(a, NamedSharding(mesh, s)) for a, s in zip(args, specs)]
    got = shardc.jit(shardc.vmap(f_ours, in_axes=in_axes))(*args)
    want = jax.jit(jax.vmap(f_ref, in_axes=in_axes))(*args)
    gl, wl = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
    assert len(gl) == len(wl)
    for g, w in zip(gl, wl):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)
        if mesh is not None:
            assert g.sharding.is_equivalent_to(w.sharding, g.ndim), (g.sharding, w.sharding)


def pair(body):
    return (lambda *a: body(shardc.lax.linalg, snp, *a),
            lambda *a: body(jax.lax.linalg, jnp, *a))


UNARY = {
    "cholesky": (lambda L, m, a: L.cholesky(a), lambda: spd(batch=(4, 2))),
    "lu": (lambda L, m, a: L.lu(a), lambda: R(4, 2, 4, 4)),
    "lu_wide": (lambda L, m, a: L.lu(a), lambda: R(4, 3, 5)),
    "qr": (lambda L, m, a: L.qr(a), lambda: R(4, 5, 3)),
    "qr_reduced": (lambda L, m, a: L.qr(a, full_matrices=False), lambda: R(4, 2, 5, 3)),
    "eigh": (lambda L, m, a: L.eigh(a), lambda: spd(batch=(4,))),
    "svd": (lambda L, m, a: L.svd(a, full_matrices=False), lambda: R(4, 5, 3)),
    "svd_s": (lambda L, m, a: L.svd(a, compute_uv=False), lambda: R(4, 3, 5)),
    "eig": (lambda L, m, a: L.eig(a), lambda: R(4, 4, 4)),
    "inv": (lambda L, m, a: m.linalg.inv(a), lambda: spd(batch=(4,))),
    "det": (lambda L, m, a: m.linalg.det(a), lambda: R(4, 5, 5)),
    "slogdet": (lambda L, m, a: tuple(m.linalg.slogdet(a)), lambda: R(4, 5, 5)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_vmap_unary(name):
    body, make = UNARY[name]
    _check(*pair(body), [make()])


@pytest.mark.parametrize("name", ["cholesky", "svd", "lu"])
def test_vmap_mapped_dim_not_first(name):
    body, make = UNARY[name]
    a = np.moveaxis(make(), 0, -1).copy()
    _check(*pair(body), [a], in_axes=-1)


def test_vmap_batch_sharded(mesh2x4):
    body, _ = UNARY["cholesky"]
    _check(*pair(body), [spd(batch=(8,))], mesh=mesh2x4, specs=[P("x")])


@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 0)])
@pytest.mark.parametrize("left", [True, False])
def test_vmap_triangular_solve(in_axes, left):
    a = spd(batch=(4,)) if in_axes[0] == 0 else spd(batch=())
    bs = (4, 3) if left else (3, 4)
    b = R(4, *bs, seed=1) if in_axes[1] == 0 else R(*bs, seed=1)
    _check(*pair(lambda L, m, a, b: L.triangular_solve(a, b, left_side=left, lower=True,
                                                       transpose_a=True)),
           [a, b], in_axes=in_axes)


@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 0)])
def test_vmap_solve(in_axes):
    a = spd(batch=(4,)) if in_axes[0] == 0 else spd(batch=())
    b = R(4, 4, seed=1) if in_axes[1] == 0 else R(4, seed=1)
    _check(*pair(lambda L, m, a, b: m.linalg.solve(a, b)), [a, b], in_axes=in_axes)


CONVS = [
    ("plain", (2, 4, 8), (6, 4, 3), dict(window_strides=(1,), padding="SAME")),
    ("nhwc", (2, 6, 6, 4), (3, 3, 4, 2),
     dict(window_strides=(2, 1), padding="VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))),
    ("fgc", (2, 4, 8), (6, 2, 3), dict(window_strides=(1,), padding="SAME",
                                       feature_group_count=2)),
    ("bgc", (4, 2, 8), (6, 2, 3), dict(window_strides=(1,), padding=[(1, 1)],
                                       batch_group_count=2)),
    ("dilated", (2, 4, 9), (4, 4, 2), dict(window_strides=(2,), padding=[(1, 0)],
                                           lhs_dilation=(2,), rhs_dilation=(2,))),
]


@pytest.mark.parametrize("in_axes", [(0, 0), (0, None), (None, 0)],
                         ids=["both", "lhs", "rhs"])
@pytest.mark.parametrize("name", [c[0] for c in CONVS])
def test_vmap_conv(name, in_axes):
    _, ls, rs, params = next(c for c in CONVS if c[0] == name)
    lhs = R(3, *ls) if in_axes[0] == 0 else R(*ls)
    rhs = R(3, *rs, seed=1) if in_axes[1] == 0 else R(*rs, seed=1)

    def body(lax):
        return lambda a, b: lax.conv_general_dilated(a, b, **params)
    _check(body(shardc.lax), body(jax.lax), [lhs, rhs], in_axes=in_axes, tol=1e-4)


def test_vmap_of_grad_through_conv_and_cholesky():
    """per-example gradients (vmap of grad) through both families."""
    x, k = R(3, 2, 4, 8), R(4, 4, 3, seed=1)
    a = spd(batch=(3,))

    def loss(lax, L, x, k, a):
        y = lax.conv_general_dilated(x, k, (1,), "SAME")
        return (y ** 2).sum() + (L.cholesky(a) ** 2).sum()
    ours = shardc.jit(shardc.vmap(shardc.grad(
        lambda x, a: loss(shardc.lax, shardc.lax.linalg, x, k, a), argnums=(0, 1))))(x, a)
    ref = jax.jit(jax.vmap(jax.grad(
        lambda x, a: loss(jax.lax, jax.lax.linalg, x, k, a), argnums=(0, 1))))(x, a)
    for g, w in zip(ours, ref):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-4, atol=1e-4)


def test_vmap_lu_pivots_to_permutation():
    piv = np.array([[2, 2, 3], [1, 1, 2], [0, 1, 2], [3, 3, 3]], np.int32)
    _check(lambda p: shardc.lax.linalg.lu_pivots_to_permutation(p, 5),
           lambda p: jax.lax.linalg.lu_pivots_to_permutation(p, 5), [piv])


def test_vmap_spmd_axis_name(mesh2x4):
    """the mapped dim sharded over a mesh axis (spmd_axis_name) stays sharded, as jax's."""
    a = jax.device_put(spd(batch=(8,)), NamedSharding(mesh2x4, P("x")))
    x = jax.device_put(R(8, 2, 4, 16), NamedSharding(mesh2x4, P("x")))
    k = R(4, 4, 3, seed=1)
    with jax.set_mesh(mesh2x4):
        for fo, fr, arg in [
                (shardc.lax.linalg.cholesky, jax.lax.linalg.cholesky, a),
                (lambda v: shardc.lax.conv_general_dilated(v, k, (1,), "SAME"),
                 lambda v: jax.lax.conv_general_dilated(v, k, (1,), "SAME"), x)]:
            got = shardc.jit(shardc.vmap(fo, spmd_axis_name="x"))(arg)
            want = jax.jit(jax.vmap(fr, spmd_axis_name="x"))(arg)
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
            assert got.sharding.is_equivalent_to(want.sharding, got.ndim)
