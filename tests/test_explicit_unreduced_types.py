"""Unreduced (partial sums) and reduced axes in explicit mode's types, against jax: they
follow jax's per-op rules through slices, layout changes, sums, casts and elementwise
ops (typeof names them), a jit's results keep them (an unreduced result is left as
its partial sums, a reduced one says so in its spec), and partial sums reshard in
another jit or outside one. Ops jax refuses on them (a whole value added to
partial sums, a nonlinear op, a dot of partial sums, a replicated operand beside a
reduced one) are type errors naming the user's line, where shardc reduced implicitly
before."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.errors import ShardingTypeError

A = np.arange(8 * 16, dtype=np.float32).reshape(8, 16) / 100
B = np.arange(16 * 4, dtype=np.float32).reshape(16, 4) / 10


def _mesh(m):
    return m.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Explicit,) * 2)


def _u(m, n, x, w):
    """A dot contracting a dim split over Y, left as partial sums over Y: f32[8,4]{U:Y}."""
    return n.matmul(m.reshard(x, P(None, "Y")), m.reshard(w, P("Y", None)),
                    out_sharding=P(None, None, unreduced={"Y"}))


def _r(m, x):
    return m.reshard(x, P(reduced={"Y"}))


OK = {
    "transpose": lambda m, n, x, w: _u(m, n, x, w).T,
    "slice": lambda m, n, x, w: _u(m, n, x, w)[:4],
    "sum": lambda m, n, x, w: _u(m, n, x, w).sum(),
    "sum axis 0": lambda m, n, x, w: _u(m, n, x, w).sum(axis=0),
    "sum of two": lambda m, n, x, w: _u(m, n, x, w) + _u(m, n, x, w),
    "times reduced": lambda m, n, x, w: _u(m, n, x, w) * _r(m, x[:, :4]),
    "concatenate": lambda m, n, x, w: n.concatenate([_u(m, n, x, w), _u(m, n, x, w)]),
    # (jax's concatenate: reduced where any operand is)
    "concatenate, reduced and plain": lambda m, n, x, w: n.concatenate([_r(m, x), x]),
    "concatenate, plain and reduced": lambda m, n, x, w: n.concatenate([x[:2], _r(m, x)]),
    "cast": lambda m, n, x, w: _u(m, n, x, w).astype(np.float16),
    "reduced": lambda m, n, x, w: _r(m, x),
    "reduced, elementwise": lambda m, n, x, w: n.sin(_r(m, x)) * 2 + _r(m, x),
    "reduced, a sum": lambda m, n, x, w: _r(m, x).sum(0),
}


def _run(m, n, f):
    seen = []

    def g(x, w):
        out = f(m, n, x, w)
        seen.append(str(m.typeof(out)))
        return out
    with m.set_mesh(_mesh(m)):
        out = m.jit(g)(A, B)
        spec = out.sharding.spec
        if spec.unreduced:      # partial sums: reduced by the next program
            out = m.jit(lambda v: m.reshard(v, P()))(out)
    return seen[0], spec, np.asarray(out, np.float32)


@pytest.mark.parametrize("name", list(OK))
def test_types_results_and_values_as_jax(name):
    want_t, want_spec, want_v = _run(jax, jnp, OK[name])
    got_t, got_spec, got_v = _run(shardc, snp, OK[name])
    assert got_t == want_t
    assert got_spec == want_spec
    np.testing.assert_allclose(got_v, want_v, rtol=2e-3 if name == "cast" else 1e-5)


def test_an_unreduced_result_passed_to_another_jit():
    def run(m, n):
        with m.set_mesh(_mesh(m)):
            u = m.jit(lambda x, w: _u(m, n, x, w))(A, B)
            assert u.sharding.spec == P(None, None, unreduced={"Y"})
            return np.asarray(m.jit(lambda v: m.reshard(v.T, P("Y")))(u))
    np.testing.assert_allclose(run(shardc, snp), run(jax, jnp), rtol=1e-5)
    np.testing.assert_allclose(run(shardc, snp), (A @ B).T, rtol=1e-5)


def test_eager_reshard_of_partial_sums():
    def run(m, n):
        with m.set_mesh(_mesh(m)):
            u = _u(m, n, A, B)      # (outside jit: an op at a time)
            assert u.sharding.spec == P(None, None, unreduced={"Y"})
            return np.asarray(m.reshard(u, P("Y")))
    np.testing.assert_allclose(run(shardc, snp), run(jax, jnp), rtol=1e-5)


BAD = {
    "plus a constant": lambda m, n, x, w: _u(m, n, x, w) + 1,
    "plus a whole value": lambda m, n, x, w: _u(m, n, x, w) + x[:, :4],
    "times a whole value": lambda m, n, x, w: _u(m, n, x, w) * x[:, :4],
    "times a constant": lambda m, n, x, w: _u(m, n, x, w) * 2,
    "product of two": lambda m, n, x, w: _u(m, n, x, w) * _u(m, n, x, w),
    "a dot of partial sums": lambda m, n, x, w: _u(m, n, x, w) @ w[:4],
    "nonlinear": lambda m, n, x, w: n.sin(_u(m, n, x, w)),
    "reduced beside replicated": lambda m, n, x, w: _r(m, x) + x,
    "reduced beside sharded": lambda m, n, x, w: _r(m, x) + m.reshard(x, P(None, "Y")),
    # (concatenate keeps reduced axes where any operand has them, not beside one
    # sharded on them: shardc raised PartitionSpec's ValueError)
    "concatenate, reduced beside sharded": lambda m, n, x, w: n.concatenate(
        [_r(m, x), m.reshard(x, P(None, "Y"))]),
}


@pytest.mark.parametrize("name", list(BAD))
def test_what_jax_refuses_is_a_type_error(name):
    with jax.set_mesh(_mesh(jax)):
        with pytest.raises((jax.errors.JaxRuntimeError, NotImplementedError, Exception)) as e:
            jax.jit(lambda x, w: BAD[name](jax, jnp, x, w))(A, B)
    assert type(e.value).__name__ in ("ShardingTypeError", "NotImplementedError")
    with shardc.set_mesh(_mesh(shardc)):
        with pytest.raises(ShardingTypeError, match="test_explicit_unreduced_types.py:") as e:
            shardc.jit(lambda x, w: BAD[name](shardc, snp, x, w))(A, B)
    assert "unreduced" in str(e.value) or "reduced over" in str(e.value)


FORWARD = {   # (shardc re-traced the dot typed: 'ambiguous how the output should be sharded')
    "jvp": lambda m, n, x, w: m.jvp(
        lambda x: m.reshard(_u(m, n, x, w), P()), (x,), (x,))[1],
    "hessian-vector product": lambda m, n, x, w: m.jvp(m.grad(
        lambda x: (m.reshard(_u(m, n, x, w), P()) ** 2).sum()), (x,), (x,))[1],
}


@pytest.mark.parametrize("name", list(FORWARD))
def test_forward_mode_through_a_dot_left_as_partial_sums(name):
    want_v = _run(jax, jnp, FORWARD[name])[2]
    got_v = _run(shardc, snp, FORWARD[name])[2]
    np.testing.assert_allclose(got_v, want_v, rtol=1e-5)
