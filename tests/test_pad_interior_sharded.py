"""A pad with interior padding whose result is split along an interior-padded dim
that its operand does not split the same way. XLA's partitioner gets this wrong
(jax.jit too): values off by up to the largest element, or per-device buffers of
the wrong size. shardc pads such dims whole and splits the result after. The
references are eager jax.lax.pad on one device."""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

import shardc  # noqa: E402

X = np.arange(1, 1 + 4 * 8 * 4, dtype=np.float32).reshape(4, 8, 4)

# (operand placement (None: a NumPy array), result spec, padding of dim 1, in a cond)
CASES = [
    (P(), P(None, "y"), (0, 1, 1), False),                 # main: buffers of size 7, not 8
    (P(), P(None, ("x", "y")), (1, 0, 1), False),          # main: off by 128
    (None, P("x", "y"), (-2, 3, 1), False),                # negative low: off by 128
    (P("x"), P(None, "y"), (-2, 3, 1), False),
    (P(), P(None, "x"), (0, 1, 1), True),                  # in a cond branch: XLA rejected it
    (None, P(None, ("x", "y")), (-2, 3, 1), True),         # off by 124
    # controls: XLA gets these right, and shardc keeps the pad split
    (P(None, "y"), P(None, "y"), (0, 1, 1), False),
    (P(), P("x"), (0, 1, 1), False),
]


def _mesh():
    return jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)


@pytest.mark.parametrize("ispec, ospec, dim1, in_cond", CASES)
def test_a_pad_split_along_an_interior_padded_dim_matches_one_device(ispec, ospec, dim1,
                                                                      in_cond):
    mesh = _mesh()
    pads = [(0, 0, 0), dim1, (0, 0, 0)]
    ref = np.asarray(jax.lax.pad(X, np.float32(0), pads))
    x = X if ispec is None else jax.device_put(X, NamedSharding(mesh, ispec))

    def pad(v):
        return shardc.lax.pad(v, np.float32(0), pads)

    def f(v):
        return shardc.lax.cond(v.sum() > 0, pad, lambda v: pad(v) * 2, v) if in_cond \
            else pad(v)
    out = shardc.jit(f, out_shardings=NamedSharding(mesh, ospec))(x)
    assert out.sharding.spec == ospec
    np.testing.assert_array_equal(np.asarray(out), ref)
    for s in out.addressable_shards:      # each device holds its own block of the result
        np.testing.assert_array_equal(np.asarray(s.data), ref[s.index])


def test_the_split_pad_of_a_matching_operand_stays_split():
    """Padded whole only where XLA would get it wrong: an operand split like the result
    keeps the pad split (no constraint in the lowering)."""
    mesh = _mesh()
    x = jax.device_put(X, NamedSharding(mesh, P(None, "y")))
    f = shardc.jit(lambda v: shardc.lax.pad(v, np.float32(0), [(0, 0, 0), (0, 1, 1), (0, 0, 0)]),
                   out_shardings=NamedSharding(mesh, P(None, "y")))
    assert "sharding_constraint" not in f.lower(x).as_text()
    g = shardc.jit(lambda v: shardc.lax.pad(v, np.float32(0), [(0, 0, 0), (0, 1, 1), (0, 0, 0)]),
                   out_shardings=NamedSharding(mesh, P(None, "y")))
    assert "sharding_constraint" in g.lower(X).as_text()
