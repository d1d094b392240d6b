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
