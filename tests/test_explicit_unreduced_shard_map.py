"""Explicit mode, against jax: a shard_map whose out_specs name unreduced axes
(P(..., unreduced={'Y'})) returns its per-device partial sums as an unreduced array
(shardc raised: the result varies along Y), which a later jit or reshard sums; an
unreduced argument passes in with in_specs naming the same axes; gradients through
both are jax's. A result the same on every device along an unreduced axis is an
error, as jax's."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc.errors import ShardcError

from test_explicit_unreduced_types import A, B, _mesh, _run, _u

UY = P(None, None, unreduced={"Y"})


def _api(m):
    return (jax.shard_map, jax.lax) if m is jax else (shardc.shard_map, shardc.lax)


def _partial(m, rows=None, body=lambda lax, a, b: a @ b):
    """x @ w with the contraction split over Y, each device's product left unsummed."""
    sm, lax = _api(m)

    def f(x, w):
        return sm(lambda a, b: body(lax, a, b), in_specs=(P(rows, "Y"), P("Y", None)),
                  out_specs=P(rows, None, unreduced={"Y"}))(
            m.reshard(x, P(rows, "Y")), m.reshard(w, P("Y", None)))
    return f


CASES = {
    "out_specs unreduced": lambda m, n, x, w: _partial(m)(x, w),
    "rows over X too": lambda m, n, x, w: _partial(m, "X")(x, w),
    "then a sum and a transpose": lambda m, n, x, w: (lambda u: (u + u).T)(_partial(m)(x, w)),
    "in_specs unreduced": lambda m, n, x, w: _api(m)[0](
        lambda u: _api(m)[1].psum(u, "Y"), in_specs=UY, out_specs=P())(_u(m, n, x, w)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_partial_sums_through_shard_map_as_jax(name):
    want_t, want_spec, want_v = _run(jax, jnp, CASES[name])
    got_t, got_spec, got_v = _run(shardc, snp, CASES[name])
    assert got_t == want_t
    assert got_spec == want_spec
    np.testing.assert_allclose(got_v, want_v, rtol=1e-5)


def test_resharded_outside_jit_and_passed_to_another():
    def run(m):
        with m.set_mesh(_mesh(m)):
            u = m.jit(_partial(m))(A, B)
            assert u.sharding.spec == UY
            return (np.asarray(m.reshard(u, P("Y"))),
                    np.asarray(m.jit(lambda v: m.reshard(v.T, P("Y")))(u)))
    for got, want in zip(run(shardc), run(jax)):
        np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("where", ["out_specs", "in_specs"])
def test_gradients_as_jax(where):
    def run(m, n):
        sm, lax = _api(m)

        def loss(x, w):
            if where == "out_specs":
                v = m.reshard(_partial(m)(x, w), P())
            else:
                v = sm(lambda u: lax.psum(u, "Y"), in_specs=UY, out_specs=P())(_u(m, n, x, w))
            return (v ** 2).sum()
        with m.set_mesh(_mesh(m)):
            return [np.asarray(g) for g in m.jit(m.grad(loss, argnums=(0, 1)))(A, B)]
    for got, want in zip(run(shardc, snp), run(jax, jnp)):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_a_result_invariant_along_an_unreduced_axis_is_an_error():
    f = _partial(shardc, body=lambda lax, a, b: lax.psum(a @ b, "Y"))
    with shardc.set_mesh(_mesh(shardc)):
        with pytest.raises(ShardcError, match="test_explicit_unreduced_shard_map.py:.*summand"):
            shardc.jit(f)(A, B)


def test_vmap_of_it_keeps_the_partial_sums():
    """(jax: NotImplementedError; against NumPy)"""
    def f(m, n, x, w):
        xs = m.reshard(n.stack([x, x * 2]), P(None, None, "Y"))
        return m.vmap(lambda a: _partial(m)(a, w))(xs)
    got_t, got_spec, got_v = _run(shardc, snp, f)
    assert got_spec == P(None, None, None, unreduced={"Y"}), got_t
    np.testing.assert_allclose(got_v, np.stack([A @ B, 2 * A @ B]), rtol=1e-5)


@pytest.mark.parametrize("out_specs", [P(None, None, unreduced={"Y"}, reduced={"X"}),
                                       P(reduced={"Y"})])
def test_out_specs_naming_reduced_axes_the_output_lacks_refused_as_jax(out_specs):
    for m in (jax, shardc):
        sm, _ = _api(m)

        def f(x, w):
            return sm(lambda a, b: a @ b, in_specs=(P(None, "Y"), P("Y", None)),
                      out_specs=out_specs)(m.reshard(x, P(None, "Y")), m.reshard(w, P("Y", None)))
        with m.set_mesh(_mesh(m)):
            with pytest.raises(ValueError, match="reduced present on the out_aval"):
                m.jit(f)(A, B)


def test_out_specs_reduced_from_in_specs_as_jax():
    def f(m, n, x, w):
        sm, _ = _api(m)
        return sm(lambda a: a + a, in_specs=P(reduced={"Y"}), out_specs=P(reduced={"Y"}))(
            m.reshard(x, P(reduced={"Y"})))
    want = _run(jax, jnp, f)
    got = _run(shardc, snp, f)
    assert got[:2] == want[:2]
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6)


REDUCED_THROUGH_REGIONS = {
    "checkpoint": lambda m, lax, a: m.checkpoint(lambda b: b + b)(a),
    "scan": lambda m, lax, a: lax.scan(lambda c, _: (c + c, None), a, None, length=2)[0],
    "fori_loop": lambda m, lax, a: lax.fori_loop(0, 2, lambda i, c: c + c, a),
    "while_loop": lambda m, lax, a: lax.while_loop(
        lambda c: c[0] < 2, lambda c: (c[0] + 1, c[1] + c[1]), (0, a))[1],
    "cond": lambda m, lax, a: lax.cond(True, lambda b: b + b, lambda b: b, a),
    "remat of a scan of a cond": lambda m, lax, a: m.checkpoint(lambda b: lax.scan(
        lambda c, _: (lax.cond(True, lambda d: d + d, lambda d: d, c), None), b, None,
        length=2)[0])(a),
}


@pytest.mark.parametrize("name", REDUCED_THROUGH_REGIONS)
def test_out_specs_reduced_through_region_ops_as_jax(name):
    """A value reduced over Y stays so through a cond, scan, loop or checkpoint (ops
    added whole, with regions): out_specs naming Y are jax's (shardc refused them)."""
    def f(m, n, x, w):
        sm, lax = _api(m)
        return sm(lambda a: REDUCED_THROUGH_REGIONS[name](m, lax, a), in_specs=P(reduced={"Y"}),
                  out_specs=P(reduced={"Y"}))(m.reshard(x, P(reduced={"Y"})))
    want = _run(jax, jnp, f)
    got = _run(shardc, snp, f)
    assert got[:2] == want[:2]
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6)


@pytest.mark.parametrize("reduced_in", [False, True])
def test_out_specs_reduced_unchecked_without_check_vma_as_jax(reduced_in):
    """check_vma=False: jax does not check out_specs' reduced axes against the output's
    (nor track them), so P(reduced={'Y'}) of any replicated value is accepted."""
    spec = P(reduced={"Y"}) if reduced_in else P()

    def f(m, n, x, w):
        sm, lax = _api(m)
        return sm(lambda a: lax.cond(True, lambda b: b + b, lambda b: b, a), in_specs=spec,
                  out_specs=P(reduced={"Y"}), check_vma=False)(m.reshard(x, spec))
    want = _run(jax, jnp, f)
    got = _run(shardc, snp, f)
    assert got[:2] == want[:2]
    np.testing.assert_allclose(got[2], want[2], rtol=1e-6)
