"""Gradients of the decompositions and of shardc.numpy.linalg vs jax.grad, and bad inputs
raising a ShardcError at the user's line."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp
from helpers import data

RNG = np.random.default_rng(0)


def spd(n=4, batch=(4,)):
    a = data((*batch, n, n), np.float32)
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=np.float32)).astype(np.float32)


def W(shape, seed=3):
    return data(shape, np.float32, seed=seed)


def _check_grad(f_ours, f_ref, args, argnums=0, mesh=None, spec=None, tol=2e-4):
    if mesh is not None:
        args = [jax.device_put(a, NamedSharding(mesh, spec)) for a in args]
    got = shardc.jit(shardc.grad(f_ours, argnums=argnums))(*args)
    want = jax.jit(jax.grad(f_ref, argnums=argnums))(*args)
    for g, w in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)
        if mesh is not None:
            assert g.sharding.is_equivalent_to(w.sharding, g.ndim), (g.sharding, w.sharding)


def _low_rank(a):
    a = a.copy()
    a[:2, :, 4] = a[:2, :, 0] + a[:2, :, 1]           # rank 4
    a[2:, :, 3] = a[2:, :, 4] = a[2:, :, 0]           # rank 3
    return a


def _c64(shape, seed=7):
    return (W(shape, seed) + 1j * W(shape, seed + 1)).astype(np.complex64)


def lax_pair(body):
    return (lambda *a: body(shardc.lax.linalg, snp, *a),
            lambda *a: body(jax.lax.linalg, jnp, *a))


CASES = {
    "cholesky": (lambda L, m, a: (L.cholesky(a) * W(a.shape)).sum(), spd),
    "lu": (lambda L, m, a: (L.lu(a)[0] * W(a.shape)).sum(), lambda: W((4, 4, 4), 1)),
    "qr": (lambda L, m, a: (L.qr(a, full_matrices=False)[0] * W((4, 5, 3))).sum()
           + (L.qr(a, full_matrices=False)[1] * W((4, 3, 3), 4)).sum(),
           lambda: W((4, 5, 3), 1)),
    "eigh": (lambda L, m, a: (L.eigh(a)[0] * W((4, 4, 4))[..., :1]).sum()
             + (L.eigh(a)[1] ** 2 * W((4, 4), 5)).sum(), spd),
    "svd_s": (lambda L, m, a: (L.svd(a, compute_uv=False) ** 2 * W((4, 3))).sum(),
              lambda: W((4, 5, 3), 1)),
    "svd_uv_tall": (lambda L, m, a: _svd_loss(L, a), lambda: W((4, 5, 3), 1)),
    "svd_uv_wide": (lambda L, m, a: _svd_loss(L, a), lambda: W((4, 3, 5), 1)),
    "svd_uv_square": (lambda L, m, a: _svd_loss(L, a), lambda: W((4, 4, 4), 1)),
    "inv": (lambda L, m, a: (m.linalg.inv(a) * W(a.shape)).sum(), spd),
    "solve": (lambda L, m, a: (m.linalg.solve(a, W((4, 4, 2))) * W((4, 4, 2), 6)).sum(), spd),
    "det": (lambda L, m, a: m.linalg.det(a).sum(), lambda: W((4, 5, 5), 1)),
    "slogdet": (lambda L, m, a: m.linalg.slogdet(a)[1].sum(), spd),
    "slogdet_qr": (lambda L, m, a: m.linalg.slogdet(a, method="qr")[1].sum(), spd),
    "slogdet_2x2": (lambda L, m, a: m.linalg.slogdet(a)[1].sum(), lambda: W((4, 2, 2), 1)),
    # rank n - 1 and n - 2: the adjugate (jax's), not NaN through log|det|
    "det_singular": (lambda L, m, a: (m.linalg.det(a) * W((4,), 2)).sum(),
                     lambda: _low_rank(W((4, 5, 5), 1))),
    "det_complex": (lambda L, m, a: m.abs(m.linalg.det(a)).sum(), lambda: _c64((4, 5, 5))),
    "slogdet_complex": (lambda L, m, a: m.real(m.linalg.slogdet(a)[0] * 2j).sum()
                        + m.linalg.slogdet(a)[1].sum(), lambda: _c64((4, 4, 4))),
    "solve_complex": (lambda L, m, a: m.abs(m.linalg.solve(a, _c64((4, 4, 2), 6))).sum(),
                      lambda: _c64((4, 4, 4))),
    "lu_complex": (lambda L, m, a: m.abs(L.lu(a)[0]).sum(), lambda: _c64((4, 4, 4))),
    "pinv": (lambda L, m, a: (m.linalg.pinv(a) * W((4, 3, 5))).sum(), lambda: W((4, 5, 3), 1)),
    "norm2": (lambda L, m, a: m.linalg.norm(a, 2, axis=(1, 2)).sum(), lambda: W((4, 5, 3), 1)),
}


def _svd_loss(L, a):
    u, s, vt = L.svd(a, full_matrices=False)
    # sign-invariant in u and vt (a column's sign flips with its partner's)
    return ((u * u) * W(u.shape)).sum() + ((vt * vt) * W(vt.shape, 7)).sum() + \
        (s * W(s.shape, 8)).sum() + ((u[..., :, :1] * vt[..., :1, :1]) * W(u.shape[:-1] + (1,),
                                                                         9)).sum()


@pytest.mark.parametrize("name", sorted(CASES))
def test_grad_matches_jax(name):
    body, make = CASES[name]
    ours, ref = lax_pair(body)
    _check_grad(ours, ref, [make()])


def test_grad_batch_sharded(mesh2x4):
    body, make = CASES["cholesky"]
    ours, ref = lax_pair(body)
    _check_grad(ours, ref, [make()], mesh=mesh2x4, spec=P("x"))


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [True, False])
@pytest.mark.parametrize("unit", [True, False])
def test_triangular_solve_grad(left, lower, trans, unit):
    kw = dict(left_side=left, lower=lower, transpose_a=trans, unit_diagonal=unit)
    a, b = spd(), W((4, 4, 3) if left else (4, 3, 4), 1)
    w = W(b.shape, 2)

    def body(L, m, a, b):
        return (L.triangular_solve(a, b, **kw) * w).sum()
    ours, ref = lax_pair(body)
    _check_grad(ours, ref, [a, b], argnums=(0, 1))


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans,conj", [(False, False), (True, False), (False, True),
                                        (True, True)])
def test_triangular_solve_grad_complex(left, lower, trans, conj):
    """Complex gradients (jax's unconjugated transposes), conjugate_a with and without
    a transpose (LAPACK conjugates only with one: shardc conjugates a first)."""
    kw = dict(left_side=left, lower=lower, transpose_a=trans, conjugate_a=conj)
    a = _c64((4, 4, 4)) + 4 * np.eye(4, dtype=np.complex64)
    b = _c64((4, 4, 3) if left else (4, 3, 4), 9)

    def body(L, m, a, b):
        return m.abs(L.triangular_solve(a, b, **kw)).sum()
    ours, ref = lax_pair(body)
    _check_grad(ours, ref, [a, b], argnums=(0, 1))


def test_qr_grad_unsupported_case_raises():
    # (a wide matrix's, once refused here, is jax's rule now: tests/test_linalg_forms.py)
    with pytest.raises(shardc.ShardcError, match="QR decomposition derivative"):
        shardc.jit(shardc.grad(lambda a: shardc.lax.linalg.qr(a)[1].sum()))(W((5, 3)))


# ---------------------------------------------------------------- bad inputs

BAD = [
    ("cholesky_1d", lambda: snp.linalg.cholesky(snp.ones(3)), "at least two"),
    ("inv_nonsquare", lambda: snp.linalg.inv(snp.ones((3, 4))), r"\[\.\.\., n, n\]"),
    ("det_nonsquare", lambda: snp.linalg.det(snp.ones((2, 3, 4))), r"\[\.\.\., n, n\]"),
    ("solve_mismatch", lambda: snp.linalg.solve(snp.eye(3), snp.ones((4, 2))), "rows"),
    ("eigh_uplo", lambda: snp.linalg.eigh(snp.eye(3), UPLO="X"), "UPLO"),
    ("qr_mode", lambda: snp.linalg.qr(snp.eye(3), mode="bogus"), "mode"),
    ("tri_batch", lambda: shardc.lax.linalg.triangular_solve(snp.ones((2, 3, 3)),
                                                             snp.ones((3, 3, 2))),
     "batch dims"),
    ("outer_2d", lambda: snp.linalg.outer(snp.ones((2, 2)), snp.ones(2)), "one-dimensional"),
    ("cross_size", lambda: snp.linalg.cross(snp.ones(2), snp.ones(2)), "3-dimensional"),
]


@pytest.mark.parametrize("name", [b[0] for b in BAD])
@pytest.mark.parametrize("jit", [True, False])
def test_bad_input_names_user_line(name, jit):
    _, fn, match = next(b for b in BAD if b[0] == name)
    run = shardc.jit(fn) if jit else fn
    with pytest.raises(shardc.ShardcError, match=match) as e:
        run()
    assert e.value.loc is not None and e.value.loc.file.endswith("test_linalg_grad.py"), \
        e.value.loc


def test_int_input_promotes_as_jax():
    """lax.linalg.cholesky of an int matrix: jax promotes to float (NaN where not PD)."""
    x = np.ones((2, 2), np.int32)
    got = shardc.jit(shardc.lax.linalg.cholesky)(x)
    want = jax.jit(jax.lax.linalg.cholesky)(x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))


def test_eig_eigenvector_grad_needs_the_opt_in():
    # (eigenvalue and opted-in eigenvector gradients: tests/test_eig_grad.py)
    with pytest.raises(shardc.ShardcError, match="enable_eigvec_derivs"):
        shardc.jit(shardc.grad(lambda a: snp.real(snp.linalg.eig(a)[1]).sum()))(W((3, 3)))
