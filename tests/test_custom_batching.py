"""shardc.custom_batching (custom_vmap, sequential_vmap) against jax.custom_batching, and
jax's own custom_vmap / custom_vjp functions inside shardc traces."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.custom_batching import custom_vmap as jax_custom_vmap

import shardc
import shardc.numpy as snp
from shardc.custom_batching import custom_vmap, sequential_vmap
from shardc.ir.program import print_program

X = np.linspace(-1.0, 2.0, 6, dtype=np.float32)
Y = np.linspace(0.5, 1.5, 6, dtype=np.float32)


def make(lib, np_, seen):
    """sin(x) * y, whose vmap rule computes cos(x) * y: a rule that is not vmap(f), so a
    result tells which one ran."""
    @lib
    def f(x, y):
        return np_.sin(x) * y

    @f.def_vmap
    def rule(axis_size, in_batched, xs, ys):
        seen.append((axis_size, list(in_batched)))
        return np_.cos(xs) * ys, in_batched[0] or in_batched[1]
    return f


def pair():
    s_seen, j_seen = [], []
    return make(custom_vmap, snp, s_seen), make(jax_custom_vmap, jnp, j_seen), s_seen, j_seen


@pytest.mark.parametrize("in_axes", [0, (0, None), (None, 0)])
def test_vmap_applies_the_rule_as_jax(in_axes):
    sf, jf, s_seen, j_seen = pair()
    y = Y if in_axes != (0, None) else Y[0]
    x = X if in_axes != (None, 0) else X[0]
    want = jax.vmap(jf, in_axes=in_axes)(x, y)
    for got in (shardc.vmap(sf, in_axes=in_axes)(x, y),
                shardc.jit(shardc.vmap(sf, in_axes=in_axes))(x, y)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
        assert got.dtype == want.dtype and got.shape == want.shape
    assert s_seen[0] == j_seen[0]          # the same axis size and in_batched flags


def test_unbatched_calls_are_the_function():
    sf, jf, s_seen, _ = pair()
    np.testing.assert_allclose(sf(X[1], Y[1]), np.sin(X[1]) * Y[1], rtol=1e-6)   # eager
    np.testing.assert_allclose(shardc.jit(sf)(X, Y), jf(X, Y), rtol=1e-6)
    assert s_seen == []


def test_nested_vmaps_and_vmap_inside_jit_loops():
    sf, jf, _, _ = pair()
    x2, y2 = X.reshape(2, 3), Y.reshape(2, 3)
    np.testing.assert_allclose(shardc.vmap(shardc.vmap(sf))(x2, y2),
                               jax.vmap(jax.vmap(jf))(x2, y2), rtol=1e-6)

    def loop(x, y):       # vmap inside a scan body
        return shardc.lax.scan(lambda c, xy: (c + shardc.vmap(sf)(*xy).sum(), None),
                               0.0, (x, y))[0]
    np.testing.assert_allclose(shardc.jit(loop)(x2, y2), (np.cos(x2) * y2).sum(), rtol=1e-5)


def test_forward_mode_differentiates_the_function_then_the_rule_under_vmap():
    sf, jf, _, _ = pair()
    p, t = jax.jvp(jf, (X[2], Y[2]), (1.0, 0.5))
    sp, st = shardc.jvp(sf, (X[2], Y[2]), (1.0, 0.5))
    np.testing.assert_allclose([sp, st], [p, t], rtol=1e-6)
    # under vmap: the JVP of the rule, cos(x) * y (jax 0.10.2 broadcasts this result to
    # (6, 6), a bug of its own; the reference is the rule's JVP directly)
    got = shardc.vmap(lambda a, b: shardc.jvp(sf, (a, b), (snp.ones_like(a), b)))(X, Y)
    want = jax.jvp(lambda a, b: jnp.cos(a) * b, (X, Y), (np.ones_like(X), Y))
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6)


def test_reverse_mode_is_an_error_as_in_jax():
    sf, jf, _, _ = pair()
    with pytest.raises(ValueError):
        jax.grad(jf)(1.0, 2.0)
    with pytest.raises(shardc.ShardcError, match=r"test_custom_batching.py:\d+: custom_vmap "
                       r"function <f> does not support reverse-mode"):
        shardc.grad(sf)(1.0, 2.0)


def test_custom_vjp_around_custom_vmap_as_in_jaxs_docs():
    def build(vjp, vmap_, np_):
        @vjp
        @vmap_
        def f(x, y):
            return np_.sin(x) * y

        @f.def_vmap
        def rule(axis_size, in_batched, xs, ys):
            return np_.cos(xs) * ys, True

        def fwd(x, y):
            return f(x, y), (np_.cos(x), np_.sin(x), y)

        def bwd(res, g):
            cos_x, sin_x, y = res
            return (cos_x * g * y, sin_x * g)
        f.defvjp(fwd, bwd)
        return f
    sf = build(shardc.custom_vjp, custom_vmap, snp)
    jf = build(jax.custom_vjp, jax_custom_vmap, jnp)
    np.testing.assert_allclose(shardc.vmap(sf)(X, Y), jax.vmap(jf)(X, Y), rtol=1e-6)
    np.testing.assert_allclose(shardc.grad(sf)(0.3, 2.0), jax.grad(jf)(0.3, 2.0), rtol=1e-6)
    np.testing.assert_allclose(shardc.jit(shardc.vmap(shardc.grad(sf)))(X, Y),
                               jax.vmap(jax.grad(jf))(X, Y), rtol=1e-6)
    # jax's own pair, inside shardc.jit
    np.testing.assert_allclose(shardc.jit(jax.vmap(jf))(X, Y), jax.vmap(jf)(X, Y), rtol=1e-6)
    np.testing.assert_allclose(shardc.jit(jax.vmap(jax.grad(jf)))(X, Y),
                               jax.vmap(jax.grad(jf))(X, Y), rtol=1e-6)


def test_jax_custom_vmap_inside_shardc_traces():
    _, jf, _, j_seen = pair()
    want = jax.vmap(jf)(X, Y)
    for got in (shardc.jit(jax.vmap(jf))(X, Y), shardc.vmap(jf)(X, Y),
                shardc.jit(shardc.vmap(lambda a, b: jf(a, b)))(X, Y)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(shardc.jit(jf)(X, Y), np.sin(X) * Y, rtol=1e-6)


def test_sequential_vmap_loops():
    def g(x):
        return x.sum() + 1
    sg = sequential_vmap(g)
    jg = jax.custom_batching.sequential_vmap(g)
    xs = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(shardc.jit(shardc.vmap(sg))(xs), jax.vmap(jg)(xs))
    np.testing.assert_allclose(shardc.jit(jax.vmap(jg))(xs), jax.vmap(jg)(xs))
    text = print_program(shardc.jit(shardc.vmap(sg)).trace(xs)._program)
    assert re.search(r"= scan\(.*\n.*\n\s+%\d+: f32\[\] .*= custom_vmap_call\(", text), text


def test_rule_mistakes_are_clear_errors():
    def with_rule(rule, np_=snp):
        f = custom_vmap(lambda x: np_.sin(x))
        f.def_vmap(rule)
        return f
    with pytest.raises(ValueError, match="structure of output value and output batching"):
        shardc.vmap(with_rule(lambda n, b, x: (x, (True, True))))(X)
    with pytest.raises(ValueError, match="does not match that of original"):
        shardc.vmap(with_rule(lambda n, b, x: ((x, x), (True, True))))(X)
    with pytest.raises(shardc.ShardcError, match=r"output 0 has shape \(6, 2\)"):
        shardc.vmap(with_rule(lambda n, b, x: (snp.stack([x, x], 1), True)))(X)
    with pytest.raises(AttributeError, match="No batching rule defined"):
        shardc.jit(custom_vmap(lambda x: x))(X)

    def closes_over(x, y):
        f = custom_vmap(lambda v: snp.sin(v) * y)
        f.def_vmap(lambda n, b, v: (snp.sin(v) * y, True))
        return f(x)
    with pytest.raises(shardc.ShardcError, match="closes over a value that vmap batches"):
        shardc.vmap(closes_over)(X, Y)
