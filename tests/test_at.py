"""x.at[idx].set/add/subtract/multiply/divide/power/min/max/apply/get vs jax.jit (values,
dtypes, output shardings) and their gradients vs jax.grad."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import compare, sample

RNG = np.random.default_rng(3)
A = RNG.standard_normal((8, 16)).astype(np.float32)
I = RNG.integers(-9, 9, (8, 16)).astype(np.int32)
B = RNG.standard_normal((8, 16)) > 0

UPDATES = {
    "set_row": lambda m, a: a.at[2].set(1),
    "set_slice": lambda m, a: a.at[1:5, ::3].set(a[0, 0]),
    "set_neg_ellipsis": lambda m, a: a.at[..., -1].set(a[:, 0]),
    "set_array_idx": lambda m, a: a.at[np.array([5, 0, 7])].set(a[:3] * 2),
    "set_dup_equal": lambda m, a: a.at[:, np.array([1, 3, 1])].set(0),
    "add_dups": lambda m, a: a.at[np.array([1, 1, 4, 1])].add(a[:4]),
    "add_cols": lambda m, a: a.at[:, 2:6].add(3),
    "subtract": lambda m, a: a.at[np.array([0, 2]), 1:3].subtract(1),
    "multiply": lambda m, a: a.at[3:, np.array([0, 15])].multiply(a[3:, :2]),
    "divide": lambda m, a: a.at[0].divide(2),
    "power": lambda m, a: a.at[:, 0].power(2),
    "min": lambda m, a: a.at[1:4].min(0),
    "max": lambda m, a: a.at[np.array([6, 2])].max(a[:2]),
    "apply": lambda m, a: a.at[::2].apply(lambda v: v * v),
    "get": lambda m, a: a.at[np.array([1, 5]), 3].get(),
    "traced_idx_set": lambda m, a: a.at[m.argmax(a[0])].set(9),      # may be out of bounds
    "oob_static": lambda m, a: a.at[np.array([-9, 3, 8, -1])].add(1),
    "traced_idx_add": lambda m, a: a.at[:, (m.argmax(a, axis=1) % 4)].add(1),
    # boxes (ints, traced scalars, unit-step slices): one slice + dynamic_update_slice
    "box_traced_oob": lambda m, a: a.at[m.argmax(a[0]) + 20].set(9),
    "box_traced_neg": lambda m, a: a.at[-1 - m.argmax(a[0]) % 3, 2:5].add(a[0, :3]),
    "box_traced_2d": lambda m, a: a.at[m.argmax(a[0]) % 8, m.argmin(a[1]) - 40].max(5),
    "box_clamped": lambda m, a: a.at[-3:100, 14:].multiply(a[:3, :2]),
    "box_empty": lambda m, a: a.at[5:2].set(1),
    "box_newaxis": lambda m, a: a.at[None, 2, ..., 1:4].subtract(a[0, :3]),
    "box_broadcast": lambda m, a: a.at[1:3].set(a[0]),
    "box_power": lambda m, a: a.at[m.argmin(a[2]) % 8].power(2),
    # mode="clip" clamps traced indices too (negative ones counted from the end first)
    "clip_traced_set": lambda m, a: a.at[m.argmax(a, axis=1) * 3 - 10].set(1, mode="clip"),
    "clip_traced_add": lambda m, a: a.at[:, m.argmin(a, axis=0) * 2 - 12].add(
        a[:, :1], mode="clip"),
    "clip_traced_max": lambda m, a: a.at[m.argmax(a[0]) * 3 - 20, 2].max(5, mode="clip"),
    # (constant updates: jax.jit multiplies in the padding of rows split 2 + 1 by x)
    "clip_traced_mul": lambda m, a: a.at[m.argmax(a[:, :3], axis=0) - 9].multiply(
        np.full((3, 16), 2, np.float32), mode="clip"),
}


@pytest.mark.parametrize("spec", [P(), P("x"), P("x", "y")], ids=str)
@pytest.mark.parametrize("name", sample(sorted(UPDATES), 2))
def test_at_vs_jax(mesh2x4, name, spec):
    compare(UPDATES[name], [A], [spec], mesh2x4, numpy_ref=False)


@pytest.mark.parametrize("name", ["set_row", "set_array_idx", "set_dup_equal", "add_dups",
                                  "max", "traced_idx_add", "divide"])
def test_at_ints_and_bools(mesh2x4, name):
    compare(UPDATES[name], [I], [P(None, "y")], mesh2x4, numpy_ref=False)
    if name.startswith("set"):
        compare(lambda m, b: b.at[np.array([1, 3])].set(True), [B], [P("x")], mesh2x4,
                numpy_ref=False)
        compare(lambda m, b: b.at[:, np.array([3, 3])].set(False), [B], [P("x")], mesh2x4,
                numpy_ref=False)


EDGES = {
    # a static repeated index keeps its last write (jax on CPU does), big values intact
    "set_dup_last": lambda m, a: a.at[np.array([0, 2, 0])].set(np.array([1, 2, 3], a.dtype)),
    "set_dup_max": lambda m, a: a.at[np.array([1, 1])].set(m.iinfo(a.dtype).max
                                                          if a.dtype.kind in "iu" else 3e38),
    "set_oob_int": lambda m, a: a.at[9].set(1),
    "set_neg_zero": lambda m, a: 1 / a.at[np.array([0, 1])].set(-0.0) if a.dtype.kind == "f"
    else a.at[0].set(0),
    "uint_traced_idx": lambda m, a: a.at[(a[:2] % 3).astype(m.uint32)].set(7),
}


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.float16], ids=str)
@pytest.mark.parametrize("name", sorted(EDGES))
def test_at_edges(mesh8, name, dtype):
    a = (np.arange(8) % 5).astype(dtype)
    compare(EDGES[name], [a], [P("x")], mesh8, numpy_ref=False)


def test_set_repeated_traced_index_last_write():
    # a traced index may repeat; one write wins, the last on CPU (as jax.jit's scatter)
    out = shardc.jit(lambda a, i: a.at[i].set(np.array([2.0, 4.0], np.float32)))(
        np.zeros(3, np.float32), np.array([0, 0], np.int32))
    np.testing.assert_array_equal(out, [4.0, 0.0, 0.0])


@pytest.mark.parametrize("name", ["set_slice", "set_array_idx", "add_dups", "multiply",
                                  "max", "apply", "get", "box_traced_neg", "box_broadcast",
                                  "box_clamped"])
def test_at_grads(mesh2x4, name):
    f = UPDATES[name]
    # jax does not differentiate apply, nor multiply without unique_indices=True: the
    # reference writes the same update as a set
    cols = np.array([0, 15])
    g = {"multiply": lambda m, a: a.at[3:, cols].set(a[3:, cols] * a[3:, :2]),
         "box_clamped": lambda m, a: a.at[-3:, 14:].set(a[-3:, 14:] * a[:3, :2]),
         "apply": lambda m, a: a.at[::2].set(a[::2] * a[::2])}.get(name, f)
    x = jax.device_put(A, NamedSharding(mesh2x4, P("x", "y")))
    w = RNG.standard_normal(np.shape(f(jnp, jnp.asarray(A)))).astype(np.float32)
    ours = shardc.jit(shardc.grad(lambda a: snp.sum(f(snp, a) * w)))(x)
    ref = jax.jit(jax.grad(lambda a: jnp.sum(g(jnp, a) * w)))(x)
    np.testing.assert_allclose(np.asarray(ours), np.asarray(ref), rtol=2e-5, atol=2e-5)


def test_at_errors():
    # (multiply / min / max take repeated indices: tests/test_scatter_combine.py; apply
    # too: tests/test_scatter_apply.py)
    with pytest.raises(shardc.ShardcError, match="does not accept dtype bool"):
        shardc.jit(lambda b: b.at[0].subtract(True))(B)
    # a bool array with a number: combined in the promoted dtype, cast back (as jax's)
    for v in (np.float32(1.7), -1, 0.5):
        for meth in ("add", "subtract", "multiply"):
            got = shardc.jit(lambda b: getattr(b.at[1:3], meth)(v))(B)
            np.testing.assert_array_equal(
                np.asarray(got), np.asarray(getattr(jnp.asarray(B).at[1:3], meth)(v)))
    np.testing.assert_allclose(shardc.jit(lambda a: a.at[1].mul(2))(A),
                               jnp.asarray(A).at[1].multiply(2))

    def assign(a):
        a[0] = 1
        return a
    with pytest.raises(shardc.ShardcError, match=r"x.at\[idx\].set"):
        shardc.jit(assign)(A)
