"""Gradients (grad, value_and_grad, grad of grad, jvp) of shardc.lax control flow
against jax's under jax.jit, in few compiles; while_loop's reverse mode raises."""
import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import Case, compare_cases, data

F = np.float32


def L(m):
    return shardc.lax if m._base is snp else jax.lax


def AD(m):
    return shardc if m._base is snp else jax


def G(m, f, argnums=0):
    return AD(m).grad(f, argnums=argnums)


def VG(m, f, argnums=0):
    return AD(m).value_and_grad(f, argnums=argnums)


def _grad_cases():
    a, b, w = data((4, 3), F, seed=1), data((3,), F, seed=2), data((3, 3), F, seed=3) / 2
    xs = data((5, 3), F, seed=4)
    cs = []

    def c1(m, p, x, y):
        def loss(x, y):
            return L(m).cond(p, lambda x: (m.sin(x) * y).sum(),
                             lambda x: (x * x).sum() + y.sum(), x)
        return VG(m, loss, (0, 1))(x, y)
    for pv in (True, False):
        cs.append(Case(f"cond_{pv}", c1, [np.bool_(pv), a, b], numpy_ref=False))

    def c2(m, i, x, y):
        def loss(x, y):
            # branches close over different values; an int output too
            r, k = L(m).switch(i, [lambda x: (m.exp(x).sum() * y[0], 1),
                                   lambda x: ((x @ w).sum(), 2),
                                   lambda x: (x.sum() * 0 + y[1] * y[2], 3)], x)
            return r * k
        return G(m, loss, (0, 1))(x, y)
    for iv in (-1, 1, 2, 9):
        cs.append(Case(f"switch_{iv}", c2, [np.int32(iv), a, b], numpy_ref=False))

    def s1(m, x, w, h0, rev):
        def loss(x, w, h0):
            h, ys = L(m).scan(lambda h, x: (m.tanh(h @ w + x), (h * x).sum()), h0, x,
                              reverse=rev)
            return (h ** 2).sum() + ys.sum()
        return G(m, loss, (0, 1, 2))(x, w, h0)
    for rev in (False, True):
        cs.append(Case(f"scan_rev{rev}", lambda m, x, w, h, rev=rev: s1(m, x, w, h, rev),
                       [xs, w, b], numpy_ref=False))

    def s2(m, x, w):
        def loss(x, w):
            # pytree carry with an int leaf, closed-over w, xs=None elsewhere
            (h, n), ys = L(m).scan(lambda c, x: ((m.sin(c[0] * w[0]) + x, c[1] + 1),
                                                 {"y": c[0].sum() * x}), (x[0], 0), x)
            z, _ = L(m).scan(lambda c, _: (c * w[1], None), h, None, length=3)
            return z.sum() + ys["y"].sum() + n
        return VG(m, loss, (0, 1))(x, w)
    cs.append(Case("scan_pytree", s2, [xs, w], numpy_ref=False))

    def s3(m, x, w):
        def loss(x, w):
            def outer(c, row):
                c2, _ = L(m).scan(lambda d, e: (m.sin(d * e + w[0]), None), c, row)
                return c2, c2.sum()
            h, ys = L(m).scan(outer, w[1], x)
            return h.sum() * ys.sum()
        return G(m, loss, (0, 1))(x, w)
    cs.append(Case("scan_nested", s3, [data((3, 2, 3), F, seed=5), w], numpy_ref=False))

    def f1(m, x, w):
        def loss(x, w):
            return L(m).fori_loop(1, 4, lambda i, h: m.tanh(h @ w) * i, x).sum()
        return G(m, loss, (0, 1))(x, w)
    cs.append(Case("fori_static", f1, [a, w], numpy_ref=False))

    def f2(m, x):     # a weakly typed residual (from the weak index) stacked by the scan
        return G(m, lambda x: L(m).fori_loop(0, 3, lambda i, c: m.sin(c * (i * 0.5)),
                                             x).sum())(x)
    cs.append(Case("fori_weak_residual", f2, [b], numpy_ref=False))

    def m1(m, x, w):
        def loss(x, w):
            return (L(m).map(lambda r: m.sin(r @ w), x) ** 2).sum() + \
                L(m).map(lambda r: r * w[0], x, batch_size=2).sum()
        return G(m, loss, (0, 1))(x, w)
    cs.append(Case("map", m1, [xs, w], numpy_ref=False))

    def r1(m, x, w):
        def loss(x, w):
            body = AD(m).checkpoint(lambda h, x: (m.tanh(h @ w + x), None))
            return L(m).scan(body, x[0], x)[0].sum()
        return G(m, loss, (0, 1))(x, w)
    cs.append(Case("remat_in_scan", r1, [xs, w], numpy_ref=False))

    def cs1(m, p, x):
        def loss(x):
            return L(m).cond(p, lambda x: L(m).scan(lambda c, e: (c * e, None),
                                                   m.ones((), m.float32), x)[0],
                             lambda x: x.sum(), x)
        return G(m, loss)(x)
    cs.append(Case("scan_in_cond", cs1, [np.bool_(True), b * 2], numpy_ref=False))

    def sc(m, x):
        def loss(x):
            return L(m).scan(lambda c, e: (L(m).cond(e > 0, lambda: c * e, lambda: c + e),
                                           None), m.ones((), m.float32), x)[0]
        return G(m, loss)(x)
    cs.append(Case("cond_in_scan", sc, [xs[:, 0]], numpy_ref=False))

    # grad of grad
    def gg(m, x, p):
        def f(x):
            a = L(m).cond(p, lambda x: m.sin(x) * x, lambda x: x ** 3, x)
            b = L(m).scan(lambda c, _: (c * m.sin(x), None), x, None, length=3)[0]
            c = L(m).fori_loop(0, 2, lambda i, v: v * x, x)
            return a + b + c
        return G(m, G(m, f))(x)
    cs.append(Case("grad_grad", gg, [F(0.7), np.bool_(True)], numpy_ref=False))
    cs.append(Case("grad_grad_f", gg, [F(0.7), np.bool_(False)], numpy_ref=False))
    return cs


def test_grads():
    compare_cases(_grad_cases())


def _jvp_cases():
    a, w = data((4, 3), F, seed=6), data((3, 3), F, seed=7) / 2
    cs = []

    def j(m, x, t, w, p):
        def f(x):
            c = L(m).cond(p, lambda x: m.sin(x), lambda x: x * w[0], x)
            s, ys = L(m).scan(lambda h, r: (m.tanh(h @ w) + r, h.sum()), x[0], x)
            fo = L(m).fori_loop(0, 3, lambda i, h: h * m.cos(h), x)
            sw = L(m).switch(2, [lambda x: x, lambda x: -x, lambda x: x * x], x)
            return c, s, ys, fo, sw
        return AD(m).jvp(f, (x,), (t,))
    for pv in (True, False):
        cs.append(Case(f"jvp_{pv}", lambda m, x, t, w, pv=pv: j(m, x, t, w, pv),
                       [a, data((4, 3), F, seed=8), w], numpy_ref=False))
    return cs


def test_jvps():
    compare_cases(_jvp_cases())


def test_sharded_grads(mesh2x4):
    x, ws = data((8, 16), F, seed=9), data((3, 16, 16), F, seed=10) / 4

    def f(m, x, ws):
        def loss(x, ws):
            h, _ = L(m).scan(lambda h, w: (m.tanh(h @ w), None), x, ws)
            return L(m).cond(h.sum() > 0, lambda: (h ** 2).sum(), lambda: h.sum())
        gx, gw = G(m, loss, (0, 1))(x, ws)
        # shardc's gradients take their primals' shardings (as test_grad's reference)
        return m.constrain(gx, P("x", None)), m.constrain(gw, P(None, None, "y"))
    cs = [Case("scan_stacked", f, [x, ws], [P("x", None), P(None, None, "y")],
               numpy_ref=False)]
    mesh = mesh2x4

    def g1(m, x, ws):
        def f(x, ws):
            h, ys = L(m).scan(lambda h, w: (m.constrain(m.tanh(h @ w), P("x", "y")),
                                            m.constrain(h.sum(0), P("y"))), x, ws)
            return (h ** 2).sum() + ys.sum()
        gx, gw = G(m, f, (0, 1))(x, ws)
        return m.constrain(gx, P("x", None)), m.constrain(gw, P(None, None, "y"))
    cs.append(Case("grad_wsc_in_scan", g1, [x, ws], [P("x", None), P(None, None, "y")],
                   numpy_ref=False))

    def g2(m, x, ws):
        sm = shardc.shard_map if m._base is snp else jax.shard_map
        inner = sm(lambda h, w: L(m).psum(h @ w, "y"), mesh=mesh,
                   in_specs=(P("x", "y"), P("y", None)), out_specs=P("x", None))

        def f(x, ws):
            return L(m).scan(lambda h, w: (m.tanh(inner(h, w)), None), x, ws)[0].sum()
        gx, gw = G(m, f, (0, 1))(x, ws)
        return m.constrain(gx, P("x", None)), m.constrain(gw, P())
    cs.append(Case("grad_smap_in_scan", g2, [x, ws], [P("x", None), None], numpy_ref=False))

    def j1(m, x, ws, p):
        def f(x):
            h, _ = L(m).scan(lambda h, w: (m.tanh(h @ w), None), x, ws)
            return (L(m).cond(p, lambda: h * 2, lambda: h),
                    L(m).fori_loop(0, 2, lambda i, c: m.sin(c), x))
        return AD(m).jvp(f, (x,), (x * 0.1,))
    cs.append(Case("jvp_sharded", j1, [x, ws, np.bool_(True)],
                   [P("x", "y"), P(None, None, "y"), None], numpy_ref=False))

    def g3(m, x, ws):
        pol = (shardc if m._base is snp else jax).checkpoint_policies.dots_saveable
        ck = AD(m).checkpoint(lambda h, w: (m.tanh(h @ w), None), policy=pol)
        gx, gw = G(m, lambda x, ws: L(m).scan(ck, x, ws)[0].sum(), (0, 1))(x, ws)
        return m.constrain(gx, P("x", None)), m.constrain(gw, P(None, None, "y"))
    cs.append(Case("grad_remat_scan_sharded", g3, [x, ws], [P("x", None), P(None, None, "y")],
                   numpy_ref=False))
    compare_cases(cs, mesh2x4)


def test_while_loop_reverse_mode_raises():
    def loss(x):
        return shardc.lax.while_loop(lambda c: c < 3.0, lambda c: c * 2, x)
    with pytest.raises(shardc.ShardcError) as e:
        shardc.jit(shardc.grad(loss))(F(1.0))
    assert "Reverse-mode differentiation does not work for lax.while_loop" in str(e.value)
    assert e.value.loc.file == __file__, e.value.loc
    with pytest.raises(shardc.ShardcError) as e:
        shardc.jit(shardc.grad(lambda x, n: shardc.lax.fori_loop(0, n, lambda i, c: c * x,
                                                                  x)))(F(1.0), 3)
    assert e.value.loc.file == __file__, e.value.loc


def _wl_cond_only(lax, y):      # y only in the predicate: no tangent enters the loop
    return lax.while_loop(lambda c: c < y, lambda c: c + 1.0, 0.0) * y


def _wl_passthrough(lax, y):    # a loop-invariant carry: its tangent is forwarded
    return lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1]), (0, y * 2))[1]


def _wl_stopped(lax, y):        # stop_gradient in the body
    return y * lax.while_loop(lambda c: c[0] < 3, lambda c: (
        c[0] + 1, c[1] * lax.stop_gradient(y)), (0, 1.0))[1]


def _wl_unused(lax, y):         # the carry a tangent reaches is not the result used
    return y * lax.while_loop(lambda c: c[0] < 10, lambda c: (
        c[0] + 1, c[1] * y, c[2] + 1.0), (0, 1.0, 0.0))[2]


def _wl_mixed(lax, y):          # one passed-through carry used, one differentiated unused
    c = lax.while_loop(lambda c: c[0] < 4, lambda c: (c[0] + 1, c[1], c[2] * y),
                       (0, y * y, y))
    return c[1] * 3


def _wl_pred_and_passthrough(lax, y):   # under vmap the predicate is batched
    return lax.while_loop(lambda c: c[0] < y, lambda c: (c[0] + 1.0, c[1]), (0.0, y * 2))[1]


@pytest.mark.parametrize("f", [_wl_cond_only, _wl_passthrough, _wl_stopped, _wl_unused,
                               _wl_mixed, _wl_pred_and_passthrough])
def test_while_loop_gradients_that_need_no_reverse_mode(f):
    """jax differentiates a while loop when no tangent goes around it into a result
    with a cotangent; shardc refused every while loop."""
    want = jax.grad(lambda y: f(jax.lax, y))(2.5)
    for got in (shardc.grad(lambda y: f(shardc.lax, y))(2.5),
                shardc.jit(shardc.grad(lambda y: f(shardc.lax, y)))(2.5),
                shardc.jit(shardc.grad(lambda y: f(jax.lax, y)))(2.5)):      # jax code
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    ys = np.array([1.5, 2.5, 3.5], np.float32)
    np.testing.assert_allclose(
        np.asarray(shardc.jit(shardc.vmap(shardc.grad(lambda y: f(shardc.lax, y))))(ys)),
        np.asarray(jax.vmap(jax.grad(lambda y: f(jax.lax, y)))(ys)), rtol=1e-6)
    # grad of vmap: a batched predicate selects each carry, a passed-through one too
    np.testing.assert_allclose(
        np.asarray(shardc.grad(lambda ys: shardc.vmap(lambda y: f(shardc.lax, y))(ys).sum())(
            ys)),
        np.asarray(jax.grad(lambda ys: jax.vmap(lambda y: f(jax.lax, y))(ys).sum())(ys)),
        rtol=1e-6)


def test_while_loop_tangent_around_the_loop_still_raises():
    # a swap is not a pass-through: the tangent goes around the loop (jax raises too)
    def f(y):
        return shardc.lax.while_loop(lambda c: c[2] < 3, lambda c: (c[1], c[0], c[2] + 1),
                                     (y, y * 2, 0))[0]
    with pytest.raises(shardc.ShardcError, match="Reverse-mode differentiation"):
        shardc.grad(f)(F(1.0))


def _nested_cases():
    xs, a = data((5, 3), F, seed=11), data((3,), F, seed=12)
    pos = data((5, 3), F, "pos", seed=13)
    cs = []

    def case(label, fn, arrays, **kw):
        cs.append(Case(label, fn, arrays, **kw))
    case("cond_in_while", lambda m, x: L(m).while_loop(
        lambda c: c[1] < 3, lambda c: (L(m).cond(c[1] % 2 == 0, lambda: c[0] * 2,
                                                 lambda: c[0] + 1), c[1] + 1), (x, 0)), [a])
    case("while_in_cond", lambda m, p, x: L(m).cond(p, lambda: L(m).while_loop(
        lambda c: c.sum() < 100, lambda c: c * 2 + 1, x), lambda: x),
        [np.bool_(True), pos[0]])
    case("while_in_scan", lambda m, x: L(m).scan(lambda c, r: (L(m).while_loop(
        lambda v: v.sum() < 50, lambda v: v * 2 + r, c), c.sum()), m.ones(3), x), [pos])
    case("scan_in_while", lambda m, x: L(m).while_loop(lambda c: c[1] < 3, lambda c: (
        L(m).scan(lambda d, r: (d + r * c[1], None), c[0], x)[0], c[1] + 1), (x[0], 0)),
        [xs])

    def one_branch(m, i, x):
        return AD(m).value_and_grad(lambda x: L(m).switch(i, [lambda x: m.sin(x)], x).sum())(x)
    case("switch_one_grad", one_branch, [np.int32(3), a], numpy_ref=False)

    def dep_bound(m, x):    # nested fori loops, the inner body reading the outer index
        def f(x):
            return L(m).fori_loop(0, 3, lambda i, c: L(m).fori_loop(
                0, 2, lambda j, d: d * m.cos(d) + j + i, c), x).sum()
        return AD(m).grad(f)(x)
    case("fori_nested_grad", dep_bound, [a], numpy_ref=False)
    return cs


def test_nested_loops():
    compare_cases(_nested_cases())


def _inactive_cases():
    """Loops nothing differentiable flows into are not differentiated (as jax), so a
    while_loop over constants, stop_gradient'ed or integer values does not raise."""
    a, pos = data((3,), F, seed=21), data((3,), F, "pos", seed=22)
    cs = []

    def case(label, fn, arrays):
        cs.append(Case(label, fn, arrays, numpy_ref=False))

    def consts(m, x, k):
        return VG(m, lambda x: x.sum() * L(m).while_loop(lambda c: c < 10,
                                                         lambda c: c + k, 0.0))(x)
    case("while_on_consts", consts, [a, F(3)])

    def ints(m, x):
        def f(x):
            n, y = L(m).while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1]),
                                   (0, x.sum() > 0))
            return x.sum() * n * y
        return VG(m, f)(x)
    case("while_int_carry", ints, [a])

    def stopped(m, x):
        def f(x):
            n = L(m).while_loop(lambda c: c.sum() < 10, lambda c: c * 2,
                                L(m).stop_gradient(x))
            return (x * n).sum()
        return VG(m, f)(x)
    case("while_stop_gradient", stopped, [pos])

    def traced_bounds(m, x, n):
        return VG(m, lambda x: L(m).fori_loop(0, n, lambda i, c: c + 1.0, 0.0) * x.sum())(x)
    case("fori_traced_bounds_on_consts", traced_bounds, [a, np.int32(3)])

    def weak_operand(m, p, x):
        return VG(m, lambda x: L(m).cond(p, lambda a, b: a * b, lambda a, b: a + b, x,
                                         2.0).sum())(x)
    case("cond_weak_operand", weak_operand, [np.bool_(True), a])

    # in bodies: a while_loop on the body's constants (closed over, not differentiated)
    def while_on(m, k):
        return L(m).while_loop(lambda v: v < 5.0, lambda v: v + k, 0.0)

    def in_scan(m, x, k):
        def f(x):
            def body(c, r):
                n = L(m).while_loop(lambda v: v < c[1] + 2, lambda v: v + 1, 0)
                return (c[0] * r * n * while_on(m, k), c[1] + 1), None
            return L(m).scan(body, (x[0], 0), x)[0][0].sum()
        return VG(m, f)(x)
    case("while_in_scan", in_scan, [data((5, 3), F, seed=23), F(1.5)])

    def in_cond(m, p, x, k):
        return VG(m, lambda x: L(m).cond(p, lambda x: x * while_on(m, k), lambda x: x,
                                         x).sum())(x)
    case("while_in_cond", in_cond, [np.bool_(True), a, F(1.5)])

    def in_remat(m, x, k):
        return VG(m, lambda x: AD(m).checkpoint(lambda x: x * while_on(m, k))(x).sum())(x)
    case("while_in_checkpoint", in_remat, [a, F(1.5)])
    return cs


def test_inactive_loops():
    compare_cases(_inactive_cases())


def _weighted(ys):
    return sum((y * (i + 1)).sum() for i, y in enumerate(ys))


def _aliasing_cases():
    """Outputs that are block arguments, closed-over values or one value twice; carries
    that swap."""
    xs, a = data((5, 3), F, seed=31), data((3,), F, seed=32)
    cs = []

    def scan_dup(m, x, k):
        def f(x, k):
            c, ys = L(m).scan(lambda c, r: ((k, r), (c[0], c[0], r, r)), (x[0], x[1]), x)
            return c[0].sum() * c[1].sum() + _weighted(ys)
        return VG(m, f, (0, 1))(x, k)
    cs.append(Case("scan_dup_outputs", scan_dup, [xs, a], numpy_ref=False))

    def cond_dup(m, p, x, k):
        def f(x, k):
            return _weighted(L(m).cond(p, lambda x: (x, x, k, k), lambda x: (k, x * 2, x, k),
                                       x))
        return VG(m, f, (0, 1))(x, k)
    for pv in (True, False):
        cs.append(Case(f"cond_dup_outputs_{pv}", cond_dup, [np.bool_(pv), a, a * 3],
                       numpy_ref=False))

    def remat_dup(m, x, k):
        def f(x, k):
            return _weighted(AD(m).checkpoint(lambda x, k: (x, x, k, m.sin(x), k))(x, k))
        return VG(m, f, (0, 1))(x, k)
    cs.append(Case("remat_dup_outputs", remat_dup, [a, a * 3], numpy_ref=False))
    cs.append(Case("while_swap", lambda m, x: L(m).while_loop(
        lambda c: c[2] < 3, lambda c: (c[1], c[0], c[2] + 1), (x, x * 2, 0)), [a],
        numpy_ref=False))

    def scan_swap(m, x):
        def f(x):
            c, _ = L(m).scan(lambda c, r: ((c[1], c[0] * r), None), (x[0], x[1]), x)
            return (c[0] * 2 + c[1]).sum()
        return VG(m, f)(x)
    cs.append(Case("scan_swap_grad", scan_swap, [xs], numpy_ref=False))
    return cs


def test_aliasing():
    compare_cases(_aliasing_cases())


def test_jvp_with_an_integer_output():
    """jvp's transpose differentiates the float outputs only; an integer output rides
    along with a float0 tangent, as jax's."""
    import shardc
    x = np.ones(3, np.float32)
    (o, i), (t, ti) = shardc.jit(lambda x, i: shardc.jvp(lambda x: (x * 2, i + 1), (x,),
                                                         (x,)))(x, np.int32(2))
    np.testing.assert_array_equal(np.asarray(t), 2 * x)
    assert int(i) == 3 and ti.dtype == jax.dtypes.float0 and ti.shape == ()


def test_grad_of_cond_on_a_sharded_operand_compiles():
    """A cond's backward case reads the forward case's residuals from outside its
    branches; XLA failed to import annotated ops doing that ("tile assignment ...
    different than the input rank"; fuzz seeds 4000637, 8001179)."""
    from jax.sharding import NamedSharding
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    b = jax.device_put(np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8),
                       NamedSharding(mesh, P(None, "y")))

    def loss(np_, lax_):
        return lambda b: lax_.cond(np_.sum(b) > -1, lambda bb: np_.sum(bb) * 2.0,
                                   lambda bb: np_.sum(np_.exp(bb)), b)
    import jax.numpy as jnp
    got = shardc.jit(shardc.grad(loss(snp, shardc.lax)))(b)
    want = jax.jit(jax.grad(loss(jnp, jax.lax)))(b)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
