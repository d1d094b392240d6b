"""A slice whose operand is split along a sliced dim by axes its result splits another
dim by ([{}, {x, y}] -> [{x}, {}]), beside another user of that operand resharded the
same way. XLA's partitioner mis-sizes such a slice (an XLA verifier error; jax.jit's
concatenate too). shardc reshards the operand whole first and slices it at the
result's sharding. References: NumPy."""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P  # noqa: E402

import shardc  # noqa: E402
import shardc.numpy as snp  # noqa: E402

X = np.arange(1, 1 + 8 * 8, dtype=np.float32).reshape(8, 8)
I = np.array([3, 0, 7, 7, 1], np.int32)

FNS = {
    "wrap": lambda L, v, i: L.concatenate([v, v[:, :3]], 1),
    "wrap_scaled": lambda L, v, i: L.concatenate([v, v[:, :3] * 2], 1),
    "both_ends": lambda L, v, i: L.concatenate([v[:, -2:], v, v[:, :2]], 1),
    "pad_and_slice": lambda L, v, i: L.pad(v, ((0, 0), (0, 1)))[:, :4] + v[:, :4],
    "set_rows": lambda L, v, i: v.at[i].set(v[:5]),          # jax.jit gets this one right
    "set_scaled": lambda L, v, i: v.at[i].set(v[:5] * 3),
}

# (function, operand spec, result spec, in a region: None, "scan" (body) or "cond" (branch))
CASES = [
    ("wrap", P(None, ("x", "y")), P("x"), None),
    ("wrap_scaled", P(None, ("x", "y")), P("x"), None),
    ("both_ends", P(None, ("y", "x")), P("y"), None),
    ("pad_and_slice", P(None, ("x", "y")), P("x"), None),
    ("set_rows", P(("x", "y")), P(None, "x"), None),
    ("set_scaled", P(("y", "x")), P(None, "y"), None),
    ("wrap", P(None, ("x", "y")), P("x"), "scan"),
    ("set_rows", P(("x", "y")), P(None, "x"), "scan"),
    ("wrap", P(None, ("x", "y")), P("x"), "cond"),
    ("pad_and_slice", P(None, ("x", "y")), P("x"), "cond"),
    # controls: XLA gets these right
    ("wrap", P(None, "x"), P("x"), None),
    ("wrap", P(None, ("x", "y")), P(("x", "y")), None),
]


@pytest.mark.parametrize("name, ispec, ospec, region", CASES)
def test_a_slice_that_moves_the_split_axes_matches_numpy(name, ispec, ospec, region):
    mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    f = FNS[name]
    ref = np.asarray(f(np, X.copy(), I)) if not name.startswith("set") else \
        np.asarray(f(jax.numpy, jax.numpy.asarray(X), I))

    def g(v, i):
        if region == "scan":
            return shardc.lax.scan(lambda c, _: (c, f(snp, c, i)), v, None, length=2)[1][1]
        if region == "cond":
            return shardc.lax.cond(i[0] > 0, lambda v: f(snp, v, i),
                                   lambda v: -f(snp, v, i), v)
        return f(snp, v, i)
    x = jax.device_put(X, NamedSharding(mesh, ispec))
    out = shardc.jit(g, out_shardings=NamedSharding(mesh, ospec))(x, I)
    np.testing.assert_array_equal(np.asarray(out), ref)
    for s in out.addressable_shards:
        np.testing.assert_array_equal(np.asarray(s.data), ref[s.index])


def test_a_slice_keeping_the_split_axes_is_not_held():
    mesh = jax.make_mesh((4, 2), ("x", "y"), axis_types=(AxisType.Auto,) * 2)
    x = jax.device_put(X, NamedSharding(mesh, P(None, "x")))
    f = shardc.jit(lambda v: v[:, :4] * 2, out_shardings=NamedSharding(mesh, P("y", "x")))
    assert "sharding_constraint" not in f.lower(x).as_text()
