"""shardc.checkpoint (remat): every policy, checkpoint_name, static_argnums,
prevent_cse, decorator forms and pytree outputs; values and gradients against
jax.checkpoint under jax.jit, and the gradient's IR really recomputes (or saves)."""
import functools

import jax
import jax.ad_checkpoint
import numpy as np
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import Case, compare_cases, data

F = np.float32


def AD(m):
    return shardc if m._base is snp else jax


def L(m):
    return shardc.lax if m._base is snp else jax.lax


def POL(m):
    return shardc.checkpoint_policies if m._base is snp else jax.checkpoint_policies


def NAME(m):
    return shardc.ad_checkpoint.checkpoint_name if m._base is snp else \
        jax.ad_checkpoint.checkpoint_name


def _block(m, x, w1, w2):
    h = NAME(m)(x @ w1, "h")
    a = NAME(m)(m.sin(h), "a")
    z = m.einsum("bi,bj->bij", a, a).sum(2)      # a dot with batch dims
    return m.tanh(z @ w2) * a


POLICIES = {
    "default": lambda p: None,
    "everything": lambda p: p.everything_saveable,
    "nothing": lambda p: p.nothing_saveable,
    "dots": lambda p: p.dots_saveable,
    "checkpoint_dots": lambda p: p.checkpoint_dots,
    "dots_no_batch": lambda p: p.dots_with_no_batch_dims_saveable,
    "checkpoint_dots_no_batch": lambda p: p.checkpoint_dots_with_no_batch_dims,
    "only_h": lambda p: p.save_only_these_names("h"),
    "only_h_a": lambda p: p.save_only_these_names("h", "a"),
    "all_but_h": lambda p: p.save_any_names_but_these("h"),
    "anything_but_h": lambda p: p.save_anything_except_these_names("h"),
    "both": lambda p: p.save_from_both_policies(p.save_only_these_names("a"),
                                                p.dots_saveable),
}


def _policy_case(name):
    def f(m, x, w1, w2):
        ck = AD(m).checkpoint(functools.partial(_block, m), policy=POLICIES[name](POL(m)))

        def loss(x, w1, w2):
            return (ck(x, w1, w2) ** 2).sum()
        return AD(m).value_and_grad(loss, (0, 1, 2))(x, w1, w2)
    return Case(name, f, [data((4, 6), F, seed=1), data((6, 6), F, seed=2) / 2,
                          data((6, 6), F, seed=3) / 2], numpy_ref=False)


def _forms_cases():
    x, w = data((4, 6), F, seed=4), data((6, 6), F, seed=5) / 2
    cs = []

    def static(m, x, w):
        def f(x, n, w):
            for _ in range(n):
                x = m.sin(x @ w)
            return x
        ck = AD(m).checkpoint(f, static_argnums=(1,))
        return AD(m).grad(lambda x, w: ck(x, 2, w).sum(), (0, 1))(x, w), ck(x, 3, w)
    cs.append(Case("static_argnums", static, [x, w], numpy_ref=False))

    def no_cse(m, x, w):
        ck = AD(m).checkpoint(lambda x: m.cos(x @ w), prevent_cse=False)
        return AD(m).grad(lambda x: ck(x).sum())(x)
    cs.append(Case("prevent_cse_false", no_cse, [x, w], numpy_ref=False))

    def deco(m, x, w):
        @AD(m).checkpoint
        def f(x):
            return m.sin(x) @ w

        # shardc's checkpoint(**kw) returns a decorator; jax's needs partial
        @(shardc.checkpoint(policy=POL(m).nothing_saveable) if m._base is snp else
          functools.partial(jax.checkpoint, policy=POL(m).nothing_saveable))
        def g(x):
            return {"y": m.exp(x) @ w, "z": (x, x.sum())}

        def loss(x):
            o = g(f(x))
            return o["y"].sum() + o["z"][1] * o["z"][0].mean()
        return AD(m).value_and_grad(loss)(x), g(x)
    cs.append(Case("decorators_pytree", deco, [x, w], numpy_ref=False))

    def remat_alias(m, x, w):
        ck = (shardc.remat if m._base is snp else jax.remat)(lambda x: m.sin(x @ w))
        return AD(m).grad(lambda x: ck(x).sum())(x)
    cs.append(Case("remat", remat_alias, [x, w], numpy_ref=False))

    def nested(m, x, w):
        inner = AD(m).checkpoint(lambda x: m.sin(x @ w), policy=POL(m).dots_saveable)
        outer = AD(m).checkpoint(lambda x: inner(inner(x)) * x)
        return AD(m).grad(lambda x: outer(x).sum())(x)
    cs.append(Case("nested", nested, [x, w], numpy_ref=False))

    def closure(m, x, w, b):     # gradients reach values the function closes over
        def loss(w, b):
            ck = AD(m).checkpoint(lambda x, *, scale: m.sin(x @ w + b) * scale,
                                  policy=POL(m).nothing_saveable)
            return ck(x, scale=b[0]).sum()
        return AD(m).value_and_grad(loss, (0, 1))(w, b)
    cs.append(Case("closure_kwargs", closure, [x, w, data((6,), F, seed=8)],
                   numpy_ref=False))

    def neg_static(m, x, w):
        ck = AD(m).checkpoint(lambda x, w, k: m.sin(x @ w) ** k, static_argnums=(-1,))
        return AD(m).grad(lambda x: ck(x, w, 3).sum())(x)
    cs.append(Case("static_argnums_negative", neg_static, [x, w], numpy_ref=False))

    def gradgrad(m, x):
        ck = AD(m).checkpoint(lambda x: m.sin(x) * x)
        return AD(m).grad(AD(m).grad(lambda x: ck(x)))(x)
    cs.append(Case("grad_grad", gradgrad, [F(0.3)], numpy_ref=False))

    def values(m, x, w):     # forward values (and int outputs) are untouched
        ck = AD(m).checkpoint(lambda x: (m.sin(x @ w), m.argmax(x, 1)))
        return ck(x)
    cs.append(Case("values", values, [x, w], numpy_ref=False))
    return cs


def test_policies():
    compare_cases([_policy_case(n) for n in POLICIES])


def test_forms():
    compare_cases(_forms_cases())


def test_sharded(mesh2x4):
    def f(m, x, w):
        ck = AD(m).checkpoint(lambda x: m.tanh(x @ w), policy=POL(m).dots_saveable)
        gx, gw = AD(m).grad(lambda x, w: (ck(x) ** 2).sum(), (0, 1))(x, w)
        # shardc's gradients take their primals' shardings (as test_grad's reference)
        return ck(x), m.constrain(gx, P("x", None)), m.constrain(gw, P(None, "y"))
    compare_cases([Case("sharded", f, [data((8, 16), F, seed=6), data((16, 16), F, seed=7)],
                        [P("x", None), P(None, "y")], numpy_ref=False)], mesh2x4)


def test_checkpoint_outside_jit():
    ck = shardc.checkpoint(lambda x: x * 2)
    np.testing.assert_allclose(np.asarray(ck(np.ones(3, F))), 2)
    # traced as jax's, so jax's types: float32 arrays, not NumPy float64 or a Python float
    for x in (np.ones(3), 2.0):
        got, want = ck(x), jax.checkpoint(lambda x: x * 2)(x)
        assert type(got) is type(want) and got.dtype == want.dtype == np.float32
        assert got.weak_type == want.weak_type
    st = shardc.checkpoint(lambda x, n: x * n, static_argnums=(1,))
    np.testing.assert_allclose(np.asarray(st(np.ones(3, F), 3)), 3)
    # an unhashable static argument and keyword arguments, as jax's
    lst = shardc.checkpoint(lambda x, s, k=1: x * len(s) + k, static_argnums=1)
    np.testing.assert_allclose(np.asarray(lst(np.ones(3, F), [1, 2], k=2)), 4)


# ---------------------------------------------------------------- the IR recomputes

def _after_barrier(policy):
    """The gradient's IR: (#dot_general before, after the first optimization_barrier)."""
    def loss(x, w1, w2):
        ck = shardc.checkpoint(lambda x: snp.tanh(snp.sin(x @ w1) @ w2), policy=policy)
        return ck(x).sum()
    args = [data((4, 6), F, seed=1), data((6, 6), F, seed=2), data((6, 6), F, seed=3)]
    # value_and_grad: the forward value is needed (with grad alone the forward pass is
    # dead and only the recomputation remains)
    ir = str(shardc.jit(shardc.value_and_grad(loss, (0, 1, 2))).trace(*args).ir)
    before, _, after = ir.partition("optimization_barrier")
    return before.count("dot_general"), after.count("dot_general"), ir


def test_ir_recomputes():
    P_ = shardc.checkpoint_policies
    # nothing saved: both forward dots again behind the barrier, plus 4 backward dots
    b, a, ir = _after_barrier(P_.nothing_saveable)
    assert (b, a) == (2, 6), ir
    # dots saved: no dot recomputed (only the 4 backward ones)
    b, a, ir = _after_barrier(P_.dots_saveable)
    assert (b, a) == (2, 4), ir
    # everything saved: nothing to recompute, no barrier needed
    b, a, ir = _after_barrier(P_.everything_saveable)
    assert "optimization_barrier" not in ir and b == 6, ir
    # only the first dot's output (named) saved: the second is recomputed
    P_ = shardc.checkpoint_policies

    def loss(x, w1, w2):
        def f(x):
            h = shardc.ad_checkpoint.checkpoint_name(x @ w1, "h")
            return snp.tanh(snp.sin(h) @ w2)
        return shardc.checkpoint(f, policy=P_.save_only_these_names("h"))(x).sum()
    args = [data((4, 6), F, seed=1), data((6, 6), F, seed=2), data((6, 6), F, seed=3)]
    ir = str(shardc.jit(shardc.value_and_grad(loss, (0, 1, 2))).trace(*args).ir)
    before, _, after = ir.partition("optimization_barrier")
    assert (before.count("dot_general"), after.count("dot_general")) == (2, 5), ir


def _more_cases():
    xs, a = data((5, 3), F, seed=9), data((3,), F, seed=10)
    cs = []

    def passthrough(m, x, k):   # outputs passed through, constants, int in and out
        def f(x, k):
            o = AD(m).checkpoint(lambda x, k: (x, 2.0, k * 0 + 1,
                                               x.sum() + k.astype(m.float32).sum()))(x, k)
            return o[0].sum() * o[1] + o[3] * o[2].astype(m.float32).sum()
        return AD(m).value_and_grad(f)(x, k)
    cs.append(Case("passthrough_int", passthrough, [a, np.arange(3, dtype=np.int32)],
                   numpy_ref=False))

    def jvp(m, x):
        f = AD(m).checkpoint(lambda x: m.sin(NAME(m)(m.cos(x), "c")) * x,
                             policy=POL(m).save_only_these_names("c"))
        return AD(m).jvp(f, (x,), (x,)), AD(m).grad(lambda x: f(x).sum())(x)
    cs.append(Case("jvp", jvp, [a], numpy_ref=False))

    def name_outside(m, x):
        return AD(m).grad(lambda x: NAME(m)(m.sin(x), "s").sum())(x)
    cs.append(Case("name_outside_checkpoint", name_outside, [a], numpy_ref=False))

    def in_cond(m, p, x):
        ck = AD(m).checkpoint(lambda x: m.sin(x) * x, policy=POL(m).nothing_saveable)
        return AD(m).grad(lambda x: L(m).cond(p, ck, lambda x: x * 2, x).sum())(x)
    cs.append(Case("in_cond", in_cond, [np.bool_(True), a], numpy_ref=False))

    def scan_gradgrad(m, x):
        ck = AD(m).checkpoint(lambda c, x: (m.sin(c * x), c.sum()), policy=POL(m).dots_saveable)

        def f(x):
            return L(m).scan(ck, x[0], x)[0].sum()
        return AD(m).grad(f)(x), AD(m).grad(lambda s: AD(m).grad(lambda x: f(x * s))(x).sum())(
            F(1.5))
    cs.append(Case("scan_grad_grad", scan_gradgrad, [xs], numpy_ref=False))
    return cs


def test_more():
    compare_cases(_more_cases())


def test_ir_prevent_cse_and_scan():
    """prevent_cse=False: no barrier; a checkpointed scan body: the backward scan's body
    recomputes the forward dot (nothing saveable) instead of stacking its result."""
    args = [data((4, 6), F, seed=1), data((6, 6), F, seed=2)]

    def loss(x, w):
        return shardc.checkpoint(lambda x: snp.sin(x @ w), prevent_cse=False,
                                 policy=shardc.checkpoint_policies.nothing_saveable)(x).sum()
    ir = str(shardc.jit(shardc.value_and_grad(loss, (0, 1))).trace(*args).ir)
    assert "optimization_barrier" not in ir and ir.count("dot_general") == 4, ir

    def scanned(policy):
        def loss(xs, w):
            body = shardc.checkpoint(lambda c, x: (snp.sin(c @ w) + x, None), policy=policy)
            return shardc.lax.scan(body, xs[0], xs)[0].sum()
        ir = str(shardc.jit(shardc.value_and_grad(loss, (0, 1))).trace(
            data((3, 6, 6), F, seed=3), args[1]).ir)
        fwd, _, bwd = ir.partition("reverse=True")
        return fwd.count("dot_general"), bwd.count("dot_general"), ir
    f, b, ir = scanned(shardc.checkpoint_policies.nothing_saveable)
    assert (f, b) == (1, 3), ir         # the dot again, then its two transposes
    f, b, ir = scanned(shardc.checkpoint_policies.dots_saveable)
    assert (f, b) == (1, 2), ir


def test_jax_standard_policies_are_taken_as_shardc_s():
    """jax.checkpoint_policies.dots_saveable tests jax's dot_general primitive; passed to
    shardc.checkpoint it must save shardc's dots, not silently save nothing."""
    import jax
    import numpy as np
    import shardc
    import shardc.numpy as snp

    def f_with(policy):
        layer = shardc.checkpoint(lambda h, w: snp.tanh(h @ w), policy=policy)
        return lambda w, h: layer(layer(h, w), w).sum()
    w = np.full((8, 8), 0.1, np.float32)
    h = np.ones((4, 8), np.float32)
    texts = [str(shardc.jit(shardc.grad(f_with(p))).trace(w, h).ir)
             for p in (jax.checkpoint_policies.dots_saveable,
                       shardc.checkpoint_policies.dots_saveable)]
    assert texts[0].count("dot_general") == texts[1].count("dot_general")
    assert "<callback dots_saveable>" in texts[0]
