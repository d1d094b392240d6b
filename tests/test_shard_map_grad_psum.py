"""Gradients through shard_map bodies where an invariant value meets a varying one.

A psum's result is invariant over its axes; used beside a varying value it is
implicitly pvary'd, whose transpose is a psum of the cotangent (jax inserts the pvary
when check_vma=True). With check_vma=False jax transposes psum to psum and splits the
cotangent of outputs replicated over manual axes. Both were silently wrong before
(the gradient of c + psum(c) was 2/3 of jax's)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from shardc import lax as slax


def _bodies(np_, lax_):
    def v_div(c):
        s = lax_.psum(c.sum(), "x")
        return c / (1.0 + s * 0.01)

    def v_add(c):
        return c + lax_.psum(c, "x")

    def v_rep(c):
        return lax_.psum(c, "x") * 1.0

    def v_scan(c):
        def step(h, _):
            h = h + lax_.psum(np_.tanh(h), "x") * 0.5
            return h, None
        return lax_.scan(step, c, None, length=3)[0]
    return {"div": (v_div, P("x")), "add": (v_add, P("x")), "rep": (v_rep, P()),
            "scan": (v_scan, P("x"))}


@pytest.mark.parametrize("check_vma", [True, False])
def test_grad_of_invariant_meeting_varying(check_vma):
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    rng = np.random.default_rng(0)
    h = rng.normal(size=(16, 8)).astype(np.float32)
    w = rng.normal(size=(8, 8)).astype(np.float32) * 0.3
    sb, jb = _bodies(snp, slax), _bodies(jnp, jax.lax)

    def make(np_, sm, body, out_spec):
        def f(h, w):
            g = sm(lambda h, w: body(np_.tanh(h @ w)), mesh=mesh, in_specs=(P("x"), P()),
                   out_specs=out_spec, check_vma=check_vma)
            return g(h, w).sum()
        return f

    for name in sb:
        (s_body, spec), (j_body, _) = sb[name], jb[name]
        got = shardc.jit(shardc.grad(make(snp, shardc.shard_map, s_body, spec),
                                     argnums=(0, 1)))(h, w)
        want = jax.jit(jax.grad(make(jnp, jax.shard_map, j_body, spec), argnums=(0, 1)))(h, w)
        for a, b in zip(got, want):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=2e-5, atol=2e-5,
                                       err_msg=name)
