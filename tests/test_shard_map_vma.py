"""Which manual axes a value varies over after each collective (jax's `vma`): a
reduction after the collective sums when the value varies and scales when it does
not, so a wrong rule gives a wrong value. Each body runs under shardc.shard_map and
jax.shard_map (check_vma on) on an invariant and on a varying input."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp

from shardc.ir.program import print_program
from shardc.ir.parse import parse_program

from helpers import check_outputs, sample

PERM = ((0, 1), (1, 2), (2, 3))   # no wrap: device 0 receives zeros

BODIES = {
    "psum_scatter": lambda l, m, y: l.psum_scatter(y, "b", scatter_dimension=1, tiled=True),
    "psum_scatter_untiled": lambda l, m, y: l.psum_scatter(y[:, :4], "b",
                                                           scatter_dimension=1),
    "all_gather": lambda l, m, y: l.all_gather(y, "b", axis=1, tiled=True),
    "all_gather_stacked": lambda l, m, y: l.all_gather(y, "b"),
    "all_to_all": lambda l, m, y: l.all_to_all(y, "b", 1, 0, tiled=True),
    "ppermute": lambda l, m, y: l.ppermute(y, "b", PERM),
    "psum": lambda l, m, y: l.psum(y, "b"),
    "pmax": lambda l, m, y: l.pmax(y, "b"),
    "pmean": lambda l, m, y: l.pmean(y, "b"),
    "axis_index": lambda l, m, y: y * l.axis_index("b"),
    "psum_two_axes": lambda l, m, y: l.psum(y, ("a", "b")),
}
AFTER = {
    "psum": lambda l, m, z: l.psum(z, "b"),
    "pmax": lambda l, m, z: l.pmax(z, "b"),
    "psum_a": lambda l, m, z: l.psum(z, "a"),
    "sum_then_psum": lambda l, m, z: l.psum(m.sum(z, axis=0), ("a", "b")),
}


def _run(sm, lax, m, body, after, x, in_spec, mesh):
    def f(y):
        return after(lax, m, body(lax, m, y))
    return sm(f, mesh=mesh, in_specs=in_spec, out_specs=P())(x)


class _SplitLax:
    """jax.lax, but a psum over several axes is one psum per axis: jax 0.10 refuses a
    psum over axes some of which the value varies on and some not; shardc takes it,
    and its value is that of the psums one after the other."""

    def __getattr__(self, name):
        return getattr(jax.lax, name)

    @staticmethod
    def psum(x, axes):
        for a in (axes,) if isinstance(axes, str) else axes:
            x = jax.lax.psum(x, a)
        return x


@pytest.mark.parametrize("after", sorted(AFTER))
@pytest.mark.parametrize("name", sample(sorted(BODIES), 2))
@pytest.mark.parametrize("in_spec", [P(), P("a"), P(None, "b")], ids=["inv", "a", "b"])
def test_collective_then_reduction(name, after, in_spec):
    mesh = shardc.make_mesh((2, 4), ("a", "b"), axis_types=(shardc.AxisType.Auto,) * 2)
    x = np.arange(64, dtype=np.float32).reshape(4, 16) - 20
    x = jax.device_put(x, NamedSharding(mesh, P()))
    body, aft = BODIES[name], AFTER[after]

    def ours():
        return shardc.jit(lambda x: _run(shardc.shard_map, shardc.lax, snp, body, aft, x,
                                         in_spec, mesh))(x)
    try:
        ref = jax.jit(lambda x: _run(jax.shard_map, jax.lax, jnp, body, aft, x, in_spec,
                                     mesh))(x)
    except ValueError as e:
        if "out_specs" in str(e):     # the result varies where out_specs claim it does not
            with pytest.raises(shardc.ShardcError, match="out_specs"):
                ours()
            return
        assert "psum can only accept" in str(e), e
        ref = jax.jit(lambda x: _run(jax.shard_map, _SplitLax(), jnp, body, aft, x,
                                     in_spec, mesh))(x)
    check_outputs(ours(), ref, mesh)


def test_issue_repro():
    mesh = shardc.make_mesh((2, 4), ("a", "b"), axis_types=(shardc.AxisType.Auto,) * 2)
    body = lambda y: shardc.lax.psum(shardc.lax.psum_scatter(y, "b", scatter_dimension=1,
                                                             tiled=True), "b")
    got = shardc.shard_map(body, mesh=mesh, in_specs=P(), out_specs=P())(
        np.arange(16.).reshape(2, 8))
    np.testing.assert_array_equal(np.asarray(got), [[48, 64], [176, 192]])


@pytest.mark.parametrize("name", sorted(set(BODIES) - {"psum_two_axes"}))
@pytest.mark.parametrize("placed", [P(), P("a"), P("a", "b")], ids=["rep", "a", "ab"])
@pytest.mark.parametrize("in_spec", [P(), P(None, "b")], ids=["inv", "b"])
def test_partial_manual(name, placed, in_spec):
    """Manual over "b" only; "a" stays automatic (the input may be sharded over it)."""
    mesh = shardc.make_mesh((2, 4), ("a", "b"), axis_types=(shardc.AxisType.Auto,) * 2)
    x = np.arange(64, dtype=np.float32).reshape(4, 16) - 20
    x = jax.device_put(x, NamedSharding(mesh, placed))
    body = BODIES[name]

    def run(sm, lax, m):
        f = sm(lambda y: lax.psum(body(lax, m, y), "b") * 2, mesh=mesh, in_specs=in_spec,
               out_specs=P(), axis_names={"b"})
        return f(x) + 1
    ref = jax.jit(lambda: run(jax.shard_map, jax.lax, jnp))()
    ours = shardc.jit(lambda: run(shardc.shard_map, shardc.lax, snp))()
    check_outputs(ours, ref, mesh)


def test_partial_manual_axis_index_issue_repro():
    mesh = shardc.make_mesh((2, 4), ("a", "b"), axis_types=(shardc.AxisType.Auto,) * 2)
    f = shardc.shard_map(lambda y: y * 0 + shardc.lax.axis_index("a"), mesh=mesh,
                         in_specs=P("a"), out_specs=P("a"), axis_names={"a"})
    np.testing.assert_array_equal(np.asarray(shardc.jit(f)(np.arange(8.))),
                                  [0, 0, 0, 0, 1, 1, 1, 1])
    text = shardc.jit(f).trace(np.arange(8.)).ir
    assert "auto=" in text
    assert print_program(parse_program(text)) == text


def test_a_value_a_region_captured_keeps_its_variance(mesh8):
    """A scan inside a cond: the cond's branch captures the varying `a` and passes it on
    as the scan's carry. The captured value varies as `a` does, so the psum in the scan
    sums (it scaled: `a` read as the same on every device)."""
    x = jax.device_put(np.arange(16.0, dtype=np.float32), NamedSharding(mesh8, P("x")))

    def prog(sm, lax):
        def body(a):
            def branch(_):
                return lax.scan(lambda c, _: (c + lax.psum(c, "x"), None), a, None,
                                length=2)[0]
            return lax.cond(a[0] > -1, branch, lambda _: a, 0)
        return sm(body, mesh=mesh8, in_specs=P("x"), out_specs=P("x"))
    check_outputs(shardc.jit(prog(shardc.shard_map, shardc.lax))(x),
                  jax.jit(prog(jax.shard_map, jax.lax))(x), mesh8)
