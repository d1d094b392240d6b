"""Strided slices of split dims, even and uneven: XLA's partitioner mis-sizes a strided
slice that keeps one element (an internal error, or a wrong value). Each against jax.jit
(values, dtypes, output shardings), and against NumPy where jax.jit itself fails."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import check_outputs, data


@pytest.fixture(scope="module")
def mesh4x2():
    return shardc.make_mesh((4, 2), ("a", "b"), axis_types=(shardc.AxisType.Auto,) * 2)


def _put(mesh, x, spec):
    return jax.device_put(x, NamedSharding(mesh, spec))


def _both(fn, *args):
    """shardc.jit(fn) and jax.jit(fn) with fn(m, *args), m the numpy module."""
    return (shardc.jit(lambda *xs: fn(snp, *xs))(*args),
            jax.jit(lambda *xs: fn(jnp, *xs))(*args))


# ---------------------------------------------------------------- strided slices

def test_strided_slice_one_element_of_split_dim(mesh4x2):
    """x[5:8:3] is one element inside a device's block: XLA's partitioner mis-sized the
    strided slice shardc emitted (limit 6, stride 3) -- 'Expected instruction to have
    shape equal to f32[3]'."""
    x = _put(mesh4x2, np.arange(8.), P("a"))
    check_outputs(*_both(lambda m, x: x[5:8:3], x), mesh4x2)


SLICES_1D = [slice(5, 8, 3), slice(7, None, 5), slice(1, 2, 7), slice(None, None, 3),
             slice(1, None, 2), slice(2, 7, 4), slice(6, 0, -3), slice(None, None, -2),
             slice(-3, None, 5), slice(3, 4, 2), slice(None, 3, 3)]


@pytest.mark.parametrize("spec", [P("a"), P(("a", "b")), P("b")], ids=str)
def test_strided_slices_vs_jax(mesh4x2, spec):
    """Against jax.jit where it compiles (XLA mis-sizes some of jax's own strided slices of
    split dims), else against NumPy."""
    x1 = _put(mesh4x2, np.arange(16.), spec)
    x2 = _put(mesh4x2, data((8, 12), np.float32), P(spec[0], "b" if spec[0] == "a" else None))
    ours = shardc.jit(lambda x1, x2: [(x1[s], x2[s, ::3]) for s in SLICES_1D])(x1, x2)
    for s, o in zip(SLICES_1D, ours):
        try:
            ref = jax.jit(lambda x1, x2: (x1[s], x2[s, ::3]))(x1, x2)
        except jax.errors.JaxRuntimeError:
            ref = None
        if ref is not None:
            check_outputs(o, ref, mesh4x2, what=f"jax [{s}]")
        for got, want in zip(o, (np.asarray(x1)[s], np.asarray(x2)[s, ::3])):
            np.testing.assert_array_equal(got, want, err_msg=str(s))


@pytest.mark.parametrize("n,spec,uneven", [(8, P("a"), False), (16, P(("a", "b")), False),
                                           (12, P("b"), False), (8, P("a"), True),
                                           (16, P(("a", "b")), True)], ids=str)
def test_strided_slices_sweep(mesh4x2, n, spec, uneven):
    """Every start/stop/step in a range, on even and uneven (n - 1) splits, against NumPy
    (jax.jit itself fails on some of these: it keeps the user's stop as the limit)."""
    xn = np.arange(float(n))
    ends = list(range(-n - 2, n + 3, 3)) + [None]
    sl = [slice(s, e, st) for s in ends for e in ends for st in (1, 2, 3, 5, -1, -2, -4)]

    def f(x):
        if uneven:
            x = shardc.lax.with_sharding_constraint(x[1:], NamedSharding(mesh4x2, spec))
        return [x[s] for s in sl]
    outs = shardc.jit(f)(_put(mesh4x2, xn, spec))
    xr = xn[1:] if uneven else xn
    for s, o in zip(sl, outs):
        np.testing.assert_array_equal(o, xr[s], err_msg=str(s))
