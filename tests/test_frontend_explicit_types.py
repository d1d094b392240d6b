"""jax code under shardc.jit on meshes with Explicit axes: a jax op's replicated
out_sharding (P()) is its result's type, as jax's -- once dropped, so the result kept
its operands' sharding and jax's own gradients (whose _unbroadcast reshapes a summed
cotangent to the primal's replicated type) failed their cotangent type check. On a mesh
that also has Auto axes, the Auto axes stay free. Values, output shardings and
typeof against jax.jit."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

import shardc

E = AxisType.Explicit
R = np.random.default_rng(3)
X = R.normal(size=(16, 64)).astype(np.float32)
W = R.normal(size=(64, 32)).astype(np.float32)
B = R.normal(size=(64,)).astype(np.float32)

CASES = {
    "dot": (lambda x, w, b: jnp.dot(x, w, out_sharding=P())),
    "einsum": (lambda x, w, b: jnp.einsum("ij,jk->ik", x, w, out_sharding=P())),
    "broadcast_in_dim": (lambda x, w, b: jax.lax.broadcast_in_dim(b, (16, 64), (1,),
                                                                  out_sharding=P())),
    "reduce_sum": (lambda x, w, b: jax.lax.reduce_sum(x, (1,), out_sharding=P())),
    "reshape": (lambda x, w, b: jax.lax.reshape(x, (1024,), out_sharding=P())),
    "top_k_of_dot": (lambda x, w, b: jax.lax.top_k(jnp.dot(x, w, out_sharding=P()), 3)[0]),
    "grad_bias_add": (lambda x, w, b: jax.grad(lambda b: (x + b).sum())(b)),
    "grad_bias_mul_where": (lambda x, w, b: jax.grad(
        lambda b: jnp.where(x > 0, x * b, jax.nn.relu(x - b)).sum())(b)),
    "grad_layernorm": (lambda x, w, b: jax.grad(lambda g: (jax.nn.standardize(x) * g
                                                            + b).sum())(b)),
    "grad_column_scale": (lambda x, w, b: jax.grad(lambda c: (x * c[:, None]).sum())(
        x.sum(1))),
}


@pytest.fixture(scope="module", params=[(E, E), (E, AxisType.Auto)], ids=["explicit", "mixed"])
def mesh(request):
    return jax.make_mesh((2, 4), ("data", "model"), axis_types=request.param)


@pytest.mark.parametrize("name", sorted(CASES))
def test_replicated_out_sharding_is_the_type(mesh, name):
    explicit_model = mesh.axis_types[1] == E
    xs = P("data", "model") if explicit_model else P("data", None)
    args = [jax.device_put(X, NamedSharding(mesh, xs)), jax.device_put(W, NamedSharding(
        mesh, P(None, "model" if explicit_model else None))),
        jax.device_put(B, NamedSharding(mesh, P("model" if explicit_model else None)))]
    types = {}
    outs = []
    for jit in (jax.jit, shardc.jit):
        def f(*a, _jit=jit):
            out = CASES[name](*a)
            types[_jit] = str(jax.typeof(out) if _jit is jax.jit else shardc.typeof(out))
            return out
        with jax.set_mesh(mesh):
            outs.append(jit(f)(*args))
    want, got = outs
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-5)
    assert got.sharding.is_equivalent_to(want.sharding, want.ndim), \
        (got.sharding.spec, want.sharding.spec)
    assert types[shardc.jit] == types[jax.jit]


CLOSED = {
    "matmul": lambda M, w, t: lambda x: x @ w,
    "scale": lambda M, w, t: lambda x: (w * 2, M.numpy.sin(w) + x.sum()),
    "gather_out_sharding": lambda M, w, t: lambda x: t.at[M.numpy.arange(8)].get(
        out_sharding=P()),
    "returned": lambda M, w, t: lambda x: (w, x),
}


@pytest.mark.parametrize("name", sorted(CLOSED))
def test_closed_over_arrays_keep_their_types(mesh, name):
    """A closed-over sharded jax.Array is typed as the array is, as jax types a
    constant (was replicated, so results and their shardings differed)."""
    model = "model" if mesh.axis_types[1] == E else None
    x = jax.device_put(X, NamedSharding(mesh, P("data")))
    w = jax.device_put(W, NamedSharding(mesh, P(None, model)))
    t = jax.device_put(X, NamedSharding(mesh, P("data", None)))
    types, outs = {}, []
    for M, jit in ((jax, jax.jit), (shardc, shardc.jit)):
        def f(x, _M=M):
            out = CLOSED[name](_M, w, t)(x)
            types[_M] = [str(_M.typeof(o)) for o in jax.tree_util.tree_leaves(out)]
            return out
        with jax.set_mesh(mesh):
            outs.append(jit(f)(x))
    for g, r in zip(jax.tree_util.tree_leaves(outs[1]), jax.tree_util.tree_leaves(outs[0]),
                    strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=2e-5, atol=2e-5)
        assert g.sharding.is_equivalent_to(r.sharding, r.ndim), (g.sharding.spec,
                                                                 r.sharding.spec)
    assert types[shardc] == types[jax]
