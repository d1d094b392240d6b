"""shardc.ensure_compile_time_eval (jax's own): inside a trace, ops on constants run at
trace time, so Python can branch on their values; ops on traced values stay traced."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp

X = np.linspace(0.0, 1.0, 6, dtype=np.float32)


def program(np_, random, seen):
    def f(x):
        with shardc.ensure_compile_time_eval():
            y = np_.sin(3.0) * 2                # concrete
            k = random.randint(random.key(0), (4, 4), 0, 100)
            n = (k @ k).sum()
            if y > 0:                           # Python branches on it
                y = y + n
            w = x * 2                           # traced: it reads the argument
        seen.append((type(y), type(w)))
        return x + y + w
    return f


def test_constants_are_concrete_and_match_jax():
    ours, theirs = [], []
    got = shardc.jit(program(snp, shardc.random, ours))(X)
    want = jax.jit(program(jnp, jax.random, theirs))(X)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got.dtype == want.dtype
    (y_t, w_t), = ours
    assert issubclass(y_t, jax.Array) and not issubclass(y_t, jax.core.Tracer)
    assert issubclass(w_t, jax.core.Tracer)


def test_jax_code_inside_shardc_jit():
    def g(x):
        with jax.ensure_compile_time_eval():
            y = jnp.cos(1.0) + 1
            if y > 1:
                y = y * 10
        return x + y
    np.testing.assert_allclose(shardc.jit(g)(X), jax.jit(g)(X), rtol=1e-6)


def test_without_it_a_branch_on_a_traced_value_is_an_error():
    def h(x):
        y = snp.sin(3.0)
        return x + (1 if y > 0 else 2)
    with pytest.raises(Exception, match="(?i)concrete|bool|traced"):
        shardc.jit(h)(X)
    assert shardc.ensure_compile_time_eval is jax.ensure_compile_time_eval


def test_collectives_stay_traced_inside_shard_map(mesh8):
    """axis_index has no operands yet names the shard_map's axis: it is not folded (it
    was, to an internal error). jax 0.10.2 folds it and raises "unbound axis name"."""
    def body(np_, lax_):
        def f(a):
            with jax.ensure_compile_time_eval():
                i = lax_.axis_index("x")
            return a + i
        return f
    x = np.zeros(8, np.float32)
    from jax.sharding import PartitionSpec as P
    ours = shardc.jit(shardc.shard_map(body(snp, shardc.lax), mesh=mesh8, in_specs=P("x"),
                                       out_specs=P("x")))(x)
    np.testing.assert_array_equal(ours, np.arange(8))
    with pytest.raises(NameError, match="unbound axis name"):
        jax.jit(jax.shard_map(body(jnp, jax.lax), mesh=mesh8, in_specs=P("x"),
                              out_specs=P("x")))(x)


def control_flow(m, lax, j, seen):
    def f(x):
        with jax.ensure_compile_time_eval():
            n = lax.fori_loop(0, 5, lambda i, c: c + i, 0)                 # 10
            w = lax.while_loop(lambda c: c[0] < 7, lambda c: (c[0] + 2, c[1] * 1.5),
                               (0, 1.0))
            b = lax.cond(n > 3, lambda v: v * 2.0, lambda v: v - 1.0, 4.0)
            s, ys = lax.scan(lambda c, v: (c + v, c * v), 0.0, m.arange(4.0))
            r = j.checkpoint(lambda v: m.sin(v) * 2)(1.0)
            loop_on_x = lax.fori_loop(0, 2, lambda i, c: c + x, x)        # reads x
            seen.append([type(v) for v in (n, w[0], w[1], b, s, ys, r, loop_on_x)])
            if n > 9 and w[0] == 8:                 # Python reads the loops' results
                n = n + int(w[0])
        return x * n + w[1] + b + s + ys.sum() + r + loop_on_x
    return f


def test_control_flow_on_constants_runs_now():
    # loops, branches, scans and checkpoints on constants ran traced (Python could not
    # read their results); jax runs them at trace time
    ours, theirs = [], []
    got = shardc.jit(control_flow(snp, shardc.lax, shardc, ours))(X)
    want = jax.jit(control_flow(jnp, jax.lax, jax, theirs))(X)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got.dtype == want.dtype
    concrete = [not issubclass(t, jax.core.Tracer) for t in ours[0]]
    assert concrete == [not issubclass(t, jax.core.Tracer) for t in theirs[0]]
    assert concrete == [True] * 7 + [False]
    # jax code inside shardc.jit folds its loops too
    np.testing.assert_allclose(shardc.jit(control_flow(jnp, jax.lax, jax, []))(X), want, rtol=1e-6)


def _jit_closing_over(M, N):
    def f(x):
        with M.ensure_compile_time_eval():
            y = M.jit(lambda: x * 2)() + M.jit(lambda c: c * x)(N.ones(4))
        return y + 1
    return f


def _grad_at_a_constant(M, N):
    def f(x):
        with M.ensure_compile_time_eval():
            return M.grad(lambda a: (a * x).sum())(N.ones(4))
    return f


def _jvp_at_a_constant(M, N):
    def f(x):
        with M.ensure_compile_time_eval():
            return M.jvp(lambda a: a * x, (N.ones(4),), (N.ones(4),))[1]
    return f


CLOSURES = {"jit": _jit_closing_over, "grad": _grad_at_a_constant,
            "jvp": _jvp_at_a_constant}


@pytest.mark.parametrize("name", sorted(CLOSURES))
def test_a_function_of_constants_closing_over_a_traced_value(name):
    """Its arguments are constants, but it reads a traced value: it is traced (a jit
    called with constants ran at trace time and raised 'leaked tracer'; grad at a
    constant primal crashed)."""
    x = np.arange(4, dtype=np.float32)
    got = shardc.jit(CLOSURES[name](shardc, snp))(x)
    np.testing.assert_allclose(got, jax.jit(CLOSURES[name](jax, jnp))(x), rtol=1e-6)


def _scalar_primals(M, N):
    def f(x):
        with M.ensure_compile_time_eval():
            return (M.grad(lambda a: a * a)(3.0) + x,
                    M.grad(lambda a: (a * x).sum())(np.float32(1.0)),
                    M.jvp(lambda a: a * x, (2.0,), (1.0,))[1],
                    M.hessian(lambda a: (a * a * x).sum() * a)(2.0))
    return f


def test_derivatives_at_a_scalar_constant_primal():
    """A scalar primal folded to a literal was no value AD could differentiate: every
    derivative was silently 0 (review)."""
    x = np.arange(4, dtype=np.float32)
    got = shardc.jit(_scalar_primals(shardc, snp))(x)
    want = jax.jit(_scalar_primals(jax, jnp))(x)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-6)


def _side_effects(M, N, log):
    def f(x):
        with M.ensure_compile_time_eval():
            def inner(c):
                log.append("inner")
                return c * x
            def outer(c):     # constants in, but it reads x: traced into f's trace
                log.append("outer")
                return M.jit(inner)(N.sin(c)) + M.jit(lambda: (log.append("none"), x)[1])()
            y = M.jit(outer)(N.ones(4))
            k = M.jit(lambda c: (log.append("now"), c * 2)[1])(N.ones(4))   # runs now
        return y + k
    return f


def test_a_jit_of_constants_closing_over_a_traced_value_runs_its_python_once():
    """Such a jit was first run at trace time, then, on reaching the traced value,
    traced again: what the function did before then happened twice (jax: once)."""
    x = np.arange(4, dtype=np.float32)
    ours, theirs = [], []
    got = shardc.jit(_side_effects(shardc, snp, ours))(x)
    want = jax.jit(_side_effects(jax, jnp, theirs))(x)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert ours == theirs == ["outer", "inner", "none", "now"]


def _constrained(M, mesh, P, NamedSharding):
    def f(x):
        with M.ensure_compile_time_eval():
            def g(c):    # constants in, reads x: traced into f's trace
                y = M.lax.with_sharding_constraint(c * x, NamedSharding(mesh, P("i")))
                z = M.shard_map(lambda b: b * 2, mesh=mesh, in_specs=P("i"),
                                out_specs=P("i"))(y + 1)
                return y + z
            return M.jit(g)(M.numpy.ones(8))
    return f


def test_a_jit_of_constants_closing_over_a_traced_value_keeps_its_mesh():
    """What such a jit traced is replayed into the outer trace: the mesh its constraint
    and shard_map named is that trace's too (it failed to verify: unknown mesh axis)."""
    from jax.sharding import AxisType, NamedSharding, PartitionSpec as P
    mesh = jax.make_mesh((4,), ("i",), axis_types=(AxisType.Auto,))
    x = np.arange(8, dtype=np.float32)
    want = jax.jit(_constrained(jax, mesh, P, NamedSharding))(x)
    got = shardc.jit(_constrained(shardc, mesh, P, NamedSharding))(x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)
    assert got.sharding.is_equivalent_to(want.sharding, 1)
    # (jax's grad of it fails: pvary outside shard_map) f(x) = 3x + 2
    g = shardc.jit(shardc.grad(lambda x: _constrained(shardc, mesh, P, NamedSharding)(x).sum()))
    np.testing.assert_allclose(np.asarray(g(x)), np.full(8, 3.0), rtol=1e-6)
