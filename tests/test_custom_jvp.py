"""shardc.custom_jvp against jax.custom_jvp: the rule is used under jvp, transposed under
grad/vjp, composes with jit, grad of grad, scan, cond, remat, shard_map, and reports
jax's errors at the user's line."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import check_outputs


class S:
    custom_jvp, grad, value_and_grad = shardc.custom_jvp, shardc.grad, shardc.value_and_grad
    jvp, vjp, jit, np, lax = shardc.jvp, shardc.vjp, shardc.jit, snp, shardc.lax
    checkpoint, shard_map = shardc.checkpoint, shardc.shard_map


class J:
    custom_jvp, grad, value_and_grad = jax.custom_jvp, jax.grad, jax.value_and_grad
    jvp, vjp, jit, np, lax = jax.jvp, jax.vjp, jax.jit, jnp, jax.lax
    checkpoint, shard_map = jax.checkpoint, jax.shard_map


def both(run, *args, mesh=None, sharding=True):
    """run(m, *args) with m = S and m = J; values, dtypes, weak types, shardings."""
    got, want = run(S, *args), run(J, *args)
    # (jax's eager jvp hands a rule's NumPy results through as they are)
    want = jax.tree_util.tree_map(lambda a: jnp.asarray(a) if isinstance(a, np.ndarray) else a,
                                  want)
    check_outputs(got, want, mesh, sharding)
    return got


def sin_times(m):
    @m.custom_jvp
    def f(x, y):
        return m.np.sin(x) * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        xd, yd = tangents
        return f(x, y), m.np.cos(x) * xd * y + m.np.sin(x) * yd
    return f


def softplus(m):
    """jax's docs example: log1p(exp(x)) with a stable derivative."""
    @m.custom_jvp
    def f(x):
        return m.np.log1p(m.np.exp(x))

    @f.defjvp
    def f_jvp(primals, tangents):
        x, = primals
        xd, = tangents
        return f(x), (1 - 1 / (1 + m.np.exp(x))) * xd
    return f


X = np.linspace(-2., 3., 8, dtype=np.float32)
Y = np.linspace(0.5, 1.5, 8, dtype=np.float32)


def test_value_grad_jvp_vjp():
    def run(m):
        f = sin_times(m)
        vg = m.value_and_grad(lambda x, y: m.np.sum(f(x, y)), (0, 1))(X, Y)
        jv = m.jvp(f, (X, Y), (np.ones_like(X), np.full_like(Y, 0.5)))
        out, fn = m.vjp(f, X, Y)
        return vg, jv, fn(np.ones_like(X) * 2)
    both(run)


def test_rule_is_used_not_the_function():
    """softplus at 100: autodiff of log1p(exp(x)) gives nan, the rule 1."""
    def run(m):
        f = softplus(m)
        x = np.array([100., 1., -3.], np.float32)
        return (m.grad(lambda x: m.np.sum(f(x)))(x), m.jit(m.grad(lambda x: f(x)[0]))(x),
                m.jvp(f, (x,), (np.ones(3, np.float32),)))
    got = both(run)
    assert np.all(np.isfinite(np.asarray(got[0])))


def test_rule_that_differs_from_the_function():
    """A rule giving a 'wrong' derivative is what grad and jvp report."""
    def run(m):
        @m.custom_jvp
        def f(x):
            return m.np.sin(x)

        @f.defjvp
        def f_jvp(p, t):
            return f(p[0]), 3.0 * t[0]
        return m.grad(lambda x: m.np.sum(f(x)))(X), m.jvp(f, (X,), (jnp.asarray(Y),))
    both(run)


def test_grad_of_grad_and_jit():
    def run(m):
        f = sin_times(m)
        g2 = m.grad(m.grad(lambda x: f(x, 2.0)))
        inner = m.grad(lambda z: m.np.sum(f(z, Y)))
        return m.jit(g2)(np.float32(0.7)), m.grad(lambda x: inner(x)[3])(X)
    both(run)


def test_defjvps():
    def run(m):
        @m.custom_jvp
        def f(x, y):
            return m.np.sin(x) * y
        f.defjvps(lambda xd, ans, x, y: m.np.cos(x) * xd * y,
                  lambda yd, ans, x, y: m.np.sin(x) * yd)
        return (m.value_and_grad(lambda x, y: m.np.sum(f(x, y)), (0, 1))(X, Y),
                m.jvp(f, (X, Y), (Y, X)))
    both(run)


def test_defjvps_none_entry():
    def run(m):
        @m.custom_jvp
        def f(x, y):
            return x * y
        f.defjvps(None, lambda yd, ans, x, y: x * yd)
        return m.grad(lambda x, y: m.np.sum(f(x, y)), (0, 1))(X, Y)
    both(run)


def test_nondiff_argnums_function_and_array():
    def run(m):
        from functools import partial

        @partial(m.custom_jvp, nondiff_argnums=(0,))
        def app(f, x):
            return f(x)

        @app.defjvp
        def app_jvp(f, primals, tangents):
            x, = primals
            xd, = tangents
            return f(x), 2. * xd

        @partial(m.custom_jvp, nondiff_argnums=(1,))
        def scale(x, k):
            return x * k

        @scale.defjvp
        def scale_jvp(k, primals, tangents):
            return scale(primals[0], k), tangents[0] * k
        g1 = m.grad(lambda x: m.np.sum(app(lambda y: y ** 3, x)))(X)
        g2 = m.jit(m.grad(lambda x, k: m.np.sum(scale(x, k))))(X, Y)
        return g1, g2, m.jvp(lambda x: app(m.np.sin, x), (X,), (Y,))
    both(run)


def test_clip_gradient():
    """A rule clipping the incoming tangent: the identity's derivative, clipped."""
    def run(m):
        from functools import partial

        @partial(m.custom_jvp, nondiff_argnums=(0, 1))
        def clip_gradient(lo, hi, x):
            return x

        @clip_gradient.defjvp
        def clip_jvp(lo, hi, primals, tangents):
            x, = primals
            return x, tangents[0] * m.np.where(m.np.abs(x) > hi, 0.0, 1.0)
        return m.grad(lambda x: m.np.sum(clip_gradient(-1., 1., x) ** 2))(X)
    both(run)


def test_pytrees_in_and_out():
    def run(m):
        @m.custom_jvp
        def f(d, pair):
            a, b = pair
            return {"s": m.np.sin(d["x"]) * a, "t": (b * d["x"], a)}

        @f.defjvp
        def f_jvp(primals, tangents):
            (d, (a, b)), (dd, (ad, bd)) = primals, tangents
            out = f(d, (a, b))
            return out, {"s": m.np.cos(d["x"]) * dd["x"] * a + m.np.sin(d["x"]) * ad,
                         "t": (bd * d["x"] + b * dd["x"], ad)}

        def loss(d, pair):
            o = f(d, pair)
            return m.np.sum(o["s"]) + m.np.sum(o["t"][0] ** 2) + m.np.sum(o["t"][1])
        g = m.grad(loss, (0, 1))({"x": X}, (Y, X + 1))
        jv = m.jvp(f, ({"x": X}, (Y, X)), ({"x": Y}, (X, Y)))
        return g, jv
    both(run)


def test_integer_and_python_arguments():
    """An int argument gets a float0 tangent in the rule; a Python float a zero one."""
    seen = []

    def run(m):
        @m.custom_jvp
        def f(x, n, c):
            return x * n * c

        @f.defjvp
        def f_jvp(p, t):
            x, n, c = p
            seen.append(np.asarray(t[1]).dtype)
            return f(x, n, c), t[0] * n * c + x * n * t[2]
        return m.grad(lambda x: m.np.sum(f(x, 3, 2.0)))(X)
    both(run)
    assert seen == [jax.dtypes.float0, jax.dtypes.float0]


def test_in_scan_cond_and_remat():
    def run(m):
        f = softplus(m)

        def body(c, x):
            return c + f(x * c), f(x)

        def loss(x):
            c, ys = m.lax.scan(body, np.float32(0.5), x)
            z = m.lax.cond(c > 0, lambda v: f(v) * 2, lambda v: v, ys)
            return m.np.sum(m.checkpoint(lambda v: f(v) * v)(z))
        return m.jit(m.value_and_grad(loss))(X), m.jvp(loss, (X,), (Y,))
    both(run)


def test_while_loop_inside_uses_the_rule():
    """The primal function holds a while loop (no reverse mode): grad and jvp use the rule
    (the rule's own ops are differentiable)."""
    def run(m):
        @m.custom_jvp
        def sqrt_newton(a):
            def body(c):
                return 0.5 * (c + a / c)
            return m.lax.fori_loop(0, m.np.int32(20) * 1, lambda i, c: body(c), a)

        @sqrt_newton.defjvp
        def rule(p, t):
            y = sqrt_newton(p[0])
            return y, t[0] / (2 * y)
        a = np.array([2., 9., 16.], np.float32)
        return (m.grad(lambda a: m.np.sum(sqrt_newton(a)))(a),
                m.jvp(sqrt_newton, (a,), (np.ones(3, np.float32),)))
    both(run)


def test_sharded_inputs_under_jit(mesh2x4):
    xs = jax.device_put(np.arange(32, dtype=np.float32).reshape(4, 8) / 10,
                        NamedSharding(mesh2x4, P("x", "y")))

    def run(m):
        f = softplus(m)
        return m.jit(lambda x: (f(x), m.grad(lambda z: m.np.sum(f(z) * z))(x)))(xs)
    both(run, mesh=mesh2x4)


def test_shard_map_body(mesh8):
    xs = jax.device_put(X, NamedSharding(mesh8, P("x")))

    def run(m):
        f = softplus(m)
        g = m.shard_map(lambda x: f(x) * 2, mesh=mesh8, in_specs=P("x"), out_specs=P("x"))
        return m.jit(m.grad(lambda x: m.np.sum(g(x))))(xs)
    both(run, mesh=mesh8)


def test_closure_over_a_non_differentiated_tracer():
    def run(m):
        def outer(x, y):
            @m.custom_jvp
            def f(x):
                return m.np.sin(x) * y

            @f.defjvp
            def fj(p, t):
                return f(p[0]), m.np.cos(p[0]) * t[0] * y
            return f(x)
        return m.jit(m.grad(lambda x, y: m.np.sum(outer(x, y))))(X, Y)
    both(run)


def test_differentiating_a_closed_over_value_is_an_error():
    def outer(y):
        @shardc.custom_jvp
        def f(x):
            return snp.sin(x) * y

        @f.defjvp
        def fj(p, t):
            return f(p[0]), snp.cos(p[0]) * t[0] * y
        return f(2.0)    # the call's line
    with pytest.raises(shardc.ShardcError, match="closed-over value") as e:
        shardc.grad(outer)(np.float32(3.))
    assert f"{os.path.basename(__file__)}:" in str(e.value)


@pytest.mark.parametrize("bad,match", [
    (lambda f, x, t: f(x), "must produce a pair"),
    (lambda f, x, t: (f(x), (t, t)), "equal container"),
    (lambda f, x, t: (f(x), t.astype(np.float16)), "corresponding shapes and dtypes"),
    (lambda f, x, t: (f(x), t[:2]), "corresponding shapes and dtypes"),
])
def test_rule_output_errors(bad, match):
    def build(m):
        @m.custom_jvp
        def f(x):
            return m.np.sin(x)

        @f.defjvp
        def f_jvp(p, t):
            return bad(f, p[0], t[0])
        return f
    for m in (J, S):
        with pytest.raises(TypeError, match=match):
            m.grad(lambda x: m.np.sum(build(m)(x)))(X)
    with pytest.raises(shardc.ShardcError, match=f"{os.path.basename(__file__)}:"):
        shardc.jvp(build(S), (X,), (Y,))


def test_no_rule_and_eager_call():
    f = shardc.custom_jvp(lambda x: x * 2)
    with pytest.raises(AttributeError, match="No JVP defined"):
        f(X)
    g = sin_times(S)
    np.testing.assert_allclose(g(X, Y), np.sin(X) * Y, rtol=1e-6)
    with pytest.raises(TypeError, match="nondiff_argnums"):
        shardc.custom_jvp(lambda a, b: a, nondiff_argnums=(0,)).defjvps(None, None)


def test_keyword_arguments_resolve():
    def run(m):
        f = sin_times(m)
        return m.grad(lambda x: m.np.sum(f(x, y=Y)))(X)
    both(run)


def test_program_shows_the_primal_ops():
    f = softplus(S)
    text = shardc.jit(f).trace(X).traced_ir
    assert "custom_jvp_call" in text and "log1p" in text


def test_jvp_of_a_scan_whose_body_takes_a_grad():
    """Regression: the transposed backward of a scan body holding a grad has ops with no
    results (shard_alike's sharding groups); the scan's hoisting read their first one."""
    def run(m):
        def body(c, x):
            return c + m.grad(lambda z: m.np.sin(z * c))(x), x
        return m.jvp(lambda x: m.lax.scan(body, np.float32(0.5), x)[0], (X,), (Y,))
    both(run)


def test_symbolic_zeros():
    """The rule sees a SymbolicZero for each input nothing differentiates, and may
    return one."""
    from jax.custom_derivatives import SymbolicZero
    seen = []

    def run(m):
        @m.custom_jvp
        def f(x, y):
            return x * y, m.np.sum(x)

        def rule(p, t):
            (x, y), (xd, yd) = p, t
            seen.append((type(xd) is SymbolicZero, type(yd) is SymbolicZero))
            out = f(x, y)
            tx = xd * y if type(xd) is not SymbolicZero else 0.
            ty = yd * x if type(yd) is not SymbolicZero else 0.
            ts = SymbolicZero(jax.core.ShapedArray((), np.float32)) \
                if type(xd) is SymbolicZero else m.np.sum(xd)
            return out, (tx + ty, ts)
        f.defjvp(rule, symbolic_zeros=True)
        g = m.grad(lambda x, y: m.np.sum(f(x, y)[0]) + f(x, y)[1])
        return g(X, Y), m.jit(g)(X, Y), m.grad(lambda y: m.np.sum(f(X, y)[0]))(Y)
    got = run(S)
    ours, seen[:] = set(seen), []
    check_outputs(got, run(J))
    assert ours == set(seen) == {(False, True), (True, False)}


def test_hessian_and_forward_over_forward():
    def run(m):
        f = sin_times(m)
        g = lambda x: m.np.sum(f(x, Y) ** 2)   # noqa: E731
        jac = jax.jacfwd if m is J else shardc.jacfwd
        jrev = jax.jacrev if m is J else shardc.jacrev
        ff = m.jvp(lambda x: m.jvp(lambda z: f(z, Y), (x,), (Y,))[1], (X,), (X,))
        return jac(jrev(g))(X), ff
    both(run)


needs_vmap = pytest.mark.skipif(not hasattr(shardc, "vmap"), reason="shardc.vmap not there yet")
X2 = np.linspace(-1., 2., 24, dtype=np.float32).reshape(4, 6)


@needs_vmap
def test_under_vmap():
    """The batched call's rule is the user's, batched: vmap of grad, grad of vmap, jvp
    of vmap, with an unbatched operand (in_axes=None)."""
    def run(m):
        vmap = shardc.vmap if m is S else jax.vmap
        f = sin_times(m)
        sp = softplus(m)
        per_ex = lambda x, y: m.np.sum(f(x, y) * sp(x))   # noqa: E731
        return (vmap(f)(X2, X2 + 1), vmap(f, (0, None))(X2, Y[:6]),
                vmap(m.grad(per_ex, (0, 1)), (0, None))(X2, Y[:6]),
                m.grad(lambda x: m.np.sum(vmap(per_ex, (0, None))(x, Y[:6])))(X2),
                m.jvp(lambda x: vmap(f, (0, None))(x, Y[:6]), (X2,), (X2,)),
                m.jit(vmap(m.grad(lambda x: sp(x).sum())))(X2))
    both(run)


@needs_vmap
def test_under_vmap_nondiff_and_symbolic_zeros():
    from functools import partial

    def run(m):
        vmap = shardc.vmap if m is S else jax.vmap

        @partial(m.custom_jvp, nondiff_argnums=(1,))
        def scale(x, k):
            return x * k

        def rule(k, p, t):
            xd = t[0]
            return scale(p[0], k), (xd * k if type(xd) is not SymbolicZero else 0. * p[0])
        from jax.custom_derivatives import SymbolicZero
        scale.defjvp(rule, symbolic_zeros=True)
        g = m.grad(lambda x, k: m.np.sum(scale(x, k) ** 2))
        return vmap(g, (0, None))(X2, np.float32(3)), vmap(g)(X2, X2[:, 0])
    both(run)


def test_symbolic_zeros_with_a_function_nondiff_argument():
    from functools import partial
    from jax.custom_derivatives import SymbolicZero

    def run(m):
        @partial(m.custom_jvp, nondiff_argnums=(0,))
        def app(f, x, y):
            return f(x) * y

        def rule(f, p, t):
            (x, y), (xd, yd) = p, t
            ty = 0. if type(yd) is SymbolicZero else yd * f(x)
            return app(f, x, y), xd * 2. * y + ty
        app.defjvp(rule, symbolic_zeros=True)
        return m.grad(lambda x: m.np.sum(app(m.np.sin, x, Y)))(X)
    both(run)


def test_integer_output():
    """An integer output's tangent is jax's float0."""
    def run(m):
        @m.custom_jvp
        def f(x):
            return m.np.sin(x), m.np.argmax(x)

        @f.defjvp
        def f_jvp(p, t):
            out = f(p[0])
            return out, (m.np.cos(p[0]) * t[0], np.zeros((), jax.dtypes.float0))
        g = m.grad(lambda x: m.np.sum(f(x)[0]) * f(x)[1])(X)
        return g, m.jvp(lambda x: f(x)[0], (X,), (jnp.asarray(Y),))
    both(run)
    out, t = shardc.jvp(sin_int(), (X,), (Y,))
    assert t[1].dtype == np.int32 or t[1].dtype == jax.dtypes.float0


def sin_int():
    @shardc.custom_jvp
    def f(x):
        return snp.sin(x), snp.argmax(x)

    @f.defjvp
    def f_jvp(p, t):
        return f(p[0]), (snp.cos(p[0]) * t[0], np.zeros((), jax.dtypes.float0))
    return f


def test_default_arguments_are_filled_in():
    """Regression: a defaulted argument reached the rule only when passed (jax fills
    defaults in, so the rule always sees every parameter)."""
    def run(m):
        @m.custom_jvp
        def f(x, scale=2.0):
            return m.np.sin(x) * scale

        @f.defjvp
        def f_jvp(p, t):
            return f(*p), m.np.cos(p[0]) * t[0] * p[1] + m.np.sin(p[0]) * t[1]
        return (m.grad(lambda y: m.np.sum(f(y)))(X), m.grad(lambda y: f(y, scale=y))(X[1]),
                m.jit(lambda y: f(2.0) + y)(X))
    both(run)
