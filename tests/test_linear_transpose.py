"""shardc.linear_transpose against jax.linear_transpose: values and dtypes of linear
functions (control flow, complex, integer ones included), and jax's errors for non-linear
ones, named at the op that makes them so."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp
from shardc import lax as slax
from jax.sharding import NamedSharding, PartitionSpec as P

X = np.arange(1.0, 4.0, dtype=np.float32)


def both(name):
    """(shardc's function, jax's) for case `name`: m is shardc.numpy or jax.numpy."""
    return CASES[name](snp, slax), CASES[name](jnp, jax.lax)


CASES = {
    "affine": lambda m, L: lambda x: 2 * x + 1,
    "pytree": lambda m, L: lambda d, y: {"s": d["a"] @ m.ones((3, 2)) + y.sum(),
                                       "t": m.roll(d["a"], 1)},
    "cumsum_div": lambda m, L: lambda x: m.cumsum(x) / 3.0,
    "slices": lambda m, L: lambda x: m.concatenate([x[::-1], m.pad(x, 1), x[1:]]),
    "gather_scatter": lambda m, L: lambda x: m.zeros(5).at[m.array([1, 1, 3])].add(
        x[m.array([2, 0, 0])]),
    "dynamic_slice": lambda m, L: lambda x: L.dynamic_slice(x, (1,), (2,)),
    "scan": lambda m, L: lambda x: L.scan(lambda c, a: (c + a, 2 * c), 0.0, x)[1],
    "scan_counter": lambda m, L: lambda x: L.scan(
        lambda c, a: (c + 1, a * m.floor(c / 2)), 0.0, x)[1],
    "fori": lambda m, L: lambda x: L.fori_loop(0, 3, lambda i, c: c * 2, x),
    "cond": lambda m, L: lambda x: L.cond(True, lambda v: 2 * v, lambda v: -v, x),
    "remat": lambda m, L: (jax.checkpoint if m is jnp else shardc.checkpoint)(
        lambda x: m.sin(2.0) * x),
    "to_int_and_back": lambda m, L: lambda x: x.astype(int).astype(float),
    "constant": lambda m, L: lambda x: m.ones(3),
    "grad_of_quadratic": lambda m, L: lambda x: (jax.grad if m is jnp else shardc.grad)(
        lambda y: (y * y).sum())(x),
    "triangular_solve": lambda m, L: lambda b: L.linalg.triangular_solve(
        m.tril(m.ones((3, 3))) + m.eye(3), b[:, None], left_side=True, lower=True)[:, 0],
    "convolve": lambda m, L: lambda x: m.convolve(x, m.array([1.0, 2.0, 3.0])),
}
PRIMALS = {"pytree": ({"a": X}, X)}


def _cts(fun, primals):
    out = jax.eval_shape(fun, *primals)
    rng = np.random.default_rng(0)
    return jax.tree.map(lambda o: rng.standard_normal(o.shape).astype(o.dtype), out)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(name):
    sf, jf = both(name)
    primals = PRIMALS.get(name, (X,))
    ct = _cts(jf, primals)
    want = jax.linear_transpose(jf, *primals)(ct)
    got = shardc.linear_transpose(sf, *primals)(ct)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_complex_integer_and_shape_dtype_struct():
    z = X.astype(np.complex64)
    for f, p, ct in [(lambda v: v * (1 + 2j), z, np.ones(3, np.complex64) * (1 - 1j)),
                     (lambda v: 2 * v + v[::-1], np.arange(3), np.arange(3, dtype=np.int32)),
                     (lambda v: 2 * v, jax.ShapeDtypeStruct((3,), jnp.bfloat16),
                      np.ones(3, jnp.bfloat16))]:
        got, want = shardc.linear_transpose(f, p)(ct), jax.linear_transpose(f, p)(ct)
        assert got[0].dtype == want[0].dtype
        np.testing.assert_array_equal(got[0], want[0])


def test_inside_jit_and_as_an_argument():
    def f(x, c):      # closes over a traced value: still linear in v
        return shardc.linear_transpose(lambda v: v * x[0] + snp.roll(v, 1), x)(c)

    def g(x, c):
        return jax.linear_transpose(lambda v: v * x[0] + jnp.roll(v, 1), x)(c)
    np.testing.assert_allclose(shardc.jit(f)(X + 1, X)[0], jax.jit(g)(X + 1, X)[0])
    t = shardc.linear_transpose(lambda v: 3 * v, X)
    np.testing.assert_allclose(shardc.jit(lambda t, c: t(c))(t, X)[0], 3 * X)


def test_sharded():
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    w = np.arange(32.0, dtype=np.float32).reshape(8, 4)
    ct = jax.device_put(np.ones((16, 4), np.float32), NamedSharding(mesh, P("x", "y")))
    x = jax.ShapeDtypeStruct((16, 8), jnp.float32)
    with shardc.set_mesh(mesh):
        got = shardc.jit(lambda c: shardc.linear_transpose(lambda v: v @ w, x)(c))(ct)[0]
    with jax.set_mesh(mesh):
        want = jax.jit(lambda c: jax.linear_transpose(lambda v: v @ w, x)(c))(ct)[0]
    np.testing.assert_allclose(got, want)
    assert got.sharding.is_equivalent_to(want.sharding, 2), (got.sharding, want.sharding)


NOT_LINEAR = {
    "sin": (lambda m: m.sin, "sin"),
    "square": (lambda m: lambda x: x * x, "mul"),
    "relu": (lambda m: lambda x: m.where(x > 0, x, 0.0), "gt"),
    "reciprocal": (lambda m: lambda x: 3.0 / x, "div"),
    "floor": (lambda m: m.floor, "floor"),
    "max": (lambda m: m.max, "reduce_max"),
    "stop_gradient": (lambda m: lambda x: x * (jax.lax if m is jnp else slax).stop_gradient(x),
                      "stop_gradient"),
    "floor_in_scan": (lambda m: lambda x: (jax.lax if m is jnp else slax).scan(
        lambda c, a: (c + a, m.floor(c)), 0.0, x)[1], "floor"),
    "square_in_cond": (lambda m: lambda x: (jax.lax if m is jnp else slax).cond(
        True, lambda v: v * v, lambda v: -v, x), "cond"),
}


@pytest.mark.parametrize("name", sorted(NOT_LINEAR))
def test_not_linear_is_an_error_at_the_users_line(name):
    make, op = NOT_LINEAR[name]
    ct = np.ones(jax.eval_shape(make(jnp), X).shape, np.float32)
    with pytest.raises(Exception):                       # jax refuses it too
        jax.linear_transpose(make(jnp), X)(ct)
    t = shardc.linear_transpose(make(snp), X)
    with pytest.raises(TypeError, match=f"not linear in its inputs: {op} here") as e:
        t(ct)
    if name not in ("sin", "floor", "max"):              # (the op is the user's line)
        assert "test_linear_transpose.py" in str(e.value)


def test_argument_errors():
    t = shardc.linear_transpose(lambda v: 2 * v, X)
    with pytest.raises(TypeError, match=r"cotangent type does not match function output, "
                       r"expected \(float32\[3\]\) but got \(float32\[4\]\)"):
        t(np.ones(4, np.float32))
    with pytest.raises(TypeError, match="cotangent tree does not match function output"):
        t([X])
    with pytest.raises(TypeError, match=r"only supports \[float or complex\] -> \[float or "
                       r"complex\], and integer -> integer functions"):
        shardc.linear_transpose(lambda v, i: v * i, X, np.arange(3))
    with pytest.raises(NotImplementedError, match="reduce_axes"):
        shardc.linear_transpose(lambda v: v, X, reduce_axes=("i",))
