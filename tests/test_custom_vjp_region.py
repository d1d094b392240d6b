"""custom_vjp as one `custom_vjp_call` op owning fwd as its region, and region ops
re-traced generically when a shard_map body is differentiated; checked against jax."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp

X = np.linspace(-2., 2., 64, dtype=np.float32).reshape(8, 8)
W = np.linspace(0.5, 1.5, 64, dtype=np.float32).reshape(8, 8)


class S:
    np, custom_vjp, grad, jit, lax = snp, shardc.custom_vjp, shardc.grad, shardc.jit, shardc.lax
    shard_map = staticmethod(shardc.shard_map)
    mesh = staticmethod(lambda: shardc.make_mesh((2, 4), ("a", "b"),
                                                 axis_types=(shardc.AxisType.Auto,) * 2))
    wsc = staticmethod(shardc.lax.with_sharding_constraint)


class J:
    np, custom_vjp, grad, jit, lax = jnp, jax.custom_vjp, jax.grad, jax.jit, jax.lax
    shard_map = staticmethod(jax.shard_map)
    mesh = staticmethod(lambda: jax.make_mesh((2, 4), ("a", "b"),
                                              axis_types=(shardc.AxisType.Auto,) * 2))
    wsc = staticmethod(jax.lax.with_sharding_constraint)


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    assert np.asarray(a).dtype == np.asarray(b).dtype


def _scaled_sin(m):
    """sin with a gradient scaled by 3 (so a wrong rule shows)."""
    @m.custom_vjp
    def f(x):
        return m.np.sin(x)

    def fwd(x):
        return m.np.sin(x), m.np.cos(x)

    def bwd(c, g):
        return (3. * c * g,)
    f.defvjp(fwd, bwd)
    return f


def _loss(m):
    f = _scaled_sin(m)
    return lambda x: m.np.sum(f(x) * W)


def test_inside_jit_and_under_grad():
    _close(shardc.jit(_scaled_sin(S))(X), jax.jit(_scaled_sin(J))(X))
    _close(shardc.grad(_loss(S))(X), jax.grad(_loss(J))(X))
    _close(shardc.jit(shardc.grad(_loss(S)))(X), jax.jit(jax.grad(_loss(J)))(X))
    # and grad of a jit-compiled function with a custom_vjp inside
    _close(shardc.grad(shardc.jit(_loss(S)))(X), jax.grad(jax.jit(_loss(J)))(X))


def test_printed_ir_shows_the_region():
    ir = shardc.jit(_scaled_sin(S)).trace(X).ir
    head = [ln for ln in ir.splitlines() if "custom_vjp_call(" in ln]
    assert len(head) == 1 and "{bwd=<bwd>, num_out=1}" in head[0] and head[0].endswith("{")
    # the region: its block argument and fwd's ops; the residual (cos) nothing used is
    # dropped from the results and the region by dead-code elimination
    assert "  ^(%1: f32[8,8]" in ir and "= sin(%1)" in ir and "cos(" not in ir
    assert "    return %2\n" in ir
    # under grad it stays, a result of the op used by the backward pass
    ir = shardc.jit(shardc.grad(_loss(S))).trace(X).ir
    assert "= cos(" in ir.split("custom_vjp_call(")[1] and "    return %4, %5\n" in ir
    # the region is inlined at lowering: no call, no extra ops
    hlo = shardc.jit(_scaled_sin(S)).lower(X).as_text()
    assert "stablehlo.sine" in hlo and "custom" not in hlo


def _nondiff(m):
    @functools.partial(m.custom_vjp, nondiff_argnums=(0, 2))
    def f(k, x, act):
        return act(x) * k

    def fwd(k, x, act):
        return act(x) * k, x

    def bwd(k, act, x, g):
        return (g * k * 10. + x,)
    f.defvjp(fwd, bwd)
    return lambda x: m.np.sum(f(2., x, m.np.tanh) * W)


def test_nondiff_argnums():
    _close(shardc.jit(_nondiff(S))(X), jax.jit(_nondiff(J))(X))
    _close(shardc.jit(shardc.grad(_nondiff(S)))(X), jax.jit(jax.grad(_nondiff(J)))(X))


def _residual_is_input(m):
    @m.custom_vjp
    def f(x, y):
        return x * y

    def fwd(x, y):
        return x * y, (x, y)        # both residuals are the call's own arguments

    def bwd(res, g):
        x, y = res
        return (g * y * 2., g * x * 5.)
    f.defvjp(fwd, bwd)
    return lambda x, y: m.np.sum(f(x, y) ** 2)


def test_residual_that_is_an_input():
    got = shardc.jit(shardc.grad(_residual_is_input(S), argnums=(0, 1)))(X, W)
    want = jax.jit(jax.grad(_residual_is_input(J), argnums=(0, 1)))(X, W)
    _close(got[0], want[0])
    _close(got[1], want[1])


def _constrained(m, mesh):
    @m.custom_vjp
    def f(x):
        return m.wsc(m.np.sin(x), NamedSharding(mesh, P("a", "b"))) * 2.

    def fwd(x):
        y = m.wsc(m.np.sin(x), NamedSharding(mesh, P("a", "b")))
        return y * 2., m.np.cos(x)

    def bwd(c, g):
        return (m.wsc(c * g, NamedSharding(mesh, P(None, "b"))),)
    f.defvjp(fwd, bwd)
    return f


def test_fwd_with_a_sharding_constraint():
    sm, jm = S.mesh(), J.mesh()
    got = shardc.jit(_constrained(S, sm))(X)
    want = jax.jit(_constrained(J, jm))(X)
    _close(got, want)
    assert got.sharding.is_equivalent_to(want.sharding, 2)
    ir = shardc.jit(_constrained(S, sm)).trace(X).ir
    assert "sharding_constraint(" in ir.split("custom_vjp_call(")[1]   # inside the region

    def loss(m, mesh):
        f = _constrained(m, mesh)
        return lambda x: m.np.sum(f(x) * W)
    got = shardc.jit(shardc.grad(loss(S, sm)))(X)
    want = jax.jit(jax.grad(loss(J, jm)))(X)
    _close(got, want)
    assert got.sharding.is_equivalent_to(want.sharding, 2)


def _in_shard_map(m, mesh):
    f = _scaled_sin(m)

    def body(y):
        return m.lax.psum(f(y) * y, "a")
    h = m.shard_map(body, mesh=mesh, in_specs=P("a"), out_specs=P())
    return lambda x: m.np.sum(h(x) ** 2)


def test_nested_in_a_differentiated_shard_map():
    sm, jm = S.mesh(), J.mesh()
    _close(shardc.jit(_in_shard_map(S, sm))(X), jax.jit(_in_shard_map(J, jm))(X))
    _close(shardc.jit(shardc.grad(_in_shard_map(S, sm)))(X),
           jax.jit(jax.grad(_in_shard_map(J, jm)))(X))
    _close(shardc.grad(_in_shard_map(S, sm))(X), jax.grad(_in_shard_map(J, jm))(X))


def _closes_over(m, mesh):
    """A custom_vjp whose fwd closes over a value of the shard_map body."""
    def body(y, w):
        s = m.np.sin(w)

        @m.custom_vjp
        def f(x):
            return x * s

        f.defvjp(lambda x: (x * s, s), lambda s_, g: (g * s_ * 4.,))
        return m.lax.psum(f(y), "a")
    h = m.shard_map(body, mesh=mesh, in_specs=(P("a"), P("a")), out_specs=P())
    return lambda x: m.np.sum(h(x, W) ** 2)


def test_closure_inside_a_differentiated_shard_map():
    sm, jm = S.mesh(), J.mesh()
    _close(shardc.jit(shardc.grad(_closes_over(S, sm)))(X),
           jax.jit(jax.grad(_closes_over(J, jm)))(X))


class _Stop(Exception):
    pass


def test_retracing_a_program_rebinds_its_region_ops():
    """eval_ops (shard_map's gradient re-traces its body with it) copies ops that own
    regions by re-tracing the region: shard_map with its own manual context, others
    (custom_vjp_call) generically. Nested shard_map is not supported yet, so a traced
    shard_map is re-traced here directly, then differentiated."""
    from shardc.ir.program import Program
    from shardc.trace import core
    from shardc.transforms.ad import eval_ops
    sm = S.mesh()
    h = shardc.shard_map(lambda y: shardc.lax.psum(_scaled_sin(S)(y) * y, "a"), mesh=sm,
                         in_specs=P("a"), out_specs=P())
    progs = []

    def record(x):
        """h's op as a program of its own, as traced (before any pass)"""
        b = core.current_builder()
        start = len(b.program.ops)
        y = h(x)
        p = Program("h")
        p.inputs, p.ops, p.outputs = [x.value], b.program.ops[start:], [y.value]
        progs.append(p)
        raise _Stop     # before the passes (dead-code elimination drops residuals)
    with pytest.raises(_Stop):
        shardc.jit(record).trace(X)
    (prog,) = progs
    xs = jax.device_put(X, NamedSharding(sm, P()))     # the mesh comes with the input
    again = shardc.jit(lambda x: eval_ops(prog, [x])[0])
    ir = again.trace(xs).ir
    assert ir.count("shard_map(") == 1 and ir.count("custom_vjp_call(") == 1
    _close(again(xs), h(X))
    _close(shardc.jit(shardc.grad(lambda x: snp.sum(eval_ops(prog, [x])[0] ** 2)))(xs),
           jax.jit(jax.grad(_in_shard_map(J, J.mesh())))(X))


def _grad_of_grad(m):
    f = _scaled_sin(m)
    inner = m.grad(lambda y: m.np.sum(f(y) * y))
    return m.grad(lambda x: m.np.sum(inner(x) * W) + m.np.sum(f(x * W)))


def test_grad_of_grad_as_jax():
    """The custom rule is the innermost differentiation's; the outer one differentiates
    fwd (its output and its residuals) as ordinary ops, as jax does; a call only the
    outer one differentiates uses the rule."""
    _close(shardc.jit(_grad_of_grad(S))(X), jax.jit(_grad_of_grad(J))(X))
    _close(shardc.jit(_grad_of_grad(S))(W),
           jax.jit(_grad_of_grad(J))(W))


@pytest.mark.parametrize("none_at", ["leaf", "subtree", "whole"])
def test_bwd_returns_none_for_zero_cotangents_of_pytree_parts(none_at):
    """None in bwd's result stands for zeros of a leaf or a whole subtree, as jax's."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    def grads(M):
        @M.custom_vjp
        def f(d, e):
            return d["a"] * d["b"]["c"] * d["b"]["e"] + e

        def bwd(d, g):
            sub = {"c": None, "e": g} if none_at == "leaf" else None
            first = None if none_at == "whole" else {"a": g * d["b"]["c"], "b": sub}
            return first, g
        f.defvjp(lambda d, e: (f(d, e), d), bwd)
        return M.jit(M.grad(lambda a, b, e: f({"a": a, "b": {"c": b, "e": b}}, e).sum(),
                            argnums=(0, 1, 2)))(x, x + 1, x)
    for o, r in zip(grads(shardc), grads(jax), strict=True):
        np.testing.assert_array_equal(np.asarray(o), np.asarray(r))


def test_bwd_cotangent_of_the_wrong_structure_is_a_clear_error():
    @shardc.custom_vjp
    def f(d):
        return d["a"] * d["b"]
    f.defvjp(lambda d: (f(d), d), lambda d, g: ((g, g),))
    with pytest.raises(shardc.errors.ShardcError,
                       match=r"cotangent of argument 0 has the structure .* but the argument"):
        shardc.grad(lambda a: f({"a": a, "b": a}).sum())(np.ones(3, np.float32))
