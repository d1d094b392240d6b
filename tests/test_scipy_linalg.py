"""shardc.scipy.linalg vs jax.scipy.linalg under jit: values, dtypes (complex included),
result order and output shardings of stacks of matrices on the 2x4 mesh, gradients vs
jax.grad, eager calls, float64's paths, and jax's errors. Each test compiles its cases
as one program."""
import inspect
import warnings

import jax
import jax.numpy as jnp
import jax.scipy.linalg as JL
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.scipy.linalg as SL
from helpers import Case, assert_close, compare_cases, data

# jax.scipy.linalg.solve(assume_a="pos") warns about its own batched cho_solve
pytestmark = pytest.mark.filterwarnings("ignore:.*batched 1D solves:FutureWarning")


def sl(m):
    """The linalg module matching a test namespace (shardc's or jax's)."""
    return SL if m.nn is shardc.nn else JL


def gen(shape, seed=0, dtype=np.float32):
    a = data(shape, np.float32, seed=seed)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * data(shape, np.float32, seed=seed + 100)
    return a.astype(dtype)


def spd(n=4, batch=(8,), seed=0, dtype=np.float32):
    a = gen((*batch, n, n), seed, dtype)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def well(n=4, batch=(8,), seed=0, dtype=np.float32):
    """Diagonally dominant (well-conditioned, and triangular parts too)."""
    return (gen((*batch, n, n), seed, dtype) + 3 * n * np.eye(n)).astype(dtype)


A8, S8, B8 = well(), spd(), gen((8, 4, 3), seed=1)
C4, H4 = well(batch=(4,), dtype=np.complex64), spd(batch=(4,), dtype=np.complex64)
V8 = gen((8, 4), seed=2)
BATCH, BATCH2 = P("x"), P(("x", "y"))


def _case(label, fn, arrays, specs):
    return Case(label, lambda m, *xs: fn(sl(m), *xs), arrays, specs, numpy_ref=False)


def test_decompositions(mesh2x4):
    cases = [
        _case("cholesky", lambda s, a: s.cholesky(a), [S8], [BATCH]),
        _case("cholesky_lower_c", lambda s, a: s.cholesky(a, lower=True), [H4], [P("y")]),
        _case("cho_solve", lambda s, a, b: s.cho_solve(s.cho_factor(a), b), [S8, B8],
              [BATCH2, BATCH2]),
        _case("cho_solve_vec", lambda s, a, b: s.cho_solve(s.cho_factor(a, lower=True), b),
              [S8[0], V8[0]], [P(), P()]),
        _case("svd", lambda s, a: s.svd(a, full_matrices=False)[1], [B8], [BATCH]),
        _case("svd_vals", lambda s, a: s.svd(a, compute_uv=False), [B8], [P(None, "y")]),
        _case("det_c", lambda s, a: s.det(a), [C4], [P("y")]),
        _case("inv", lambda s, a: s.inv(a), [A8], [BATCH]),
        _case("eigh", lambda s, a: s.eigh(a)[0], [S8], [BATCH]),
        _case("eigh_upper", lambda s, a: s.eigh(a, lower=False, eigvals_only=True), [H4],
              [P("y")]),
        _case("lu_factor", lambda s, a: s.lu_factor(a), [A8], [BATCH]),
        _case("lu_solve", lambda s, a, b: s.lu_solve(s.lu_factor(a), b), [A8, B8],
              [BATCH, BATCH]),
        _case("lu_solve_T", lambda s, a, b: s.lu_solve(s.lu_factor(a), b, trans=1), [A8, B8],
              [BATCH2, BATCH2]),
        _case("lu_solve_H_c", lambda s, a, b: s.lu_solve(s.lu_factor(a), b, trans=2),
              [C4[0], V8[0].astype(np.complex64)], [P(), P()]),
        _case("lu", lambda s, a: s.lu(a), [A8[0]], [P()]),
        _case("lu_wide_c", lambda s, a: s.lu(a[:3]), [C4[0]], [P()]),
        _case("lu_permute_l", lambda s, a: s.lu(a[:, :3], permute_l=True), [A8[0]], [P()]),
        _case("qr", lambda s, a: s.qr(a), [B8], [BATCH]),
        _case("qr_econ_piv", lambda s, a: s.qr(a, mode="economic", pivoting=True), [B8],
              [BATCH2]),
        _case("qr_r_c", lambda s, a: s.qr(a, mode="r"), [C4], [P("y")]),
        _case("qr_multiply", lambda s, a, c: s.qr_multiply(a, c), [B8, B8[:, :2]],
              [BATCH, BATCH]),
        _case("qr_multiply_left", lambda s, a, c: s.qr_multiply(a, c, mode="left",
                                                               conjugate=True),
              [B8, B8[:, :3, :2]], [BATCH, BATCH]),
        _case("qr_multiply_piv_vec", lambda s, a, c: s.qr_multiply(a, c, pivoting=True),
              [B8[0], V8[0]], [P(), P()]),
    ]
    compare_cases(cases, mesh2x4)


def test_solvers(mesh2x4):
    cases = [
        _case("solve", lambda s, a, b: s.solve(a, b), [A8, B8], [BATCH, BATCH]),
        _case("solve_sym", lambda s, a, b: s.solve(a, b, assume_a="sym"), [S8, V8],
              [BATCH2, BATCH2]),
        _case("solve_pos", lambda s, a, b: s.solve(a, b, assume_a="pos"), [S8, B8],
              [BATCH, BATCH]),
        _case("solve_pos_vec_c", lambda s, a, b: s.solve(a, b, assume_a="pos", lower=True),
              [H4[0], V8[0].astype(np.complex64)], [P(), P()]),
        _case("solve_triangular", lambda s, a, b: s.solve_triangular(a, b), [A8, B8],
              [BATCH, BATCH]),
        _case("solve_triangular_T", lambda s, a, b: s.solve_triangular(
            a, b, trans="T", lower=True, unit_diagonal=True), [A8, B8], [BATCH2, BATCH2]),
        _case("solve_triangular_C", lambda s, a, b: s.solve_triangular(a, b, trans=2),
              [C4[0], V8[0]], [P(), P()]),
        _case("block_diag", lambda s, a, b, c: s.block_diag(a, b, c, 2.0),
              [A8[0], B8[0], V8[0]], [P("x"), P("y"), P()]),
        _case("expm", lambda s, a: s.expm(a), [A8 / 8], [BATCH]),
        _case("expm_big", lambda s, a: s.expm(a), [gen((8, 3, 3), seed=3) * 20], [BATCH]),
        _case("expm_nan", lambda s, a: s.expm(a * 100, max_squarings=2), [A8[0]], [P()]),
        _case("expm_triu_c", lambda s, a: s.expm(a, upper_triangular=True),
              [np.triu(C4) / 4], [P("y")]),
        _case("expm_frechet", lambda s, a, e: s.expm_frechet(a, e), [A8[:2] / 8, B8[:2, :, :1]
                                                                     * np.ones(4, np.float32)],
              [P(), P()]),
        _case("polar", lambda s, a: s.polar(a), [B8], [BATCH]),
        _case("polar_left", lambda s, a: s.polar(a, side="left"),
              [np.swapaxes(B8, 1, 2)[:2]], [P()]),
        _case("polar_svd_c", lambda s, a: s.polar(a, method="svd"), [C4], [P("y")]),
    ]
    compare_cases(cases, mesh2x4)


def test_eigh_tridiagonal(mesh2x4):
    d, e = gen((8,), seed=4), gen((7,), seed=5)
    ones, tiny = np.ones(8, np.float32), np.full(7, 1e-4, np.float32)   # one tight cluster
    cases = [
        _case("vals", lambda s, d, e: s.eigh_tridiagonal(d, e, eigvals_only=True), [d, e],
              [P("x"), P()]),
        _case("vals_range", lambda s, d, e: s.eigh_tridiagonal(
            d, e, eigvals_only=True, select="i", select_range=(2, 5)), [d, e], [P(), P()]),
        _case("vectors", lambda s, d, e: s.eigh_tridiagonal(d, e), [d, e], [P("y"), P()]),
        _case("clustered", lambda s, d, e: s.eigh_tridiagonal(d, e), [ones, tiny],
              [P(), P()]),
    ]
    compare_cases(cases, mesh2x4)


def test_eigh_tridiagonal_complex():
    """Complex eigenvectors: each column's phase comes from rounding noise of a
    numerically singular solve (jax's LAPACK-style kernel vs shardc's scan), so compare
    moduli, orthonormality and the eigen-equation."""
    d = gen((8,), seed=6).astype(np.complex64)
    e = gen((7,), seed=7, dtype=np.complex64)
    w, v = shardc.jit(lambda d, e: SL.eigh_tridiagonal(d, e))(d, e)
    wj, vj = JL.eigh_tridiagonal(d, e)
    assert_close(w, wj, "eigenvalues")
    v = np.asarray(v)
    np.testing.assert_allclose(np.abs(v), np.abs(np.asarray(vj)), atol=1e-5)
    t = np.diag(d) + np.diag(e, 1) + np.diag(np.conj(e), -1)
    np.testing.assert_allclose(t @ v, v * np.asarray(w), atol=1e-5)
    np.testing.assert_allclose(v.conj().T @ v, np.eye(8), atol=1e-5)


def test_special_matrices(mesh2x4):
    c, r = gen((8, 4), seed=8), gen((8, 3), seed=9)
    coef = gen((2, 5), seed=10) + 3
    cases = [
        _case("toeplitz", lambda s, c, r: s.toeplitz(c, r), [c, r], [BATCH, BATCH]),
        _case("toeplitz_c", lambda s, c: s.toeplitz(c), [c[0].astype(np.complex64) * 1j + 1],
              [P()]),
        _case("toeplitz_int", lambda s, c: s.toeplitz(c), [np.arange(5, dtype=np.int32)],
              [P()]),
        _case("hankel", lambda s, c, r: s.hankel(c, r), [c[0], r], [P(), P("y")]),
        _case("hankel_default", lambda s, c: s.hankel(c), [c], [BATCH2]),
        _case("circulant", lambda s, c: s.circulant(c), [c], [BATCH]),
        _case("leslie", lambda s, f, v: s.leslie(f, v), [c, r], [BATCH, BATCH]),
        _case("companion", lambda s, a: s.companion(a), [coef], [P()]),
        _case("fiedler", lambda s, a: s.fiedler(a), [c], [BATCH]),
        _case("fiedler_companion", lambda s, a: s.fiedler_companion(a), [coef], [P()]),
        _case("fiedler_companion_2", lambda s, a: s.fiedler_companion(a[:, :2]), [coef],
              [P()]),
        _case("convolution_matrix", lambda s, a: s.convolution_matrix(a, 6), [c], [BATCH]),
        _case("convolution_same", lambda s, a: s.convolution_matrix(a, 3, "same"), [c[0]],
              [P()]),
        _case("convolution_valid", lambda s, a: s.convolution_matrix(a, 2, "valid"), [c[0]],
              [P()]),
        _case("hilbert", lambda s: s.hilbert(5), [], []),
        _case("invhilbert", lambda s: s.invhilbert(4), [], []),
        _case("pascal", lambda s: s.pascal(5), [], []),
        _case("pascal_lower", lambda s: s.pascal(4, "lower"), [], []),
        _case("invpascal", lambda s: s.invpascal(5), [], []),
        _case("invpascal_upper", lambda s: s.invpascal(4, kind="upper"), [], []),
        _case("helmert", lambda s: s.helmert(5), [], []),
        _case("helmert_full", lambda s: s.helmert(4, full=True), [], []),
        _case("hadamard", lambda s: s.hadamard(8), [], []),
        _case("hadamard_f", lambda s: s.hadamard(4, dtype=jnp.float32), [], []),
        _case("dft", lambda s: s.dft(6), [], []),
        _case("dft_sqrtn", lambda s: s.dft(4, "sqrtn"), [], []),
        _case("dft_n", lambda s: s.dft(3, scale="n"), [], []),
    ]
    compare_cases(cases, mesh2x4)


def test_float64():
    """float64 takes expm's five-degree Pade table and the f64 bisection tolerances."""
    with jax.enable_x64(True):
        a = gen((6, 4, 4), seed=11).astype(np.float64) * np.array(
            [0.005, 0.1, 0.5, 1.5, 4, 40])[:, None, None]
        d, e = gen((6,), seed=12).astype(np.float64), gen((5,), seed=13).astype(np.float64)
        compare_cases([
            _case("expm", lambda s, a: s.expm(a), [a], [None]),
            _case("eigh_tridiagonal", lambda s, d, e: s.eigh_tridiagonal(d, e), [d, e],
                  [None, None]),
            _case("polar", lambda s, a: s.polar(a), [a[2]], [None]),
        ])


def test_eager(mesh2x4):
    """Outside jit the functions run op by op (their loops under shardc.jit)."""
    compare_cases([
        _case("solve_pos", lambda s, a, b: s.solve(a, b, assume_a="pos"), [S8, B8],
              [BATCH, BATCH]),
        _case("expm", lambda s, a: s.expm(a), [A8 / 8], [BATCH]),
        _case("toeplitz", lambda s, c: s.toeplitz(c), [V8], [BATCH]),
    ], mesh2x4, eager=True)


GRADS = {  # name: (function of (module, x), x) -- grad of the sum of its weighted output
    "solve": (lambda s, x: s.solve(x, x[..., :2] + 1.0), A8[:2]),
    "solve_pos": (lambda s, x: s.solve(x @ x.T + 4 * jnp.eye(4), x[:, 0], assume_a="pos"),
                  A8[0] / 4),
    "det": (lambda s, x: s.det(x), A8[:2]),
    "cholesky": (lambda s, x: s.cholesky(x @ x.T + 4 * jnp.eye(4)), A8[0] / 4),
    "cho_solve": (lambda s, x: s.cho_solve((x, False), x[:, :2]), np.triu(A8[0])),
    "lu_solve": (lambda s, x: s.lu_solve(s.lu_factor(x), x[:, 1]), A8[0]),
    "solve_triangular": (lambda s, x: s.solve_triangular(x, x[:, :2], lower=True), A8[0]),
    "expm": (lambda s, x: s.expm(x), A8[:2] / 8),
    "expm_scaled": (lambda s, x: s.expm(x), A8[:1] * 2),
    "toeplitz": (lambda s, x: s.toeplitz(x[0], x[1]), V8[:2]),
    "block_diag": (lambda s, x: s.block_diag(x, 2 * x), V8[:2]),
}


def test_gradients(mesh2x4):
    names = sorted(GRADS)
    xs = [jax.device_put(jnp.asarray(GRADS[n][1]), NamedSharding(mesh2x4, P()))
          for n in names]

    def run(mod, grad):
        def weighted(n):
            def f(x):
                y = GRADS[n][0](mod, x)
                return (y * jnp.arange(1, y.size + 1).reshape(y.shape) / y.size).sum()
            return f

        def g(*xs):
            return [grad(weighted(n))(x) for n, x in zip(names, xs)]
        return g
    ours = shardc.jit(run(SL, shardc.grad))(*xs)
    ref = jax.jit(run(JL, jax.grad))(*xs)
    for n, o, r in zip(names, ours, ref):
        assert_close(o, r, f"grad of {n}")


ERRORS = {  # jax rejects these; shardc must too, naming the user's line
    "solve_assume_a": lambda s, a: s.solve(a, a, assume_a="diag"),
    "solve_pos_shapes": lambda s, a: s.solve(a, a[0, :3], assume_a="pos"),
    "solve_triangular_trans": lambda s, a: s.solve_triangular(a, a, trans=3),
    "eigh_b": lambda s, a: s.eigh(a, a),
    "eigh_type": lambda s, a: s.eigh(a, type=2),
    "qr_mode": lambda s, a: s.qr(a, mode="raw"),
    "qr_multiply_shapes": lambda s, a: s.qr_multiply(a, a[..., :3]),
    "qr_multiply_mode": lambda s, a: s.qr_multiply(a, a, mode="top"),
    "lu_solve_trans": lambda s, a: s.lu_solve(s.lu_factor(a), a, trans=3),
    "expm_square": lambda s, a: s.expm(a[..., :3]),
    "expm_dtype": lambda s, a: s.expm(a.astype(jnp.float16)),
    "expm_frechet_shapes": lambda s, a: s.expm_frechet(a, a[0]),
    "polar_side": lambda s, a: s.polar(a, side="up"),
    "polar_1d": lambda s, a: s.polar(a[0, 0]),
    "polar_qdwh_wide": lambda s, a: s.polar(a[:, :3], side="right"),
    "block_diag_3d": lambda s, a: s.block_diag(a),
    "eigh_tridiagonal_dtype": lambda s, a: s.eigh_tridiagonal(a[0, 0], a[0, 0, :3].astype(
        jnp.int32)),
    "eigh_tridiagonal_select": lambda s, a: s.eigh_tridiagonal(a[0, 0], a[0, 0, :3],
                                                               select="v"),
    "leslie_lengths": lambda s, a: s.leslie(a[0, 0], a[0, 0]),
    "companion_short": lambda s, a: s.companion(a[0, 0, :1]),
    "convolution_mode": lambda s, a: s.convolution_matrix(a[0, 0], 3, mode="wide"),
    "pascal_kind": lambda s, a: s.pascal(3, "diag"),
    "hadamard_n": lambda s, a: s.hadamard(6),
    "dft_dtype": lambda s, a: s.dft(4, dtype=jnp.float32),
    "lu_batched": lambda s, a: s.lu(a),
    "helmert_n": lambda s, a: s.helmert(0),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors(name):
    fn = ERRORS[name]
    compare_cases([_case(name, fn, [A8[:2]], [None])])


def test_batched_vector_solve_warns():
    """b one dim short of a stack of matrices: jax's deprecated batched-vector solve."""
    a, b = A8[:2], B8[:2, :, 0]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = SL.solve_triangular(a, b)
    assert any(issubclass(x.category, FutureWarning) for x in w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_close(got, JL.solve_triangular(a, b))


def _params(f):
    return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]


def test_namespace():
    """Every name of jax.scipy.linalg is in shardc.scipy.linalg, with jax's signature."""
    public = {n for n in dir(JL) if not n.startswith("_")}
    missing = sorted(public - set(dir(SL)))
    assert not missing, missing
    for n in SL.__all__:
        assert _params(getattr(SL, n)) == _params(getattr(JL, n)), n
