"""A scatter into an operand split unevenly along a dim its indices address (7 rows
over 4 devices). XLA's partitioner writes the wrong rows there, jax.jit's too; shardc
scatters such dims whole and splits the result after. References: NumPy."""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import shardc  # noqa: E402

X = (np.arange(7 * 6 * 5, dtype=np.float32).reshape(7, 6, 5) % 11) / 7 + 0.5
V = np.full((5,), 3.0, np.float32)


@pytest.mark.parametrize("spec", [P("x"), P("x", "y")])
@pytest.mark.parametrize("op, mode, traced", [
    ("multiply", None, True), ("multiply", "promise_in_bounds", True),
    ("add", "promise_in_bounds", True), ("add", "promise_in_bounds", False),
    ("add", None, True), ("set", None, True)])          # (the last two: controls)
def test_a_scatter_into_an_unevenly_split_operand_matches_numpy(spec, op, mode, traced):
    mesh = shardc.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)

    def con(a):
        return shardc.lax.with_sharding_constraint(a, NamedSharding(mesh, spec))
    j = 4
    want = X.copy()
    want[j, 2] = {"multiply": want[j, 2] * 3, "add": want[j, 2] + 3, "set": 3.0}[op]
    if traced:
        out = shardc.jit(lambda x, j, v: con(getattr(con(x).at[j, 2], op)(v, mode=mode)))(
            X, np.int32(j), V)
    else:
        out = shardc.jit(lambda x, v: con(getattr(con(x).at[j, 2], op)(v, mode=mode)))(X, V)
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)


@pytest.mark.parametrize("spec", [P("x"), P("x", "y")])
@pytest.mark.parametrize("op, mode, traced", [
    ("multiply", None, True), ("add", "promise_in_bounds", True),
    ("add", "promise_in_bounds", False), ("set", None, True)])     # (the last: control)
def test_the_same_scatter_in_a_cond_branch_matches_numpy(spec, op, mode, traced):
    """A branch's ops carry no shardings (XLA picks them): the scatter is held whole by
    constraints there (8 of 12 such cases were wrong before)."""
    mesh = shardc.make_mesh((4, 2), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)

    def con(a):
        return shardc.lax.with_sharding_constraint(a, NamedSharding(mesh, spec))
    want = X.copy()
    want[4, 2] = {"multiply": want[4, 2] * 3, "add": want[4, 2] + 3, "set": 3.0}[op]

    def branch(x, j, v):
        return getattr(con(x).at[j if traced else 4, 2], op)(v, mode=mode)
    out = shardc.jit(lambda x, j, v: con(shardc.lax.cond(
        j > 0, branch, lambda x, j, v: x * 0, x, j, v)))(X, np.int32(4), V)
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-6)
