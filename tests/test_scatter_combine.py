"""scatter with a combiner (scatter_mul / _min / _max) against jax.jit: shardc.lax's, x.at[i]
.multiply/min/max with indices that repeat, jax's scatter-mul/-min/-max inside shardc.jit;
values, dtypes and output shardings on the (2, 4) mesh, gradients against jax.grad (ties
shared as jax shares them), shardc.vmap against jax.vmap."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.lax import ScatterDimensionNumbers as DN
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import check_outputs, compare, place, sample

OPS = ["scatter_mul", "scatter_min", "scatter_max"]
RNG = np.random.default_rng(11)


def _data(shape, dtype):
    if np.dtype(dtype).kind == "f":
        return RNG.uniform(-2, 2, shape).astype(dtype)
    return RNG.integers(-4, 5, shape).astype(dtype)


# (operand shape, indices, updates shape, dimension numbers): repeated indices in each
CASES = {
    # rows, a window of whole rows each: row 1 three times
    "rows": ((8, 16), [[1], [3], [1], [6], [1]], (5, 16), DN((1,), (0,), (0,))),
    # single elements at (row, col) coordinates
    "elements": ((8, 16), [[0, 0], [7, 15], [0, 0], [3, 4], [3, 4], [0, 0]], (6,),
                 DN((), (0, 1), (0, 1))),
    # windows of 4 columns at (row, col) starts, the last two out of bounds
    "windows": ((8, 16), [[2, 4], [2, 6], [2, 4], [5, 14], [9, 0]], (5, 4),
                DN((1,), (0,), (0, 1))),
    # batching dims (take_along_axis's transpose): a column per row, repeated
    "batching": ((8, 16), [[[3], [3], [0]]] * 4 + [[[15], [2], [2]]] * 4, (8, 3),
                 DN((), (1,), (1,), operand_batching_dims=(0,),
                    scatter_indices_batching_dims=(0,))),
    # an empty index vector: each update is the whole operand (at[0:1] of a (1,) array)
    "whole": ((8, 16), np.zeros((3, 0)), (3, 8, 16), DN((1, 2), (), ())),
    # out of bounds both ways (dropped by fill / drop, clamped by clip)
    "oob": ((8, 16), [[-1], [8], [2], [2], [30]], (5, 16), DN((1,), (0,), (0,))),
}


def _run(name, case, dtype, mode, mesh, specs):
    shape, idx, ushape, dn = CASES[case]
    x, u = _data(shape, dtype), _data(ushape, dtype)
    args = place(mesh, [x, np.asarray(idx, np.int32), u], specs)
    ours = shardc.jit(lambda x, i, u: getattr(shardc.lax, name)(x, i, u, dn, mode=mode))(*args)
    ref = jax.jit(lambda x, i, u: getattr(jax.lax, name)(x, i, u, dn, mode=mode))(*args)
    check_outputs(ours, ref, mesh)
    return ours


@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("name", OPS)
def test_lax_scatter_vs_jax(mesh2x4, name, case, dtype):
    _run(name, case, dtype, None, mesh2x4, [P("x", "y"), None, None])


@pytest.mark.parametrize("mode", ["fill", "drop", "clip", "promise_in_bounds",
                                  jax.lax.GatherScatterMode.CLIP])
@pytest.mark.parametrize("name", OPS)
def test_lax_scatter_modes(mesh2x4, name, mode):
    case = "oob" if mode != "promise_in_bounds" else "rows"  # (XLA's choice out of bounds)
    _run(name, case, np.float32, mode, mesh2x4, [P(None, "y"), None, None])
    _run(name, "windows", np.int32, mode if case == "oob" else None, mesh2x4,
         [P("x"), None, None])


@pytest.mark.parametrize("mode", ["fill", "clip", "promise_in_bounds"])
@pytest.mark.parametrize("name", ["scatter", "scatter_add"] + OPS)
def test_empty_index_vectors(mesh2x4, name, mode):
    """No scattered dims: every window starts at the origin, in bounds (a fill-mode
    scatter once failed building its in-bounds mask). gather too."""
    _run(name, "whole", np.float32, mode, mesh2x4, [P("x", "y"), None, None])
    dn = jax.lax.GatherDimensionNumbers((1, 2), (), ())
    x = place(mesh2x4, [_data((8, 16), np.float32)], [P("x", "y")])[0]
    i = np.zeros((3, 0), np.int32)
    check_outputs(shardc.jit(lambda x: shardc.lax.gather(x, i, dn, (8, 16), mode=mode))(x),
                  jax.jit(lambda x: jax.lax.gather(x, i, dn, (8, 16), mode=mode))(x), mesh2x4)
    ours = shardc.jit(lambda x: x.at[0:1].min(0.5))(np.ones(1, np.float32))
    check_outputs(ours, jax.jit(lambda x: x.at[0:1].min(0.5))(np.ones(1, np.float32)))


@pytest.mark.parametrize("name", OPS)
def test_sharded_operand_and_updates(mesh2x4, name):
    # operand sharded on the window dim (not scattered): the result keeps it, as jax's
    out = _run(name, "rows", np.float32, None, mesh2x4, [P(None, "y"), None, None])
    assert out.sharding.spec[1] == "y", out.sharding.spec
    # updates sharded along their scatter (batch) dim: partial results combined by XLA
    shape, ushape, dn = (8, 16), (16, 16), DN((1,), (0,), (0,))
    x, u = _data(shape, np.float32), _data(ushape, np.float32)
    i = (np.arange(16) % 3 * 2).reshape(16, 1).astype(np.int32)
    args = place(mesh2x4, [x, i, u], [None, P("x"), P("x", "y")])
    ours = shardc.jit(lambda x, i, u: getattr(shardc.lax, name)(x, i, u, dn))(*args)
    ref = jax.jit(lambda x, i, u: getattr(jax.lax, name)(x, i, u, dn))(*args)
    check_outputs(ours, ref, mesh2x4)


@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=lambda d: np.dtype(d).name)
def test_scatter_add_batching_dims(mesh2x4, dtype):
    # scatter_add shares the wrappers' handling of batching dims (it raised before)
    _run("scatter_add", "batching", dtype, None, mesh2x4, [P("x", "y"), None, None])


def test_dtype_mismatch_is_a_clear_error():
    dn = DN((), (0,), (0,))
    with pytest.raises(TypeError, match="same dtypes"):
        shardc.jit(lambda x: shardc.lax.scatter_max(x, np.array([[0]]), np.ones(1, np.int32),
                                                    dn))(np.ones(4, np.float32))


# ---------------------------------------------------------------- x.at[i]

IDX = np.array([1, 3, 1, 1, 6])          # repeats
AT = {
    # jax's scatter: of repeated indices one write wins (the last, on CPU)
    "set": lambda m, a, u, i: a.at[i].set(u),
    "set_cols": lambda m, a, u, i: a.at[:, i].set(u[:, :8].T * 2),
    "set_oob": lambda m, a, u, i: a.at[i * 3 - 4, 1:3].set(u[:, :2]),
    "multiply": lambda m, a, u, i: a.at[i].multiply(u),
    "min": lambda m, a, u, i: a.at[i].min(u),
    "max": lambda m, a, u, i: a.at[i].max(u),
    "divide": lambda m, a, u, i: a.at[i].divide(m.abs(u) + 1),
    "power": lambda m, a, u, i: a.at[i].power(2),
    "cols_min": lambda m, a, u, i: a.at[:, i].min(u[:, :8].T),
    "array_and_int_max": lambda m, a, u, i: a.at[i, 3].max(u[:, 0]),
    "scalar_update_mul": lambda m, a, u, i: a.at[i, 2:4].multiply(1.5),
    "oob_drop_min": lambda m, a, u, i: a.at[i * 3 - 4].min(u, mode="drop"),
    "oob_fill_max": lambda m, a, u, i: a.at[i * 3 - 4].max(u, mode="fill"),
}


@pytest.mark.parametrize("traced", [False, True], ids=["static_idx", "traced_idx"])
@pytest.mark.parametrize("spec", [P(), P("x", "y"), P(None, "y")], ids=str)
@pytest.mark.parametrize("name", sample(sorted(AT), 2))
def test_at_repeated_vs_jax(mesh2x4, name, spec, traced):
    a = _data((8, 16), np.float32)
    u = _data((5, 16), np.float32)
    if traced:
        compare(AT[name], [a, u, IDX.astype(np.int32)], [spec, None, None], mesh2x4,
                numpy_ref=False)
    else:
        compare(lambda m, a, u: AT[name](m, a, u, IDX), [a, u], [spec, None], mesh2x4,
                numpy_ref=False)


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.int8], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["multiply", "min", "max", "divide"])
def test_at_repeated_ints(mesh2x4, name, dtype):
    a, u = _data((8, 16), np.int32), _data((5, 16), np.int32)
    a, u = (np.abs(a), np.abs(u)) if np.dtype(dtype).kind == "u" else (a, u)
    compare(AT[name], [a.astype(dtype), u.astype(dtype), IDX.astype(np.int32)],
            [P("x", "y"), None, None], mesh2x4, numpy_ref=False)


@pytest.mark.filterwarnings("ignore:scatter inputs have incompatible types")
@pytest.mark.parametrize("name", ["multiply", "min", "max"])
def test_at_float_update_into_ints(mesh2x4, name):
    # combined in the promoted dtype, then cast back (as jax): 3 * 1.5 * 1.5 -> 6
    a = _data((8, 16), np.int32)
    compare(lambda m, a, i: getattr(a.at[i], name)(1.5), [a, IDX.astype(np.int32)],
            [P("x"), None], mesh2x4, numpy_ref=False)


# ---------------------------------------------------------------- jax's primitives


SEGMENT = ["segment_max", "segment_min", "segment_prod"]


@pytest.mark.parametrize("name", SEGMENT)
def test_jax_scatter_primitives_inside_shardc_jit(mesh2x4, name):
    """jax.ops.segment_max/_min/_prod bind scatter-max/-min/-mul; jax.vmap of a lax scatter
    binds it with batching dims; both translate to shardc's ops."""
    x = jax.device_put(_data((16, 8), np.float32), NamedSharding(mesh2x4, P(None, "y")))
    seg = jnp.asarray(np.array([0, 2, 0, 5, 2, 2, 1, 0] * 2, np.int32))

    def f(x, s):
        return getattr(jax.ops, name)(x, s, num_segments=6)
    check_outputs(shardc.jit(f)(x, seg), jax.jit(f)(x, seg), mesh2x4)
    lax_name = {"segment_max": "scatter_max", "segment_min": "scatter_min"}.get(
        name, "scatter_mul")
    v = jax.vmap(lambda x, i, u: getattr(jax.lax, lax_name)(x, i, u, DN((), (0,), (0,))))
    args = (jnp.asarray(_data((4, 6), np.float32)),
            jnp.asarray(np.array([[[0], [0], [5]], [[1], [3], [3]]] * 2, np.int32)),
            jnp.asarray(_data((4, 3), np.float32)))
    check_outputs(shardc.jit(v)(*args), jax.jit(v)(*args))


# ---------------------------------------------------------------- gradients

X = np.array([1.0, 2.0, 3.0, 4.0, 0.5, -1.0], np.float32)
TIE_IDX = np.array([[0], [0], [1], [2], [2], [4], [9]], np.int32)       # 9: dropped
TIE_U = {"scatter_min": np.array([1.0, 1.0, 0.0, 5.0, 3.0, 0.5, -7.0], np.float32),
         "scatter_max": np.array([1.0, 1.0, 7.0, 3.0, 2.0, 0.5, 9.0], np.float32)}
W = np.arange(1.0, 7.0, dtype=np.float32)
DN1 = DN((), (0,), (0,))


@pytest.mark.parametrize("name", ["scatter_min", "scatter_max"])
def test_extremal_grads_at_ties(name):
    """Three-way, operand-and-update and update-update ties: the cotangent is shared
    equally among the tied (jax's _scatter_extremal_jvp)."""
    u = TIE_U[name]

    def loss(lax, np_):
        return lambda x, u: np_.sum(getattr(lax, name)(x, TIE_IDX, u, DN1) * W)
    ours = shardc.jit(shardc.grad(loss(shardc.lax, snp), (0, 1)))(X, u)
    ref = jax.jit(jax.grad(loss(jax.lax, jnp), (0, 1)))(X, u)
    for o, r in zip(ours, ref):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=1e-6, atol=1e-6)
    # the ties: element 0 is shared by the operand and two updates
    np.testing.assert_allclose(np.asarray(ours[0])[0], 1 / 3, rtol=1e-6)


@pytest.mark.parametrize("name", ["add", "set", "min", "max"])
def test_dropped_update_has_zero_gradient(name):
    # a traced index out of bounds drops its update: scatter_add's gradient rule read the
    # clamped position's cotangent for it (4 here), jax's is zero
    x, u, i = jnp.arange(1.0, 5.0), jnp.array([1.0, 2.0, 3.0]), jnp.array([0, 7, 3])

    def f(m, x, u, i):
        return m.sum(getattr(x.at[i], name)(u) * jnp.arange(1.0, 5.0))
    ours = shardc.jit(shardc.grad(lambda *a: f(snp, *a), 1))(x, u, i)
    ref = jax.jit(jax.grad(lambda *a: f(jnp, *a), 1))(x, u, i)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(ref))
    dn = DN((1,), (0,), (0,))         # and a window out of bounds, through the primitive
    ours = shardc.jit(shardc.grad(lambda u: snp.sum(shardc.ops.indexing.scatter_add_p.bind(
        snp.zeros((4, 3)), np.array([[1], [4], [3]], np.int32), u,
        update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
        index_vector_dim=1) * np.arange(12.0).reshape(4, 3))))(np.ones((3, 3), np.float32))
    ref = jax.grad(lambda u: jnp.sum(jax.lax.scatter_add(
        jnp.zeros((4, 3)), np.array([[1], [4], [3]]), u, dn) * np.arange(12.0).reshape(4, 3)))(
        np.ones((3, 3), np.float32))
    np.testing.assert_allclose(np.asarray(ours), np.asarray(ref))


def _dense_mul(np_, x, idx, u):
    """scatter_mul of rows written densely (every update a factor of a one-hot row),
    which jax differentiates with repeated indices too."""
    hot = idx[:, None] == np.arange(x.shape[0])[None, :]
    return x * np_.prod(np_.where(hot[:, :, None], u[:, None, :], 1.0), axis=0)


def test_mul_grads_with_repeats_and_zeros():
    x = _data((6, 4), np.float32)
    u = _data((5, 4), np.float32)
    u[0, 1] = 0.0                      # a zero factor once (row 1) ...
    u[2, 2] = u[3, 2] = 0.0            # ... and twice (row 1 and row 4's 2nd column)
    idx = np.array([1, 4, 1, 4, 1])
    w = _data((6, 4), np.float32)
    dn = DN((1,), (0,), (0,))
    ours = shardc.jit(shardc.grad(lambda x, u: snp.sum(
        shardc.lax.scatter_mul(x, idx[:, None], u, dn) * w), (0, 1)))(x, u)
    ref = jax.jit(jax.grad(lambda x, u: jnp.sum(_dense_mul(jnp, x, idx, u) * w), (0, 1)))(x, u)
    for o, r in zip(ours, ref):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=2e-5, atol=2e-5)
    # unique indices: jax's own rule (it has none for repeats), sharded
    mesh = shardc.make_mesh((2, 4), ("x", "y"), axis_types=(shardc.AxisType.Auto,) * 2)
    xs = jax.device_put(x, NamedSharding(mesh, P(None, "y")))
    uniq = np.array([[5], [0], [2]], np.int32)
    ours = shardc.jit(shardc.grad(lambda x, u: snp.sum(
        shardc.lax.scatter_mul(x, uniq, u, dn) * w), (0, 1)))(xs, u[:3])
    ref = jax.jit(jax.grad(lambda x, u: jnp.sum(jax.lax.scatter_mul(
        x, uniq, u, dn, unique_indices=True) * w), (0, 1)))(xs, u[:3])
    for o, r in zip(ours, ref):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("name", ["min", "max", "multiply"])
def test_at_grads_with_repeats(mesh2x4, name):
    a = jax.device_put(_data((8, 16), np.float32), NamedSharding(mesh2x4, P("x", "y")))
    u = _data((5, 16), np.float32)
    u[2] = np.asarray(a)[1]            # ties with the operand (row 1)
    u[3] = u[0]                        # and between updates (row 1)
    w = _data((8, 16), np.float32)

    def f(m, a, u):
        return m.sum(getattr(a.at[IDX], name)(u) * w)
    ours = shardc.jit(shardc.grad(lambda a, u: f(snp, a, u), (0, 1)))(a, u)
    if name == "multiply":
        ref = jax.jit(jax.grad(lambda a, u: jnp.sum(_dense_mul(jnp, a, IDX, u) * w),
                               (0, 1)))(a, u)
    else:
        ref = jax.jit(jax.grad(lambda a, u: f(jnp, a, u), (0, 1)))(a, u)
    for o, r in zip(ours, ref):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=2e-5, atol=2e-5)
    assert ours[0].sharding.is_equivalent_to(a.sharding, 2), ours[0].sharding


def test_shardc_grad_of_jax_scatter_primitives():
    """shardc.grad through jax's scatter-min / -max translated (shardc's rules) equals
    jax.grad; scatter-mul with repeats has the exact gradient (jax has none)."""
    for name in ["scatter_min", "scatter_max"]:
        def loss(x, u, name=name):
            return jnp.sum(getattr(jax.lax, name)(x, TIE_IDX, u, DN1) * W)
        ours = shardc.jit(shardc.grad(loss, (0, 1)))(X, TIE_U[name])
        ref = jax.jit(jax.grad(loss, (0, 1)))(X, TIE_U[name])
        for o, r in zip(ours, ref):
            np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=1e-6, atol=1e-6)
    x, u, idx = _data((6, 4), np.float32), _data((5, 4), np.float32), np.array([1, 4, 1, 4, 1])
    ours = shardc.jit(shardc.grad(lambda x, u: jnp.sum(jax.lax.scatter_mul(
        x, idx[:, None], u, DN((1,), (0,), (0,))) * x), (0, 1)))(x, u)
    ref = jax.grad(lambda x, u: jnp.sum(_dense_mul(jnp, x, idx, u) * x), (0, 1))(x, u)
    for o, r in zip(ours, ref):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=2e-5, atol=2e-5)


# ---------------------------------------------------------------- vmap


VMAP = {   # in_axes of (operand, indices, updates)
    "operand": (0, None, None), "indices": (None, 0, None), "updates": (None, None, 0),
    "all": (0, 0, 0), "operand_updates_axis1": (1, None, 1),
}


@pytest.mark.parametrize("axes", sorted(VMAP))
@pytest.mark.parametrize("name", OPS)
def test_vmap_vs_jax(name, axes):
    in_axes = VMAP[axes]
    b = 3
    xs, us = (6, 5), (4, 5)
    x = _data((b,) + xs if in_axes[0] == 0 else (6, b, 5) if in_axes[0] == 1 else xs,
              np.float32)
    u = _data((b,) + us if in_axes[2] == 0 else (4, b, 5) if in_axes[2] == 1 else us,
              np.float32)
    i = np.array([[1], [3], [1], [1]], np.int32)
    i = np.stack([i, i[::-1], (i + 2) % 6]) if in_axes[1] == 0 else i
    dn = DN((1,), (0,), (0,))

    def f(lax):
        return lambda x, i, u: getattr(lax, name)(x, i, u, dn)
    ours = shardc.jit(shardc.vmap(f(shardc.lax), in_axes))(x, i, u)
    ref = jax.jit(jax.vmap(f(jax.lax), in_axes))(x, i, u)
    check_outputs(ours, ref)
    if name != "scatter_mul":          # (jax differentiates scatter_mul's updates only
        def loss(lax, np_):            # with unique indices)
            return lambda x, i, u: np_.sum(f(lax)(x, i, u) ** 2)
        g = shardc.jit(shardc.vmap(shardc.grad(loss(shardc.lax, snp), (0, 2)), in_axes))
        r = jax.jit(jax.vmap(jax.grad(loss(jax.lax, jnp), (0, 2)), in_axes))
        for o, e in zip(g(x, i, u), r(x, i, u)):
            np.testing.assert_allclose(np.asarray(o), np.asarray(e), rtol=2e-5, atol=2e-5)


def test_vmap_of_at_repeated():
    x, u = _data((3, 8), np.float32), _data((3, 5), np.float32)
    i = np.stack([IDX, IDX[::-1], IDX % 2]).astype(np.int32)
    for name in ["multiply", "min", "max"]:
        def f(a, u, i, name=name):
            return getattr(a.at[i], name)(u)
        check_outputs(shardc.jit(shardc.vmap(f))(x, u, i), jax.jit(jax.vmap(f))(x, u, i))


DN_ROWS = DN(update_window_dims=(1,), inserted_window_dims=(0,),
             scatter_dims_to_operand_dims=(0, 1))
ROWS = np.array([[0, 0], [2, 3], [2, 3], [7, 4], [9, 0], [3, -1], [5, 2], [6, 5]], np.int32)


@pytest.mark.parametrize("mode", [None, "clip"], ids=str)
@pytest.mark.parametrize("spec", [P(), P("x", "y")], ids=str)
def test_lax_scatter_replace_vs_jax(mesh2x4, mode, spec):
    """lax.scatter of windows, some repeated and some out of bounds (dropped, or clamped
    with clip): values, gradients and vmap as jax's."""
    a = _data((8, 16), np.float32)
    u = _data((8, 3), np.float32)
    w = _data((8, 16), np.float32)

    def f(lax):
        return lambda a, i, u: lax.scatter(a, i, u, DN_ROWS, mode=mode)
    xs = place(mesh2x4, [a], [spec])[0]
    check_outputs(shardc.jit(f(shardc.lax))(xs, ROWS, u), jax.jit(f(jax.lax))(xs, ROWS, u),
                  mesh2x4)
    ours = shardc.jit(shardc.grad(lambda a, u: snp.sum(snp.sin(
        f(shardc.lax)(a, ROWS, u)) * w), (0, 1)))(xs, u)
    ref = jax.jit(jax.grad(lambda a, u: jnp.sum(jnp.sin(f(jax.lax)(a, ROWS, u)) * w),
                           (0, 1)))(a, u)
    for o, r in zip(ours, ref):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=2e-5, atol=2e-5)
    rows = np.stack([ROWS, ROWS[::-1]])
    ours = shardc.jit(shardc.vmap(f(shardc.lax), in_axes=(None, 0, None)))(a, rows, u)
    ref = jax.jit(jax.vmap(f(jax.lax), in_axes=(None, 0, None)))(a, rows, u)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(ref))


def test_set_repeated_traced_index_grads(mesh2x4):
    """The gradient of a set whose traced index repeats reaches only the winning update,
    and the operand only where nothing was written (jax's rule), also through jax's own
    code inside shardc.jit."""
    a = _data((8, 16), np.float32)
    u = _data((5, 16), np.float32)
    i = IDX.astype(np.int32)

    def loss(m):
        return lambda a, u, i: m.sum(m.sin(a.at[i].set(u * 2.0)) * a)
    ref = jax.jit(jax.grad(loss(jnp), (0, 1)))(a, u, i)
    xs = place(mesh2x4, [a], [P("x", "y")])[0]
    for ours in (shardc.jit(shardc.grad(loss(snp), (0, 1)))(xs, u, i),
                 shardc.jit(jax.grad(loss(jnp), (0, 1)))(xs, u, i)):
        for o, r in zip(ours, ref):
            np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=2e-5, atol=2e-5)
