"""Traced indices out of bounds, values and gradients against jax.jit. jax reads
scalar indices (with unit-step slices) by a dynamic_slice, which clamps both ways,
so the gradient lands on the clamped element; a gather of an index array clamps
forward and drops backward (promise_in_bounds), clamps both ways with mode="clip",
and reads fill_value with mode="fill"; a promise_in_bounds scatter-add drops a window
out of bounds and its gradient reads the clamped one (its transpose is a gather). Each
side is one program of all the cases and one gradient of their weighted sum, so a
single wrong case shows."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import shardc
import shardc.numpy as snp
from helpers import check_outputs

X = np.linspace(-2.0, 2.0, 48, dtype=np.float32).reshape(4, 6, 2)

SCALAR = [   # (a, j, k) with traced scalars j, k
    lambda m, lax, a, j, k: a[j, k],
    lambda m, lax, a, j, k: a[j, 1:4],
    lambda m, lax, a, j, k: a[j, ::-1],
    lambda m, lax, a, j, k: a[j, ::2],                  # a gather (strided): drops
    lambda m, lax, a, j, k: a[j, np.array([0, 7, 2])],  # a gather: drops
    lambda m, lax, a, j, k: a[None, :, k],
    lambda m, lax, a, j, k: a.at[j].get(),
    lambda m, lax, a, j, k: a.at[j, k].get(mode="clip"),
    lambda m, lax, a, j, k: a.at[j, k].get(mode="fill", fill_value=0),
    lambda m, lax, a, j, k: lax.dynamic_slice(a, (j, k, 0), (2, 3, 2)),
]
ARRAY = [    # (a, i) with a traced index array
    lambda m, a, i: a.at[i].get(mode="fill", fill_value=-1.0),
    lambda m, a, i: a.at[1:3, i].get(mode="fill", fill_value=0.5),
    lambda m, a, i: a.at[i[:2], :, i[2:] % 2].get(mode="fill", fill_value=5.0),
    lambda m, a, i: a.at[np.array([0, 9]), i[:2]].get(mode="fill", fill_value=0.0),
    lambda m, a, i: a.at[i].get(mode="clip"),
    lambda m, a, i: a.at[:, i].get(mode="clip"),
    lambda m, a, i: a.at[i].get(),
    lambda m, a, i: a[:, i],
]
VMAPPED = [  # per example of a (4, 12) batch, with a traced scalar per example
    lambda m, lax, r, k: r[k],
    lambda m, lax, r, k: lax.dynamic_slice(r, (k,), (3,)),
]


def _weighted(outs):
    return sum((w + 1.0) * (o ** 2).sum() for w, o in enumerate(outs))


def _check(fn_ours, fn_ref, args):
    check_outputs(shardc.jit(fn_ours)(*args), jax.jit(fn_ref)(*args))
    g = shardc.jit(shardc.grad(lambda *a: _weighted(fn_ours(*a))))(*args)
    gr = jax.jit(jax.grad(lambda *a: _weighted(fn_ref(*a))))(*args)
    check_outputs(g, gr)


@pytest.mark.parametrize("jk", [(9, -11), (-7, 8), (2, 3)])
def test_scalar_indices(jk):
    j, k = map(np.int32, jk)
    _check(lambda a, j, k: [f(snp, shardc.lax, a, j, k) for f in SCALAR],
           lambda a, j, k: [f(jnp, jax.lax, a, j, k) for f in SCALAR], (X, j, k))


def test_index_arrays():
    i = np.array([0, 7, -9, 3], np.int32)
    _check(lambda a, i: [f(snp, a, i) for f in ARRAY],
           lambda a, i: [f(jnp, a, i) for f in ARRAY], (X, i))


def test_vmapped_scalar_indices():
    k = np.array([13, -20, 5, 11], np.int32)
    r = X.reshape(4, 12)
    _check(lambda r, k: [shardc.vmap(lambda a, b: f(snp, shardc.lax, a, b))(r, k)
                         for f in VMAPPED],
           lambda r, k: [jax.vmap(lambda a, b: f(jnp, jax.lax, a, b))(r, k)
                         for f in VMAPPED], (r, k))


def test_promise_in_bounds_scatter_add_gradient_and_tangent(mesh2x4):
    from jax.sharding import NamedSharding, PartitionSpec as P
    x = np.concatenate([X.reshape(8, 6)] * 2, 1)[:, :8]
    x = jax.device_put(x, NamedSharding(mesh2x4, P("x", "y")))
    u = np.arange(1, 25, dtype=np.float32).reshape(6, 2, 2)
    i = np.array([[1, 3], [7, 7], [-1, 2], [3, 3], [6, 9], [2, 6]], np.int32)
    dn = jax.lax.ScatterDimensionNumbers(update_window_dims=(1, 2), inserted_window_dims=(),
                                         scatter_dims_to_operand_dims=(0, 1))

    def f(lax, M):
        def add(x, u):
            return lax.scatter_add(x, i, u, dn, mode="promise_in_bounds") - \
                lax.scatter_sub(x, i[::-1], u, dn, mode="promise_in_bounds")
        return lambda x, u: (add(x, u), M.jvp(add, (x, u), (x, u))[1],
                             M.grad(lambda u: (add(x, u) * x).sum())(u))
    _check(f(shardc.lax, shardc), f(jax.lax, jax), (x, u))


STATIC = [   # static (NumPy) indices out of bounds: clamped forward, dropped backward
    lambda a: a.at[np.array([1, 9, -3, 7, -12])].get(),
    lambda a: a.at[:, np.array([0, 6, -9])].get(mode="promise_in_bounds"),
    lambda a: a.at[7, np.array([0, 5, -5])].get(),
    lambda a: a[-8, np.array([1, 3])],
]


def test_static_index_arrays_out_of_bounds():
    def f(M):
        return lambda a: [g(a) for g in STATIC] + M.jvp(lambda a: [g(a) for g in STATIC],
                                                        (a,), (a * a,))[1]
    _check(f(shardc), f(jax), (X,))


@pytest.mark.parametrize("index", ["0d", "0d_beside_int", "0d_negative"])
def test_a_static_zero_d_index_out_of_bounds_reads_as_an_int(index):
    """jax reads a concrete 0-d index array as an int, a dynamic_slice clamping both
    ways: the gradient lands on the clamped row (it was dropped, as a gather's)."""
    ix = {"0d": (np.array(9),), "0d_beside_int": (np.array(9), 1),
          "0d_negative": (np.array(-9),)}[index]
    x = np.arange(12, dtype=np.float32).reshape(4, 3)

    def f(m):
        return lambda a: (m.asarray(a)[ix].sum(), m.asarray(a).at[ix].get().sum())
    for k in range(2):
        got = shardc.jit(shardc.grad(lambda a: f(snp)(a)[k]))(x)
        want = jax.jit(jax.grad(lambda a: f(jnp)(a)[k]))(x)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))



PIB = "promise_in_bounds"
PROMISED = [    # (a, v, i, j): traced i and j, some out of bounds, and static ones
    lambda a, v, i, j: a.at[5].add(v, mode=PIB),
    lambda a, v, i, j: a.at[-6].add(v * 2, mode=PIB),
    lambda a, v, i, j: a.at[np.array([1, 9, -7, 3])].add(v, mode=PIB),
    lambda a, v, i, j: a.at[i].add(v, mode=PIB),
    lambda a, v, i, j: a.at[j].add(v, mode=PIB),
    lambda a, v, i, j: a.at[i, 7].add(v[0], mode=PIB),
    lambda a, v, i, j: a.at[j, 1:4].add(v[:3], mode=PIB),
    lambda a, v, i, j: a.at[i].subtract(v, mode=PIB),
]


def test_promise_in_bounds_at_add_gradient():
    """x.at[i].add(v, mode="promise_in_bounds") drops an update out of bounds, and its
    gradient w.r.t. v reads the cotangent at the clamped index (jax's scatter-add, whose
    transpose is its gather): it was 0 (int, box and index-array paths alike). Under
    jit and eagerly."""
    v = np.linspace(1.0, 3.0, 12, dtype=np.float32).reshape(6, 2)
    i, j = np.array([0, 7, -9, 3], np.int32), np.int32(9)

    def f(m):
        return lambda v, a, i, j: [g(m.asarray(a), v, i, j) for g in PROMISED]
    _check(f(snp), f(jnp), (v, X, i, j))
    got = shardc.grad(lambda v: _weighted(f(snp)(v, X, i, j)))(v)
    want = jax.grad(lambda v: _weighted(f(jnp)(v, X, i, j)))(v)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6)


@pytest.mark.parametrize("op", ["set", "add", "multiply", "min", "divide"])
def test_traced_array_with_a_static_int_out_of_bounds_drops(op):
    """x.at[i, 7, ::2] with a traced index array i and the int 7 past the end of its
    dim (of 6): the update names no element and is dropped, as jax's (the flat
    positions read the int clamped, so row 5 was written). Values and gradients."""
    i = np.array([-4, 2, 1], np.int32)
    v = np.arange(3, dtype=np.float32)[:, None] + 2.0

    def f(x, i, v):
        return (getattr(x.at[i, 7, ::2], op)(v), getattr(x.at[i, -7, ::-1], op)(v))
    want, got = jax.jit(f)(X, i, v), shardc.jit(f)(X, i, v)
    check_outputs(got, want)
    np.testing.assert_array_equal(np.asarray(got[0]), X)
    if op in ("set", "add"):
        def g(m, gm):
            return lambda x, i, v: gm.grad(lambda x, v: sum(
                (o * m.arange(o.size).reshape(o.shape)).sum() for o in f(x, i, v)),
                argnums=(0, 1))(x, v)
        check_outputs(shardc.jit(g(snp, shardc))(X, i, v), jax.jit(g(jnp, jax))(X, i, v))
