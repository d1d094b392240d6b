"""jnp.pad's modes past constant / edge / wrap / reflect / symmetric (test_ops_shape):
linear_ramp, maximum / minimum / mean / median with stat_length, empty, odd reflection,
reflections longer than the axis, per-axis constant values and a callable mode, on
sharded inputs, against jax.jit (values, dtypes, shardings) and NumPy; and jax's errors."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import Case, assert_close, compare_cases, data

MODES = {
    "ramp": lambda m, a: m.pad(a, ((2, 1), (3, 0)), mode="linear_ramp"),
    "ramp_ends": lambda m, a: m.pad(a, ((1, 2), (2, 2)), mode="linear_ramp",
                                    end_values=((-5, 5), (1, 2))),
    "max": lambda m, a: m.pad(a, ((1, 2), (2, 1)), mode="maximum"),
    "min_len": lambda m, a: m.pad(a, 2, mode="minimum", stat_length=((2, 3), (1, 20))),
    "mean": lambda m, a: m.pad(a, ((2, 0), (1, 3)), mode="mean", stat_length=3),
    "median": lambda m, a: m.pad(a, ((1, 1), (2, 0)), mode="median"),
    "median_len": lambda m, a: m.pad(a, 1, mode="median", stat_length=(2, 4)),
    "empty_zero": lambda m, a: m.pad(a, ((1, 0), (0, 2)), mode="empty") * 0,
    "reflect_odd": lambda m, a: m.pad(a, ((2, 3), (1, 2)), mode="reflect", reflect_type="odd"),
    "symmetric_odd": lambda m, a: m.pad(a, ((3, 1), (2, 2)), mode="symmetric",
                                        reflect_type="odd"),
    "reflect_long": lambda m, a: m.pad(a, ((20, 11), (0, 0)), mode="reflect"),
    "symmetric_long": lambda m, a: m.pad(a, ((0, 0), (40, 17)), mode="symmetric"),
    "wrap_long": lambda m, a: m.pad(a, ((17, 9), (1, 33)), mode="wrap"),
    "edge_wide": lambda m, a: m.pad(a, ((9, 0), (0, 20)), mode="edge"),
    "const_pairs": lambda m, a: m.pad(a, ((1, 2), (2, 1)), constant_values=((1, 2), (3, 4))),
    "const_pair": lambda m, a: m.pad(a, 1, constant_values=(-1, 9)),
    "const_one": lambda m, a: m.pad(a, 1, constant_values=np.array([3])),
}


def test_modes_against_jax_and_numpy(mesh2x4):
    cases = []
    for name, fn in MODES.items():
        for lid, spec in (("2d", P("x", "y")), ("d1", P(None, ("x", "y")))):
            cases.append(Case(f"{name}-{lid}", fn, [data((8, 16), np.float32)], [spec],
                              numpy_ref=name != "empty_zero"))
        cases.append(Case(f"{name}-int", fn, [data((8, 16), np.int32, "small")], [P("x")],
                          numpy_ref=name not in ("empty_zero", "ramp", "ramp_ends", "mean",
                                                 "median", "median_len")))
    compare_cases(cases, mesh2x4)


def test_rank_one_and_zero(mesh2x4):
    v = data((8,), np.float32)
    s = np.float32(2.5)
    compare_cases([
        Case("ramp1", lambda m, a: m.pad(a, (3, 2), mode="linear_ramp", end_values=(1, -1)),
             [v], [P("x")]),
        Case("mean1", lambda m, a: m.pad(a, 4, mode="mean"), [v], [P("x")]),
        Case("scalar", lambda m, a: m.pad(a, 3, mode="edge"), [s]),
        Case("bool_const", lambda m, a: m.pad(a > 0, 1, constant_values=True), [v], [P("x")]),
        Case("weak", lambda m, a: m.pad(a * 0 + 2, 1, mode="maximum"), [v], [P("x")]),
    ], mesh2x4)


def test_traced_constant_values_and_callable_mode(mesh2x4):
    x = data((4, 8), np.float32)

    def padder(row, width, iaxis, kwargs):
        before, after = width
        row = row.at[:before].set(kwargs.get("lo", 0.0))
        return row.at[len(row) - after:].set(kwargs.get("hi", 0.0))

    def f(m):
        def g(a, c):
            return m.pad(a, ((1, 0), (0, 2)), constant_values=c), \
                m.pad(a, 2, padder, lo=-10.0, hi=10.0)
        return g
    ours = shardc.jit(f(snp))(x, np.float32(7))
    ref = jax.jit(f(jnp))(x, np.float32(7))
    for o, r in zip(ours, ref):
        assert_close(o, r, "pad")


def test_gradients_match_jax(mesh2x4):
    x = data((6, 8), np.float32)

    def loss(m):
        return lambda a: (m.pad(a, ((2, 1), (1, 3)), mode="linear_ramp") ** 2).sum() + \
            (m.pad(a, 2, mode="mean", stat_length=3) * m.arange(12.0)).sum() + \
            (m.pad(a, ((3, 0), (0, 2)), mode="reflect", reflect_type="odd") ** 2).sum()
    assert_close(shardc.jit(shardc.grad(loss(snp)))(x), jax.jit(jax.grad(loss(jnp)))(x),
                 "grad pad")


@pytest.mark.parametrize("call", [
    lambda m, a: m.pad(a, 1, mode="nope"),
    lambda m, a: m.pad(a, 1, mode="edge", constant_values=1),
    lambda m, a: m.pad(a, 1, mode="constant", stat_length=2),
    lambda m, a: m.pad(a, -1),
    lambda m, a: m.pad(a, 1.5),
    lambda m, a: m.pad(a, ((1, 2, 3),)),
    lambda m, a: m.pad(a, 1, mode="mean", stat_length=0),
    lambda m, a: m.pad(a, 1, constant_values=np.ones((2, 3))),
    lambda m, a: m.pad(a[:, :0], ((0, 0), (1, 1)), mode="wrap"),
    lambda m, a: m.pad(a[:, :0], ((0, 0), (1, 1)), mode="reflect"),
], ids=["mode", "kwarg_edge", "kwarg_const", "negative", "float_width", "shape",
        "stat0", "const_shape", "empty_wrap", "empty_reflect"])
def test_errors_as_jax(call):
    a = np.ones((3, 4), np.float32)
    with pytest.raises(Exception) as ref:
        call(jnp, a)
    with pytest.raises(shardc.ShardcError) as ours:
        shardc.jit(lambda x: call(snp, x))(a)
    assert isinstance(ours.value, type(ref.value)) or \
        type(ref.value).__mro__[1] in type(ours.value).__mro__, (ref.value, ours.value)
