"""Argument forms jax takes that shardc refused, found by a survey of jax code inside
shardc.jit: dot_general of operands of two dtypes (the result is XLA's more precise type,
or preferred_element_type), from shardc.lax and from jax programs (jnp.matmul of a bool
and a float under vmap binds one dot_general of both); column-major reshapes and
astype's copy= / device=. Against jax.jit."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
from helpers import check_outputs, place

DN = (((1,), (0,)), ((), ()))
DTYPES = [np.bool_, np.int8, np.uint8, np.int32, jnp.bfloat16, np.float16, np.float32,
          np.complex64]


def _operand(dtype, shape, seed):
    a = np.random.default_rng(seed).integers(0, 3, shape)
    return a.astype(dtype)


PAIRS = [(a, b) for i, a in enumerate(DTYPES) for b in DTYPES[i + 1:]]


@pytest.mark.parametrize("a,b", PAIRS, ids=[f"{np.dtype(a).name}-{np.dtype(b).name}"
                                            for a, b in PAIRS])
def test_mixed_dtypes_as_jax(a, b):
    x, y = _operand(a, (4, 8), 0), _operand(b, (8, 4), 1)
    for lhs, rhs in ((x, y), (y.T, x.T)):
        want = jax.jit(lambda p, q: jax.lax.dot_general(p, q, DN))(lhs, rhs)
        got = shardc.jit(lambda p, q: shardc.lax.dot_general(p, q, DN))(lhs, rhs)
        assert got.dtype == want.dtype
        check_outputs(got, want)


@pytest.mark.parametrize("pet", [np.float32, np.int32])
def test_mixed_dtypes_preferred_element_type(pet):
    x, y = _operand(np.bool_, (4, 8), 0), _operand(np.int8, (8, 4), 1)
    f = lambda lib: lambda p, q: lib.lax.dot_general(p, q, DN, preferred_element_type=pet)
    want = jax.jit(f(jax))(x, y)
    got = shardc.jit(f(shardc))(x, y)
    assert got.dtype == want.dtype == pet
    check_outputs(got, want)


def test_vmapped_bool_matmul_from_a_jax_program(mesh2x4):
    """jax.vmap(b @ v) binds dot_general(bool, f32); shardc imports it (it refused)."""
    b = np.array([[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 1, 1], [0, 0, 1, 0]], bool)
    v = np.arange(16, dtype=np.float32).reshape(4, 4)
    f = jax.vmap(lambda p, q: p @ q)
    args = place(mesh2x4, [b, v], [P("x"), P("x")])
    check_outputs(shardc.jit(f)(*args), jax.jit(f)(*args), mesh2x4)


def test_gradient_through_mixed_dot():
    """The float operand's gradient; the integer one has none (float0), as jax's."""
    x, y = _operand(np.int8, (4, 8), 0), np.linspace(-1, 1, 32, dtype=np.float32)
    y = y.reshape(8, 4)
    loss = lambda q, p: (jax.lax.dot_general(p, q, DN) ** 2).sum()
    want = jax.jit(jax.grad(loss))(y, x)
    got = shardc.jit(jax.grad(loss))(y, x)
    check_outputs(got, want)
    got = shardc.jit(shardc.grad(lambda q, p: (shardc.lax.dot_general(p, q, DN) ** 2).sum()))(
        y, x)
    check_outputs(got, want)


# ---- found by the same survey of jax code inside shardc.jit: array methods with
# jax's arguments (the tracer's methods are shardc's, not jax's)

RESHAPES = {
    "method_F": lambda m, x: x.reshape(16, 8, order="F"),
    "function_F": lambda m, x: m.reshape(x, (4, -1), order="F"),
    "ravel_F": lambda m, x: m.ravel(x, order="F"),
    "rank_up_F": lambda m, x: x.reshape((2, 4, 16), order="F"),
    "astype_copy": lambda m, x: x.astype(m.int32, copy=False),
}


@pytest.mark.parametrize("name", sorted(RESHAPES))
def test_column_major_reshape_and_astype_arguments(name, mesh2x4):
    from helpers import compare
    x = np.arange(8 * 16, dtype=np.float32).reshape(8, 16)
    compare(RESHAPES[name], [x], [P("x")], mesh2x4)


def test_astype_device_places_the_result(mesh2x4):
    from jax.sharding import NamedSharding
    s = NamedSharding(mesh2x4, P(None, "y"))
    out = shardc.numpy.asarray(np.ones((8, 16), np.float32)).astype(np.int32, device=s)
    assert out.dtype == np.int32 and out.sharding.spec == P(None, "y")


def _spec(a):
    return getattr(a.sharding, "spec", "single device")


DEVICE_FORMS = {   # f(np, x, s): jnp's conversions constrain to device=, its creation ops do not
    "method_astype": lambda m, x, s: x.astype(np.float16, device=s) * 2,
    "astype": lambda m, x, s: m.astype(x, np.float16, device=s) * 2,
    "asarray": lambda m, x, s: m.asarray(x, device=s) * 2,
    "asarray_dtype": lambda m, x, s: m.asarray(x, dtype=np.float16, device=s) * 2,
    "array": lambda m, x, s: m.array(x, device=s) * 2,
    "zeros": lambda m, x, s: m.zeros((8, 16), device=s) + x,
    "zeros_like": lambda m, x, s: m.zeros_like(x, device=s) + x,
    "full": lambda m, x, s: m.full((8, 16), 2.0, device=s) * x,
}


@pytest.mark.parametrize("explicit", [False, True], ids=["auto", "explicit"])
@pytest.mark.parametrize("name", sorted(DEVICE_FORMS))
def test_device_argument_inside_jit_as_jax(name, explicit):
    """Under jax.jit, astype / asarray / array(device=sharding) constrain the result
    (jnp's convert_element_type adds a with_sharding_constraint, on Auto axes too) and
    zeros / full / *_like(device=) leave it to propagation. shardc did the opposite:
    it dropped astype's on Auto axes, refused jnp.asarray's, and pinned zeros'. Both
    jax code and shardc.numpy, against jax.jit."""
    from jax.sharding import AxisType, NamedSharding
    kind = AxisType.Explicit if explicit else AxisType.Auto
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(kind, kind))
    s = NamedSharding(mesh, P(None, "y"))
    x = np.linspace(-1, 1, 128, dtype=np.float32).reshape(8, 16)
    f = DEVICE_FORMS[name]
    with jax.set_mesh(mesh):
        if explicit:
            x = jax.device_put(x, NamedSharding(mesh, P("x")))
        want = jax.jit(lambda x: f(jnp, x, s))(x)
        for m in (jnp, shardc.numpy):
            got = shardc.jit(lambda x: f(m, x, s))(x)
            check_outputs(got, want, check_sharding=False)
            assert str(_spec(got)) == str(_spec(want)), (m.__name__, _spec(got), _spec(want))
