"""Transformations applied inside a shard_map body (check_vma on and off): jvp,
linearize, jacfwd, hessian, vmap(grad), vmap over collectives, closure_convert and
custom_vjp under vmap, against jax.jit of jax.shard_map on the same body.

Each of these traces the user's function again into a region of the body; the region's
arguments must vary over the manual axes as the values they stand for do. They once
did not, and the results were silently wrong: an invariant stand-in met varying values,
and the transposed pass summed the tangents over the mesh (jvp 8x too large, psum of an
"invariant" value multiplied by the axis size), or a gradient lost its psum."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import assert_close

V = np.arange(16, dtype=np.float32) / 10
A = np.arange(64, dtype=np.float32).reshape(4, 16) / 10
W = np.float32(0.5)


def _both(mesh, make, args, in_specs, out_specs, check_vma=True):
    """make(M, m) -> body; the body under jax's and shardc's jit(shard_map)."""
    outs = []
    for M, m in ((jax, jnp), (shardc, snp)):
        f = M.jit(M.shard_map(make(M, m), mesh=mesh, in_specs=in_specs, out_specs=out_specs,
                              check_vma=check_vma))
        outs.append(f(*args))
    ref, got = outs
    for g, r in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref),
                    strict=True):
        assert_close(g, r, "shardc vs jax")


ONE_AXIS = {    # body(M, m) on a block of V (P("x")); results P("x")
    "jvp_sin": lambda M, m: lambda a: M.jvp(m.sin, (a,), (a,)),
    "jvp_psum": lambda M, m: lambda a: M.jvp(lambda r: M.lax.psum(m.sin(r), "x"), (a,), (a,)),
    "jvp_pmean": lambda M, m: lambda a: M.jvp(lambda r: M.lax.pmean(r * r, "x"), (a,), (a,)),
    "jvp_ppermute": lambda M, m: lambda a: M.jvp(
        lambda r: M.lax.ppermute(m.sin(r), "x", [(i, (i + 1) % 8) for i in range(8)]),
        (a,), (a,)),
    "jvp_all_gather": lambda M, m: lambda a: M.jvp(
        lambda r: M.lax.all_gather(m.cos(r), "x", tiled=True)[:2], (a,), (a,)),
    "jvp_psum_scatter": lambda M, m: lambda a: M.jvp(
        lambda r: M.lax.psum_scatter(m.tile(r * r, 8), "x", tiled=True), (a,), (a,)),
    "linearize": lambda M, m: lambda a: M.linearize(
        lambda r: M.lax.psum(m.sin(r), "x"), a)[1](a),
    "jacfwd": lambda M, m: lambda a: M.jacfwd(lambda r: m.sin(r) * r)(a).sum(0),
    "jvp_while": lambda M, m: lambda a: M.jvp(   # forward mode's own walk (no vjp)
        lambda r: M.lax.while_loop(lambda c: c[1] < 3,
                                   lambda c: (m.sin(c[0]) + r, c[1] + 1), (r, 0))[0],
        (a,), (a,)),
}


@pytest.mark.parametrize("check_vma", [True, False])
@pytest.mark.parametrize("name", sorted(ONE_AXIS))
def test_forward_mode_inside_a_body(mesh8, name, check_vma):
    out = P("x")
    if name.startswith("jvp"):
        out = (out, out)
    _both(mesh8, ONE_AXIS[name], (V,), P("x"), out, check_vma)


def test_hessian_inside_a_body_then_psum(mesh8):
    _both(mesh8, lambda M, m: lambda a: M.lax.psum(
        M.hessian(lambda r: (m.sin(r) ** 3).sum())(a), "x"), (V,), P("x"), P())


def test_jvp_of_a_psum_returned_invariant(mesh8):
    """out_specs P() after a psum: the tangent is invariant too (no false "varies")."""
    _both(mesh8, lambda M, m: lambda a: M.jvp(lambda r: M.lax.psum(m.sin(r), "x"),
                                              (a,), (a,)), (V,), P("x"), (P(), P()))


@pytest.mark.parametrize("reduce", ["sum", "pmean"])
def test_vmapped_grad_of_an_invariant_argument(mesh8, reduce):
    """The gradient of a replicated w is psummed over the manual axis, vmapped or not."""
    def make(M, m):
        def body(w, a):
            g = M.vmap(M.grad(lambda w, r: m.sin(r * w).sum()), in_axes=(None, 0))(w, a)
            return g.sum() if reduce == "sum" else M.lax.pmean(g.sum(), "x")
        return body
    _both(mesh8, make, (W, A), (P(), P(None, "x")), P())


@pytest.mark.parametrize("check_vma", [True, False])
@pytest.mark.parametrize("axes", [("x",), ("x", "b"), ("b", "x")])
def test_vmapped_collectives_are_invariant(mesh8, axes, check_vma):
    """psum/pmax over the manual axis under vmap: invariant results, out_specs P(None)."""
    want = np.broadcast_to(A.reshape(4, 8, 2).sum((0, 1)) if "b" in axes
                           else A.reshape(4, 8, 2).sum(1), (4, 2))
    f = shardc.jit(shardc.shard_map(
        lambda a: shardc.vmap(lambda r: shardc.lax.psum(r, axes), axis_name="b")(a),
        mesh=mesh8, in_specs=P(None, "x"), out_specs=P(None), check_vma=check_vma))
    np.testing.assert_allclose(np.asarray(f(A)), want, rtol=1e-6)
    if axes == ("x",):
        _both(mesh8, lambda M, m: lambda a: M.vmap(lambda r: M.lax.pmax(r, "x"))(a),
              (A,), P(None, "x"), P(None), check_vma)


def test_custom_vjp_vmapped_inside_a_body(mesh8):
    def make(M, m):
        @M.custom_vjp
        def f(w, r):
            return m.sin(r) * w

        f.defvjp(lambda w, r: (f(w, r), (w, r)),
                 lambda res, g: (M.lax.psum((g * m.sin(res[1])).sum(), "x"),
                                 g * m.cos(res[1]) * res[0]))

        def body(w, a):   # (w invariant: its cotangent must be, as jax checks)
            return M.vmap(M.grad(lambda w, r: f(w, r).sum()), in_axes=(None, 0))(w, a)
        return body
    _both(mesh8, make, (W, A), (P(), P(None, "x")), P())


@pytest.mark.parametrize("check_vma", [True, False])
@pytest.mark.parametrize("name", ["grad", "value_and_grad", "jacrev"])
def test_cotangents_seeded_invariant_vary_as_their_outputs(mesh8, name, check_vma):
    """A gradient's seed 1.0 and jacrev's basis meet a varying output: they are marked
    varying (jax's pullback pvarys them), so an invariant argument's gradient through
    an add is summed over the axis (it once was not: fuzz seed 3204, program 61)."""
    def make(M, m):
        f = lambda y: m.sin(y) + M.lax.axis_index("x").astype(y.dtype)  # noqa: E731
        if name == "grad":
            return lambda y: M.grad(lambda y: m.sum(f(y)))(y)
        if name == "value_and_grad":
            return lambda y: M.value_and_grad(lambda y: m.sum(f(y) * 2))(y)[1]
        return lambda y: M.jacrev(f)(y)
    _both(mesh8, make, (V[:4],), P(), P(), check_vma)
