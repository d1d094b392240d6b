"""Explicit sharding mode (issue 17): types carry shardings, checked against jax side by side."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.errors import ShardingTypeError
from shardc.ir.parse import parse_program, parse_type


@pytest.fixture(scope="module")
def mesh():
    return jax.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Explicit,) * 2)


@pytest.fixture(scope="module")
def mixed():
    return jax.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Explicit, AxisType.Auto))


def put(mesh, x, *spec):
    return jax.device_put(np.asarray(x, np.float32), NamedSharding(mesh, P(*spec)))


def both(fn_pair, *args, mesh=None):
    """(shardc result, jax result) of the same program; the type strings printed while
    tracing each are compared too."""
    seen = {"s": [], "j": []}
    sf, jf = fn_pair(lambda x: seen["s"].append(str(shardc.typeof(x))),
                     lambda x: seen["j"].append(str(jax.typeof(x))))
    with shardc.set_mesh(mesh):
        out = shardc.jit(sf)(*args)
    with jax.set_mesh(mesh):
        ref = jax.jit(jf)(*args)
    assert seen["s"] == seen["j"]
    for a, b in zip(jax.tree_util.tree_leaves(out), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-5)
        assert str(jax.typeof(a)) == str(jax.typeof(b))
        assert a.sharding.is_equivalent_to(b.sharding, a.ndim)
    return seen["s"]


PROGRAMS = {
    "matmul": lambda np_, t: lambda x, w: (t(x @ w), x @ w)[1],
    "tanh_sum1": lambda np_, t: lambda x, w: np_.sum(np_.tanh(x), axis=1),
    "sum0": lambda np_, t: lambda x, w: (t(np_.sum(x, axis=0)), np_.sum(x, axis=0))[1],
    "transpose": lambda np_, t: lambda x, w: (t(x.T), x.T)[1],
    "outer": lambda np_, t: lambda x, w: (t(x[:, :, None] * w[None]),
                                          x[:, :, None] * w[None])[1],
    "split": lambda np_, t: lambda x, w: (t(x.reshape(2, 4, 4)), x.reshape(2, 4, 4))[1],
    "merge": lambda np_, t: lambda x, w: (t(x.reshape(32)), x.reshape(32))[1],
    "concat": lambda np_, t: lambda x, w: np_.concatenate([x, x], 0),
    "softmax_like": lambda np_, t: lambda x, w: np_.exp(x) / np_.sum(np_.exp(x), 1,
                                                                     keepdims=True),
    "zeros": lambda np_, t: lambda x, w: (t(np_.zeros((8, 4))), x + np_.zeros((8, 4)))[1],
    "slice": lambda np_, t: lambda x, w: (t(x[:4]), x[:4])[1],
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_types_match_jax(mesh, name):
    x = put(mesh, np.arange(32).reshape(8, 4) / 10, "X", None)
    w = put(mesh, np.arange(16).reshape(4, 4) / 10, None, "Y")
    prog = PROGRAMS[name]
    both(lambda ts, tj: (prog(snp, ts), prog(jnp, tj)), x, w, mesh=mesh)


def test_typeof_in_jit_and_eager(mesh):
    with shardc.set_mesh(mesh):
        a0 = shardc.reshard(np.arange(4).reshape(4, 1), P("X", None))
        a1 = shardc.reshard(np.arange(8).reshape(1, 8), P(None, "Y"))
        assert str(shardc.typeof(a0)) == "int32[4@X,1]"
        seen = []

        @shardc.jit
        def add(x, y):
            seen.append(str(shardc.typeof(x + y)))
            assert shardc.typeof(x).sharding.spec == P("X", None)
            return x + y
        out = add(a0, a1)
    assert seen == ["int32[4@X,8@Y]"]
    assert str(jax.typeof(out)) == "int32[4@X,8@Y]"
    np.testing.assert_array_equal(out, np.arange(4)[:, None] + np.arange(8)[None])


def test_ir_prints_and_parses_types(mesh):
    x = put(mesh, np.ones((8, 4)), "X", None)
    with shardc.set_mesh(mesh):
        text = shardc.jit(lambda x: snp.sin(x).T).trace(x).traced_ir
    assert "mesh <X=2 explicit, Y=4 explicit>" in text
    assert "f32[4,8@X] = transpose" in text
    assert str(parse_program(text)) == text
    for t in ["f32[8@X,16]", "f32[8@(X,Y),4]", "f32[8,8]{U:X}", "f32[8,8]{U:Y, R:X}", "~f32[]"]:
        assert str(parse_type(t)) == t


def test_ambiguous_contraction_raises_at_user_line(mesh):
    a = put(mesh, np.ones((8, 8)), None, "X")
    b = put(mesh, np.ones((8, 8)), "X", None)
    with shardc.set_mesh(mesh), pytest.raises(ShardingTypeError, match="out_sharding") as e:
        shardc.jit(lambda a, b: a @ b)(a, b)
    assert "test_explicit.py" in str(e.value) and "ambiguous" in str(e.value)
    with jax.set_mesh(mesh), pytest.raises(Exception, match="out_sharding"):
        jax.jit(lambda a, b: a @ b)(a, b)


@pytest.mark.parametrize("spec", [P("X", None), P(None, "Y"), P(None, None, unreduced={"X"})])
def test_out_sharding_on_dot(mesh, spec):
    a = put(mesh, np.arange(64).reshape(8, 8) / 64, None, "X")
    b = put(mesh, np.arange(64).reshape(8, 8) / 64, "X", None)
    both(lambda ts, tj: (
        lambda a, b: (ts(snp.dot(a, b, out_sharding=spec)),
                      shardc.reshard(snp.dot(a, b, out_sharding=spec), P()))[1],
        lambda a, b: (tj(jnp.dot(a, b, out_sharding=spec)),
                      jax.sharding.reshard(jnp.dot(a, b, out_sharding=spec), P()))[1]),
        a, b, mesh=mesh)


def test_unreduced_lowers_to_partial_sum_then_psum(mesh):
    a = put(mesh, np.arange(64).reshape(8, 8), None, "X")
    b = put(mesh, np.arange(64).reshape(8, 8), "X", None)

    def f(a, b):
        c = snp.dot(a, b, out_sharding=P(None, None, unreduced={"X"}))
        return shardc.reshard(c, P()), shardc.reshard(c, P("X"))
    with shardc.set_mesh(mesh):
        text = shardc.jit(f).lower(a, b).as_text()
        d, e = shardc.jit(f)(a, b)
    assert 'unreduced={"X"}' in text
    ref = np.arange(64.).reshape(8, 8) @ np.arange(64.).reshape(8, 8)
    np.testing.assert_allclose(d, ref)
    np.testing.assert_allclose(e, ref)
    assert str(jax.typeof(e)) == "float32[8@X,8]"


def test_grad_cotangent_takes_primal_type(mesh):
    x = put(mesh, np.arange(32).reshape(8, 4) / 10, "X", None)
    w = put(mesh, np.arange(16).reshape(4, 4) / 10, None, "Y")
    both(lambda ts, tj: (shardc.grad(lambda w, x: snp.sum(snp.tanh(x @ w) ** 2)),
                         jax.grad(lambda w, x: jnp.sum(jnp.tanh(x @ w) ** 2))), w, x, mesh=mesh)


def test_reduced_param_gradient_is_reduce_scattered(mesh):
    w = put(mesh, np.arange(64).reshape(8, 8) / 64, "X", None)
    x = put(mesh, np.arange(64).reshape(8, 8) / 64, "X", None)

    def pair(ts, tj):
        def s(w, x):
            wr = shardc.reshard(w, P(None, None, reduced={"X"}))
            ts(wr)
            return snp.sum(snp.sin(x @ wr))

        def j(w, x):
            wr = jax.sharding.reshard(w, P(None, None, reduced={"X"}))
            tj(wr)
            return jnp.sum(jnp.sin(x @ wr))
        return shardc.grad(s), jax.grad(j)
    assert both(pair, w, x, mesh=mesh) == ["float32[8,8]{R:X}"]
    with shardc.set_mesh(mesh):
        text = shardc.jit(pair(lambda _: 0, None)[0]).lower(w, x).as_text()
    # the partial-sum cotangent goes straight to w's sharding: no replicated all-reduce
    cons = [ln for ln in text.splitlines() if "sdy.sharding_constraint" in ln]
    at = [i for i, ln in enumerate(cons) if 'unreduced={"X"}' in ln]
    assert at and '<@mesh, [{"X"}, {}]>' in cons[at[-1] + 1], "\n".join(cons)


def test_scan_carry_sharding_must_match(mesh):
    c0 = put(mesh, np.zeros((8, 4)), "X", None)

    def body(c, x):
        return shardc.reshard(c + x, P(None, "Y")), None
    with shardc.set_mesh(mesh), pytest.raises(TypeError, match="shardings do not match"):
        shardc.jit(lambda c, xs: shardc.lax.scan(body, c, xs))(c0, np.ones((3, 8, 4)))


def test_scan_and_cond_keep_types(mesh):
    c0 = put(mesh, np.zeros((4, 4)), "X", "Y")
    xs = put(mesh, np.arange(64).reshape(4, 4, 4), None, "X", "Y")

    def pair(ts, tj):
        def mk(np_, lax, t):
            def f(c, xs):
                def body(c, x):
                    c = c + np_.sin(x)
                    t(c)
                    return c, c * 2
                c, ys = lax.scan(body, c, xs)
                t(ys)
                return lax.cond(True, np_.sin, np_.cos, c), ys
            return f
        return mk(snp, shardc.lax, ts), mk(jnp, jax.lax, tj)
    assert both(pair, c0, xs, mesh=mesh) == ["float32[4@X,4@Y]", "float32[4,4@X,4@Y]"]


def test_sort_of_sharded_dim_is_a_type_error(mesh):
    x = put(mesh, np.ones((8, 4)), "X", None)
    with shardc.set_mesh(mesh), pytest.raises(ShardingTypeError, match="unsharded"):
        shardc.jit(lambda x: snp.sort(x, axis=0))(x)
    with shardc.set_mesh(mesh):
        np.testing.assert_allclose(shardc.jit(lambda x: snp.sort(x, axis=1))(x), np.ones((8, 4)))


def test_mixed_mesh_auto_axis_propagates(mixed):
    x = put(mixed, np.arange(32).reshape(8, 4), "X", None)
    w = put(mixed, np.arange(16).reshape(4, 4), None, "Y")
    seen = []

    def f(x, w):
        h = snp.tanh(x @ w)
        seen.append(str(shardc.typeof(h)))
        return snp.sum(h, axis=1)
    text = shardc.jit(f).trace(x, w).propagate().explain()
    assert seen == ["float32[8@X,4]"]               # Y is Auto: not in the type
    assert "[{X}, {Y}] = dot_general" in text        # ... but propagation still uses it
    assert "from the type f32[8@X,4]" in text
    out = shardc.jit(f)(x, w)
    np.testing.assert_allclose(out, np.tanh(np.arange(32.).reshape(8, 4) @
                                            np.arange(16.).reshape(4, 4)).sum(1), rtol=1e-5)


def test_auto_axes_and_explicit_axes(mesh):
    from shardc.api.explicit import auto_axes, explicit_axes
    x = put(mesh, np.arange(16).reshape(4, 4), "X", None)
    y = put(mesh, np.arange(16).reshape(4, 4), None, "X")
    with shardc.set_mesh(mesh):
        with pytest.raises(ShardingTypeError):
            shardc.jit(lambda a, b: a + b)(x, y)
        add = auto_axes(lambda a, b: a + b, out_sharding=P("X", None))
        seen = []

        @shardc.jit
        def f(a, b):
            r = add(a, b)
            seen.append(str(shardc.typeof(r)))
            return r
        out = f(x, y)
    assert seen == ["float32[4@X,4]"]
    np.testing.assert_allclose(out, 2 * np.arange(16.).reshape(4, 4))
    auto_mesh = jax.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)
    got = []

    @explicit_axes(axes=("X", "Y"), in_sharding=P("X", "Y"))
    def g(a):
        z = a * 2
        got.append(str(shardc.typeof(z)))
        return z
    with shardc.set_mesh(auto_mesh):
        z = jax.device_put(np.arange(16.).reshape(4, 4), NamedSharding(auto_mesh, P()))
        out = shardc.jit(lambda a: g(snp.sin(a)) + 1)(z)
    assert got == ["float32[4@X,4@Y]"]
    np.testing.assert_allclose(out, 2 * np.sin(np.arange(16.).reshape(4, 4)) + 1, rtol=1e-6)


OUT_SHARDING_OPS = {
    "reduce_sum_unreduced": (
        lambda L, R, np_: lambda a: R(L.reduce_sum(a, (0,), out_sharding=P(None, unreduced={"X"})),
                                      P())),
    "broadcasted_iota": (lambda L, R, np_: lambda a: a + L.broadcasted_iota(
        np.float32, (8, 4), 0, out_sharding=P("X", "Y"))),
    "ravel": (lambda L, R, np_: lambda a: np_.ravel(a, out_sharding=P("X"))),
    "repeat": (lambda L, R, np_: lambda a: np_.repeat(a, 2, axis=1, out_sharding=P("X", "Y"))),
    "broadcast_to": (lambda L, R, np_: lambda a: np_.broadcast_to(
        a, (2, 8, 4), out_sharding=P(None, "X", "Y"))),
    "reshape": (lambda L, R, np_: lambda a: np_.reshape(a, (4, 8), out_sharding=P("X", "Y"))),
    "tensordot": (lambda L, R, np_: lambda a: np_.tensordot(a, a, ((0,), (0,)),
                                                            out_sharding=P("X", None))),
}


@pytest.mark.parametrize("name", sorted(OUT_SHARDING_OPS))
def test_out_sharding_ops(mesh, name):
    x = put(mesh, np.arange(32).reshape(8, 4), "X", "Y")
    mk = OUT_SHARDING_OPS[name]
    with shardc.set_mesh(mesh):
        r = shardc.jit(mk(shardc.lax, shardc.reshard, snp))(x)
    with jax.set_mesh(mesh):
        j = jax.jit(mk(jax.lax, jax.sharding.reshard, jnp))(x)
    np.testing.assert_allclose(r, j)
    assert str(jax.typeof(r)) == str(jax.typeof(j))


def test_shard_map_inside_explicit_types(mesh):
    """Inside shard_map the axes are Manual and types show what varies ({V:...}); its
    results are typed by out_specs -- each typeof and its abstract mesh as jax's."""
    x = put(mesh, np.arange(32).reshape(8, 4), "X", "Y")

    def mk(lib, sm, t):
        def f(x):
            def body(b):
                t(b)
                c = lib.lax.psum(b, "Y")
                t(c)
                return c * 2
            y = sm(body, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", None))(x)
            t(y)
            return lib.numpy.sin(y)
        return f
    s, j = [], []
    with shardc.set_mesh(mesh):
        r = shardc.jit(mk(shardc, shardc.shard_map, lambda v: s.append(
            (str(shardc.typeof(v)), str(shardc.typeof(v).sharding.mesh)))))(x)
    with jax.set_mesh(mesh):
        jr = jax.jit(mk(jax, jax.shard_map, lambda v: j.append(
            (str(jax.typeof(v)), str(jax.typeof(v).sharding.mesh)))))(x)
    assert s == j and s[0][0] == "float32[4,1]{V:(X,Y)}"
    np.testing.assert_allclose(r, jr, rtol=1e-6)
    assert str(jax.typeof(r)) == str(jax.typeof(jr))


def test_eager_ops_are_typed_and_checked(mesh):
    """Outside jit, each op is typed as in jit; an op run with out_sharding= first does
    not let the same op without it skip its check (the eager caches know the mode)."""
    with shardc.set_mesh(mesh):
        x = shardc.reshard(np.arange(16.).reshape(4, 4), P("X", None))
        y = shardc.reshard(np.arange(16.).reshape(4, 4), P(None, "X"))
        assert str(shardc.typeof(snp.sin(x))) == "float32[4@X,4]"
        assert str(shardc.typeof(snp.sum(x, 0))) == "float32[4]"
        r = snp.matmul(y, x, out_sharding=P("X"))
        assert str(shardc.typeof(r)) == "float32[4@X,4]"
        ref = np.arange(16.).reshape(4, 4) @ np.arange(16.).reshape(4, 4)
        np.testing.assert_allclose(r, ref)
        with pytest.raises(ShardingTypeError, match="ambiguous"):
            snp.matmul(y, x)
        with pytest.raises(ShardingTypeError, match="more than one dimension"):
            snp.add(x, y)


def test_partial_sums_through_add_and_a_constant(mesh):
    """Partial sums stay partial through a sum of two of them; adding a constant to them
    is a type error, as in jax (it would need an implicit reduction)."""
    a = put(mesh, np.arange(64).reshape(8, 8) / 8, None, "X")
    b = put(mesh, np.arange(64).reshape(8, 8) / 8, "X", None)
    seen = []

    def f(a, b, const=False):
        u = P(None, None, unreduced={"X"})
        c = snp.dot(a, b, out_sharding=u)
        if const:
            return c + 1.0
        d = c + snp.dot(a, b, out_sharding=u)
        seen.append(str(shardc.typeof(d)))
        return shardc.reshard(d, P())
    with shardc.set_mesh(mesh):
        d = shardc.jit(f)(a, b)
        with pytest.raises(ShardingTypeError, match="unreduced over mesh axes {'X'}"):
            shardc.jit(lambda a, b: f(a, b, True))(a, b)
    assert seen == ["float32[8,8]{U:X}"]
    ref = (np.arange(64.).reshape(8, 8) / 8) @ (np.arange(64.).reshape(8, 8) / 8)
    np.testing.assert_allclose(d, 2 * ref, rtol=1e-6)
