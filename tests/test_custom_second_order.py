"""Second-order derivatives through custom rules, as jax's: the first differentiation
applies the rule; an outer one differentiates what the inner one computed (a
custom_vjp's fwd; a custom_jvp's rule, so a straight-through round has derivative 0
there), also where the call sits in a scan, fori_loop, cond or checkpoint body. shardc
applied the rule again at the outer level inside those bodies (custom_vjp) or
everywhere (custom_jvp): wrong Hessians, no error."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp

X = np.array([0.3, 1.7, -0.6, 2.2], np.float32)
SHARDC = (shardc, snp, shardc.lax)
JAX = (jax, jnp, jax.lax)


def _loss(ns, f, where):
    S, np_, lax = ns
    return {
        "plain": lambda x: (f(f(x) * x) * x).sum(),
        "scan": lambda x: lax.scan(lambda c, _: (f(c) * x, None), x, None, length=2)[0].sum(),
        "fori": lambda x: lax.fori_loop(0, 2, lambda i, c: f(c) * x, x).sum(),
        "cond": lambda x: lax.cond(True, lambda x: f(f(x) * x) * x, lambda x: x, x).sum(),
        "checkpoint": lambda x: S.checkpoint(lambda x: f(f(x) * x) * x)(x).sum(),
    }[where]


def _vjp_fn(ns):
    S, np_, _ = ns

    @S.custom_vjp
    def f(x):
        return np_.sin(x)
    # a bwd that is not sin's derivative (it reads x), so applying it twice shows
    f.defvjp(lambda x: (np_.sin(x), x), lambda r, g: (g * np_.cos(r) * r,))
    return f


def _jvp_fn(ns):
    S, np_, _ = ns

    @S.custom_jvp
    def ste(x):
        return np_.round(x)

    @ste.defjvp
    def ste_jvp(p, t):
        return np_.round(p[0]), t[0]
    return ste


WHERE = ["plain", "scan", "fori", "cond", "checkpoint"]


@pytest.mark.parametrize("where", WHERE)
def test_grad_of_grad_through_custom_vjp(where):
    def run(ns):
        S = ns[0]
        loss = _loss(ns, _vjp_fn(ns), where)
        return S.jit(S.grad(lambda x: S.grad(loss)(x).sum()))(X)
    np.testing.assert_allclose(np.asarray(run(SHARDC)), np.asarray(run(JAX)), rtol=2e-5,
                               atol=1e-6)


@pytest.mark.parametrize("where", WHERE)
def test_hessian_through_custom_jvp(where):
    def run(ns):
        S = ns[0]
        f = _jvp_fn(ns)
        loss = _loss(ns, lambda x: f(x) * x, where)
        return S.jit(S.hessian(loss))(X)
    np.testing.assert_allclose(np.asarray(run(SHARDC)), np.asarray(run(JAX)), rtol=2e-5,
                               atol=1e-5)


def test_first_order_unchanged():
    for make in (_vjp_fn, _jvp_fn):
        got = shardc.jit(shardc.grad(_loss(SHARDC, make(SHARDC), "scan")))(X)
        want = jax.jit(jax.grad(_loss(JAX, make(JAX), "scan")))(X)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5)


def test_vmapped_second_order():
    def run(ns):
        S = ns[0]
        loss = _loss(ns, _vjp_fn(ns), "scan")
        return S.jit(S.vmap(S.grad(lambda x: S.grad(loss)(x).sum())))(np.stack([X, -X]))
    np.testing.assert_allclose(np.asarray(run(SHARDC)), np.asarray(run(JAX)), rtol=2e-5,
                               atol=1e-6)


@pytest.mark.parametrize("in_scan", [False, True])
@pytest.mark.parametrize("bwd_reads_w", [False, True])
def test_custom_vjp_of_a_closed_over_value_is_an_error(in_scan, bwd_reads_w):
    # jax refuses; shardc returned a zero gradient for w (or an internal KeyError)
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    w = np.array([[0.5, 1.0], [-1.0, 2.0]], np.float32)

    def make(S):
        def loss(w, x):
            @S.custom_vjp
            def f(x):
                return x @ w
            f.defvjp(lambda x: (x @ w, x),
                     (lambda r, g: (g @ w.T,)) if bwd_reads_w else (lambda r, g: (g * 2,)))
            if in_scan and S is shardc:
                return S.lax.scan(lambda c, _: (f(c), None), x, None, length=2)[0].sum()
            # (jax.jit cannot trace a bwd closing over a tracer in a scan: the reference
            # runs the two steps unrolled)
            return (f(f(x)) if in_scan else f(x)).sum()
        return loss
    with pytest.raises(shardc.ShardcError, match="closed-over value"):
        shardc.jit(shardc.grad(make(shardc)))(w, x)
    # differentiating the explicit argument only is fine (w is a constant of it), even
    # with bwd reading w inside a scan (an internal KeyError before)
    got = shardc.jit(shardc.grad(make(shardc), argnums=1))(w, x)
    want = jax.jit(jax.grad(make(jax), argnums=1))(w, x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


@pytest.mark.parametrize("in_scan", [False, True])
def test_outer_grad_of_an_inner_vjps_primal(in_scan):
    # the inner vjp linearized h (its rule applied) though its vjp_fn never ran: the
    # outer grad differentiates fwd as ordinary ops, as jax (cos x, not bwd's 3), also
    # for a call in a scan body (which the inner level must claim there too)
    def run(ns):
        S, np_, lax = ns

        @S.custom_vjp
        def f(x):
            return np_.sin(x)
        f.defvjp(lambda x: (np_.sin(x), x), lambda r, g: (g * 3.0,))
        h = (lambda x: lax.scan(lambda c, _: (f(c), None), x, None, length=1)[0]) \
            if in_scan else f
        return S.jit(S.grad(lambda x: S.vjp(h, x)[0].sum()))(X)
    np.testing.assert_allclose(np.asarray(run(SHARDC)), np.asarray(run(JAX)), rtol=1e-6)


def test_custom_jvp_nondiff_argument_stays_constant_at_second_order():
    def run(ns):
        from functools import partial
        S, np_, _ = ns

        @partial(S.custom_jvp, nondiff_argnums=(0,))
        def f(a, x):
            return np_.sin(x) * a

        @f.defjvp
        def f_jvp(a, p, t):
            return np_.sin(p[0]) * a, 2.0 * t[0]

        def outer(a):
            v, g = S.value_and_grad(lambda x: f(a, x).sum())(X)
            return v + g.sum()
        return S.jit(S.grad(outer))(np.float32(1.5))
    np.testing.assert_allclose(np.asarray(run(SHARDC)), np.asarray(run(JAX)), atol=1e-6)


def test_custom_jvp_closure_at_second_order_is_an_error():
    # the rule reads the closed-over value from its Python closure: shardc cannot take
    # its derivative there (jax can); an error, not a gradient missing that term
    def outer(a):
        @shardc.custom_jvp
        def f(x):
            return snp.sin(x) * a
        f.defjvp(lambda p, t: (snp.sin(p[0]) * a, snp.cos(p[0]) * a * t[0]))
        v, g = shardc.value_and_grad(lambda x: f(x).sum())(X)
        return v + g.sum()
    with pytest.raises(shardc.ShardcError, match="closed-over value"):
        shardc.jit(shardc.grad(outer))(np.float32(1.5))
