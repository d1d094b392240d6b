"""Convolutions whose operands and result are split in ways XLA's partitioner gets wrong
(jax.jit gives the same wrong values): shardc computes them per device in a manual
computation (ops/conv_plan.conv_plan). Every value is checked against one
device: jax.jit on these shardings is not a reference."""
import jax
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
from helpers import close_by_shard

A = (np.arange(2 * 4 * 8 * 8, dtype=np.float32).reshape(2, 4, 8, 8) % 7) - 3
K = np.random.RandomState(0).randint(-2, 3, (4, 4, 3, 3)).astype(np.float32)
SAME = dict(window_strides=(1, 1), padding=((1, 1), (1, 1)))
STRIDED = dict(window_strides=(2, 2), padding=((1, 1), (1, 1)))
DILATED = dict(window_strides=(2, 1), padding=((0, 0), (0, 0)), rhs_dilation=(2, 1))


def _pinned(mesh, kw, ls, rs, os_):
    def w(v, s):
        return shardc.lax.with_sharding_constraint(v, NamedSharding(mesh, s))
    return shardc.jit(lambda v, k: w(shardc.lax.conv_general_dilated(w(v, ls), w(k, rs), **kw),
                                     os_))


# (conv, lhs spec, kernel spec, result spec): jax.jit is off by the given amount on each
@pytest.mark.parametrize("kw,ls,rs,os_", [
    (SAME, P(None, "y"), P("y"), P(None, "y", "x")),                 # features: off by 156
    (STRIDED, P(None, None, "y"), P("x"), P(None, None, None, "y")),  # halo + kernel split
    (DILATED, P(None, None, "x"), P(None, "y"), P(None, "y")),
    (SAME, P(None, None, None, "y"), P(None, None, "y"), P(None, "y")),
], ids=["features", "halo_kernel", "dilated", "kernel_spatial"])
def test_forward_pinned(mesh4x2, kw, ls, rs, os_):
    ref = jax.lax.conv_general_dilated(A, K, **kw)
    close_by_shard(_pinned(mesh4x2, kw, ls, rs, os_)(A, K), ref)


@pytest.mark.parametrize("kw", [SAME, DILATED], ids=["same", "dilated"])
@pytest.mark.parametrize("ls", [P(None, None, "x"), P(None, None, "y")], ids=["Hx", "Hy"])
def test_kernel_grad_of_spatially_split_lhs(mesh4x2, kw, ls):
    """An lhs split along H: jax.jit's kernel gradient is 2x (6180 off) for 'x'."""
    def loss(lax, wsc):
        def f(v, k):
            return (lax.conv_general_dilated(wsc(v, ls), k, **kw) ** 2).sum()
        return f
    ref = jax.grad(loss(jax.lax, lambda v, s: v), argnums=(0, 1))(A, K)
    wsc = lambda v, s: shardc.lax.with_sharding_constraint(v, NamedSharding(mesh4x2, s))  # noqa: E731
    got = shardc.jit(shardc.grad(loss(shardc.lax, wsc), argnums=(0, 1)))(A, K)
    for g, r in zip(got, ref):
        close_by_shard(g, r)


@pytest.mark.parametrize("groups", [8, 2], ids=["depthwise", "groups2"])
@pytest.mark.parametrize("spec", [P("x"), P("y"), P("x", "y"), P(("x", "y"))],
                         ids=["x", "y", "x_y", "xy"])
def test_grouped_grads_data_parallel(mesh4x2, groups, spec):
    """Data parallelism over one axis of a 2-D mesh: jax.jit's kernel gradient of a
    grouped convolution is summed over the other axis too (off by 8760 for depthwise)."""
    x = np.random.RandomState(0).randint(-3, 4, (8, 8, 8, 8)).astype(np.float32)
    k = np.random.RandomState(1).randint(-2, 3, (8, 8 // groups, 3, 3)).astype(np.float32)
    kw = dict(SAME, feature_group_count=groups)

    def loss(lax):
        return lambda v, k: (lax.conv_general_dilated(v, k, **kw) ** 2).sum()
    ref = jax.grad(loss(jax.lax), argnums=(0, 1))(x, k)
    xs = jax.device_put(x, NamedSharding(mesh4x2, spec))
    f = shardc.jit(shardc.grad(loss(shardc.lax), argnums=(0, 1)))
    for g, r in zip(f(xs, k), ref):
        close_by_shard(g, r)
    if spec == P("x"):    # one all-reduce of the kernel gradient, as jax.jit (which is wrong)
        hlo = f.lower(xs, k).compile().as_text()
        assert hlo.count(" all-reduce(") == 1 and " all-gather(" not in hlo


@pytest.mark.parametrize("ls,rs,os_", [
    (P("x"), P(), P("x")), (P(None, "x"), P("x"), P(None, "x")),
    (P(), P(None, "y"), P()), (P(None, "y"), P("x"), P(None, "x")),
    (P(None, None, "y"), P("y"), P(None, "y")),
], ids=["batch", "groups_split", "kernel_in", "moved", "spatial"])
@pytest.mark.parametrize("fgc,bgc", [(8, 1), (2, 1), (1, 2), (1, 4)],
                         ids=["depthwise", "groups2", "batch_groups2", "batch_groups4"])
def test_grouped_pinned(mesh4x2, ls, rs, os_, fgc, bgc):
    x = (np.arange(4 * 8 * 8 * 8, dtype=np.float32).reshape(4, 8, 8, 8) % 7) - 3
    k = np.random.RandomState(0).randint(-2, 3, (8, 8 // fgc, 3, 3)).astype(np.float32)
    kw = dict(SAME, feature_group_count=fgc, batch_group_count=bgc)
    if bgc > 1:
        ls, os_ = P(None, *ls[1:]), P(None, *os_[1:])
    ref = jax.lax.conv_general_dilated(x, k, **kw)
    close_by_shard(_pinned(mesh4x2, kw, ls, rs, os_)(x, k), ref)


def test_in_scan_body(mesh4x2):
    """XLA re-decides a loop body's operands: a conv in a scan, whose result is split
    along its features while the lhs is split along H (jax.jit: off by 156)."""
    ref = jax.lax.conv_general_dilated(A, K, **SAME)
    a = jax.device_put(A, NamedSharding(mesh4x2, P(None, None, "y")))

    def f(v, k):
        def step(c, _):
            return c, shardc.lax.conv_general_dilated(c[0], c[1], **SAME)
        return shardc.lax.scan(step, (v, k), None, length=2)[1][1]
    out = shardc.jit(f, out_shardings=NamedSharding(mesh4x2, P(None, "y")))(a, K)
    close_by_shard(out, ref)


def test_in_cond_branch(mesh4x2):
    ref = jax.lax.conv_general_dilated(A, K, **SAME)

    def w(v, s):
        return shardc.lax.with_sharding_constraint(v, NamedSharding(mesh4x2, s))

    def f(v, k):
        def branch(v, k):
            return w(shardc.lax.conv_general_dilated(w(v, P(None, "y")), w(k, P("y")), **SAME),
                     P(None, "y", "x"))
        return shardc.lax.cond(v.sum() > -1e9, branch, lambda v, k: branch(v, k) * 2, v, k)
    close_by_shard(shardc.jit(f)(A, K), ref)


def test_uneven_falls_back(mesh4x2):
    """Splits that don't divide (6 batch rows over 4): held at XLA's good forms."""
    x = np.random.RandomState(3).randint(-3, 4, (6, 4, 8, 8)).astype(np.float32)
    ref = jax.lax.conv_general_dilated(x, K, **SAME)
    close_by_shard(_pinned(mesh4x2, SAME, P("x"), P("y"), P("x", "y"))(x, K), ref)
    close_by_shard(_pinned(mesh4x2, SAME, P(None, "y"), P("y"), P("x", "y"))(x, K), ref)


def test_plan_is_a_manual_computation(mesh4x2):
    """The explanation users see: the conv runs per device, its sum an explicit
    all-reduce over the input-feature axis."""
    f = _pinned(mesh4x2, SAME, P(None, "y"), P(None, "y"), P())
    text = f.lower(A, K).as_text()
    assert "sdy.manual_computation" in text and "stablehlo.all_reduce" in text
    close_by_shard(f(A, K), jax.lax.conv_general_dilated(A, K, **SAME))


@pytest.mark.parametrize("groups", [2, 4, 8])
def test_grouped_grads_of_feature_split_operands(mesh4x2, groups):
    """lhs and kernel both split along their features: the kernel gradient's convolution
    (of batch groups, its result split along its batch) aborted in XLA (2, 4 groups) or
    was off by 4412 (depthwise) when computed whole and resharded after; now per device."""
    rs = np.random.RandomState(0)
    x = rs.randint(-3, 4, (4, 8, 8, 8)).astype(np.float32)
    k = rs.randint(-2, 3, (8, 8 // groups, 3, 3)).astype(np.float32)
    kw = dict(SAME, feature_group_count=groups)

    def w(v, s):
        return shardc.lax.with_sharding_constraint(v, NamedSharding(mesh4x2, s))

    def loss(v, k):
        return (w(shardc.lax.conv_general_dilated(w(v, P(None, "y")), w(k, P(None, "y")), **kw),
                  P()) ** 2).sum()
    ref = jax.grad(lambda v, k: (jax.lax.conv_general_dilated(v, k, **kw) ** 2).sum(),
                   argnums=(0, 1))(x, k)
    for g, r in zip(shardc.jit(shardc.grad(loss, argnums=(0, 1)))(x, k), ref):
        close_by_shard(g, r)


@pytest.mark.parametrize("bgc", [2, 4, 8])
def test_batch_groups_split_along_batch(mesh4x2, bgc):
    """A batch-group convolution whose lhs and result are split along the batch
    (aborted in XLA for 2 and 4 groups, off by 67 for 8): computed whole per device."""
    x = np.random.RandomState(1).randint(-3, 4, (8, 4, 8, 8)).astype(np.float32)
    k = np.random.RandomState(2).randint(-2, 3, (8, 4, 3, 3)).astype(np.float32)
    kw = dict(SAME, batch_group_count=bgc)
    ref = jax.lax.conv_general_dilated(x, k, **kw)
    close_by_shard(_pinned(mesh4x2, kw, P("x"), P(), P("x"))(x, k), ref)
