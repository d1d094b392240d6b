"""lax.scatter_apply and x.at[idx].apply against jax.jit: a repeated index applies the
function again (f(f(x)) for a pair), traced and NumPy indices, window updates, clip
mode, promised-unique indices, and jax code reaching scatter_apply through the
frontend. Also lax.gather's batching dims, and the sharding arguments of lax.full &
co. and jax.nn.initializers."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import check_outputs, place

X = np.linspace(-1.0, 2.0, 32, dtype=np.float32).reshape(8, 4)
REPEATS = np.array([5, 1, 5, 5, 0, 7], np.int32)
DN = jax.lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0,))


def _both(fn, args, specs, mesh):
    """fn(lax, numpy) run under shardc.jit and jax.jit on the placed args."""
    inputs = place(mesh, args, specs)
    ours = shardc.jit(lambda *a: fn(shardc.lax, snp, *a))(*inputs)
    ref = jax.jit(lambda *a: fn(jax.lax, jnp, *a))(*inputs)
    return check_outputs(ours, ref, mesh)


def step(v):
    return v * 2 + 1


@pytest.mark.parametrize("mode", [None, "clip", "promise_in_bounds"])
def test_scatter_apply_repeated_rows(mesh2x4, mode):
    idx = np.array([[5], [1], [5], [9], [5]], np.int32)    # 9: out of bounds
    if mode == "promise_in_bounds":
        idx[3] = 0
    ours = _both(lambda lax, m, x, i: lax.scatter_apply(x, i, step, DN, update_shape=(5, 4),
                                                        mode=mode),
                 [X, idx], [P("x", "y"), P()], mesh2x4)
    # row 5 three times: ((x*2+1)*2+1)*2+1
    np.testing.assert_allclose(np.asarray(ours[0])[5], X[5] * 8 + 7)


def test_scatter_apply_unique_promise(mesh2x4):
    idx = np.array([[6], [2]], np.int32)
    _both(lambda lax, m, x, i: lax.scatter_apply(x, i, m.sin, DN,
                                                 update_shape=(2, 4), unique_indices=True),
          [X, idx], [P(None, "y"), P()], mesh2x4)


def test_at_apply_traced_repeats(mesh2x4):
    ours = _both(lambda lax, m, x, i: (x.at[i].apply(m.sin), x.at[i, 1].apply(step),
                                       x.at[i[3:]].apply(step, unique_indices=True)),
                 [X, REPEATS], [P("x"), P()], mesh2x4)
    np.testing.assert_allclose(np.asarray(ours[1])[5, 1], X[5, 1] * 8 + 7)


def test_at_apply_numpy_repeats_and_clip(mesh2x4):
    _both(lambda lax, m, x: (x.at[np.array([0, 0, 3])].apply(step),
                             x.at[np.array([2, 11, 11])].apply(step, mode="clip"),
                             x.at[10].apply(step, mode="clip"),
                             x.at[10].divide(4.0, mode="clip"),
                             x.at[np.array([1, 1])].divide(2.0, mode="clip")),
          [X], [P("x", "y")], mesh2x4)


def test_at_apply_int_dtype_and_vmap(mesh2x4):
    xi = (X * 4).astype(np.int32)
    _both(lambda lax, m, x, i: x.at[i].apply(lambda v: v // 2 + 3), [xi, REPEATS],
          [P("x"), P()], mesh2x4)
    ours = shardc.jit(shardc.vmap(lambda x, i: x.at[i].apply(step)))(
        X, np.array([[0, 0], [1, 2], [3, 3], [3, 3], [0, 1], [2, 2], [1, 1], [0, 3]]))
    ref = jax.vmap(lambda x, i: x.at[i].apply(step))(
        X, np.array([[0, 0], [1, 2], [3, 3], [3, 3], [0, 1], [2, 2], [1, 1], [0, 3]]))
    check_outputs(ours, ref)


def test_scatter_apply_through_the_frontend(mesh2x4):
    """jax code (jnp's .at[].apply binds scatter with an update function) in shardc.jit."""
    inputs = place(mesh2x4, [X, REPEATS], [P("x", "y"), P()])

    def f(x, i):
        return x.at[i].apply(lambda v: jnp.exp(v) - 1) + jax.lax.scatter_apply(
            x, i[:, None], step, DN, update_shape=(6, 4))
    check_outputs(shardc.jit(f)(*inputs), jax.jit(f)(*inputs), mesh2x4)


def test_gather_batching_dims(mesh2x4):
    """A gather with batching dims (jax's vmap of a dynamic_slice binds one)."""
    x = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
    starts = np.array([[0], [4], [2], [9], [1], [3], [0], [5]], np.int32)
    dn = jax.lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(),
                                        start_index_map=(1,), operand_batching_dims=(0,),
                                        start_indices_batching_dims=(0,))
    for mode in ("clip", "fill"):
        _both(lambda lax, m, a, s: lax.gather(a, s, dn, (1, 3), mode=mode),
              [x, starts], [P("x"), P()], mesh2x4)
    f = jax.vmap(lambda row, s: jax.lax.dynamic_slice(row, (s,), (3,)))
    inputs = place(mesh2x4, [x, starts[:, 0]], [P("x"), P("x")])
    check_outputs(shardc.jit(f)(*inputs), jax.jit(f)(*inputs), mesh2x4)


def test_full_and_initializers_sharding():
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(AxisType.Explicit,) * 2)
    s = NamedSharding(mesh, P("x", "y"))
    key = jax.random.key(0)

    def prog(lax, nn, k):
        return (lax.full((8, 4), 2.0, sharding=s), lax.empty((8, 4), jnp.float32,
                                                             out_sharding=s),
                lax.full_like(jnp.zeros((8, 4)), 3, sharding=s),
                nn.initializers.zeros(k, (8, 4), out_sharding=s),
                nn.initializers.constant(0.5)(k, (8, 4), out_sharding=s),
                nn.initializers.normal()(k, (8, 4), out_sharding=s),
                nn.initializers.glorot_uniform()(k, (8, 4), out_sharding=s),
                nn.initializers.lecun_normal()(k, (8, 4), out_sharding=s))
    with jax.set_mesh(mesh):
        ours = shardc.jit(lambda k: prog(shardc.lax, shardc.nn, k))(key)
        ref = jax.jit(lambda k: prog(jax.lax, jax.nn, k))(key)
    check_outputs(ours, ref, mesh)
    full = shardc.lax.full((8, 4), 1.5, sharding=s)       # outside a trace: placed
    assert full.sharding == s and np.asarray(full)[3, 2] == 1.5
    with pytest.raises(NotImplementedError, match="orthogonal"):
        shardc.nn.initializers.orthogonal()(key, (8, 4), out_sharding=s)


@pytest.mark.parametrize("name", ["take", "dynamic_slice", "at_add"])
def test_vmapped_indexing_keeps_the_batch_sharding(mesh2x4, name):
    """shardc.vmap of per-example indexing: the batch dim is a batching dim of the
    gather / scatter, so its sharding stays (it used to be an index column, which
    gathered the whole operand onto every device); gradients too."""
    x = np.linspace(-2.0, 2.0, 8 * 16, dtype=np.float32).reshape(8, 16)
    i = np.array([[3, 3], [0, 15], [7, 1], [2, 2], [9, 4], [5, 5], [14, 0], [1, 8]], np.int32)
    per = {"take": lambda m, lax, r, j: r[j] * 2,
           "dynamic_slice": lambda m, lax, r, j: lax.dynamic_slice(r, (j[0],), (4,)),
           "at_add": lambda m, lax, r, j: r.at[j].add(r[j[::-1]])}[name]
    inputs = place(mesh2x4, [x, i], [P("x"), P("x")])

    def loss(m, lax, vmap, r, j):
        return m.sum(vmap(lambda a, b: per(m, lax, a, b))(r, j) ** 2)
    ours = shardc.jit(shardc.vmap(lambda r, j: per(snp, shardc.lax, r, j)))(*inputs)
    ref = jax.jit(jax.vmap(lambda r, j: per(jnp, jax.lax, r, j)))(*inputs)
    check_outputs(ours, ref, mesh2x4)
    g = shardc.jit(shardc.grad(lambda r, j: loss(snp, shardc.lax, shardc.vmap, r, j)))(*inputs)
    gr = jax.jit(jax.grad(lambda r, j: loss(jnp, jax.lax, jax.vmap, r, j)))(*inputs)
    check_outputs(g, gr, mesh2x4)
    text = shardc.jit(shardc.vmap(lambda r, j: per(snp, shardc.lax, r, j))).lower(
        *inputs).as_text()
    assert "all_gather" not in text and "all-gather" not in text, text


def test_at_apply_negative_index_aliasing_a_positive(mesh2x4):
    """-1 and 7 name one row of 8 (-8 and 0 too): applied twice, as jax's (the NumPy
    index looked unique, -1 != 7, so the function was applied once)."""
    ours = _both(lambda lax, m, x: (x.at[np.array([-1, 7, 2])].apply(step),
                                    x.at[np.array([-8, 3]), 1:].apply(step),
                                    x.at[np.array([0, 2]), np.array([-1, 3])].apply(step)),
                 [X], [P("x", "y")], mesh2x4)
    np.testing.assert_allclose(np.asarray(ours[0])[7], X[7] * 4 + 3)
