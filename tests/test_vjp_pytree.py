"""vjp's function is a pytree of residuals, as jax's VJP: it leaves and enters jitted
functions; jax.fwd_and_bwd on top of it compiles each half once."""
import jax
import jax.ad_checkpoint
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp

R = np.random.default_rng(0)
X = R.normal(size=(8, 4)).astype(np.float32)
W = R.normal(size=(4, 4)).astype(np.float32)
CT = R.normal(size=(8, 4)).astype(np.float32)


def sf(x, w):
    return snp.tanh(x @ w) * x


def jf(x, w):
    return jnp.tanh(x @ w) * x


def close(a, b):
    for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        np.testing.assert_allclose(u, v, rtol=2e-5, atol=1e-6)


def test_vjp_function_returned_from_jit_and_passed_into_jit():
    want = jax.vjp(jf, X, W)[1](CT)
    y, fn = shardc.jit(lambda x, w: shardc.vjp(sf, x, w))(X, W)
    leaves = jax.tree_util.tree_leaves(fn)
    assert leaves and all(isinstance(r, jax.Array) for r in leaves)     # residual arrays
    close(fn(CT), want)                                       # called outside any trace
    close(shardc.jit(lambda f, c: f(c))(fn, CT), want)        # an argument of a jit
    close(shardc.jit(lambda f, c: f(c * 2))(fn, CT), jax.vjp(jf, X, W)[1](CT * 2))
    close(shardc.vjp(sf, X, W)[1](CT), want)                  # eager vjp: the same object
    close(y, jf(X, W))


@pytest.mark.parametrize("policy", [None, "save_only_these_names", "dots_saveable"])
def test_vjp_function_of_a_checkpoint(policy):
    """A checkpoint's gradient adds the residuals its policy saves to the forward op;
    with the backward pass traced into a region (the vjp function leaving jit, or an
    eager vjp) they stay results of that op, which the region captures. (This raised
    "the return uses an undefined value".)"""
    def pick(cp):
        return None if policy is None else (cp.save_only_these_names("t") if policy ==
                                            "save_only_these_names" else getattr(cp, policy))

    def s(x, w):
        return shardc.ad_checkpoint.checkpoint_name(snp.tanh(x @ w), "t") * x

    def j(x, w):
        return jax.ad_checkpoint.checkpoint_name(jnp.tanh(x @ w), "t") * x
    sg = shardc.checkpoint(s, policy=pick(shardc.checkpoint_policies))
    y, want = jax.vjp(jax.checkpoint(j, policy=pick(jax.checkpoint_policies)), X, W)
    for out, fn in (shardc.jit(lambda x, w: shardc.vjp(sg, x, w))(X, W),
                    shardc.vjp(sg, X, W)):
        close(out, y)
        close(fn(CT), want(CT))
        close(shardc.jit(lambda f, c: f(c))(fn, CT), want(CT))


def test_vjp_function_keeps_the_shardings_of_the_primals(mesh2x4):
    x = jax.device_put(X, NamedSharding(mesh2x4, P("x", None)))
    w = jax.device_put(W, NamedSharding(mesh2x4, P(None, "y")))
    _, fn = shardc.jit(lambda x, w: shardc.vjp(sf, x, w))(x, w)
    gx, gw = shardc.jit(lambda f, c: f(c))(fn, CT)
    close((gx, gw), jax.vjp(jf, X, W)[1](CT))
    # as the pullback called in the trace that made it: sharded like the primals
    igx, igw = shardc.jit(lambda x, w, c: shardc.vjp(sf, x, w)[1](c))(x, w, CT)
    assert gx.sharding.spec == igx.sharding.spec == P("x")
    assert gw.sharding.spec == igw.sharding.spec == P(None, "y")


@pytest.mark.parametrize("name", ["sin_mul", "tanh_chain", "dot"])
def test_vjp_function_carries_each_primal_once(mesh2x4, name):
    """vjp differentiates a fresh copy of each primal; the pullback reads the copy (for
    sin's cos) and the primal (its gradient is sharded like it), so the copy is made
    again inside the backward region rather than leaving jit beside the primal: no two
    residuals hold the same bytes; the gradients and their shardings stay jax's."""
    fns = {"sin_mul": lambda m: lambda x, w: m.sin(x) * w[0],
           "tanh_chain": lambda m: lambda x, w: m.tanh(m.tanh(x) @ w.T),
           "dot": lambda m: lambda x, w: m.exp(x @ w.T) * x}
    x = jax.device_put(X, NamedSharding(mesh2x4, P("x", None)))
    _, fn = shardc.jit(lambda x, w: shardc.vjp(fns[name](snp), x, w))(x, W)
    _, want = jax.jit(lambda x, w: jax.vjp(fns[name](jnp), x, w))(x, W)
    leaves = [np.asarray(a) for a in jax.tree_util.tree_leaves(fn)]
    for i, a in enumerate(leaves):
        for b in leaves[:i]:
            assert a.shape != b.shape or not np.array_equal(a, b), [a.shape for a in leaves]
    got = shardc.jit(lambda f, c: f(c))(fn, CT)
    close(got, want(CT))
    assert got[0].sharding.spec == P("x")


def test_vjp_function_inside_one_trace_and_with_aux():
    def f(x, w):
        y, fn, aux = shardc.vjp(lambda a: (sf(a, w), a.sum()), x, has_aux=True)
        leaves, tree = jax.tree_util.tree_flatten(fn)       # flattened inside the trace
        return fn(CT)[0] + jax.tree_util.tree_unflatten(tree, leaves)(CT)[0] + aux
    want = 2 * jax.vjp(lambda a: jf(a, W), X)[1](CT)[0] + X.sum()
    np.testing.assert_allclose(shardc.jit(f)(X, W), want, rtol=2e-5)


def test_cotangent_mistakes_are_clear_errors():
    _, fn = shardc.jit(lambda x, w: shardc.vjp(sf, x, w))(X, W)
    with pytest.raises(shardc.ShardcError, match="cotangent's structure"):
        fn((CT, CT))
    with pytest.raises(ValueError, match=r"got float32\[4, 4\], but expected float32\[8, 4\]"):
        fn(CT[:4])
    # a complex cotangent for a real output lost its imaginary part silently
    for call in (fn, lambda c: shardc.jit(lambda x, w, c: shardc.vjp(sf, x, w)[1](c))(X, W, c),
                 lambda c: shardc.vjp(sf, X, W)[1](c)):
        with pytest.raises(ValueError, match="got complex64"):
            call(CT * (1 + 2j))


@pytest.mark.parametrize("argnums", [0, 1, (0, 1)])
def test_fwd_and_bwd_as_jax_and_compiled_once(argnums):
    fwd, bwd = shardc.fwd_and_bwd(sf, argnums=argnums)
    jfwd, jbwd = jax.fwd_and_bwd(jf, argnums=argnums)
    for i in range(3):
        y, res = fwd(X + i, W)
        g = bwd(res, CT)
        jy, jres = jfwd(X + i, W)
        close(y, jy)
        close(g, jbwd(jres, CT))
        assert jax.tree_util.tree_structure(g) == jax.tree_util.tree_structure(jbwd(jres, CT))
    assert len(fwd._cache) == 1 and len(bwd._cache) == 1


def test_fwd_and_bwd_with_aux_and_unjitted():
    fwd, bwd = shardc.fwd_and_bwd(lambda x, w: (sf(x, w), x.sum()), argnums=0, has_aux=True)
    y, res, aux = fwd(X, W)
    np.testing.assert_allclose(aux, X.sum(), rtol=1e-6)
    close(bwd(res, CT), jax.vjp(lambda a: jf(a, W), X)[1](CT)[0])
    fwd, bwd = shardc.fwd_and_bwd(sf, argnums=1, jitted=False)
    y, res = fwd(X, W)
    close(bwd(res, CT), jax.vjp(lambda w: jf(X, w), W)[1](CT)[0])


def _region_cases(lax, np_, ns, mesh):
    return {
        "cond": lambda x: lax.cond(x[0] > 0, np_.sin, np_.cos, x),
        "switch": lambda x: lax.switch(1, [np_.sin, np_.cos, np_.tanh], x),
        "checkpointed_cond": ns.checkpoint(lambda x: lax.cond(x[0] > 0, np_.sin, np_.cos, x)),
        "scan": lambda x: lax.scan(lambda c, v: (c * np_.sin(v), c + v), 1.0, x)[1],
        "checkpoint_in_scan": lambda x: lax.scan(ns.checkpoint(
            lambda c, v: (np_.sin(c * v), c)), 1.0, x)[0],
        "cond_in_scan": lambda x: lax.scan(lambda c, v: (
            lax.cond(v > 0.5, np_.sin, np_.cos, c), c), 1.0, x)[1],
        "shard_map": lambda x: ns.shard_map(lambda b: lax.psum(np_.sin(b), "x"), mesh=mesh,
                                            in_specs=P("x"), out_specs=P())(x),
    }


@pytest.mark.parametrize("name", sorted(_region_cases(jax.lax, jnp, jax, None)))
def test_vjp_function_of_region_ops_leaves_its_trace(mesh2x4, name):
    """Region ops whose gradient rebuilds the forward op with residual results (cond,
    checkpoint, scan): an eager vjp and one returned from jit (its backward pass traced
    into a region) against jax.vjp. (cond's and checkpoint's raised "the return uses
    an undefined value".)"""
    x = np.linspace(0.1, 1, 8).astype(np.float32)
    ours = _region_cases(shardc.lax, snp, shardc, mesh2x4)[name]
    y, want = jax.vjp(_region_cases(jax.lax, jnp, jax, mesh2x4)[name], x)
    ct = np.linspace(1, 2, np.size(y)).reshape(np.shape(y)).astype(np.float32)
    for out, fn in (shardc.vjp(ours, x), shardc.jit(lambda x: shardc.vjp(ours, x))(x)):
        close(out, y)
        close(fn(ct), want(ct))
