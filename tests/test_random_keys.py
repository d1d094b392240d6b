"""PRNG keys at shardc's boundaries (typed and raw keys as jit arguments and results,
in scan/cond carries), partitionable generation (a sharded sample is generated shard by
shard, no collective, equal to the unsharded one), shard_map with fold_in, gradients,
and errors for bad keys."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
from shardc import random as sr
from helpers import sample

jr = jax.random


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    assert np.array_equal(a, b, equal_nan=True)


def same_keys(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    same(jr.key_data(a), jr.key_data(b))


def test_typed_key_argument_and_result():
    k = jr.key(0)
    same(shardc.jit(lambda k: sr.normal(k, (3, 4)))(k), jr.normal(k, (3, 4)))
    same(shardc.jit(lambda k: sr.normal(k, (3, 4)))(k), jr.normal(k, (3, 4)))  # cached
    out = shardc.jit(lambda k: sr.split(k))(k)
    assert isinstance(out, type(k))
    same_keys(out, jr.split(k))
    out = shardc.jit(lambda k: {"a": sr.split(k, 3), "raw": sr.split(sr.key_data(k))})(k)
    same_keys(out["a"], jr.split(k, 3))
    same(out["raw"], jr.split(jr.key_data(k)))


def test_raw_key_argument_and_result():
    k = jr.PRNGKey(7)
    same(shardc.jit(lambda k: sr.uniform(k, (5,)))(k), jr.uniform(k, (5,)))
    same(shardc.jit(lambda k: sr.split(k, 4))(k), jr.split(k, 4))


def test_key_made_inside_jit_and_wrapped():
    f = shardc.jit(lambda s: (sr.key(s), sr.wrap_key_data(sr.PRNGKey(s))))
    for s in (5, 6, 7):     # later calls take the compiled fast path: keys still come out
        a, b = f(jnp.int32(s))
        same_keys(a, jr.key(s))
        same_keys(b, jr.key(s))


def test_keys_in_scan_and_cond_carries():
    def body(r, lax):
        def step(k, _):
            k, sub = r.split(k)
            return k, r.normal(sub, (3,))

        def f(k):
            k2, ys = lax.scan(step, k, None, length=4)
            z = lax.cond(ys[0, 0] > 0, lambda k: r.fold_in(k, 1), lambda k: r.fold_in(k, 2), k2)
            return z, ys
        return f
    k = jr.key(4)
    want = jax.jit(body(jr, jax.lax))(k)
    for got in (shardc.jit(body(sr, shardc.lax))(k), body(sr, shardc.lax)(k)):
        same_keys(got[0], want[0])
        same(got[1], want[1])


def _collectives(text):
    return [ln for ln in text.splitlines()
            if re.search(r"all-gather|all-reduce|all-to-all|collective-permute|reduce-scatter",
                         ln)]


@pytest.mark.parametrize("spec", [P("x", "y"), P(None, "y"), P("y", "x")])
def test_sharded_normal_has_no_collectives_and_equals_unsharded(mesh2x4, spec):
    s = NamedSharding(mesh2x4, spec)
    k = jr.key(0)
    f = shardc.jit(lambda k: sr.normal(k, (256, 128)), out_shardings=s)
    text = f.lower(k).compile().as_text()
    assert not _collectives(text)
    per = [d // (mesh2x4.shape[a] if a else 1) for d, a in zip((256, 128), spec)]
    assert f"f32[{per[0]},{per[1]}]" in text     # each device generates its shard only
    out = f(k)
    assert out.sharding.spec == spec
    same(out, jr.normal(k, (256, 128)))


def test_sharded_by_constraint_bits_and_uniform(mesh2x4):
    s = NamedSharding(mesh2x4, P("x", "y"))
    k = jr.PRNGKey(3)
    for fn in (lambda k: sr.uniform(k, (64, 32)), lambda k: sr.bits(k, (64, 32)),
               lambda k: sr.randint(k, (64, 32), 0, 10)):
        f = shardc.jit(lambda k: shardc.lax.with_sharding_constraint(fn(k), s))
        assert not _collectives(f.lower(k).compile().as_text())
    same(shardc.jit(lambda k: shardc.lax.with_sharding_constraint(sr.uniform(k, (64, 32)), s))(k),
         jr.uniform(k, (64, 32)))


def test_large_sharded_normal(mesh2x4):
    s = NamedSharding(mesh2x4, P("x", "y"))
    k = jr.key(1)
    f = shardc.jit(lambda k: sr.normal(k, (1024, 1024)), out_shardings=s)
    assert not _collectives(f.lower(k).compile().as_text())
    same(f(k), jr.normal(k, (1024, 1024)))


@pytest.mark.parametrize("make", [jr.key, jr.PRNGKey])
def test_shard_map_fold_in_axis_index(mesh2x4, make):
    def ours(k):
        return sr.normal(sr.fold_in(k, shardc.lax.axis_index("x")), (2, 3))

    def theirs(k):
        return jr.normal(jr.fold_in(k, jax.lax.axis_index("x")), (2, 3))
    k = make(5)
    a = shardc.jit(shardc.shard_map(ours, mesh=mesh2x4, in_specs=P(), out_specs=P("x")))(k)
    b = jax.jit(jax.shard_map(theirs, mesh=mesh2x4, in_specs=P(), out_specs=P("x")))(k)
    same(a, b)


def test_normal_reparameterization_gradient():
    k = jr.key(2)

    def loss(r, grad):
        return grad(lambda mu, sigma: jnp.sum((mu + sigma * r.normal(k, (4,))) ** 2)
                    if r is jr else shardc.numpy.sum((mu + sigma * r.normal(k, (4,))) ** 2),
                    argnums=(0, 1))(1.0, 2.0)
    a = loss(sr, shardc.grad)
    b = loss(jr, jax.grad)
    np.testing.assert_allclose(a, b, rtol=1e-6)


def test_truncated_normal_and_uniform_gradients():
    k = jr.key(2)
    a = shardc.grad(lambda lo: shardc.numpy.sum(sr.uniform(k, (5,), minval=lo, maxval=3.)))(1.)
    b = jax.grad(lambda lo: jnp.sum(jr.uniform(k, (5,), minval=lo, maxval=3.)))(1.)
    np.testing.assert_allclose(a, b, rtol=1e-6)


@pytest.mark.parametrize("name", ["gamma", "loggamma", "dirichlet", "chisquare", "beta"])
def test_gamma_family_gradients_by_implicit_differentiation(name):
    k = jr.key(5)
    a = jnp.array([0.3, 1.0, 2.5, 7.0])
    extra = (2.,) if name == "beta" else ()
    got = shardc.grad(lambda a: shardc.numpy.sum(getattr(sr, name)(k, a, *extra)))(a)
    want = jax.grad(lambda a: jnp.sum(getattr(jr, name)(k, a, *extra)))(a)
    if name == "beta":      # the quotient's gradient rounds differently in its last bit
        np.testing.assert_allclose(got, want, rtol=1e-6)
    else:
        same(got, want)


@pytest.mark.parametrize("key,err,msg", [
    (jnp.zeros(3, jnp.uint32), TypeError, "expected key_data.shape to end with (2,)"),
    (jnp.zeros(2, jnp.int32), TypeError, "expected key_data.dtype = uint32"),
    (jr.split(jr.key(0)), ValueError, "accepts a single key"),
    ("key", TypeError, "expected key_data to have ndim, shape, and dtype"),
    ([1, 2], TypeError, "unexpected PRNG key type"),
])
def test_bad_keys_raise_jax_errors_at_the_callers_line(key, err, msg):
    with pytest.raises(err, match=re.escape(msg)) as info:
        sr.normal(key, (2,))
    assert "test_random_keys.py" in str(info.value)
    with pytest.raises(err, match=re.escape(msg)):
        jr.normal(key, (2,))


def test_bad_seed_and_arguments():
    with pytest.raises(TypeError, match="scalar seed"):
        sr.key(jnp.arange(2))
    with pytest.raises(TypeError, match="scalar seed, but was given a PRNG key"):
        sr.PRNGKey(jr.key(0))
    with pytest.raises(ValueError, match="must be a float dtype"):
        sr.uniform(jr.key(0), (2,), jnp.int32)
    with pytest.raises(TypeError, match="fold_in accepts a scalar"):
        sr.fold_in(jr.key(0), jnp.arange(2))
    with pytest.raises(ValueError, match="Incompatible shapes for broadcasting"):
        sr.truncated_normal(jr.key(0), jnp.zeros(3), 1., (2,))
    with pytest.raises(ValueError, match="broadcast-compatible"):
        sr.gamma(jr.key(0), jnp.ones(3), (2, 1))


VMAPPED = [
    ("normal", lambda r, k: r.normal(k, (3,))),
    ("uniform", lambda r, k: r.uniform(k, (2, 2), jnp.bfloat16)),
    ("split", lambda r, k: r.key_data(r.split(k))),
    ("fold_in", lambda r, k: r.normal(r.fold_in(k, 3), (2,))),
    ("randint", lambda r, k: r.randint(k, (3,), 0, 10)),
    ("gamma", lambda r, k: r.gamma(k, jnp.array([0.5, 2.0]))),
    ("bernoulli", lambda r, k: r.bernoulli(k, 0.3, (5,))),
    ("poisson", lambda r, k: r.poisson(k, jnp.array([2.0, 30.0]))),
]


@pytest.mark.parametrize("case", sample([pytest.param(c, id=c[0]) for c in VMAPPED], 2))
@pytest.mark.parametrize("typed", [True, False])
def test_vmap_over_keys(case, typed):
    _, fn = case
    ks = jr.split(jr.key(0), 4)
    ks = ks if typed else jr.key_data(ks)
    want = jax.vmap(lambda k: fn(jr, k))(ks)
    same(shardc.vmap(lambda k: fn(sr, k))(ks), want)
    same(shardc.jit(shardc.vmap(lambda k: fn(sr, k)))(ks), want)


def test_vmap_over_seeds_and_parameters():
    same(shardc.vmap(sr.PRNGKey)(jnp.arange(3)), jax.vmap(jr.PRNGKey)(jnp.arange(3)))
    k = jr.key(1)
    mus = jnp.arange(3.)
    same(shardc.vmap(lambda m: sr.normal(k, (2,)) + m)(mus),
         jax.vmap(lambda m: jr.normal(k, (2,)) + m)(mus))
    same(shardc.vmap(lambda a: sr.gamma(k, a))(jnp.array([0.3, 1.5, 4.0])),
         jax.vmap(lambda a: jr.gamma(k, a))(jnp.array([0.3, 1.5, 4.0])))
