"""shardc.ops.segment_sum / _prod / _max / _min against jax.ops's: values, dtypes and
output shardings under jit (negative and out-of-range ids, the modes, buckets, empty
segments, complex, ints and bools), gradients, eager calls and jax's errors."""
import jax
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
from helpers import Case, compare_cases

NAMES = ["segment_sum", "segment_prod", "segment_max", "segment_min"]
rng = np.random.default_rng(0)
DATA = rng.normal(size=(16, 8)).astype(np.float32)
# a negative id and ids past the end are dropped (clip clamps them); segment 5 is empty
IDS = np.array([0, 3, 3, -1, 4, 7, 2, 2, 9, 0, 1, 1, 4, -3, 6, 6], np.int32)
SORTED = np.sort(np.abs(IDS) % 8).astype(np.int32)
CPLX = (rng.integers(-2, 3, (16, 4)) + 1j * rng.integers(-2, 3, (16, 4))).astype(np.complex64)
INTS = rng.integers(-50, 50, (16,)).astype(np.int8)


def ops(m):
    return shardc.ops if m.nn is shardc.nn else jax.ops


def _cases():
    cs = []
    for name in NAMES:
        def f(m, d, i, name=name):
            fn = getattr(ops(m), name)
            return [fn(d, i, 8), fn(d, i, num_segments=6, mode="clip"),
                    fn(d, i, 10, bucket_size=5), fn(d * 2, i, 8, unique_indices=False)]
        cs.append(Case(name, f, [DATA, IDS], [P("x", "y"), None], numpy_ref=False))
        cs.append(Case(name + ".sorted", lambda m, d, i, name=name: getattr(ops(m), name)(
            d, i, 8, indices_are_sorted=True), [DATA, SORTED], [P(None, "y"), P("x")],
            numpy_ref=False))
    cs.append(Case("complex", lambda m, d, i: [ops(m).segment_max(d, i, 8),
                                                ops(m).segment_min(d, i, 8),
                                                ops(m).segment_sum(d, i, 8)],
                   [CPLX, IDS], [P("x"), None], numpy_ref=False))
    cs.append(Case("ints", lambda m, d, i: [ops(m).segment_max(d, i, 9),
                                             ops(m).segment_prod(d, i, 9),
                                             ops(m).segment_sum(d, i, 9)],
                   [INTS, IDS], [None, None], numpy_ref=False))
    cs.append(Case("bools", lambda m, d, i: [ops(m).segment_max(d > 0, i, 9),
                                              ops(m).segment_min(d > 0, i, 9)],
                   [DATA[:, 0], IDS], [P("x"), None], numpy_ref=False))
    return cs


def test_segment_reductions_as_jax(mesh2x4):
    compare_cases(_cases(), mesh2x4)


def _weighted(seg):
    return lambda d: (seg(d) * np.arange(8)[:, None]).sum()


def test_segment_gradients_and_eager():
    for name in ("segment_sum", "segment_max"):
        np.testing.assert_allclose(
            shardc.jit(shardc.grad(_weighted(lambda d: getattr(shardc.ops, name)(d, IDS, 8))))(
                DATA),
            jax.grad(_weighted(lambda d: getattr(jax.ops, name)(d, IDS, 8)))(DATA),
            rtol=1e-5)
    # jax has no gradient of segment_prod with repeated ids: the reference is the
    # product of each segment's rows picked by a mask
    masks = (IDS[None, :] == np.arange(8)[:, None])[:, :, None]
    np.testing.assert_allclose(
        shardc.jit(shardc.grad(_weighted(lambda d: shardc.ops.segment_prod(d, IDS, 8))))(DATA),
        jax.grad(_weighted(lambda d: jax.numpy.where(masks, d[None], 1).prod(1)))(DATA),
        rtol=1e-5)
    # eager, and num_segments from the ids' values (concrete outside a trace)
    got = shardc.ops.segment_sum(DATA, np.abs(IDS))
    want = jax.ops.segment_sum(DATA, np.abs(IDS))
    assert got.shape == want.shape == (10, 8)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    mode = jax.lax.GatherScatterMode.CLIP       # jax's enum is accepted too
    np.testing.assert_allclose(shardc.ops.segment_min(DATA, IDS, 8, mode=mode),
                               jax.ops.segment_min(DATA, IDS, 8, mode=mode))


def test_segment_errors():
    f = shardc.jit(lambda d, i: shardc.ops.segment_sum(d, i))
    with pytest.raises(shardc.ShardcError, match="pass a static num_segments"):
        f(DATA, IDS)
    with pytest.raises(shardc.ShardcError, match="non-negative"):
        shardc.ops.segment_max(DATA, IDS, -1)
    with pytest.raises(shardc.ShardcError, match="booleans"):
        shardc.ops.segment_sum(DATA > 0, IDS, 4)
    with pytest.raises(shardc.ShardcError, match="leading dim"):
        shardc.ops.segment_sum(DATA[:3], IDS, 4)
    with pytest.raises(shardc.ShardcError, match="integers"):
        shardc.ops.segment_sum(DATA, IDS.astype(np.float32), 4)
