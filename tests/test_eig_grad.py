"""eig's derivatives against jax's: the eigenvalues' (eigvals, real and complex input),
the eigenvectors' with enable_eigvec_derivs=True (left and right, through LAPACK's
normalization), forward mode, a batch sharded over the mesh, vmap, jax's own eig inside
shardc.jit, and jax's refusal without the opt-in."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp

rng = np.random.default_rng(0)
A = rng.normal(size=(4, 5, 5)).astype(np.float32)
AC = (A + 1j * rng.normal(size=A.shape)).astype(np.complex64)
W = rng.normal(size=(4, 5)).astype(np.float32)


def eigvals_loss(np_):
    return lambda a: ((np_.linalg.eigvals(a) * W).real.sum()
                      + (np_.linalg.eigvals(a) ** 2).imag.sum())


def eigvec_loss(lax, left=True):
    def f(a):
        outs = lax.linalg.eig(a, compute_left_eigenvectors=left, enable_eigvec_derivs=True)
        return sum(((o * (1 + i)).real ** 2 + o.imag).sum() for i, o in enumerate(outs))
    return f


def close(got, want, tol=2e-5):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=tol, atol=tol)


def test_eigenvalue_gradients(mesh2x4):
    for a in (A, AC):
        close(shardc.jit(shardc.grad(eigvals_loss(snp)))(a), jax.grad(eigvals_loss(jnp))(a))
    # a batch sharded over the mesh: each device differentiates its own matrices
    xs = jax.device_put(A, NamedSharding(mesh2x4, P("x")))
    close(shardc.jit(shardc.grad(eigvals_loss(snp)))(xs), jax.grad(eigvals_loss(jnp))(A))
    # jax's own eig (jnp.linalg.eigvals) inside shardc.jit
    close(shardc.jit(jax.grad(eigvals_loss(jnp)))(A), jax.grad(eigvals_loss(jnp))(A))


def test_eigenvector_gradients():
    for a, left in ((A, True), (AC, False)):
        close(shardc.jit(shardc.grad(eigvec_loss(shardc.lax, left)))(a),
              jax.grad(eigvec_loss(jax.lax, left))(a), 1e-4)
    t = np.broadcast_to(W[..., None], A.shape).astype(np.float32)

    def f(lax):
        return lambda a: lax.linalg.eig(a, compute_left_eigenvectors=False,
                                        enable_eigvec_derivs=True)
    got = shardc.jvp(f(shardc.lax), (A,), (t,))[1]
    want = jax.jvp(f(jax.lax), (A,), (t,))[1]
    for g, w in zip(got, want):
        close(g, w, 1e-4)
    close(shardc.vmap(shardc.grad(eigvals_loss(snp)))(A[:, None]),
          jax.vmap(jax.grad(eigvals_loss(jnp)))(A[:, None]))


def test_eigenvectors_need_the_opt_in():
    with pytest.raises(shardc.ShardcError, match="enable_eigvec_derivs"):
        shardc.grad(lambda a: abs(snp.linalg.eig(a).eigenvectors).sum())(A)
    with pytest.raises(shardc.ShardcError, match="lapack implementation"):
        shardc.lax.linalg.eig(A, implementation=jax.lax.linalg.EigImplementation.MAGMA)
