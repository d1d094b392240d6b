"""Indexing on traced arrays vs jax.jit and NumPy: basic indexing (ints, slices with
negative steps, None, ...) and integer-array indices (embedding lookups, x[:, idx],
traced index arrays and scalars, several broadcast together), over layouts and dtypes;
errors for what shardc cannot do."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import LAYOUTS_2D, Case, compare_cases, data

DTYPES = [np.bool_, np.int32, np.uint32, np.float16, "bfloat16", np.float32]
DT_IDS = ["bool", "i32", "u32", "f16", "bf16", "f32"]

BASIC = {
    "int": lambda m, a: a[3],
    "neg_int": lambda m, a: a[-1],
    "int_int": lambda m, a: a[1, -2],
    "col": lambda m, a: a[:, 3],
    "slice": lambda m, a: a[2:5],
    "slice_cols": lambda m, a: a[:, 4:12],
    "step": lambda m, a: a[::2],
    "step_cols": lambda m, a: a[:, 1::3],
    "reverse": lambda m, a: a[::-1],
    "reverse_both": lambda m, a: a[::-1, ::-1],
    "neg_step": lambda m, a: a[5:1:-2],
    "neg_step_cols": lambda m, a: a[:, -2::-3],
    "neg_bounds": lambda m, a: a[-3:, :-4],
    "empty": lambda m, a: a[5:2],
    "none": lambda m, a: a[None],
    "none_mid": lambda m, a: a[:, None, :],
    "ellipsis_none": lambda m, a: a[..., None],
    "ellipsis_int": lambda m, a: a[..., 3],
    "mixed": lambda m, a: a[1:-1, None, ::3],
    "int_slice_none": lambda m, a: a[2, None, 3:7],
}


@pytest.mark.parametrize("name", sorted(BASIC))
def test_basic_indexing(mesh2x4, name):
    fn = BASIC[name]
    cases = [Case(f"{name}-{lid}", lambda m, a, pre=pre: fn(m, pre(m, a)),
                  [data((8, 16), np.float32)], [spec]) for lid, spec, pre in LAYOUTS_2D]
    for dt, dt_id in zip(DTYPES, DT_IDS):
        if dt_id in ("bool", "bf16", "u32"):
            cases.append(Case(f"{name}-{dt_id}", fn, [data((8, 16), dt)], [P("x", "y")]))
    compare_cases(cases, mesh2x4)


def test_basic_indexing_3d(mesh2x4):
    a = data((4, 8, 16), np.float32)
    specs = [P("x", "y", None), P(None, "x", "y"), P("y", None, None)]
    fns = {
        "int_ellipsis_int": lambda m, a: a[1, ..., 2],
        "none_slice": lambda m, a: a[:, None, 1:3],
        "ellipsis_mid": lambda m, a: a[-1, ..., ::-2],
        "all_three": lambda m, a: a[1:3, ::-1, 4],
    }
    compare_cases([Case(f"{n}-{k}", fn, [a], [s]) for n, fn in fns.items()
                   for k, s in enumerate(specs)], mesh2x4)


IDX = np.array([3, -1, 0, 5, 3, 7, -8, 2], np.int32)
IDX2 = np.array([[1, 7], [0, -8], [2, 2]], np.int32)

# (id, fn(m, table, idx), idx array, spec of table, spec of idx); idx is an argument
# (traced) unless the fn closes over a constant
GATHER = [
    ("embed_const", lambda m, t, i: t[IDX], P("x", None), P()),
    # jax refuses list indices (NumPy and shardc take them): jax gets the array
    ("embed_list", lambda m, t, i: t[[1, 2, -3]] if m.__name__ != "jax.numpy" else
     t[np.array([1, 2, -3])], P(None, "y"), P()),
    ("embed_traced", lambda m, t, i: t[i], P("x", "y"), P()),
    ("embed_traced_rows", lambda m, t, i: t[i], P(None, "y"), P("x")),
    ("embed_traced_vocab", lambda m, t, i: t[i], P(("x", "y"), None), P()),
    ("embed_2d_idx", lambda m, t, i: t[IDX2], P(None, ("x", "y")), P()),
    ("embed_2d_traced", lambda m, t, i: t[i.reshape(4, 2)], P("y", None), P("x")),
    ("cols_const", lambda m, t, i: t[:, IDX], P("x", None), P()),
    ("cols_traced", lambda m, t, i: t[:, i], P("x", "y"), P("y")),
    ("cols_traced_2d", lambda m, t, i: t[:, IDX2], P("x", "y"), P()),
    ("slice_then_idx", lambda m, t, i: t[1:, i], P(None, "y"), P()),
    ("idx_then_slice", lambda m, t, i: t[i, 2:9], P("x", "y"), P()),
    ("idx_int", lambda m, t, i: t[i, 3], P("x", "y"), P()),
    ("int_idx", lambda m, t, i: t[2, i], P("x", "y"), P()),
    ("none_idx", lambda m, t, i: t[None, i], P("x", None), P()),
    ("idx_none", lambda m, t, i: t[:, None, i], P(None, "y"), P()),
    ("uneven_table", lambda m, t, i: t[1:][i % 7], P(("x", "y"), None), P()),
    ("computed_idx", lambda m, t, i: t[(i * 2) % 8], P(None, "y"), P()),
    ("traced_scalar", lambda m, t, i: t[i[0]], P("x", "y"), P()),
    # out-of-bounds indices are clamped, as in jax (NumPy raises: its reference clamps)
    ("out_of_bounds", lambda m, t, i: t[i * 3] if m.__name__ != "numpy" else t[
        np.clip(np.where(i * 3 < 0, i * 3 + 8, i * 3), 0, 7)], P("x", "y"), P()),
    ("traced_scalar_col", lambda m, t, i: t[:, i[1]], P("x", "y"), P("x")),
]


@pytest.mark.parametrize("group", [0, 1])
def test_integer_array_indexing(mesh2x4, group):
    table = data((8, 16), np.float32)
    cases = [Case(n, fn, [table, IDX], [st, si]) for n, fn, st, si in GATHER[group::2]]
    compare_cases(cases, mesh2x4)


def test_integer_array_indexing_3d_and_dtypes(mesh2x4):
    t3 = data((4, 8, 16), np.float32)
    i = np.array([2, 0, -1], np.int32)
    cases = [
        Case("3d_mid", lambda m, t, i: t[:, i], [t3, i], [P("x", "y", None), P()]),
        Case("3d_last", lambda m, t, i: t[..., i], [t3, i], [P(None, "x", "y"), P()]),
        Case("3d_mid_int", lambda m, t, i: t[:, i, 1], [t3, i], [P("x", None, "y"), P()]),
        Case("3d_noncontiguous", lambda m, t, i: t[i, :, 1], [t3, i], [P(None, "y", None), P()]),
        Case("3d_noncontiguous2", lambda m, t, i: t[1, :, i], [t3, i], [P("x", "y", None), P()]),
    ]
    for dt, dt_id in zip(DTYPES, DT_IDS):
        cases.append(Case(f"embed-{dt_id}", lambda m, t, i: t[i], [data((8, 16), dt), IDX],
                          [P("x", "y"), P()]))
    for idt in (np.uint32, np.int8):
        cases.append(Case(f"idx-{np.dtype(idt).name}", lambda m, t, i: t[i],
                          [data((8, 16), np.float32), np.array([1, 7, 0], idt)],
                          [P(None, "y"), P()]))
    compare_cases(cases, mesh2x4)


def test_several_integer_array_indices(mesh2x4):
    """Several integer arrays or traced scalars in one index broadcast together, as
    NumPy's advanced indexing (x[i, j] with traced i, j was refused)."""
    t3 = data((4, 8, 16), np.float32)
    i = np.array([2, 0, -1], np.int32)
    j = np.array([[5], [-8]], np.int32)
    s = np.int32(-3)
    L3 = [P("x", "y", None), P(), P(), P()]
    cases = [
        Case("scalars", lambda m, t, i, j, s: t[s, s + 5], [t3, i, j, s], L3),
        Case("scalars_apart", lambda m, t, i, j, s: t[s, :, s], [t3, i, j, s], L3),
        Case("broadcast", lambda m, t, i, j, s: t[i, j], [t3, i, j, s], L3),
        Case("apart", lambda m, t, i, j, s: t[i, 1:7:2, j], [t3, i, j, s], L3),
        Case("adjacent_last", lambda m, t, i, j, s: t[:, j, i], [t3, i, j, s],
             [P(None, "x", "y"), P(), P(), P()]),
        Case("with_int_none", lambda m, t, i, j, s: t[None, 1, j, i], [t3, i, j, s], L3),
        Case("with_scalar", lambda m, t, i, j, s: t[s, j, i], [t3, i, j, s], L3),
    ]
    compare_cases(cases, mesh2x4)


ERRORS = [
    ("bool_mask", lambda m, a: a[a > 0]),
    ("too_many", lambda m, a: a[1, 2, 3]),
    ("float_index", lambda m, a: a[1.5]),
    ("two_ellipsis", lambda m, a: a[..., 1, ...]),
]


def test_indexing_errors(mesh2x4):
    """What jax rejects, shardc rejects with a ShardcError at the user's line."""
    compare_cases([Case(n, fn, [data((8, 16), np.float32)], [P("x", None)]) for n, fn in ERRORS],
                  mesh2x4)


def test_static_index_out_of_bounds():
    """A static integer index out of bounds is clamped, as jax's (eagerly and under
    jit); a dim of size 0 has no element to clamp to."""
    x = np.arange(128, dtype=np.float32).reshape(8, 16)
    np.testing.assert_array_equal(np.asarray(shardc.jit(lambda a: a[8])(x)), x[7])
    np.testing.assert_array_equal(np.asarray(shardc.jit(lambda a: a[-9])(x)), x[0])
    f = shardc.jit(lambda a: a[0])
    with pytest.raises(shardc.ShardcError, match=r"test_ops_indexing.py:\d+: index 0 is out "
                       "of bounds for axis 0 with size 0"):
        f(np.ones((0, 16), np.float32))


def test_out_of_bounds_complex_reads_fill_nan():
    """jax fills an out-of-bounds complex read with nan+0j (shardc's default fill crashed
    on complex dtypes: take, take_along_axis, .at[].get, lax.gather)."""
    x = (np.arange(4) + 1j).astype(np.complex64)
    i = np.array([0, 5, -7])
    for f in (lambda m, x: m.take(x, i), lambda m, x: m.take_along_axis(x, i, axis=0),
              lambda m, x: x.at[i].get(mode="fill")):
        got = shardc.jit(lambda x: f(snp, x))(x)
        want = jax.jit(lambda x: f(jnp, x))(x)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
        assert np.isnan(np.asarray(got)[1].real)


_A45, _I31 = np.zeros((4, 5), np.float32), np.zeros((3, 1), np.int32)
BAD_GATHERS = {     # jax's TypeErrors (shardc failed in XLA's compile, "a shardc bug")
    "slice_too_big": (dict(offset_dims=(1,), collapsed_slice_dims=(0,),
                           start_index_map=(0,)), (1, 7)),
    "collapsed_wide": (dict(offset_dims=(1,), collapsed_slice_dims=(0,),
                            start_index_map=(0,)), (2, 5)),
    "map_out_of_range": (dict(offset_dims=(1,), collapsed_slice_dims=(0,),
                              start_index_map=(3,)), (1, 5)),
    "offsets_miscounted": (dict(offset_dims=(1, 2), collapsed_slice_dims=(0,),
                                start_index_map=(0,)), (1, 5)),
}


@pytest.mark.parametrize("name", sorted(BAD_GATHERS))
def test_malformed_gather_dimension_numbers_are_type_errors(name):
    kw, sizes = BAD_GATHERS[name]
    for L in (jax.lax, shardc.lax):
        with pytest.raises(TypeError):
            L.gather(_A45, _I31, L.GatherDimensionNumbers(**kw), sizes)


def test_malformed_scatter_dimension_numbers_are_type_errors():
    kw = dict(update_window_dims=(1,), inserted_window_dims=(1,),
              scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
              scatter_indices_batching_dims=(0,))
    for a in (np.zeros((3, 5, 2), np.float32), np.zeros((3, 5), np.float32)):
        for L in (jax.lax, shardc.lax):     # a window too large; a rank mismatch
            with pytest.raises(TypeError, match="(window|Bounds)"):
                L.scatter_add(a, _I31, np.ones((3, 5), np.float32),
                              L.ScatterDimensionNumbers(**kw))
