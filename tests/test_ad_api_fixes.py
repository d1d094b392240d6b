"""The differentiation API where it differed from jax's: a Python-scalar primal stays
weakly typed; gradients jax refuses (zeta in s, polygamma in m, nextafter) raise
instead of being silently zero; jax's keyword arguments (jvp has_aux, custom_vjp
nondiff_argnames, checkpoint static_argnames) and vjp's float0 cotangent of an integer
primal; linearize's jvp function is a pytree (returned from jit, passed into it)."""
from functools import partial

import jax
import numpy as np
import pytest

import shardc

X = np.array([0.5, 1.0, 2.0], np.float32)


def _close(got, want):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


def _same(got, want):
    """Equal values and the same type, weak type included."""
    assert str(jax.typeof(got)) == str(jax.typeof(want))
    _close(got, want)


# ---------------------------------------------------------------- weak types

WEAK_CASES = {
    "grad": lambda M: M.grad(M.numpy.sin)(3.0),
    "grad_mul": lambda M: M.grad(lambda x: x * 2.0)(3.0),
    "value": lambda M: M.value_and_grad(lambda x: x * 2.0)(3.0)[0],
    "vjp": lambda M: M.vjp(M.numpy.sin, 3.0)[1](1.0)[0],
    "jvp_tangent": lambda M: M.jvp(M.numpy.sin, (3.0,), (1.0,))[1],
    "jvp_primal": lambda M: M.jvp(M.numpy.sin, (3.0,), (1.0,))[0],
    "strong_arg": lambda M: M.grad(lambda x, y: x * y, argnums=1)(3.0, np.float32(2)),
}


@pytest.mark.parametrize("case", list(WEAK_CASES))
def test_python_scalar_primal_stays_weak(case):
    f = WEAK_CASES[case]
    _same(shardc.jit(lambda: f(shardc))(), jax.jit(lambda: f(jax))())


def test_weak_gradient_promotes_with_float16():
    h = np.float16(1.5)
    got = shardc.jit(lambda h: shardc.grad(lambda x: x * 2.0)(3.0) * h)(h)
    want = jax.jit(lambda h: jax.grad(lambda x: x * 2.0)(3.0) * h)(h)
    assert got.dtype == want.dtype == np.float16
    _close(got, want)


@pytest.mark.parametrize("p,c", [(1.0, 2.0), (1.0, np.float32(2)), (np.float32(1), 2.0)])
def test_linear_transpose_python_scalar_weak(p, c):
    got = shardc.linear_transpose(lambda x: 3 * x, p)(c)[0]
    want = jax.linear_transpose(lambda x: 3 * x, p)(c)[0]
    _same(got, want)


# ---------------------------------------------------------------- refused gradients

S = np.array([2., 3.5], np.float32)
Q = np.array([1.5, 0.7], np.float32)
REFUSED = {     # jax's error types: NotImplementedError (no rule), ValueError (polygamma)
    "zeta_s": (lambda M: lambda s: M.lax.zeta(s, Q), NotImplementedError, "zeta"),
    "polygamma_m": (lambda M: lambda m: M.lax.polygamma(m, Q), ValueError,
                    "polygamma gradient with respect to m"),
    "nextafter_x": (lambda M: lambda x: M.lax.nextafter(x, x + 1), NotImplementedError,
                    "nextafter"),
    "nextafter_y": (lambda M: lambda y: M.lax.nextafter(Q, y), NotImplementedError,
                    "nextafter"),
}
HOW = {
    "grad": lambda M, f: M.grad(lambda a: f(a).sum())(S),
    "jvp": lambda M, f: M.jvp(f, (S,), (S,))[1],
    "scan": lambda M, f: M.grad(lambda a: M.lax.scan(
        lambda c, _: (f(c), None), a, None, length=2)[0].sum())(S),
}


@pytest.mark.parametrize("how", list(HOW))
@pytest.mark.parametrize("case", list(REFUSED))
def test_gradient_jax_refuses_raises(case, how):
    make, err, msg = REFUSED[case]
    with pytest.raises(err, match=msg):
        HOW[how](jax, make(jax))
    with pytest.raises(err, match=msg) as e:
        HOW[how](shardc, make(shardc))
    assert __file__ in str(e.value)         # names the user's line


def test_undifferentiated_operand_keeps_its_gradient():
    """zeta in q, polygamma in x, nextafter on a constant: still differentiable (jax's
    lax.zeta has no rule at all: its q-derivative is checked against scipy's zeta)."""
    got = shardc.jit(shardc.grad(lambda q: shardc.lax.zeta(S, q).sum()))(Q)
    _close(got, jax.grad(lambda q: jax.scipy.special.zeta(S, q).sum())(Q))
    m = np.float32(1) + 0 * S
    got = shardc.jit(shardc.grad(lambda x: shardc.lax.polygamma(m, x).sum()))(Q)
    _close(got, jax.grad(lambda x: jax.lax.polygamma(m, x).sum())(Q))
    f = lambda M: lambda x: (x * M.lax.nextafter(S, S + 1)).sum()  # noqa: E731
    _close(shardc.grad(f(shardc))(Q), jax.grad(f(jax))(Q))
    t = shardc.jvp(lambda q: shardc.lax.zeta(S, q), (Q,), (Q,))[1]
    _close(t, jax.jvp(lambda q: jax.scipy.special.zeta(S, q), (Q,), (Q,))[1])


# ---------------------------------------------------------------- jax's keyword arguments

def _tree_close(got, want):
    gl, gt = jax.tree_util.tree_flatten(got)
    wl, wt = jax.tree_util.tree_flatten(want)
    assert gt == wt
    for g, w in zip(gl, wl):
        if np.asarray(w).dtype == jax.dtypes.float0:
            assert np.asarray(g).dtype == jax.dtypes.float0 and np.shape(g) == np.shape(w)
        else:
            assert np.asarray(g).dtype == np.asarray(w).dtype
            _close(g, w)


def _jvp_aux(M, **extra):
    return lambda x: (M.numpy.sin(x), {"s": x.sum(), "i": M.numpy.arange(2), **extra})


def test_jvp_has_aux():
    got = shardc.jvp(_jvp_aux(shardc, tag="t"), (X,), (X,), has_aux=True)
    want = jax.jvp(_jvp_aux(jax, tag="t"), (X,), (X,), has_aux=True)
    assert got[2].pop("tag") == want[2].pop("tag") == "t"     # (a leaf that is no array)
    _tree_close(got, want)
    got = shardc.jit(lambda x: shardc.jvp(_jvp_aux(shardc), (x,), (x,), has_aux=True))(X)
    _tree_close(got, jax.jit(lambda x: jax.jvp(_jvp_aux(jax), (x,), (x,), has_aux=True))(X))


def test_jvp_has_aux_stays_differentiable():
    """aux is not differentiated by the jvp, but an outer grad reaches it (as jax's)."""
    def loss(M):
        return lambda x: M.jvp(lambda x: (M.numpy.sin(x), M.numpy.cos(x)), (x,), (x,),
                               has_aux=True)[2].sum()
    _close(shardc.grad(loss(shardc))(X), jax.grad(loss(jax))(X))
    with pytest.raises(shardc.errors.ShardcError, match="has_aux=True"):
        shardc.jvp(shardc.numpy.sin, (X,), (X,), has_aux=True)


def _custom_vjp_fns(M):
    @partial(M.custom_vjp, nondiff_argnames=("k",))
    def f(x, k):
        return x * k
    f.defvjp(lambda x, k: (x * k, None), lambda k, r, g: (g * k * 2,))

    @partial(M.custom_vjp, nondiff_argnames="k")
    def f2(k, x, y=2.):
        return x * k * y
    f2.defvjp(lambda k, x, y=2.: (x * k * y, (x, y)),
              lambda k, r, g: (g * r[1] * k * 3, g * r[0]))
    return f, f2


CUSTOM_VJP = {
    "kw": lambda M, f, f2: M.grad(lambda x: f(x, k=3.).sum())(X),
    "pos": lambda M, f, f2: M.grad(lambda x: f(x, 3.).sum())(X),
    "jit": lambda M, f, f2: M.jit(M.grad(lambda x: f(x, k=3.).sum()))(X),
    "vmap": lambda M, f, f2: M.vmap(M.grad(lambda x: f(x, k=3.)))(X),
    "default": lambda M, f, f2: M.grad(lambda x, y: f2(4., x, y=y).sum(),
                                       argnums=(0, 1))(X, X + 1),
    "eager": lambda M, f, f2: f(X, k=3.),
}


@pytest.mark.parametrize("case", list(CUSTOM_VJP))
def test_custom_vjp_nondiff_argnames(case):
    got = CUSTOM_VJP[case](shardc, *_custom_vjp_fns(shardc))
    _tree_close(got, CUSTOM_VJP[case](jax, *_custom_vjp_fns(jax)))


def test_custom_jvp_nondiff_argnames():
    def make(M):
        @partial(M.custom_jvp, nondiff_argnames=("k",))
        def h(x, k):
            return x * k
        h.defjvp(lambda k, p, t: (p[0] * k, t[0] * k * 2))
        return h
    for M in (jax, shardc):
        h = make(M)
        got = M.grad(lambda x: h(x, k=3.).sum())(X), M.jvp(lambda x: h(x, k=3.), (X,), (X,))
        if M is jax:
            want = got
    _tree_close(got, want)


def _pow(x, n):
    return x ** n if n > 1 else x       # Python control flow on n: n must be static


CHECKPOINT = {
    "grad": lambda M: M.grad(lambda x: M.checkpoint(_pow, static_argnames="n")(
        x, n=3).sum())(X),
    "jit": lambda M: M.jit(M.grad(lambda x: M.checkpoint(_pow, static_argnames=("n",))(
        x, n=3).sum()))(X),
    "eager": lambda M: M.checkpoint(_pow, static_argnames="n")(X, n=3),
    "policy": lambda M: M.grad(lambda x: M.checkpoint(
        _pow, static_argnames="n", policy=M.checkpoint_policies.nothing_saveable)(
        x, n=2).sum())(X),
}


@pytest.mark.parametrize("case", list(CHECKPOINT))
def test_checkpoint_static_argnames(case):
    """Keyword arguments named are static, as with jax_remat3 (jax's default checkpoint
    accepts the names but traces the arguments)."""
    jax.config.update("jax_remat3", True)
    try:
        want = CHECKPOINT[case](jax)
    finally:
        jax.config.update("jax_remat3", False)
    _tree_close(CHECKPOINT[case](shardc), want)


I32 = np.arange(3, dtype=np.int32)
VJP_INT = {
    "int": lambda M: M.vjp(lambda i: i * 2, I32)[1](I32),
    "mixed": lambda M: M.vjp(lambda x, i: x * i, X, I32)[1](X),
    "tree": lambda M: M.vjp(lambda d: d["x"] * d["i"], {"x": X, "i": I32})[1](X),
    "bool": lambda M: M.vjp(lambda b, x: M.numpy.where(b, x, 0.), I32 > 0, X)[1](X),
    "aux": lambda M: M.vjp(lambda x, i: (x * i, i), X, I32, has_aux=True)[1](X),
    "in_jit": lambda M: M.jit(lambda x, i: M.vjp(lambda x, i: x * i, x, i)[1](x))(X, I32),
    "from_jit": lambda M: M.jit(lambda x, i: M.vjp(lambda x, i: x * i, x, i))(X, I32)[1](X),
    "scalars": lambda M: M.jit(lambda: M.vjp(lambda x, i: x * i, 2.0, 3)[1](1.0))(),
    "grad_allow_int": lambda M: M.jit(M.grad(lambda x, i: (x * i).sum(), argnums=(0, 1),
                                             allow_int=True))(X, I32),
}


@pytest.mark.parametrize("case", list(VJP_INT))
def test_vjp_integer_primal_float0(case):
    _tree_close(VJP_INT[case](shardc), VJP_INT[case](jax))


# ---------------------------------------------------------------- linearize

Y = np.float32(2.5)
LINEARIZE = {     # M -> (what jit returns, how it is used after)
    "closure": (lambda M: M.jit(lambda x, y: M.linearize(
        lambda x: M.numpy.sin(x) * y, x))(X, Y), lambda M, r: r[1](X)),
    "aux": (lambda M: M.jit(lambda x: M.linearize(
        lambda x: (M.numpy.sin(x), M.numpy.cos(x)), x, has_aux=True))(X),
        lambda M, r: (r[0], r[1](X), r[2])),
    "tree": (lambda M: M.jit(lambda d: M.linearize(lambda d: {"a": d["x"] * d["y"]}, d))(
        {"x": X, "y": X}), lambda M, r: r[1]({"x": X, "y": 2 * X})),
    "int_out": (lambda M: M.jit(lambda x: M.linearize(
        lambda x: (x * 2, M.numpy.arange(3)), x))(X), lambda M, r: r[1](X)),
    "into_jit": (lambda M: M.jit(lambda x: M.linearize(M.numpy.sin, x))(X),
                 lambda M, r: M.jit(lambda f, t: f(t))(r[1], X)),
    "vmap": (lambda M: M.jit(lambda x: M.linearize(M.numpy.sin, x))(X),
             lambda M, r: M.vmap(r[1])(np.stack([X, 2 * X]))),
    "eager_int": (lambda M: M.linearize(lambda x, i: x * i, X, I32),
                  lambda M, r: r[1](X, np.zeros(3, jax.dtypes.float0))),
    "weak": (lambda M: M.linearize(lambda x: x * 2., 3.0), lambda M, r: r[1](1.0)),
}


@pytest.mark.parametrize("case", list(LINEARIZE))
def test_linearize_jvp_function_is_a_pytree(case):
    """linearize's f_jvp leaves jit (its leaves are what it reads) and enters it again."""
    make, use = LINEARIZE[case]
    got, want = use(shardc, make(shardc)), use(jax, make(jax))
    _tree_close(got, want)
    if case == "weak":
        assert str(jax.typeof(got)) == str(jax.typeof(want)) == "~float32[]"


def test_linearize_checks_tangents():
    _, f_jvp = shardc.linearize(shardc.numpy.sin, X)
    with pytest.raises(ValueError, match="expected float32"):
        f_jvp(X.astype(np.int32))
    _, f_jvp = shardc.linearize(lambda x, i: x * i, X, I32)
    with pytest.raises(ValueError, match="expected float0"):
        f_jvp(X, I32)


S2, Q2 = np.array([2., 3.5], np.float32), np.array([1.5, 0.7], np.float32)


def _scan_carry_next(M):     # nextafter on a carry no tangent reaches
    return M.grad(lambda x: M.lax.scan(lambda c, _: (M.lax.nextafter(c, c + 1), x * c), S2,
                                       None, length=2)[1].sum())(Q2)


def _fori_carry_next(M):
    def body(i, c):
        return M.lax.nextafter(c[0], c[0] + 1), c[1] + c[2] * c[0], c[2]
    return M.grad(lambda x: M.lax.fori_loop(0, 2, body, (S2, 0 * S2, x))[1].sum())(Q2)


def _scan_polygamma_m_carry(M):
    return M.grad(lambda x: M.lax.scan(lambda m, _: (m + 1, M.lax.polygamma(m, x)),
                                       np.array([1., 2.], np.float32), None,
                                       length=2)[1].sum())(Q2)


def _while_jvp_carry_next(M):
    def body(c):
        return c[0] + 1, M.lax.nextafter(c[1], c[1] + 1), c[2] * 1.1
    return M.jvp(lambda x: M.lax.while_loop(lambda c: c[0] < 2, body, (0, S2, x))[1:],
                 (Q2,), (Q2,))


LOOP_CARRIES = {"scan": _scan_carry_next, "fori": _fori_carry_next,
                "scan_polygamma": _scan_polygamma_m_carry, "while_jvp": _while_jvp_carry_next}


@pytest.mark.parametrize("case", list(LOOP_CARRIES))
def test_loop_carry_no_tangent_reaches_is_not_differentiated(case):
    """A loop carry that no tangent reaches (in any trip) is not differentiated, so an
    op with no gradient on it does not raise (jax's symbolic zeros)."""
    _tree_close(LOOP_CARRIES[case](shardc), LOOP_CARRIES[case](jax))


def _aux_of(M):
    return lambda x: ((x * 2).sum(), {"n": 3, "c": np.ones(2), "t": x + 1, "s": "tag"})


AUX_TRANSFORMS = {
    "jvp": lambda M: M.jvp(_aux_of(M), (X,), (X,), has_aux=True)[2],
    "vjp": lambda M: M.vjp(_aux_of(M), X, has_aux=True)[2],
    "value_and_grad": lambda M: M.value_and_grad(_aux_of(M), has_aux=True)(X)[0][1],
    "grad": lambda M: M.grad(_aux_of(M), has_aux=True)(X)[1],
    "jacrev": lambda M: M.jacrev(_aux_of(M), has_aux=True)(X)[1],
}


@pytest.mark.parametrize("name", list(AUX_TRANSFORMS))
def test_eager_aux_leaves_stay_as_given(name):
    """Outside a trace, an aux leaf that is no traced value (a string, a NumPy array, a
    Python int) comes back as itself, as jax's: shardc's eager transforms run jitted and
    made them Arrays, or refused a string."""
    got, want = AUX_TRANSFORMS[name](shardc), AUX_TRANSFORMS[name](jax)
    assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in want.items()}
    assert got["n"] == 3 and got["s"] == "tag"
    _close(got["t"], want["t"])
    _close(got["c"], want["c"])
