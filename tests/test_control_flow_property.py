"""Random programs of nested scan / cond / fori_loop / checkpoint over elementwise and
dot bodies: values and gradients equal jax's (few, derandomized examples)."""
import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

import shardc
import shardc.numpy as snp
from helpers import data

LEAVES = ["sin", "tanh", "dot", "mulw", "square", "add_x0"]


def programs(depth=0):
    leaf = st.tuples(st.just("leaf"), st.sampled_from(LEAVES))
    if depth >= 2:
        return leaf
    sub = st.lists(st.deferred(lambda: programs(depth + 1)), min_size=1, max_size=2)
    return st.one_of(
        leaf,
        st.tuples(st.just("scan"), sub, st.booleans()),            # reverse
        st.tuples(st.just("cond"), sub, sub),
        st.tuples(st.just("fori"), sub, st.integers(-1, 3)),        # upper bound
        st.tuples(st.just("remat"), sub, st.sampled_from(["nothing", "dots", "all"])))


def run(node, m, lax, ad, h, w, xs):
    """The program on the carry h: f32[4,4] (w: f32[4,4], xs: f32[3,4,4] closed over)."""
    def seq(nodes, h):
        for n in nodes:
            h = run(n, m, lax, ad, h, w, xs)
        return h
    kind = node[0]
    if kind == "leaf":
        op = node[1]
        return {"sin": lambda: m.sin(h), "tanh": lambda: m.tanh(h),
                "dot": lambda: m.tanh(h @ w), "mulw": lambda: h * w,
                "square": lambda: h * h * 0.5, "add_x0": lambda: h + xs[0]}[op]()
    if kind == "scan":
        def body(c, x):
            c2 = m.tanh(seq(node[1], c) + x)
            return c2, (c2 * x).sum()
        h2, ys = lax.scan(body, h, xs, reverse=node[2])
        return h2 + ys.mean()
    if kind == "cond":
        return lax.cond(h.sum() > 0, lambda h: seq(node[1], h), lambda h: seq(node[2], h), h)
    if kind == "fori":
        return lax.fori_loop(0, node[2], lambda i, c: seq(node[1], c) * 0.9 + i * 0.01, h)
    pols = ad.checkpoint_policies
    policy = {"nothing": pols.nothing_saveable, "dots": pols.dots_saveable,
              "all": pols.everything_saveable}[node[2]]
    return ad.checkpoint(lambda h: seq(node[1], h), policy=policy)(h)


def _fn(progs, m, lax, ad):
    """Several programs in one function: one compile checks them all."""
    def loss(h, w, xs):
        each = [(run(p, m, lax, ad, h, w, xs) ** 2).sum() for p in progs]
        return sum(e * (k + 1) for k, e in enumerate(each)), each
    return ad.value_and_grad(loss, (0, 1, 2), has_aux=True)


ARGS = [data((4, 4), np.float32, seed=1), data((4, 4), np.float32, seed=2) / 2,
        data((3, 4, 4), np.float32, seed=3)]


@settings(max_examples=5, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.generate])     # no shrinking: compiles are slow
@given(st.lists(programs(), min_size=4, max_size=4))
def test_random_control_flow(progs):
    ours = shardc.jit(_fn(progs, snp, shardc.lax, shardc))(*ARGS)
    ref = jax.jit(_fn(progs, jnp, jax.lax, jax))(*ARGS)
    for i, (o, r) in enumerate(zip(jax.tree_util.tree_leaves(ours),
                                   jax.tree_util.tree_leaves(ref))):
        o, r = np.asarray(o), np.asarray(r)
        assert o.dtype == r.dtype and o.shape == r.shape, (progs, i)
        np.testing.assert_allclose(o, r, rtol=1e-4, atol=1e-4, err_msg=f"{progs} output {i}")
