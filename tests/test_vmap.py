# ruff: noqa: E501  (the table of op families reads best one entry per line)
"""shardc.vmap against jax.vmap: values, dtypes, weak types, and (under jit on a mesh)
output shardings; every op family's batching rule, collectives over the vmapped axis,
control flow, shard_map, custom_vjp, per-example gradients, spmd_axis_name, errors."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.ir.primitive import PRIMITIVES
from tests.helpers import check_outputs

RNG = np.random.RandomState(0)
X = RNG.randn(4, 3, 6).astype(np.float32)
Y = RNG.randn(6, 5).astype(np.float32)
V = RNG.randn(4, 6).astype(np.float32)
I = np.array([[0, 2], [1, 1], [2, 0], [1, 2]], np.int32)


def _ns(ours):
    if ours:
        return snp, shardc.lax, shardc.nn, shardc
    return jnp, jax.lax, jax.nn, jax


def _check(fn, args, in_axes=0, out_axes=0, jit=False, **kw):
    ours = shardc.vmap(fn(*_ns(True)), in_axes=in_axes, out_axes=out_axes, **kw)
    ref = jax.vmap(fn(*_ns(False)), in_axes=in_axes, out_axes=out_axes, **kw)
    if jit:
        ours, ref = shardc.jit(ours), jax.jit(ref)
    check_outputs(ours(*args), _arrays(ref(*args)), check_sharding=False, what="jax.vmap")


def _arrays(tree):
    """jax.vmap returns a NumPy input it only moves as it is; shardc, a jax.Array."""
    return jax.tree.map(lambda v: jnp.asarray(v) if isinstance(v, np.ndarray) else v, tree)


# one function per op family (each batching rule with batched and unbatched operands)
FAMILIES = {  # noqa: E501
    "elementwise": (lambda m, lax, nn, j: lambda x, y: m.tanh(x) * 2 + m.maximum(x, 0.5),
                    (X, X), (0, None)),
    "scalar_bcast": (lambda m, lax, nn, j: lambda x, s: x * s + s, (X, np.arange(4.0, dtype=np.float32)), (0, 0)),
    "compare_select": (lambda m, lax, nn, j: lambda x, y: m.where(x > y, x, -y), (X, X[0]), (0, None)),
    "convert_pow": (lambda m, lax, nn, j: lambda x: (x.astype(m.int32) ** 2, x ** 3), (X,), 0),
    "reduce": (lambda m, lax, nn, j: lambda x: (x.sum(1), m.max(x, 0), m.argmax(x, 1),
                                                m.cumsum(x, 0), m.prod(x, axis=(0, 1))), (X,), 1),
    "shape": (lambda m, lax, nn, j: lambda x: (x.T, x.reshape(18), x[1:, ::2], m.flip(x, 1),
                                               m.concatenate([x, x], 1), m.pad(x, ((1, 0), (0, 2))),
                                               m.broadcast_to(x[:, None], (3, 2, 6))), (X,), 0),
    "concat_mixed": (lambda m, lax, nn, j: lambda x, y: m.concatenate([x, y], 0), (X, X[0]), (0, None)),
    "dot_both": (lambda m, lax, nn, j: lambda x, y: x @ y, (X, np.stack([Y] * 4)), 0),
    "dot_lhs": (lambda m, lax, nn, j: lambda x, y: x @ y, (X, Y), (0, None)),
    "dot_rhs": (lambda m, lax, nn, j: lambda y, x: x @ y, (np.stack([Y] * 4), X[0]), (0, None)),
    "einsum": (lambda m, lax, nn, j: lambda x, y: m.einsum("ij,jk->ki", x, y), (X, Y[:3]), (2, None)),
    "gather_idx": (lambda m, lax, nn, j: lambda i, x: m.asarray(x)[i], (I, X[0]), (0, None)),
    "gather_both": (lambda m, lax, nn, j: lambda x, i: x[i], (X, I), 0),
    "gather_op": (lambda m, lax, nn, j: lambda x: x[np.array([2, 0])], (X,), 0),
    "scatter": (lambda m, lax, nn, j: lambda x, i: x.at[i].add(1.0), (X, I), 0),
    "scatter_upd": (lambda m, lax, nn, j: lambda u, x: m.asarray(x).at[np.array([0, 2])].add(u),
                    (X[:, :2], X[0]), (0, None)),
    "nn": (lambda m, lax, nn, j: lambda x: (nn.softmax(x), nn.gelu(x), nn.logsumexp(x, -1)), (X,), 0),
}


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family(name):
    fn, args, in_axes = FAMILIES[name]
    _check(fn, args, in_axes)


def test_in_and_out_axes_pytrees_and_kwargs():
    fn = lambda m, lax, nn, j: lambda d, y, *, z: {"a": d["p"] * y, "b": (d["q"].sum(), z)}  # noqa
    args = ({"p": X.transpose(1, 0, 2), "q": V}, X[0])
    ours = shardc.vmap(fn(*_ns(True)), in_axes=({"p": 1, "q": 0}, None), out_axes={"a": 2, "b": 0})
    ref = jax.vmap(fn(*_ns(False)), in_axes=({"p": 1, "q": 0}, None), out_axes={"a": 2, "b": 0})
    z = np.arange(4, dtype=np.float32)      # keyword arguments are mapped over axis 0
    check_outputs(ours(*args, z=z), _arrays(ref(*args, z=z)))


def test_unbatched_output_is_broadcast_and_axis_size():
    _check(lambda m, lax, nn, j: lambda x: (x * 0 + 1, m.ones(2)), (V,), 0)
    ours = shardc.vmap(lambda: snp.arange(3), in_axes=(), axis_size=5)()
    ref = jax.vmap(lambda: jnp.arange(3), in_axes=(), axis_size=5)()
    check_outputs(ours, jnp.asarray(ref))


def test_collectives_over_the_vmapped_axis():
    for fn in [lambda m, lax, nn, j: lambda a: a - lax.pmean(a, "b"),
               lambda m, lax, nn, j: lambda a: lax.pmax(a, "b") + lax.psum(1, "b"),
               lambda m, lax, nn, j: lambda a: lax.all_gather(a, "b"),
               lambda m, lax, nn, j: lambda a: lax.all_gather(a, "b", axis=1, tiled=True),
               lambda m, lax, nn, j: lambda a: lax.psum_scatter(a, "b", scatter_dimension=1,
                                                                tiled=True),
               lambda m, lax, nn, j: lambda a: lax.all_to_all(a, "b", 1, 0, tiled=True),
               lambda m, lax, nn, j: lambda a: lax.ppermute(a, "b", [(0, 1), (1, 2), (2, 3),
                                                                     (3, 0)]),
               lambda m, lax, nn, j: lambda a: a * lax.axis_index("b")]:
        _check(fn, (RNG.randn(4, 3, 8).astype(np.float32),), axis_name="b")


def test_nested_vmaps_with_named_axes():
    fn = lambda m, lax, nn, j: j.vmap(lambda v: v - lax.pmean(v, "i") + lax.psum(v, "j"),  # noqa
                                      axis_name="j")
    _check(fn, (X,), axis_name="i")


def test_control_flow():
    def g(m, lax, nn, j):
        def body(c, xx):
            c = c * 0.5 + xx.sum()
            return c, c * 2

        def h(a):
            c, ys = lax.scan(body, 0.0, a)
            d = lax.cond(c > 0, lambda v: v + 1, lambda v: v - 1, ys)
            e = lax.while_loop(lambda s: s[0] < a[0, 0] * 10 + 20,
                               lambda s: (s[0] + 1.0, s[1] * 1.01), (0.0, c))
            k = lax.switch(lax.convert_element_type(a[0, 0] > 0, np.int32),
                           [lambda v: v * 2, lambda v: v + 3], a)
            f = lax.fori_loop(0, 3, lambda i, v: v + i, a)
            return d, e, k, f
        return h
    _check(g, (X,))
    _check(g, (X,), jit=True)


def test_scan_with_unbatched_xs_and_batched_carry():
    def g(m, lax, nn, j):
        return lambda c: lax.scan(lambda c, x: (c + x, c * x), c, Y)
    _check(g, (RNG.randn(4, 5).astype(np.float32),))


def test_per_example_gradients():
    loss = lambda m: lambda w, a: m.sum(m.tanh(a @ w) ** 2)  # noqa: E731
    got = shardc.vmap(shardc.grad(loss(snp)), in_axes=(None, 0))(Y, X)
    want = jax.vmap(jax.grad(loss(jnp)), in_axes=(None, 0))(Y, X)
    check_outputs(got, want)
    got = shardc.grad(lambda w, a: shardc.vmap(loss(snp), in_axes=(None, 0))(w, a).sum())(Y, X)
    want = jax.grad(lambda w, a: jax.vmap(loss(jnp), in_axes=(None, 0))(w, a).sum())(Y, X)
    check_outputs(got, want)


def test_vjp_and_jvp_under_vmap():
    basis = np.eye(6, dtype=np.float32)[:, None, None, :].repeat(4, 1).repeat(3, 2)
    got = shardc.vmap(lambda c: shardc.vjp(snp.sin, X)[1](c)[0])(basis)
    want = jax.vmap(lambda c: jax.vjp(jnp.sin, X)[1](c)[0])(basis)
    check_outputs(got, want)
    got = shardc.vmap(lambda t: shardc.jvp(snp.sin, (X,), (t,))[1])(basis)
    want = jax.vmap(lambda t: jax.jvp(jnp.sin, (X,), (t,))[1])(basis)
    check_outputs(got, want)


def _custom(cv, m):
    @cv
    def f(x, y):
        return m.sin(x) * y

    def fwd(x, y):
        return f(x, y), (m.cos(x), y)

    def bwd(res, g):
        c, y = res
        return (c * y * g * 2.0, m.sin(y) * g)
    f.defvjp(fwd, bwd)
    return f


def test_custom_vjp_under_vmap_and_grad():
    fs, fj = _custom(shardc.custom_vjp, snp), _custom(jax.custom_vjp, jnp)
    got = shardc.vmap(shardc.grad(lambda a, b: fs(a, b).sum(), argnums=(0, 1)),
                      in_axes=(0, None))(V, Y[:, 0])
    want = jax.vmap(jax.grad(lambda a, b: fj(a, b).sum(), argnums=(0, 1)),
                    in_axes=(0, None))(V, Y[:, 0])
    check_outputs(got, want)
    got = shardc.grad(lambda a, b: shardc.vmap(fs, in_axes=(0, None))(a, b).sum(),
                      argnums=(0, 1))(V, Y[:, 0])
    want = jax.grad(lambda a, b: jax.vmap(fj, in_axes=(0, None))(a, b).sum(),
                    argnums=(0, 1))(V, Y[:, 0])
    check_outputs(got, want)


def test_checkpoint_under_vmap_and_grad():
    got = shardc.grad(lambda a: shardc.vmap(shardc.checkpoint(
        lambda v: snp.sin(snp.sin(v)).sum()))(a).sum())(X)
    want = jax.grad(lambda a: jax.vmap(jax.checkpoint(
        lambda v: jnp.sin(jnp.sin(v)).sum()))(a).sum())(X)
    check_outputs(got, want)


@pytest.fixture(scope="module")
def mesh():
    return Mesh(np.array(jax.devices()[:8]).reshape(2, 4), ("x", "y"))


@pytest.mark.parametrize("spmd", [None, "x"])
def test_shard_map_inside_vmap(mesh, spmd):
    x = RNG.randn(4, 8, 16).astype(np.float32)

    def f(sm, lax):
        body = lambda a: lax.psum(a.sum(0, keepdims=True), "y") * a  # noqa: E731
        return lambda a: sm(body, mesh=mesh, in_specs=P(None, "y"), out_specs=P(None, "y"))(a)
    got = shardc.jit(shardc.vmap(f(shardc.shard_map, shardc.lax), spmd_axis_name=spmd))(x)
    want = jax.jit(jax.vmap(f(jax.shard_map, jax.lax), spmd_axis_name=spmd))(x)
    check_outputs(got, want, mesh)


@pytest.mark.parametrize("in_spec", [P(), P("x")])
def test_spmd_axis_name_shards_constraints(mesh, in_spec):
    # without spmd_axis_name the mapped dim is left to propagation, as jax's: a batch
    # dim sharded on entry stays sharded (shardc pinned it replicated, a gather)
    x = jax.device_put(RNG.randn(4, 8, 16).astype(np.float32), NamedSharding(mesh, in_spec))

    def g(m, wsc):
        return lambda a: wsc(m.sin(a), NamedSharding(mesh, P(None, "y")))
    for spmd in (None, "x"):
        got = shardc.jit(shardc.vmap(g(snp, shardc.lax.with_sharding_constraint),
                                     spmd_axis_name=spmd))(x)
        want = jax.jit(jax.vmap(g(jnp, jax.lax.with_sharding_constraint),
                                spmd_axis_name=spmd))(x)
        check_outputs(got, want, mesh)


@pytest.mark.parametrize("spec", [P("x"), P(None, "y"), P("x", "y")])
def test_output_shardings_follow_the_inputs(mesh, spec):
    x = jax.device_put(RNG.randn(8, 4, 16).astype(np.float32), NamedSharding(mesh, spec))
    fn = lambda m: lambda a: m.sin(a) @ m.ones((16, 4), a.dtype)  # noqa: E731
    got = shardc.jit(shardc.vmap(fn(snp)))(x)
    want = jax.jit(jax.vmap(fn(jnp)))(x)
    check_outputs(got, want, mesh)


def test_errors_name_the_user_line():
    with pytest.raises(shardc.ShardcError, match="inconsistent sizes"):
        shardc.vmap(lambda a, b: a + b)(X, Y)
    with pytest.raises(shardc.ShardcError, match="out_axes is None"):
        shardc.vmap(lambda a: a, out_axes=None)(X)
    with pytest.raises(shardc.ShardcError, match="tree prefix"):
        shardc.vmap(lambda a: a, in_axes=({"p": 0},))(X)
    with pytest.raises(shardc.ShardcError, match="at least one non-None"):
        shardc.vmap(lambda a: a, in_axes=None)(X)
    with pytest.raises(shardc.ShardcError, match="rank should be at least") as e:
        shardc.vmap(lambda a: a, in_axes=3)(X)
    assert "test_vmap.py" in str(e.value)
    # jax's ValueErrors, so `except ValueError` catches them as with jax
    for bad in (lambda: shardc.vmap(lambda a, b: a + b)(X, Y),
                lambda: shardc.vmap(lambda a: a, out_axes=None)(X),
                lambda: shardc.vmap(lambda a: a, in_axes=({"p": 0},))(X),
                lambda: shardc.vmap(lambda a: a, in_axes=None)(X),
                lambda: shardc.vmap(lambda a: a, in_axes=3)(X),
                lambda: shardc.vmap(lambda a: a, in_axes=(0, 0))(X)):
        with pytest.raises(ValueError):
            bad()


def test_every_primitive_has_a_batching_rule():
    assert [n for n, p in PRIMITIVES.items() if not callable(p.batch)] == []


GRAD_OVER_NAMED_AXIS = {
    # a vmap's named axis has no variance: psum transposes to psum there, as jax's vmap
    # and pmap (shardc transposed it as in a checked shard_map: 12, not jax's 48)
    "psum": lambda L: lambda u: L.psum(u, "i") ** 2,
    "pmean": lambda L: lambda u: L.pmean(u, "i") * u,
    "psum_pytree": lambda L: lambda u: (L.psum((u, 2 * u), "i")[1] * u).sum(),
    "all_gather": lambda L: lambda u: (L.all_gather(u, "i") ** 2).sum(),
}


@pytest.mark.parametrize("name", sorted(GRAD_OVER_NAMED_AXIS))
@pytest.mark.parametrize("how", ["grad", "vjp", "jit_grad"])
def test_grad_through_collectives_of_a_named_vmap(name, how):
    x = np.arange(4, dtype=np.float32) + 1

    def run(S, L):
        f = GRAD_OVER_NAMED_AXIS[name](L)
        if how == "vjp":
            g = lambda u: S.vjp(f, u)[1](np.float32(1.0))[0]     # noqa: E731
        else:
            g = S.grad(f)
        out = S.vmap(g, axis_name="i")
        return (S.jit(out) if how == "jit_grad" else out)(x)
    np.testing.assert_allclose(np.asarray(run(shardc, shardc.lax)),
                               np.asarray(run(jax, jax.lax)), rtol=1e-6)


def test_unmapped_python_scalars_pass_through():
    """jax.vmap passes an in_axes=None Python scalar to the function as it is, so shapes
    and counts can come from it (random.split(k, 2), jnp.ones(n), reshape(n, -1)); shardc
    traced it and int() of it raised. Eagerly and under jit; weak types kept."""
    def f(m, lax, nn, j):
        return lambda r, n, s: (r.sum() * m.ones(n) * s, r.reshape(n, -1),
                                j.random.key_data(j.random.split(j.random.key(1), n)))
    _check(f, (V, 2, 2.5), in_axes=(0, None, None))
    ours = shardc.jit(lambda v: shardc.vmap(f(*_ns(True)), (0, None, None))(v, 2, 2.5))
    ref = jax.jit(lambda v: jax.vmap(f(*_ns(False)), (0, None, None))(v, 2, 2.5))
    check_outputs(ours(V), ref(V), check_sharding=False, what="jax.vmap under jit")
