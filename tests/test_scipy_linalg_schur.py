"""shardc.scipy.linalg's Schur-based functions (schur, hessenberg, rsf2csf, sqrtm, funm,
solve_sylvester) vs jax.scipy.linalg under jit on the 2x4 mesh: values where they are
unique (or LAPACK computes them alike), reconstructions where factors are unique only
up to phases, dtypes, output shardings, an eager call, rsf2csf's gradient, and jax's
errors (jax has no derivative for the rest, nor has shardc). Each test compiles its
cases as one program."""
import inspect

import jax
import jax.numpy as jnp
import jax.scipy.linalg as JL
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.scipy.linalg as SL
from helpers import Case, assert_close, compare_cases
from test_scipy_linalg import gen, sl  # (the namespace pick and inputs)


def _case(label, fn, arrays, specs):
    return Case(label, lambda m, *xs: fn(sl(m), m, *xs), arrays, specs, numpy_ref=False)


def mH(m, x):
    return m.conj(m.swapaxes(x, -1, -2))


def recon(m, t, z, below):
    """What makes (t, z) a Schur (or Hessenberg) pair of a: z t z^H (= a), t below its
    `below`-th subdiagonal (zeros), z^H z (= I)."""
    return z @ t @ mH(m, z), m.tril(t, -below), mH(m, z) @ z


A8 = gen((8, 4, 4))                                    # real: complex eigenvalue pairs
C4 = gen((4, 4, 4), seed=1, dtype=np.complex64)
A4, C8 = A8[0], gen((8, 8), seed=2, dtype=np.complex64)
JORDAN = np.array([[1, 1, 0], [0, 1, 0], [0, 0, 2]], np.float32)   # repeated eigenvalue
NILPOTENT = np.array([[0, 1], [0, 0]], np.float32)                 # has no square root
SA, SB = A8 + 3 * np.eye(4, dtype=np.float32), gen((3, 3), seed=3) + 2 * np.eye(3, dtype=np.float32)
SC = gen((8, 4, 3), seed=4)
ROWS, BATCH = P("x", None), P("x")


def test_decompositions(mesh2x4):
    cases = [
        _case("schur_real", lambda s, m, a: recon(m, *s.schur(a), 2), [A8], [BATCH]),
        _case("schur_values", lambda s, m, a: s.schur(a), [A8], [BATCH]),
        _case("schur_complex", lambda s, m, a: recon(m, *s.schur(a, output="complex"), 1),
              [C4], [P("y")]),
        _case("schur_real_to_complex", lambda s, m, a: recon(m, *s.schur(a, "complex"), 1),
              [A4], [ROWS]),
        _case("schur_int_complex", lambda s, m: recon(m, *s.schur(
            m.arange(9).reshape(3, 3) % 4, output="complex"), 1), [], []),
        _case("hessenberg", lambda s, m, a: s.hessenberg(a), [A8], [BATCH]),
        _case("hessenberg_q_c", lambda s, m, a: s.hessenberg(a, calc_q=True), [C4],
              [P("y")]),
        _case("hessenberg_q_recon", lambda s, m, a: recon(
            m, *s.hessenberg(a, calc_q=True, overwrite_a=True, check_finite=False), 2),
            [C8], [ROWS]),
        _case("hessenberg_1x1", lambda s, m, a: s.hessenberg(a[:1, :1], calc_q=True), [A4],
              [P()]),
        _case("hessenberg_empty", lambda s, m, a: s.hessenberg(a[:, :0], calc_q=True), [A4],
              [P()]),
        _case("rsf2csf", lambda s, m, a: s.rsf2csf(*s.schur(a)), [A8], [BATCH]),
        _case("rsf2csf_recon", lambda s, m, a: recon(m, *s.rsf2csf(*s.schur(a)), 1), [A8],
              [BATCH]),
        _case("rsf2csf_row_sharded", lambda s, m, a: recon(m, *s.rsf2csf(*s.schur(a)), 1),
              [gen((8, 8), seed=5)], [ROWS]),
        _case("rsf2csf_broadcast_z", lambda s, m, a: s.rsf2csf(s.schur(a)[0], m.eye(4)),
              [A8[:2]], [P()]),
        _case("rsf2csf_complex", lambda s, m, a: s.rsf2csf(*s.schur(a, "complex")), [C4],
              [P()]),
        _case("rsf2csf_complex_blocks", lambda s, m, a: s.rsf2csf(m.triu(a, -1), m.eye(4)),
              [C4], [P("y")]),     # complex subdiagonals: G's conjugates matter
        _case("rsf2csf_1x1_int", lambda s, m: s.rsf2csf(m.ones((1, 1), m.int32),
                                                        m.ones((1, 1), m.int32)), [], []),
    ]
    got = dict(zip((c.label for c in cases), compare_cases(cases, mesh2x4)))
    # the reconstructions are the inputs themselves, not only what jax gets
    for k, a in (("schur_real", A8), ("schur_complex", C4), ("schur_real_to_complex", A4),
                 ("hessenberg_q_recon", C8), ("rsf2csf_recon", A8)):
        z_t_zh, below, zh_z = got[k]
        np.testing.assert_allclose(np.asarray(z_t_zh), a, atol=2e-5, err_msg=k)
        assert not np.asarray(below).any(), k
        np.testing.assert_allclose(np.asarray(zh_z), np.broadcast_to(np.eye(len(a[-1])),
                                                                     zh_z.shape), atol=2e-5)


def test_matrix_functions(mesh2x4):
    cases = [
        _case("sqrtm", lambda s, m, a: s.sqrtm(a, blocksize=1), [A4], [ROWS]),
        _case("sqrtm_c", lambda s, m, a: s.sqrtm(a), [C8], [P(None, "y")]),
        _case("sqrtm_nilpotent_nan", lambda s, m, a: s.sqrtm(a), [NILPOTENT], [P()]),
        _case("sqrtm_zero", lambda s, m, a: s.sqrtm(a * 0), [A4], [P()]),
        _case("funm_exp_err", lambda s, m, a: s.funm(a, m.exp, disp=False), [A4], [ROWS]),
        _case("funm_c", lambda s, m, a: s.funm(a, lambda x: m.sin(x) + 2 * m.cos(x)), [C8],
              [P()]),
        _case("funm_jordan", lambda s, m, a: s.funm(a, m.exp, disp=False), [JORDAN], [P()]),
        _case("funm_1x1_real_func", lambda s, m, a: s.funm(a[:1, :1], m.abs, False), [A4],
              [P()]),
        _case("sylvester", lambda s, m, a, b, c: s.solve_sylvester(a, b, c), [SA, SB, SC],
              [BATCH, P(), BATCH]),
        _case("sylvester_c", lambda s, m, a, b: s.solve_sylvester(a, b, a @ b), [
            C4 + 3 * np.eye(4, dtype=np.complex64), C4[::-1] + 2 * np.eye(4, dtype=np.complex64)],
            [P("y"), P("y")]),
        _case("sylvester_eigen", lambda s, m, a, b, c: s.solve_sylvester(
            a, b, c, method="eigen"), [SA[0], SB, SC[0]], [ROWS, P(), P()]),
        _case("sylvester_int", lambda s, m: s.solve_sylvester(
            m.eye(2, dtype=int) * 3, m.eye(3, dtype=int), m.ones((2, 3), int)), [], []),
        _case("sylvester_singular_nan", lambda s, m, a, c: s.solve_sylvester(a, -a, c),
              [SA[0], SC[0, :, :1] * np.ones(4, np.float32)], [P(), P()]),
        _case("sylvester_tol", lambda s, m, a, b, c: s.solve_sylvester(a, b, c, tol=100.),
              [SA[:2], SB, SC[:2]], [P(), P(), P()]),
    ]
    got = dict(zip((c.label for c in cases), compare_cases(cases, mesh2x4)))
    sq = np.asarray(got["sqrtm"][0])
    np.testing.assert_allclose(sq @ sq, A4, atol=1e-4)
    x = np.asarray(got["sylvester"][0])
    np.testing.assert_allclose(SA @ x + x @ SB, SC, atol=1e-4)
    assert np.isnan(np.asarray(got["sqrtm_nilpotent_nan"][0])).all()
    assert not np.asarray(got["sqrtm_zero"][0]).any()
    f, err = got["funm_jordan"]     # as jax: T's repeated eigenvalue leaves F[0, 1] at 0
    assert np.asarray(err) == 1 and np.asarray(f)[0, 1] == 0


def test_float64():
    """float64: LAPACK's double kernels, complex128 results, funm's float64 tolerance."""
    with jax.enable_x64(True):
        a = A4.astype(np.float64)
        compare_cases([
            _case("sqrtm", lambda s, m, a: s.sqrtm(a), [a], [None]),
            _case("funm", lambda s, m, a: s.funm(a, m.exp, disp=False), [a], [None]),
            _case("sylvester", lambda s, m, a, b: s.solve_sylvester(a, b, a[:, :3]),
                  [a + 3 * np.eye(4), SB.astype(np.float64)], [None, None]),
        ])


def test_eager(mesh2x4):
    """Outside jit the functions run op by op (their loops under shardc.jit)."""
    compare_cases([
        _case("hessenberg", lambda s, m, a: s.hessenberg(a, calc_q=True), [A8], [BATCH]),
        _case("funm", lambda s, m, a: s.funm(a, m.exp), [A4], [ROWS]),
        _case("sylvester", lambda s, m, a, b, c: s.solve_sylvester(a, b, c), [SA, SB, SC],
              [BATCH, P(), BATCH]),
    ], mesh2x4, eager=True)


def test_rsf2csf_gradient(mesh2x4):
    """rsf2csf is differentiable in jax (its 2x2 blocks' eigenvalues included); the
    others need schur's or hessenberg's derivative, which neither jax nor shardc has."""
    t, z = (np.asarray(v) for v in JL.schur(gen((6, 6), seed=6)))
    assert np.abs(np.diag(t, -1)).max() > 0.1       # has a 2x2 block to split
    args = [jax.device_put(v, NamedSharding(mesh2x4, ROWS)) for v in (t, z)]

    def loss(mod, np_):
        w = np_.arange(1, 37, dtype=np_.float32).reshape(6, 6) / 36

        def f(t, z):
            tc, zc = mod.rsf2csf(t, z)
            return np_.sum(np_.real(tc) * w + np_.imag(zc) * w.T)
        return f
    got = shardc.jit(shardc.grad(loss(SL, shardc.numpy), argnums=(0, 1)))(*args)
    want = jax.jit(jax.grad(loss(JL, jnp), argnums=(0, 1)))(*args)
    for g, w, what in zip(got, want, ("dT", "dZ")):
        assert_close(g, w, what)
    assert np.abs(np.asarray(got[0])).max() > 0


NO_GRAD = {  # jax.grad raises NotImplementedError for these; shardc.grad must raise too
    "schur": lambda s, x: s.schur(x)[0],
    "hessenberg": lambda s, x: s.hessenberg(x),
    "sqrtm": lambda s, x: s.sqrtm(x).real,
    "funm": lambda s, x: s.funm(x, jnp.exp if s is JL else shardc.numpy.exp).real,
    "solve_sylvester": lambda s, x: s.solve_sylvester(x, x.T + 9, x),
}


@pytest.mark.parametrize("name", sorted(NO_GRAD))
def test_no_gradient(name):
    fn = NO_GRAD[name]
    with pytest.raises(NotImplementedError):
        jax.grad(lambda x: fn(JL, x).sum())(A4)
    with pytest.raises(shardc.ShardcError):
        shardc.jit(shardc.grad(lambda x: fn(SL, x).sum()))(A4)


ERRORS = {  # jax rejects these; shardc must too, naming the user's line
    "schur_output": lambda s, m, a: s.schur(a, output="cplx"),
    "schur_int": lambda s, m, a: s.schur(a.astype(m.int32)),
    "schur_nonsquare": lambda s, m, a: s.schur(a[:3]),
    "schur_1d": lambda s, m, a: s.schur(a[0]),
    "hessenberg_int": lambda s, m, a: s.hessenberg(a.astype(m.int32)),
    "hessenberg_nonsquare": lambda s, m, a: s.hessenberg(a[:3], calc_q=True),
    "hessenberg_1d": lambda s, m, a: s.hessenberg(a[0]),
    "rsf2csf_nonsquare_t": lambda s, m, a: s.rsf2csf(a[:3], a),
    "rsf2csf_nonsquare_z": lambda s, m, a: s.rsf2csf(a, a[:, :3]),
    "rsf2csf_shapes": lambda s, m, a: s.rsf2csf(a[:3, :3], a),
    "rsf2csf_empty": lambda s, m, a: s.rsf2csf(a[:0, :0], a[:0, :0]),
    "sqrtm_blocksize": lambda s, m, a: s.sqrtm(a, blocksize=2),
    "sqrtm_batched": lambda s, m, a: s.sqrtm(m.stack([a, a])),
    "sqrtm_1d": lambda s, m, a: s.sqrtm(a[0]),
    "sqrtm_nonsquare": lambda s, m, a: s.sqrtm(a[:3]),
    "sqrtm_empty": lambda s, m, a: s.sqrtm(a[:0, :0]),
    "funm_batched": lambda s, m, a: s.funm(m.stack([a, a]), m.exp),
    "funm_nonsquare": lambda s, m, a: s.funm(a[:3], m.exp),
    "funm_int": lambda s, m, a: s.funm(a.astype(m.int32), m.exp),
    "funm_empty": lambda s, m, a: s.funm(a[:0, :0], m.exp),
    "sylvester_shapes": lambda s, m, a: s.solve_sylvester(a, a, a[:3]),
    "sylvester_c_1d": lambda s, m, a: s.solve_sylvester(a, a, a[0]),
    "sylvester_method": lambda s, m, a: s.solve_sylvester(a, a, a, method="qr"),
    "sylvester_empty": lambda s, m, a: s.solve_sylvester(a[:0, :0], a, a[:0]),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors(name):
    compare_cases([_case(name, ERRORS[name], [A4], [None])])


def _params(f):
    return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]


def test_namespace():
    """shardc.scipy.linalg has every public function of jax.scipy.linalg, with jax's
    parameter names, kinds and defaults."""
    public = sorted(n for n in dir(JL) if not n.startswith("_"))
    assert not sorted(set(public) - set(SL.__all__)), sorted(set(public) - set(SL.__all__))
    for n in public:
        assert _params(getattr(SL, n)) == _params(getattr(JL, n)), n
