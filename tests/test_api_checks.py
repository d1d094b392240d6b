"""Arguments jax refuses are refused here too, with jax's exception type, where shardc
used to run them (some silently computing something else): jvp's primals and tangents,
vmap's out_axes, .at[]'s mode, static and donated arguments at once. And what jax takes
that shardc refused: integer primals with float0 tangents."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
from jax.lax import GatherScatterMode

X = np.arange(6, dtype=np.float32).reshape(2, 3)
I = np.arange(3, dtype=np.int32)
F0 = np.zeros(3, jax.dtypes.float0)

BAD_JVP = {
    # arrays for tuples: their rows were taken as two primals
    "arrays_not_tuples": (TypeError, lambda J: J(lambda a, b: a * b, X, X)),
    "int_tangent": (TypeError, lambda J: J(lambda a: a * 2, (X,), (X.astype(np.int32),))),
    "bf16_primal_f32_tangent": (TypeError, lambda J: J(lambda a: a * 2,
                                                       (X.astype(jnp.bfloat16),), (X,))),
    "int_primal_int_tangent": (TypeError, lambda J: J(lambda a: a * 2, (I,), (I,))),
    "tree": (TypeError, lambda J: J(lambda a: a["u"], ({"u": X},), ({"v": X},))),
    "shape": (ValueError, lambda J: J(lambda a: a * 2, (X,), (np.ones(3, np.float32),))),
}


@pytest.mark.parametrize("name", sorted(BAD_JVP))
def test_jvp_refuses_what_jax_refuses(name):
    exc, call = BAD_JVP[name]
    with pytest.raises(exc):
        call(jax.jvp)
    with pytest.raises(exc):
        call(shardc.jvp)


@pytest.mark.parametrize("jitted", [False, True])
def test_jvp_with_integer_primals_and_float0_tangents(jitted):
    def run(J):
        return J(lambda a, b: (a * b, b * 2), (X, I), (X, F0))
    (o, oi), (t, ti) = run(jax.jvp)
    if jitted:
        (go, goi), (gt, gti) = shardc.jit(lambda: run(shardc.jvp))()
    else:
        (go, goi), (gt, gti) = run(shardc.jvp)
        assert gti.dtype == jax.dtypes.float0 and gti.shape == ti.shape
    for g, w in ((go, o), (goi, oi), (gt, t)):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("out_axes", [2, 3, -3])
def test_vmap_out_axes_out_of_range(out_axes):
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    for vmap in (jax.vmap, shardc.vmap):
        with pytest.raises(ValueError, match=f"axis {out_axes} is out of bounds"):
            vmap(lambda x: x * 1, out_axes=out_axes)(a)


MODES = [None, "clip", "fill", "drop", "promise_in_bounds", GatherScatterMode.CLIP,
         GatherScatterMode.FILL_OR_DROP]


@pytest.mark.parametrize("op", ["get", "set", "add", "max"])
@pytest.mark.parametrize("mode", MODES, ids=str)
def test_at_modes_as_jax(op, mode):
    a = np.arange(4, dtype=np.float32)

    def f(x):
        ref = x.at[np.array([1, 7])]
        return ref.get(mode=mode) if op == "get" else getattr(ref, op)(5.0, mode=mode)
    np.testing.assert_array_equal(np.asarray(shardc.jit(f)(a)), np.asarray(jax.jit(f)(a)))


def test_at_unknown_mode_is_jax_error():
    for jit in (jax.jit, shardc.jit):
        with pytest.raises(ValueError, match='Unknown gather mode "bogus"'):
            jit(lambda x: x.at[1].set(1.0, mode="bogus"))(np.zeros(4, np.float32))


def test_static_and_donated_argument_is_jax_error():
    for jit in (jax.jit, shardc.jit):
        with pytest.raises(ValueError, match="cannot intersect"):
            jit(lambda x, n: x * n, donate_argnums=1, static_argnums=1)
        with pytest.raises(ValueError, match="cannot intersect"):
            jit(lambda x, n: x * n, donate_argnames="n", static_argnums=1)


K = np.array([0, 1], np.uint32)
SD = jax.lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))
BOOLS = np.array([True, False])
BAD_ARGUMENTS = {
    # a float shape ran as (2,); a negative size overflowed inside
    "uniform_float_shape": (TypeError, lambda m: m.random.uniform(K, (2.,))),
    # (jax's own error here is an MLIRError from its lowering)
    "normal_negative_shape": (ValueError, lambda m: m.random.normal(K, (-1, 2))),
    "orthogonal_negative_n": (ValueError, lambda m: m.random.orthogonal(K, -1)),
    # adding into bools was a logical or; jax has no bool add
    "scatter_add_bool": (TypeError, lambda m: m.lax.scatter_add(
        BOOLS, np.array([[0]]), np.array([True]), SD)),
    "scatter_mul_bool": (TypeError, lambda m: m.lax.scatter_mul(
        BOOLS, np.array([[0]]), np.array([True]), SD)),
    "at_add_bool": (TypeError, lambda m: m.numpy.asarray(BOOLS).at[0].add(True)),
    "at_multiply_bool": (TypeError, lambda m: m.numpy.asarray(BOOLS).at[0].multiply(True)),
}


@pytest.mark.parametrize("name", sorted(BAD_ARGUMENTS))
def test_bad_arguments_raise_jaxs_error(name):
    err, f = BAD_ARGUMENTS[name]
    with pytest.raises(Exception if name == "normal_negative_shape" else err):
        jax.jit(lambda: f(jax))()
    with pytest.raises(err):
        shardc.jit(lambda: f(shardc))()


FORI = {
    # float bounds: concrete ones truncate to a Python-int index, traced ones count in
    # floats (shardc refused both); a traced bound with a Python int lower stays weak
    "float_bounds": lambda L: L.fori_loop(0., 3., lambda i, c: c + i, 0.),
    "fractional_bounds": lambda L: L.fori_loop(0.5, 3.7, lambda i, c: c * 2 + i, 0.),
    "np_float_bounds": lambda L: L.fori_loop(np.float32(1), np.float32(4),
                                             lambda i, c: c * i, 1),
}
FORI_TRACED = {
    "traced_float_upper": lambda L, u: L.fori_loop(np.float32(0.5), u.astype(np.float32),
                                                   lambda i, c: c * 2 + i, np.float32(0.)),
    "traced_int_upper_weak_carry": lambda L, u: L.fori_loop(0, u, lambda i, c: c + i, 0),
}


@pytest.mark.parametrize("name", sorted(FORI) + sorted(FORI_TRACED))
def test_fori_loop_bounds_as_jax(name):
    u = np.int32(4)
    if name in FORI:
        got, want = shardc.jit(lambda: FORI[name](shardc.lax))(), jax.jit(
            lambda: FORI[name](jax.lax))()
    else:
        got = shardc.jit(lambda u: FORI_TRACED[name](shardc.lax, u))(u)
        want = jax.jit(lambda u: FORI_TRACED[name](jax.lax, u))(u)
    assert (got.dtype, got.weak_type) == (want.dtype, want.weak_type)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_integer_outputs_tangents_are_float0_inside_jit_and_vmap():
    """Inside a trace too, an integer output's tangent is float0 (shardc.jit returned
    int32 zeros); vmap stacks float0 results; jacfwd's blocks for it are zeros of its
    dtype, as jax's."""
    x = np.ones(3, np.float32)

    def f(x):
        return x * 2, x.astype(np.int32)
    for m, J in ((jax, jax.jit), (shardc, shardc.jit)):
        t = J(lambda x: m.jvp(f, (x,), (x,))[1])(x)
        assert t[1].dtype == jax.dtypes.float0 and t[1].shape == (3,)
        v = J(m.vmap(lambda x: m.jvp(f, (x,), (x,))[1], out_axes=(0, 1)))(np.ones((2, 3),
                                                                              np.float32))
        assert v[1].dtype == jax.dtypes.float0 and v[1].shape == (3, 2)
        jac = J(m.jacfwd(f))(x)
        assert jac[1].dtype == np.int32 and jac[1].shape == (3, 3) and not jac[1].any()
        np.testing.assert_array_equal(np.asarray(jac[0]), 2 * np.eye(3))
