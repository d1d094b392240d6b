"""Explicit mode, against jax: the cotangent of a value reduced over mesh axes is partial
sums over them, and that of partial sums is reduced (jax's to_ct_aval). A whole
cotangent (grad's seed, that of an op that keeps no reduced axes: take, sort) is
resharded to partial sums, as jax reshards its seed; only a contraction that must make
them itself and cannot is an error, as in jax (tests/test_explicit_partial_sums.py).
shardc raised ShardingTypeError for grad(lambda w: reshard(w, P(reduced={'Y'})).sum()).
vjp checks its cotangent's type, as jax's."""
import jax
import jax.nn as jnn
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.nn as snn
import shardc.numpy as snp
from shardc.errors import ArgumentError

from test_explicit_unreduced_types import A, B, _mesh, _u  # (its inputs and mesh)

W = B - 3
K = np.arange(64.).reshape(16, 4) / 64


def _r(m, w):
    return m.reshard(w, P(None, None, reduced={"Y"}))


def _norm(spec, rank=2):
    parts = [() if p is None else (p,) if isinstance(p, str) else tuple(p)
             for p in spec.partitions]
    return parts + [()] * (rank - len(parts)), spec.unreduced, spec.reduced


# f(m, n, w) -> a scalar, differentiated at w
JIT = {
    "sum": lambda m, n, w: _r(m, w).sum(),
    "sin": lambda m, n, w: n.sin(_r(m, w)).sum(),
    "softplus": lambda m, n, w: (jnn if m is jax else snn).softplus(_r(m, w)).sum(),
    "silu": lambda m, n, w: (jnn if m is jax else snn).silu(_r(m, w)).sum(),
}
# jax.jit raises here (an op with no reduced rule, or a jax bug on reduced specs:
# "Using *pspec is dangerous", a 4x sigmoid gradient); the reference is NumPy
NUMPY = {
    "take": (lambda m, n, w: n.take(_r(m, w), np.array([1, 3, 3]), axis=0).sum(),
             lambda w: np.bincount([1, 3, 3], minlength=16)[:, None] * np.ones_like(w)),
    "sort": (lambda m, n, w: (n.sort(_r(m, w)[::-1], axis=0)[:2]).sum(),
             lambda w: np.where(w <= np.sort(w, axis=0)[1], 1., 0.)),
    "sigmoid": (lambda m, n, w: snn.sigmoid(_r(m, w)).sum(),
                lambda w: np.exp(-w) / (1 + np.exp(-w)) ** 2),
    "elu": (lambda m, n, w: snn.elu(_r(m, w)).sum(),
            lambda w: np.where(w > 0, 1., np.exp(w))),
    "log_softmax": (lambda m, n, w: (snn.log_softmax(_r(m, w), axis=1) * _r(m, K)).sum(),
                    lambda w: K - K.sum(1, keepdims=True) * np.exp(w) /
                    np.exp(w).sum(1, keepdims=True)),
}


def _grad(m, n, f):
    seen = []

    def g(w):
        out = m.grad(lambda w: f(m, n, w))(w)
        seen.append(str(m.typeof(out)))
        return out
    with m.set_mesh(_mesh(m)):
        out = m.jit(g)(W)
    return seen[0], out.sharding.spec, np.asarray(out)


@pytest.mark.parametrize("name", list(JIT))
def test_gradient_through_a_reduced_value_as_jax(name):
    want_t, want_spec, want = _grad(jax, jnp, JIT[name])
    got_t, got_spec, got = _grad(shardc, snp, JIT[name])
    assert got_t == want_t
    assert _norm(got_spec) == _norm(want_spec)     # (jax: P(); shardc: P(None, None))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", list(NUMPY))
def test_gradient_through_ops_jax_jit_refuses_matches_numpy(name):
    f, want = NUMPY[name]
    got_t, got_spec, got = _grad(shardc, snp, f)
    assert got_t == "float32[16,4]"
    np.testing.assert_allclose(got, want(W.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_the_gradient_at_partial_sums_is_reduced_as_jax():
    # (jax's to_ct_aval swaps unreduced and reduced: shardc typed it {U:Y})
    C = np.arange(32, dtype=np.float32).reshape(8, 4) / 7

    def run(m, n):
        seen = []

        def g(x, w, c):
            out = m.grad(lambda a: (a * _r(m, c)).sum())(_u(m, n, x, w))
            seen.append(str(m.typeof(out)))
            return out
        with m.set_mesh(_mesh(m)):
            out = m.jit(g)(A, B, C)
        return seen[0], out.sharding.spec, np.asarray(out)
    want_t, want_spec, want = run(jax, jnp)
    got_t, got_spec, got = run(shardc, snp)
    assert (got_t, got_spec) == (want_t, want_spec) == ("float32[8,4]{R:Y}",
                                                        P(None, None, reduced={"Y"}))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got, C, rtol=1e-6)


def test_a_max_pool_of_a_reduced_value_stays_reduced():
    # (its untyped fold was retyped as a cotangent is: {U:Y}, partial sums)
    seen = []

    def f(w):
        out = shardc.lax.reduce_window(_r(shardc, w), -np.inf, shardc.lax.max, (2, 1),
                                       (2, 1), "VALID")
        seen.append(str(shardc.typeof(out)))
        return shardc.reshard(out, P())
    with shardc.set_mesh(_mesh(shardc)):
        got = shardc.jit(f)(W)
    assert seen == ["float32[8,4]{R:Y}"]
    np.testing.assert_allclose(np.asarray(got), W.reshape(8, 2, 4).max(1))


def test_softplus_elu_and_log_softmax_keep_the_reduced_type():
    # (jnp.where(c, 0, x)'s broadcast 0 made the result a plain value, and a max
    # dropped the type: x - max(x) was a type error)
    seen = []
    with shardc.set_mesh(_mesh(shardc)):
        shardc.jit(lambda w: seen.extend(str(shardc.typeof(o)) for o in (
            snn.softplus(_r(shardc, w)), snn.elu(_r(shardc, w)),
            snn.log_softmax(_r(shardc, w), axis=1))))(W)
    assert seen == ["float32[16,4]{R:Y}"] * 3
    with jax.set_mesh(_mesh(jax)):      # (jax's elu and log_softmax raise here)
        jax.jit(lambda w: seen.append(str(jax.typeof(jnn.softplus(_r(jax, w))))))(W)
    assert seen[-1] == "float32[16,4]{R:Y}"


def test_reshard_of_a_numpy_array_in_jit_types_it_as_jax():
    # (it was put on the devices with the sharding, its reduced axes lost in the trace)
    seen = []
    for m in (jax, shardc):
        with m.set_mesh(_mesh(m)):
            m.jit(lambda w: seen.append(str(m.typeof(_r(m, K)))))(W)
    assert seen == ["float32[16,4]{R:Y}"] * 2


def _vjp(m, n, spec, ct_spec):
    def h(w, c):
        _, fn = m.vjp(lambda w: n.sin(m.reshard(w, spec)), w)
        return fn(m.reshard(c, ct_spec))[0]
    with m.set_mesh(_mesh(m)):
        return np.asarray(m.jit(h)(B, np.ones((16, 4), np.float32)))


VJP_BAD = {     # (output type, cotangent type)
    "reduced for reduced": (P(None, reduced={"Y"}), P(None, reduced={"Y"})),
    "whole for reduced": (P(None, reduced={"Y"}), P()),
    "sharded for whole": (P(), P("X")),
    "other dim": (P(None, "Y"), P("Y")),
}


@pytest.mark.parametrize("name", list(VJP_BAD))
def test_vjp_refuses_a_cotangent_of_another_type_as_jax(name):
    spec, ct_spec = VJP_BAD[name]
    with pytest.raises(ValueError, match="unexpected JAX type"):
        _vjp(jax, jnp, spec, ct_spec)
    with pytest.raises(ArgumentError, match="unexpected type for argument to VJP") as e:
        _vjp(shardc, snp, spec, ct_spec)
    assert "test_explicit_reduced_cotangents.py:" in str(e.value)


def test_vjp_takes_its_cotangent_type():
    # (jax.jit: "device_indices_map doesn't work with unreduced"; the value is cos(w))
    got = _vjp(shardc, snp, P(None, reduced={"Y"}), P(None, unreduced={"Y"}))
    np.testing.assert_allclose(got, np.cos(B), rtol=1e-6)
    np.testing.assert_allclose(_vjp(shardc, snp, P(None, "Y"), P(None, "Y")),
                               _vjp(jax, jnp, P(None, "Y"), P(None, "Y")), rtol=1e-6)


def test_an_update_of_a_reduced_value_stays_reduced():
    # (x.at[i].set(v) of one raised "the gradient of a value reduced over mesh axes"
    # in the forward pass; jax.jit: "Using *pspec is dangerous")
    seen = []

    def loss(w):
        out = _r(shardc, w).at[1].set(2.)
        seen.append(str(shardc.typeof(out)))
        return snp.sin(out).sum()
    with shardc.set_mesh(_mesh(shardc)):
        got = shardc.jit(shardc.grad(loss))(W)
    assert seen == ["float32[16,4]{R:Y}"]
    np.testing.assert_allclose(np.asarray(got), np.cos(W) * (np.arange(16) != 1)[:, None],
                               rtol=1e-6)


def test_a_plain_scalar_beside_a_reduced_one_gets_a_whole_cotangent():
    # a + b, a plain (untyped) scalar and b reduced, is reduced: grad's seed is partial
    # sums, and a's cotangent was left so (no retyping for rank-0 values), so XLA failed
    # to compile ("duplicate axis ref") a broadcast typed sharded and unreduced on Y
    X = np.sin(np.arange(8 * 16, dtype=np.float32)).reshape(8, 16)

    def run(m, n):
        def f(w, x):
            return n.sin(m.reshard(x, P("Y", None)) @ _r(m, w)).sum() + _r(m, w).sum()
        with m.set_mesh(_mesh(m)):
            return np.asarray(m.jit(m.grad(f))(W, X))
    want = run(jax, jnp)
    np.testing.assert_allclose(run(shardc, snp), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(want, (np.cos(X @ W).T @ X).T + 1, rtol=1e-4)


def test_vmap_of_a_gradient_through_a_reduced_value_counts_it_once():
    # vmap re-traced the backward pass's untyped ops without their partial-sums
    # shardings (a broadcast of the unbatched seed, a product), so XLA reduced the seed
    # there and the retyping counted it once per device: 4x cos (jax.jit refuses it)
    f = lambda w: snp.sin(_r(shardc, w)).sum()
    with shardc.set_mesh(_mesh(shardc)):
        got = shardc.jit(shardc.vmap(shardc.grad(f)))(np.stack([W, W / 2]))
    np.testing.assert_allclose(np.asarray(got), np.cos(np.stack([W, W / 2])), rtol=1e-5)
