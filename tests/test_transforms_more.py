"""eval_shape, ShapeDtypeStruct, linearize, jacfwd, jacrev, hessian against jax's: values,
dtypes, weak types, pytrees, has_aux, argnums, nesting, jit, sharded inputs, errors."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.api import jacobian
from helpers import check_outputs


class S:
    jacfwd, jacrev, hessian = shardc.jacfwd, shardc.jacrev, shardc.hessian
    linearize, eval_shape, jit, np = shardc.linearize, shardc.eval_shape, shardc.jit, snp


class J:
    jacfwd, jacrev, hessian = jax.jacfwd, jax.jacrev, jax.hessian
    linearize, eval_shape, jit, np = jax.linearize, jax.eval_shape, jax.jit, jnp


def both(run, *args, mesh=None):
    got, want = run(S, *args), run(J, *args)
    # (jax hands an aux that is a NumPy input through as it is)
    want = jax.tree_util.tree_map(lambda a: jnp.asarray(a) if isinstance(a, np.ndarray) else a,
                                  want)
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(want)
    check_outputs(got, want, mesh)
    return got


@pytest.fixture(params=["vmap", "loop"])
def both_mappings(request, monkeypatch):
    """The Jacobians by shardc.vmap, and by the Python loop over the basis."""
    if request.param == "loop":
        monkeypatch.setattr(jacobian, "_USE_VMAP", False)
    elif jacobian._vmap() is None:
        pytest.skip("shardc.vmap is not there yet")
    return request.param


@pytest.fixture
def mapping():
    """By shardc.vmap where it exists (the loop is slower and checked above)."""
    return "vmap" if jacobian._vmap() is not None else "loop"


X3 = np.array([1., 2., 3.], np.float32)


def docs_f(m):
    return lambda x: m.np.asarray([x[0], 5 * x[2], 4 * x[1] ** 2 - 2 * x[2],
                                   x[2] * m.np.sin(x[0])])


@pytest.mark.parametrize("jac", ["jacfwd", "jacrev"])
def test_jacobian_docs_example(jac, both_mappings):
    both(lambda m: getattr(m, jac)(docs_f(m))(X3))


@pytest.mark.parametrize("jac", ["jacfwd", "jacrev"])
def test_jacobian_pytrees_argnums(jac, mapping):
    def run(m):
        def f(a, d, k):
            return {"s": m.np.sin(a) * d["w"][0], "t": (m.np.sum(a * d["b"]) * k, d["w"] * 2)}
        d = {"w": np.ones((2, 3), np.float32) * 0.5, "b": np.arange(3, dtype=np.float32)}
        j = getattr(m, jac)
        return j(f)(X3, d, 2.0), j(f, argnums=(0, 1))(X3, d, 2.0), j(f, argnums=1)(X3, d, 2.0)
    both(run)


@pytest.mark.parametrize("jac", ["jacfwd", "jacrev"])
def test_jacobian_has_aux_and_jit(jac, both_mappings):
    def run(m):
        def f(x, y):
            z = m.np.tanh(x @ y)
            return z, {"mean": m.np.mean(z)}
        y = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
        j = getattr(m, jac)(f, argnums=(0, 1), has_aux=True)
        return j(X3, y), m.jit(j)(X3, y)
    both(run)


@pytest.mark.parametrize("outer,inner", [("jacfwd", "jacrev"), ("jacrev", "jacfwd"),
                                         ("jacfwd", "jacfwd"), ("jacrev", "jacrev")])
def test_nested_jacobians(outer, inner, mapping):
    def run(m):
        f = lambda x: m.np.sin(x) * m.np.sum(x ** 2)   # noqa: E731
        return getattr(m, outer)(getattr(m, inner)(f))(X3)
    both(run)


def test_hessian(both_mappings):
    def run(m):
        g = lambda x: x[0] ** 3 - 2 * x[0] * x[1] - x[1] ** 6   # noqa: E731
        f = lambda d: {"c": m.np.power(d["a"], d["b"])}   # noqa: E731
        d = {"a": np.arange(2., dtype=np.float32) + 1., "b": np.arange(2., dtype=np.float32) + 2.}
        h = m.hessian(lambda x, y: (m.np.sum(x * y ** 2), x), argnums=1, has_aux=True)
        return m.hessian(g)(np.array([1., 2.], np.float32)), m.hessian(f)(d), h(X3, X3 + 1)
    both(run)


def test_jacobian_dtypes_follow_jax(mapping):
    """jacfwd's blocks take the output's dtype, jacrev's the input's."""
    def run(m):
        f = lambda x, y: (x * y).astype(m.np.float16)   # noqa: E731
        x, y = X3, np.float16(2)
        return m.jacfwd(f, (0, 1))(x, y), m.jacrev(f, (0, 1))(x, y)
    both(run)


def test_jacobian_of_sharded_inputs(mesh2x4, mapping):
    x = jax.device_put(np.linspace(0, 1, 32, dtype=np.float32).reshape(4, 8),
                       NamedSharding(mesh2x4, P("x", "y")))

    def run(m):
        f = lambda x: m.np.sin(x).sum(0)   # noqa: E731
        return m.jit(m.jacrev(f))(x), m.jit(m.jacfwd(f))(x)
    got = both(run, mesh=mesh2x4)
    assert got[0].shape == (8, 4, 8)


@pytest.mark.parametrize("jac", ["jacfwd", "jacrev"])
def test_jacobian_integer_input_error(jac):
    for m in (S, J):
        with pytest.raises(TypeError, match="real-valued inputs|inexact"):
            getattr(m, jac)(lambda x: x * 2.0)(np.arange(3))


def test_jacrev_integer_output_error():
    for m in (S, J):
        with pytest.raises(TypeError, match="real-valued outputs"):
            m.jacrev(lambda x: (x * 2).astype(m.np.int32))(X3)


# ---------------------------------------------------------------- eval_shape

def test_eval_shape_matches_jax():
    sds = jax.ShapeDtypeStruct((8, 4), jnp.float32)

    def run(m):
        return m.eval_shape(lambda x, y, z, k=1: (x * 2, x.sum(0), 3.0, y * z, x.T @ x * k),
                            sds, 2.0, np.ones(3, np.int32), k=np.float32(2))
    got, want = run(S), run(J)
    assert got == want, (got, want)
    assert [g.weak_type for g in got] == [w.weak_type for w in want]
    assert all(isinstance(g, shardc.ShapeDtypeStruct) for g in got)


def test_eval_shape_pytrees_and_sharded_inputs(mesh2x4):
    a = jax.device_put(np.ones((8, 4), np.float32), NamedSharding(mesh2x4, P("x", "y")))

    def run(m):
        return m.eval_shape(lambda d: {"t": d["a"].T, "n": (d["a"].sum(), d["b"] + 1)},
                            {"a": a, "b": np.zeros((2,), np.float16)})
    got, want = run(S), run(J)
    assert got == want
    assert [g.sharding for g in jax.tree.leaves(got)] == \
        [w.sharding for w in jax.tree.leaves(want)]


def test_eval_shape_runs_nothing():
    calls = []

    def f(x):
        calls.append(1)
        return snp.sin(x)
    out = shardc.eval_shape(f, shardc.ShapeDtypeStruct((3,), np.float32))
    assert out.shape == (3,) and len(calls) == 1


def test_shape_dtype_struct_as_abstract_jit_argument(mesh2x4):
    sh = NamedSharding(mesh2x4, P("x"))
    sds = shardc.ShapeDtypeStruct((8, 4), np.float32, sharding=sh)
    lowered = shardc.jit(lambda x: snp.sin(x) * 2).lower(sds)
    assert "sdy.sharding" in lowered.as_text()
    traced = shardc.jit(lambda x: x.sum(1)).trace(sds)
    info = traced.out_info
    assert info.shape == (8,) and info.sharding.spec == P("x")
    ref = jax.jit(lambda x: x.sum(1)).trace(sds).out_info
    assert info.shape == ref.shape and info.dtype == ref.dtype


# ---------------------------------------------------------------- linearize

def test_linearize_values():
    def run(m):
        f = lambda x: 3. * m.np.sin(x) + m.np.cos(x / 2.)   # noqa: E731
        y, f_jvp = m.linearize(f, X3)
        return y, f_jvp(np.ones(3, np.float32)), f_jvp(X3)
    both(run)


def test_linearize_pytrees_has_aux_and_jit():
    def run(m):
        def f(d, s):
            return {"p": d["a"] * s, "q": m.np.sum(d["b"] ** 2)}, {"aux": d["a"] + 1}
        d = {"a": X3, "b": X3 * 2}
        y, f_jvp, aux = m.linearize(f, d, np.float32(3.), has_aux=True)
        t = f_jvp({"a": X3 * 0 + 1, "b": X3}, np.float32(0.5))
        inner = m.jit(lambda d, s: m.linearize(lambda d: f(d, s)[0], d)[1](d))(d, np.float32(2))
        return y, t, aux, inner
    both(run)


def test_linearize_wrong_tangent_errors():
    _, f_jvp = shardc.linearize(lambda x: x * 2, X3)
    _, jf_jvp = jax.linearize(lambda x: x * 2, X3)
    for fn in (f_jvp, jf_jvp):
        with pytest.raises((ValueError, shardc.ShardcError), match="inconsistent"):
            fn(np.ones(4, np.float32))
        with pytest.raises(TypeError):
            fn(X3, X3)


def test_holomorphic_needs_complex_inputs():
    for m in (S, J):
        with pytest.raises(TypeError, match="holomorphic=True requires inputs with complex"):
            m.jacfwd(lambda x: x * 2.0, holomorphic=True)(X3)


def test_calling_a_jitted_function_on_shape_dtype_structs_is_a_clear_error():
    """Regression: jaxlib's InvalidInputException came out of the executable's call."""
    sds = shardc.ShapeDtypeStruct((8,), np.float32)
    f = shardc.jit(lambda x: x * 2)
    f(np.ones(8, np.float32))
    for _ in range(2):
        with pytest.raises(shardc.ShardcError, match="ShapeDtypeStruct .* no values") as e:
            f(sds)
        assert isinstance(e.value, TypeError)
    assert f.lower(sds) is not None


@pytest.mark.parametrize("wspec,xspec,shardings", [
    (P(None, "y"), P("x"), True), (P("y"), P(None, "y"), True),
    # here shardc.grad itself shards the gradients like the primals (w's P('x', 'y'),
    # x's P('x', 'y')) where jax.jit's propagation picks P(None, 'y') and P('x'):
    # the Jacobians, from the same reverse pass, differ as grad does
    (P("x", "y"), P(), False), (P(), P("x", "y"), False)])
def test_jacobians_of_a_sharded_layer(mesh2x4, wspec, xspec, shardings):
    """Values and output shardings of jit(jacfwd/jacrev/hessian) vs jax.jit's, per layout."""
    rng = np.random.default_rng(0)
    w = jax.device_put(rng.normal(size=(8, 16)).astype(np.float32), NamedSharding(mesh2x4, wspec))
    x = jax.device_put(rng.normal(size=(4, 8)).astype(np.float32), NamedSharding(mesh2x4, xspec))

    def run(m):
        f = lambda w, x: m.np.tanh(x @ w)   # noqa: E731
        loss = lambda w, x: m.np.sum(f(w, x)[:, :4] ** 2)   # noqa: E731
        return (m.jit(m.jacfwd(f))(w, x), m.jit(m.jacrev(f, argnums=(0, 1)))(w, x),
                m.jit(m.hessian(loss, argnums=1))(w, x))
    got, want = run(S), run(J)
    check_outputs(got, want, mesh2x4, check_sharding=shardings)
