"""jax code inside shardc.jit (the jaxpr-import frontend): the same function under
shardc.jit and jax.jit, values, dtypes and output shardings; custom rules, control flow,
random bits, locations and errors."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import check_outputs


def both(fn, *args, mesh=None, **kw):
    ours = shardc.jit(fn, **kw)(*args)
    ref = jax.jit(fn, **kw)(*args)
    check_outputs(ours, ref, mesh)
    return ours


def put(mesh, x, spec):
    return jax.device_put(x, NamedSharding(mesh, spec))


X = np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8)


def test_jax_numpy_and_lax_ops(mesh2x4):
    x = put(mesh2x4, X, P("x", "y"))

    def f(x):
        y = jnp.tanh(x) @ x.T + jnp.float32(2) * x
        z = jax.lax.rsqrt(jnp.abs(y) + 1) / jnp.maximum(x, 0.5)
        w = jnp.cumsum(z, axis=0) + jnp.sort(z, axis=1)
        return (jax.nn.softmax(w), jnp.argmax(w, axis=1), jnp.where(w > 0, w, 0).sum(0),
                jnp.concatenate([x[:2], x[::2, ::-1][:2]]), jnp.round(x * 3),
                x.astype(jnp.bfloat16))
    both(f, x, mesh=mesh2x4)


def test_mixed_shardc_and_jax_numpy_in_one_body(mesh2x4):
    x = put(mesh2x4, X, P("x"))

    def ours(x):
        return snp.sum(jax.nn.gelu(snp.sin(x)) * jnp.cos(x), axis=1)

    def ref(x):
        return jnp.sum(jax.nn.gelu(jnp.sin(x)) * jnp.cos(x), axis=1)
    check_outputs(shardc.jit(ours)(x), jax.jit(ref)(x), mesh2x4)


def test_size_one_broadcasting_and_batched_gather(mesh2x4):
    x = put(mesh2x4, np.arange(32, dtype=np.float32).reshape(2, 4, 4), P("x"))
    idx = np.array([[[1], [0], [3], [2]], [[0], [0], [1], [2]]], np.int32)

    def f(x, i):
        scale = jnp.ones((1, 1, 4)) * 2
        return (x.mean(-1, keepdims=True) * scale, jnp.take_along_axis(x, i, axis=2),
                x.at[:, 1].add(1.0), x[:, jnp.array([3, 0])])
    both(f, x, idx, mesh=mesh2x4)


def test_jax_jit_inside_keeps_its_shardings_as_constraints(mesh2x4):
    inner = jax.jit(lambda a: jnp.sin(a) * 2, out_shardings=NamedSharding(mesh2x4, P(None, "y")))
    x = put(mesh2x4, X, P("x"))
    out = both(lambda a: inner(a) + 1, x, mesh=mesh2x4)
    assert out.sharding.spec == P(None, "y")
    text = shardc.jit(lambda a: inner(a) + 1).lower(x).as_text()
    assert "sharding_constraint" in text


def test_grads_of_imported_code(mesh2x4):
    x = put(mesh2x4, X, P("x"))

    def loss(w):
        return jnp.mean(jax.nn.log_softmax(jnp.tanh(w) @ w) ** 2)
    ours = shardc.jit(shardc.grad(loss))(x)
    check_outputs(ours, jax.jit(jax.grad(loss))(x), mesh2x4, check_sharding=False)
    both(jax.grad(loss), x, mesh=mesh2x4)
    both(lambda w: jax.value_and_grad(loss)(w), x, mesh=mesh2x4)


def test_custom_vjp_and_custom_jvp_rules_are_used():
    @jax.custom_vjp
    def clip_grad(x):
        return x

    clip_grad.defvjp(lambda x: (x, None), lambda _, g: (jnp.clip(g, -0.1, 0.1),))

    @jax.custom_jvp
    def triple_slope(x):
        return jnp.sin(x)

    triple_slope.defjvp(lambda p, t: (jnp.sin(p[0]), 3.0 * t[0]))

    def loss(x):
        return jnp.sum(clip_grad(x) * 5.0) + jnp.sum(triple_slope(x))
    x = jnp.asarray(X)
    g = shardc.jit(shardc.grad(loss))(x)
    np.testing.assert_allclose(g, np.full(X.shape, 0.1 + 3.0), rtol=1e-6)
    np.testing.assert_allclose(g, jax.grad(loss)(x), rtol=1e-6)
    both(jax.grad(loss), x)


def test_custom_vjp_whose_fwd_calls_the_function_itself():
    """jax's usual pattern, `fwd(x) = f(x), res`: translating fwd met the same call again
    and traced its fwd again, without end (RecursionError), under jit, grad and vmap."""
    @jax.custom_vjp
    def f(x):
        return jnp.sin(x)
    f.defvjp(lambda x: (f(x), jnp.cos(x) * 2), lambda res, g: (res * g,))
    x = jnp.asarray(X[0])
    np.testing.assert_allclose(shardc.jit(f)(x), jnp.sin(x), rtol=1e-6)
    for t in (jax.grad(lambda v: f(v).sum()), jax.vmap(jax.grad(f)),
              jax.vmap(jax.grad(jax.grad(f)))):
        np.testing.assert_allclose(shardc.jit(t)(x), t(x), rtol=1e-6)
    np.testing.assert_allclose(shardc.grad(lambda v: f(v).sum())(x), 2 * jnp.cos(x), rtol=1e-6)


def test_control_flow(mesh2x4):
    x = put(mesh2x4, X, P("x"))

    def f(x):
        c, ys = jax.lax.scan(lambda c, r: (c + r, jnp.sin(r) * c), jnp.zeros(8), x)
        n = jax.lax.fori_loop(0, 3, lambda i, a: a * 1.5 + i, x)
        w = jax.lax.while_loop(lambda s: s[0] < 4, lambda s: (s[0] + 1, s[1] * 0.9), (0, x))
        b = jax.lax.cond(x[0, 0] > 0, jnp.sin, jnp.cos, x)
        s = jax.lax.switch(2, [jnp.sin, jnp.cos, jnp.tanh], x)
        return c, ys, n, w, b, s
    both(f, x, mesh=mesh2x4)
    g = lambda x: jnp.sum(jax.lax.scan(lambda c, r: (c * r, c), jnp.ones(8), x)[0])
    both(jax.grad(g), x, mesh=mesh2x4)
    check_outputs(shardc.jit(shardc.grad(g))(x), jax.jit(jax.grad(g))(x))


def test_jax_checkpoint_inside(mesh2x4):
    x = put(mesh2x4, X, P("x"))
    blk = jax.checkpoint(lambda w: jnp.sin(w @ w) @ w,
                         policy=jax.checkpoint_policies.dots_saveable)
    both(jax.grad(lambda w: jnp.sum(blk(w))), x, mesh=mesh2x4)
    check_outputs(shardc.jit(shardc.grad(lambda w: jnp.sum(blk(w))))(x),
                  jax.jit(jax.grad(lambda w: jnp.sum(blk(w))))(x))


def test_random_bits_are_jaxs(mesh2x4):
    def f(seed, raw):
        k = jax.random.key(seed)
        k1, k2 = jax.random.split(k)
        return (jax.random.normal(k1, (4, 8)), jax.random.uniform(jax.random.fold_in(k2, 7), (3,)),
                jax.random.bernoulli(k2, 0.3, (16,)), jax.random.randint(raw, (5,), 0, 9),
                jax.random.key_data(jax.random.split(k2, 3)),
                jax.random.permutation(k1, 6))
    both(f, jnp.int32(3), jax.random.PRNGKey(11))


def test_typed_key_argument():
    """A jax typed key passed in is usable by jax.random, shardc.random and jax.numpy's
    shape ops on keys; keys returned are jax key arrays."""
    k = jax.random.key(5)
    f = lambda r, k: (r.normal(k, (3,)), r.split(k)[1], r.uniform(r.split(k, 4)[2:][1], (2,)),
                      r.split(k, 4)[1:3], r.fold_in(k, 3))
    ref = jax.jit(lambda k: f(jax.random, k))(k)
    for r in (jax.random, shardc.random):
        ours = shardc.jit(lambda k: f(r, k))(k)
        for o, w in zip(ours, ref):
            if jax.dtypes.issubdtype(w.dtype, jax.dtypes.prng_key):
                assert jax.dtypes.issubdtype(o.dtype, jax.dtypes.prng_key)
                o, w = jax.random.key_data(o), jax.random.key_data(w)
            np.testing.assert_array_equal(o, w)
    # a key made by jax.random inside, consumed by shardc.random, and the other way round
    g = lambda k: (shardc.random.normal(jax.random.split(k)[0], (2,)),
                   jax.random.normal(shardc.random.split(k)[1], (2,)))
    np.testing.assert_array_equal(shardc.jit(g)(k)[0], jax.random.normal(jax.random.split(k)[0],
                                                                         (2,)))
    np.testing.assert_array_equal(shardc.jit(g)(k)[1], jax.random.normal(jax.random.split(k)[1],
                                                                         (2,)))


def test_locations_name_the_users_line():
    def f(x):
        return jnp.sin(x) * 2     # the line ops must point at
    line = f.__code__.co_firstlineno + 1
    text = shardc.jit(f).trace(jnp.ones(4)).ir
    assert re.search(rf'sin\(.*loc\("test_frontend.py":{line}\)', text), text


def test_locations_name_the_library_line_too(mesh2x4):
    """An op a library (flax) binds names the user's line and the library's line, live
    or from a jax.jit's jaxpr; in the IR text (which parses back), explain and the
    report, whose collective is tied to both."""
    import flax.linen as nn
    from shardc.ir.parse import parse_program
    from shardc.report import report
    m = nn.Dense(16)
    p = m.init(jax.random.PRNGKey(0), jnp.ones((8, 32)))
    p = jax.tree.map(lambda a: put(mesh2x4, a, P(*[None] * (a.ndim - 1), "y")), p)
    x = put(mesh2x4, np.ones((8, 32), np.float32), P("x", "y"))
    def direct(p, x):
        return m.apply(p, x)       # the user's line
    line = direct.__code__.co_firstlineno + 1
    for f in (direct, jax.jit(direct)):
        traced = shardc.jit(f).trace(p, x)
        lib = re.search(rf'dot_general\(.*loc\((?:"[^"]+"\()?"test_frontend.py":{line} in '
                        r'"flax/linen/linear.py":(\d+)\)', traced.ir)
        assert lib, traced.ir
        assert str(parse_program(traced.ir)) == traced.ir
        assert f"test_frontend.py:{line} (in flax/linen/linear.py:{lib.group(1)})" in \
            traced.explain()
    r = report(shardc.jit(f).lower(p, x).compile())
    (c,) = r.json()["collectives"]
    assert (c["line"], c["library_line"]) == (line, f"flax/linen/linear.py:{lib.group(1)}")
    assert f"(in flax/linen/linear.py:{lib.group(1)})" in r.text()


def test_the_stack_walk_keeps_the_innermost_library_frame():
    """errors.loc_of_frames (a jaxpr equation's frames, innermost first): the first user
    frame, and the first library frame before it."""
    from shardc import errors
    site = errors._LIB_DIRS[0]
    frames = [(jax.__file__, 3), (site + "flax/linen/linear.py", 287),
              (site + "flax/linen/module.py", 700), (__file__, 12), (__file__, 40)]
    loc = errors.loc_of_frames(frames)
    assert (loc.file, loc.line, loc.lib) == (__file__, 12, (site + "flax/linen/linear.py", 287))
    assert errors.loc_of_frames(frames[:1] + frames[3:]).lib is None


def test_untranslatable_primitive_is_a_clear_error():
    # (rng_uniform: a jax primitive shardc has no op for; scatter-mul, hessenberg, then
    # rng_bit_generator, were the example until each got one)
    def f(x):
        return jax.lax.rng_uniform(x, x + 1, (4,))
    with pytest.raises(shardc.ShardcError) as e:
        shardc.jit(f)(jnp.zeros((), jnp.float32))
    msg = str(e.value)
    assert "rng_uniform" in msg and "test_frontend.py" in msg, msg


def test_pooling_windows_and_their_gradient(mesh2x4):
    """flax's pooling is reduce_window: strided slices of the padded operand here."""
    import flax.linen as nn
    x = put(mesh2x4, np.linspace(-1, 1, 2 * 6 * 6 * 3, dtype=np.float32).reshape(2, 6, 6, 3),
            P("x"))

    def f(x):
        return (nn.max_pool(x, (2, 2), strides=(2, 2)),
                nn.avg_pool(x, (3, 3), strides=(1, 2), padding="SAME"),
                -nn.max_pool(-x, (2, 3), padding=((1, 0), (0, 2))))
    both(f, x, mesh=mesh2x4)
    g = lambda x: sum(jnp.sum(o ** 2) for o in f(x))
    check_outputs(shardc.jit(shardc.grad(g))(x), jax.jit(jax.grad(g))(x))


def test_reduce_window_with_any_reducer(mesh2x4):
    """lax.reduce_window with a reducer of its own (a product, a variadic max-and-index
    pair), base and window dilation, and its gradient."""
    x = put(mesh2x4, np.linspace(0.5, 1.5, 4 * 8, dtype=np.float32).reshape(4, 8), P("x"))
    idx = jnp.broadcast_to(jnp.arange(8, dtype=jnp.int32), (4, 8))

    def argmax_pair(a, b):
        (av, ai), (bv, bi) = a, b
        take = av >= bv
        return jnp.where(take, av, bv), jnp.where(take, ai, bi)

    def f(x):
        prod = jax.lax.reduce_window(x, 1.0, jax.lax.mul, (1, 3), (1, 2), ((0, 0), (1, 1)))
        dil = jax.lax.reduce_window(x, 0.0, lambda a, b: a + 2 * b, (2, 2), (1, 1), "VALID",
                                    base_dilation=(1, 2), window_dilation=(2, 1))
        mx, at = jax.lax.reduce_window((x, idx), (-jnp.inf, 0), argmax_pair, (1, 4), (1, 4),
                                       "VALID")
        return prod, dil, mx, at
    both(f, x, mesh=mesh2x4)
    # jax cannot differentiate a generic reduce_window; its reference is the same
    # windows written as slices
    g = lambda x: jnp.sum(f(x)[0]) + jnp.sum(f(x)[2] ** 2)

    def g_ref(x):
        p = jnp.pad(x, ((0, 0), (1, 1)), constant_values=1.0)
        prod = jnp.stack([jnp.prod(p[:, 2 * j:2 * j + 3], axis=1) for j in range(4)], 1)
        return jnp.sum(prod) + jnp.sum(x.reshape(4, 2, 4).max(-1) ** 2)
    check_outputs(shardc.jit(shardc.grad(g))(x), jax.jit(jax.grad(g_ref))(x))


@pytest.mark.parametrize("wrap", ["jit", "grad", "vmap"])
def test_jax_transformations_around_shardc_are_a_clear_error(wrap):
    """jax cannot trace into a shardc program (the other nesting is supported): a
    shardc.jit function or a shardc.numpy call reached with a jax tracer says so at the
    user's line."""
    f = shardc.jit(lambda x: snp.sin(x) * 2)
    for inner in (lambda x: f(x).sum(), lambda x: snp.sum(snp.sin(x))):
        g = {"jit": jax.jit, "grad": jax.grad, "vmap": jax.vmap}[wrap](inner)
        with pytest.raises(shardc.ShardcError, match="called on a jax tracer") as e:
            g(jnp.ones(3))
        assert "test_frontend.py" in str(e.value) and "shardc.jit(jax.grad(f))" in str(e.value)


def test_tile_and_its_gradient(mesh2x4):
    x = put(mesh2x4, X[:2, :4], P(None, "y"))
    f = lambda x: (jnp.tile(x, (1, 3)), jnp.tile(x, (2, 2)), jnp.tile(x[0], 3))
    both(f, x, mesh=mesh2x4)
    g = lambda x: sum(jnp.sum(jnp.sin(o)) for o in f(x))
    check_outputs(shardc.jit(shardc.grad(g))(x), jax.jit(jax.grad(g))(x))


def test_jax_transformations_of_shardc_code_inside_shardc_jit_are_a_clear_error(mesh2x4):
    cases = [lambda x: jax.grad(lambda x: snp.sum(snp.sin(x)))(x),
             lambda x: jax.vmap(lambda r: snp.sum(r))(x),
             lambda x: jax.grad(lambda x: snp.sum(shardc.shard_map(
                 lambda b: b * 2, mesh=mesh2x4, in_specs=P("x"), out_specs=P("x"))(x)))(x)]
    for f in cases:
        with pytest.raises(shardc.ShardcError, match="cannot trace shardc's own functions"):
            shardc.jit(f)(jnp.ones((8, 4)))


def test_jax_auto_axes_under_jax_grad_on_an_explicit_mesh():
    """jax.lax.map(batch_size=) reshapes its operands in jax's auto_axes, which changes
    jax's context mesh; jax.grad's tracers above shardc's read the types in it, so
    shardc's types follow jax's context (it was a mesh-mismatch error)."""
    mesh = jax.make_mesh((8,), ("x",), axis_types=(jax.sharding.AxisType.Explicit,))
    v, w = X[0, :3], X[:3, :4]

    def f(v, w):
        def loss(v):
            return jax.lax.map(lambda r: jnp.sin(r) * w, v, batch_size=1).sum()
        return jax.vmap(jax.grad(loss))(jnp.stack([v, 2 * v]))
    with jax.set_mesh(mesh):
        both(f, put(mesh, v, P()), put(mesh, w, P()), mesh=mesh)


def test_a_jax_traced_branch_indexes_a_shardc_value(mesh2x4):
    """A jax.lax.cond branch is traced by jax: a shardc value it closes over indexed with
    jax's tracer (`x[i]`, `x.at[i].multiply`) takes jax's indexing (it was an internal
    error: shardc read jax's tracer as a constant)."""
    x = put(mesh2x4, X, P())

    def f(x):
        def yes(_):
            i = jnp.argmax(x.reshape(-1)) % 8 - np.array([0, 2, 4, 1])
            return x.at[i].multiply(3.0, mode="clip") + x[i[0]]
        return jax.lax.cond(x.sum() > 0, yes, lambda _: x, 0)
    both(f, x, mesh=mesh2x4)
    both(lambda x: f(-x), x, mesh=mesh2x4)


def test_jax_triangular_solve_conjugating_without_transpose():
    """jax binds triangular_solve with conjugate_a and no transpose (LAPACK conjugates
    only with one): shardc conjugates a first (it solved with a itself)."""
    rng = np.random.default_rng(1)
    a = (np.tril(rng.normal(size=(4, 4)) + 1j * rng.normal(size=(4, 4))) + 4 * np.eye(4))
    b = rng.normal(size=(4, 3)) + 1j * rng.normal(size=(4, 3))
    both(lambda a, b: jax.lax.linalg.triangular_solve(a, b, left_side=True, lower=True,
                                                     conjugate_a=True),
         a.astype(np.complex64), b.astype(np.complex64))


def test_jax_approx_max_k_default_dimension(mesh2x4):
    """jax binds approx_top_k with reduction_dimension=-1 (its default): canonicalized
    (it failed to lower, and its batching rule read -1 as the mapped dim)."""
    x = put(mesh2x4, X, P("x"))
    both(lambda x: jax.lax.approx_max_k(x, 3), x, mesh=mesh2x4)
    both(lambda x: jax.vmap(lambda r: jax.lax.approx_min_k(r, 2))(x), x, mesh=mesh2x4)


def test_jax_ops_with_out_sharding_on_sharded_contractions():
    """jax's dot with out_sharding= over a contraction sharded on an Explicit axis (and
    jax.grad's transposed dot, which carries its primal's type): the sharding settles
    the result type (it was the 'ambiguous' type error, raised before it was seen)."""
    mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,
                                                         jax.sharding.AxisType.Explicit))
    a, b = put(mesh, X, P(None, "y")), put(mesh, X.T * 2, P("y", None))
    with jax.set_mesh(mesh):
        for spec in (P(), P(None, "y"), P("y")):
            out = both(lambda a, b: jnp.matmul(a, b, out_sharding=spec), a, b, mesh=mesh)
            assert tuple(jax.typeof(out).sharding.spec) == (*spec, None, None)[:2]
        v = put(mesh, X, P(("x", "y")))
        both(jax.grad(lambda v: jnp.sum(v @ v) + jnp.sum(v * X)), v, mesh=mesh)


def test_jax_conv_with_out_sharding_takes_its_type():
    """jax's conv_general_dilated(out_sharding=) on an Explicit mesh: the result's type is
    the sharding (the frontend dropped it, leaving the batch-sharded type)."""
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
    rng = np.random.default_rng(0)
    lhs = put(mesh, rng.normal(size=(4, 3, 8, 8)).astype(np.float32), P("x"))
    rhs = put(mesh, rng.normal(size=(8, 3, 3, 3)).astype(np.float32), P())

    def f(a, b):
        return jax.lax.conv_general_dilated(a, b, (1, 1), "SAME", out_sharding=P(None, "y"))
    with jax.set_mesh(mesh):
        out = both(f, lhs, rhs, mesh=mesh)
        assert str(jax.typeof(out)) == "float32[4,8@y,8,8]"
