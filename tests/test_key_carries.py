"""Typed PRNG keys through jax's own transforms inside shardc.jit: jax's loops, branches,
jits, vmaps and remat carry them as keys (a key is a leaf to jax, as jax's key arrays
are), and shardc's own transforms take them apart into their data. Each against jax.jit,
keys compared by their data."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import shardc
from helpers import check_outputs


def _data(tree):
    return jax.tree_util.tree_map(
        lambda x: jax.random.key_data(x)
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x, tree)


def both(fn, *args, mesh=None):
    ours, ref = shardc.jit(fn)(*args), jax.jit(fn)(*args)
    assert jax.tree_util.tree_structure(ours) == jax.tree_util.tree_structure(ref)
    for o, r in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(ref)):
        assert jax.dtypes.issubdtype(o.dtype, jax.dtypes.prng_key) == \
            jax.dtypes.issubdtype(r.dtype, jax.dtypes.prng_key)
    check_outputs(_data(ours), _data(ref), mesh)


KEY = jax.random.key(3)
X = np.linspace(-1, 1, 8, dtype=np.float32)


def _step(k, _):
    k, sub = jax.random.split(k)
    return k, jax.random.normal(sub, (4,))


def test_scan_carries_a_key():
    both(lambda k: lax.scan(_step, k, None, length=5), KEY)


def test_scan_over_split_keys_as_xs():
    def f(k, x):
        ks = jax.random.split(k, 6)
        return lax.scan(lambda c, kk: (c + jax.random.uniform(kk, x.shape), kk), x, ks)
    both(f, KEY, X)


def test_scan_carries_keys_and_arrays_in_a_dict():
    def f(k, x):
        def body(c, _):
            k, sub = jax.random.split(c["key"])
            return {"key": k, "acc": c["acc"] + jax.random.normal(sub, x.shape)}, None
        return lax.scan(body, {"key": k, "acc": x}, None, length=3)[0]
    both(f, KEY, X)


def test_fori_loop_and_while_loop_carry_keys():
    both(lambda k: lax.fori_loop(0, 4, lambda i, k: jax.random.fold_in(k, i), k), KEY)
    both(lambda k: lax.while_loop(lambda c: c[1] < 3,
                                  lambda c: (jax.random.split(c[0])[1], c[1] + 1), (k, 0)), KEY)


def test_a_batch_of_keys_as_carry():
    def f(k):
        ks = jax.random.split(k, 4)
        return lax.scan(lambda c, _: (jax.vmap(lambda kk: jax.random.split(kk)[0])(c),
                                      jax.vmap(lambda kk: jax.random.normal(kk, (2,)))(c)),
                        ks, None, length=3)
    both(f, KEY)


def test_cond_and_switch_on_key_operands():
    def f(k, p, i):
        a = lax.cond(p, lambda k: jax.random.split(k)[0], lambda k: k, k)
        b = lax.switch(i, [lambda k: jax.random.normal(k, (2,)),
                           lambda k: jax.random.uniform(k, (2,))], a)
        return a, b
    both(f, KEY, True, 1)
    both(f, KEY, False, 0)


def test_jax_jit_and_remat_inside_take_a_key():
    sample = jax.jit(lambda k, x: (jax.random.split(k)[0], x + jax.random.normal(k, x.shape)))
    both(lambda k, x: sample(k, x), KEY, X)
    both(lambda k, x: jax.checkpoint(lambda k, x: x * jax.random.uniform(k, x.shape))(k, x),
         KEY, X)


def test_jax_vmap_and_lax_map_over_keys():
    both(lambda k: jax.vmap(lambda kk: jax.random.normal(kk, (3,)))(jax.random.split(k, 5)),
         KEY)
    both(lambda k: lax.map(lambda kk: jax.random.split(kk)[1], jax.random.split(k, 3)), KEY)


def test_grad_through_a_loop_that_samples():
    def loss(w, k):
        def body(c, _):
            k, acc = c
            k, sub = jax.random.split(k)
            return (k, acc + jnp.sum(w * jax.random.normal(sub, w.shape))), None
        return lax.scan(body, (k, 0.0), None, length=3)[0][1]
    w = X.reshape(2, 4)
    check_outputs(shardc.jit(jax.grad(loss))(w, KEY), jax.jit(jax.grad(loss))(w, KEY))
    check_outputs(shardc.jit(shardc.grad(loss))(w, KEY), jax.jit(jax.grad(loss))(w, KEY))


def test_shardc_transforms_take_keys_apart():
    """shardc's own scan, vmap, jit and grad flatten a key to its data and rebuild it."""
    def f(k, w):
        k2, ys = shardc.lax.scan(_step, k, None, length=3)
        zs = shardc.vmap(lambda kk: shardc.random.normal(kk, (2,)))(shardc.random.split(k2, 3))
        g = shardc.grad(lambda w, kk: jnp.sum(w * jax.random.normal(kk, w.shape)))(w, k2)
        inner = shardc.jit(lambda kk: jax.random.split(kk)[1])(k2)
        return k2, ys, zs, g, inner
    ref = jax.jit(lambda k, w: (lambda k2, ys: (
        k2, ys, jax.vmap(lambda kk: jax.random.normal(kk, (2,)))(jax.random.split(k2, 3)),
        jax.grad(lambda w, kk: jnp.sum(w * jax.random.normal(kk, w.shape)))(w, k2),
        jax.random.split(k2)[1]))(*lax.scan(_step, k, None, length=3)))(KEY, X)
    check_outputs(_data(shardc.jit(f)(KEY, X)), _data(ref))


def test_keys_inside_a_jax_scan_on_a_mesh(mesh2x4):
    x = jax.device_put(np.arange(32, dtype=np.float32).reshape(8, 4),
                       NamedSharding(mesh2x4, P("x", None)))

    def f(k, x):
        def body(c, _):
            k, acc = c
            k, sub = jax.random.split(k)
            return (k, acc + jax.random.normal(sub, acc.shape)), None
        return lax.scan(body, (k, x), None, length=2)[0]
    both(f, KEY, x, mesh=mesh2x4)


def test_raw_uint32_keys_are_unchanged():
    both(lambda k: lax.scan(_step, k, None, length=3), jax.random.PRNGKey(1))


@pytest.mark.parametrize("n", [1, 4])
def test_keys_returned_from_a_jax_loop_are_jax_keys(n):
    out = shardc.jit(lambda k: lax.fori_loop(0, n, lambda i, k: jax.random.split(k)[0], k))(KEY)
    assert jax.dtypes.issubdtype(out.dtype, jax.dtypes.prng_key)
    want = KEY
    for _ in range(n):
        want = jax.random.split(want)[0]
    np.testing.assert_array_equal(jax.random.key_data(out), jax.random.key_data(want))


def test_keys_are_typed_by_their_datas_sharding_in_explicit_mode():
    """jax.shard_map checks its in_specs against the keys' type: a key array sharded
    P('i') has type key<fry>[8@i] inside shardc.jit, as inside jax.jit."""
    mesh = jax.make_mesh((8,), ("i",), axis_types=(jax.sharding.AxisType.Explicit,))
    with jax.set_mesh(mesh):
        ks = jax.sharding.reshard(jax.random.split(KEY, 8), P("i"))
        seen = []

        def f(ks):
            seen.append(str(jax.typeof(ks)))
            return jax.shard_map(lambda kk: jax.random.normal(kk[0], (1, 2)),
                                 in_specs=P("i"), out_specs=P("i"))(ks)
        both(f, ks, mesh=mesh)
    assert seen == ["key<fry>[8@i]"] * 2


def test_a_vmapped_while_with_a_predicate_per_example_carries_keys():
    """jax's batched while (a predicate per example) is a masked loop: the keys' data
    is selected per example, as any carry's."""
    def f(keys, n):
        def one(k, n):
            return lax.while_loop(lambda c: c[1] < n,
                                  lambda c: (jax.random.split(c[0])[0], c[1] + 1), (k, 0))
        return jax.vmap(one)(keys, n)
    both(f, jax.random.split(KEY, 3), jnp.array([1, 3, 2]))
