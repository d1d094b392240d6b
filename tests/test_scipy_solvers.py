"""shardc.scipy.sparse.linalg, .optimize and .spatial.transform vs jax.scipy's under jit
on a 2x4 mesh: values, dtypes, weak types and output shardings (each test's cases
compiled as one program), gradients through the solvers' custom linear solves, eager
calls, and the errors jax raises."""
import jax
import jax.scipy.optimize as JO
import jax.scipy.sparse.linalg as JL
import jax.scipy.spatial.transform as JR
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.scipy.optimize as SO
import shardc.scipy.sparse.linalg as SL
import shardc.scipy.spatial.transform as SR
from helpers import Case, compare_cases


def mods(m):
    """(sparse.linalg, optimize, spatial.transform) matching a test namespace."""
    return (SL, SO, SR) if m.nn is shardc.nn else (JL, JO, JR)


def lin(m):
    return mods(m)[0]


RNG = np.random.default_rng(0)
N = 8
_A = RNG.standard_normal((N, N)).astype(np.float32)
SPD = (_A @ _A.T + N * np.eye(N)).astype(np.float32)     # symmetric positive definite
GEN = (_A + N * np.eye(N)).astype(np.float32)              # general, well conditioned
B = RNG.standard_normal(N).astype(np.float32)
DIAG = np.diag(1 / np.diag(SPD)).astype(np.float32)        # a Jacobi preconditioner
XY, ROWS, REP = P("x", "y"), P("x", None), P()


def test_krylov(mesh2x4):
    cases = [
        Case("cg", lambda m, a, b: lin(m).cg(a, b), [SPD, B], [XY, P("x")]),
        Case("cg-fun-M", lambda m, a, b: lin(m).cg(lambda x: a @ x, b, M=lambda x: x * 0.1,
                                                   tol=1e-6), [SPD, B], [REP, REP]),
        Case("cg-M-maxiter", lambda m, a, b, d: lin(m).cg(a, b, M=d, maxiter=3),
             [SPD, B, DIAG], [ROWS, P("y"), REP]),
        Case("cg-pytree", lambda m, a, b: lin(m).cg(
            lambda t: {"u": a @ t["u"], "v": 3 * t["v"]}, {"u": b, "v": b[:4]},
            x0={"u": b * 0 + 1, "v": b[:4]}, atol=1e-3), [SPD, B], [XY, REP]),
        Case("cg-complex", lambda m, a, b: lin(m).cg(a + 0j, b * (1 + 1j)), [SPD, B],
             [REP, P("x")]),
        Case("bicgstab", lambda m, a, b: lin(m).bicgstab(a, b), [GEN, B], [XY, P("x")]),
        Case("bicgstab-fun-M", lambda m, a, b, d: lin(m).bicgstab(
            lambda x: a @ x, b, M=d, atol=1e-3, maxiter=5), [GEN, B, DIAG], [REP, REP, XY]),
        Case("bicgstab-complex", lambda m, a, b: lin(m).bicgstab(a + 1j * a.T, b + 0j),
             [GEN, B], [ROWS, REP]),
    ]
    cases += [
        Case("gmres-batched", lambda m, a, b: lin(m).gmres(a, b), [GEN, B], [XY, P("x")]),
        Case("gmres-incremental", lambda m, a, b: lin(m).gmres(a, b, solve_method="incremental"),
             [GEN, B], [ROWS, REP]),
        Case("gmres-restart-M", lambda m, a, b, d: lin(m).gmres(
            a, b, restart=3, M=d, maxiter=4, solve_method="incremental"), [GEN, B, SPD],
            [REP, REP, REP]),
        Case("gmres-pytree", lambda m, a, b: lin(m).gmres(
            lambda t: (a @ t[0], 2 * t[1]), (b, b[:2]), solve_method="incremental"), [GEN, B],
            [ROWS, REP]),
        Case("gmres-complex", lambda m, a, b: lin(m).gmres(a + 1j * a.T, b + 0j,
                                                           restart=4), [GEN, B],
             [REP, P("y")]),
    ]
    for c in cases:
        c.numpy_ref = False
    compare_cases(cases, mesh2x4)


def _krylov_grads(L, grad):
    """Gradients of |x|^2 through each solver, wrt A (a closed-over matrix) and b."""
    def loss(solve):
        return lambda a, b: (solve(a, b)[0] ** 2).sum()
    return [
        grad(loss(lambda a, b: L.cg(a, b)), argnums=(0, 1)),
        grad(loss(lambda a, b: L.cg(lambda x: a @ x, b, tol=1e-6)), argnums=(0, 1)),
        grad(loss(lambda a, b: L.bicgstab(a, b)), argnums=(0, 1)),
        grad(loss(lambda a, b: L.gmres(a, b)), argnums=(0, 1)),
        grad(loss(lambda a, b: L.gmres(a, b, solve_method="incremental")), argnums=(0, 1)),
    ]


def test_gradients(mesh2x4):
    """Implicit gradients (a solve of the transposed system), as jax's custom linear
    solve: never differentiating through the while loops."""
    a_spd, a_gen = (jax.device_put(a, NamedSharding(mesh2x4, XY)) for a in (SPD, GEN))
    b = jax.device_put(B, NamedSharding(mesh2x4, P("x")))

    def run(L, grad):
        fs = _krylov_grads(L, grad)
        return lambda s, g, b: [f(s if i < 2 else g, b) for i, f in enumerate(fs)]
    ours = shardc.jit(run(SL, shardc.grad))(a_spd, a_gen, b)
    ref = jax.jit(run(JL, jax.grad))(a_spd, a_gen, b)
    for i, (o, r) in enumerate(zip(jax.tree.leaves(ours), jax.tree.leaves(ref))):
        # (values only: shardc gives a gradient its parameter's sharding by design)
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=1e-3, atol=1e-4,
                                   err_msg=f"gradient {i}")


# ---------------------------------------------------------------- optimize

X0 = np.array([-1.2, 1.0, 0.5, 0.3, 0.8, -0.4, 1.1, 0.2], np.float32)


def rosen(m):
    return lambda x: m.sum(100.0 * (x[1:] - x[:-1] ** 2.0) ** 2.0 + (1 - x[:-1]) ** 2.0)


def smooth(m):
    """A well-conditioned objective: unconverged iterates still agree to f32 rounding."""
    return lambda x: m.sum(m.cosh(x - 0.3) + (x - x[::-1]) ** 2 * 0.1)


LBFGS = "l-bfgs-experimental-do-not-rely-on-this"


def test_minimize(mesh2x4):
    def opt(m):
        return mods(m)[1]
    cases = [
        Case("bfgs", lambda m, x: opt(m).minimize(rosen(m), x, method="BFGS"), [X0],
             [P("x")]),
        Case("bfgs-args-options", lambda m, x, c: opt(m).minimize(
            lambda x, c: smooth(m)(x - c), x, (c,), method="bfgs", tol=1e-6,
            options=dict(maxiter=3, gtol=1e-3, line_search_maxiter=4)), [X0, X0[::-1]],
            [P("y"), REP]),
        Case("lbfgs-options", lambda m, x: opt(m).minimize(
            rosen(m), x, method=LBFGS, options=dict(maxcor=3, norm=2)), [X0], [P("x")]),
    ]
    for c in cases:
        c.numpy_ref = False
    compare_cases(cases, mesh2x4)


def test_optimize_results_type():
    assert issubclass(SO.OptimizeResults, tuple)
    assert SO.OptimizeResults._fields == JO.OptimizeResults._fields
    r = shardc.eval_shape(lambda x: SO.minimize(smooth(shardc.numpy), x, method="BFGS"), X0)
    assert isinstance(r, SO.OptimizeResults) and r.hess_inv.shape == (8, 8)
    r = shardc.eval_shape(lambda x: SO.minimize(smooth(shardc.numpy), x, method=LBFGS), X0)
    assert isinstance(r, SO.OptimizeResults) and r.hess_inv is None


# ---------------------------------------------------------------- rotations

Q = RNG.standard_normal((8, 4)).astype(np.float32)
Q[0], Q[1] = [0, 0, 0, -1], [0, -1, 0, 0]          # w < 0; w == 0 (canonical forms)
VEC = RNG.standard_normal((8, 3)).astype(np.float32)
ANG = RNG.uniform(-3, 3, (8, 3)).astype(np.float32)
ANG[0], ANG[1] = [0.3, 0, 0.2], [0.1, np.pi, 0.4]   # gimbal lock
TIMES = np.arange(8, dtype=np.float32) * 1.5


def _rot_cases():
    def R(m, q):
        return mods(m)[2].Rotation.from_quat(q)

    def rot(m):
        return mods(m)[2].Rotation
    cases = [
        Case("as_quat", lambda m, q: (R(m, q).as_quat(), R(m, q).as_quat(
            canonical=True, scalar_first=True)), [Q], [ROWS]),
        Case("matrix", lambda m, q: (R(m, q).as_matrix(),
                                     rot(m).from_matrix(R(m, q).as_matrix()).as_quat()),
             [Q], [P("y")]),
        Case("rotvec", lambda m, q: (R(m, q).as_rotvec(), R(m, q).as_rotvec(degrees=True)),
             [Q], [ROWS]),
        Case("from_rotvec", lambda m, v: (rot(m).from_rotvec(v).quat,
                                          rot(m).from_rotvec(v * 1e-4, degrees=True).quat),
             [VEC], [ROWS]),
        Case("mrp", lambda m, q: (R(m, q).as_mrp(), rot(m).from_mrp(R(m, q).as_mrp()).quat),
             [Q], [REP]),
        Case("euler-1axis", lambda m, a: rot(m).from_euler("x", a[:, 0:1]).quat, [ANG],
             [REP]),
        Case("euler-2axes", lambda m, a: rot(m).from_euler("XY", a[0, :2]).quat, [ANG],
             [REP]),
        Case("apply", lambda m, q, v: (R(m, q).apply(v), R(m, q).apply(v, inverse=True),
                                       R(m, q)[2].apply(v)), [Q, VEC], [ROWS, ROWS]),
        Case("compose-inv", lambda m, q: ((R(m, q) * R(m, q[::-1])).quat, R(m, q).inv().quat,
                                          R(m, q).magnitude()), [Q], [ROWS]),
        Case("mean", lambda m, q: (R(m, q).mean().quat, R(m, q).mean(q[:, 0] ** 2).quat),
             [Q], [REP]),
        Case("concatenate-identity", lambda m, q: (
            rot(m).concatenate([R(m, q), R(m, q[:2])]).quat, rot(m).identity().quat), [Q],
            [ROWS]),
        Case("slerp", lambda m, q, t: mods(m)[2].Slerp.init(t, R(m, q))(
            np.array([0, 0.3, 1.7, 2.5, 4.0, 10.4, 3.9, 7], np.float32)).quat, [Q, TIMES],
            [ROWS, REP]),
        Case("slerp-scalar-object", lambda m, q, t: (
            mods(m)[2].Slerp.init(t, R(m, q))(1.5).quat, mods(m)[2].Slerp.init(t, R(m, q))),
            [Q, TIMES], [REP, REP]),
    ]
    for seq in ("xyz", "ZXZ", "yxz"):
        cases.append(Case(f"euler-{seq}", lambda m, a, seq=seq: (
            rot(m).from_euler(seq, a).quat, rot(m).from_euler(seq, a).as_euler(seq),
            rot(m).from_euler(seq, a, degrees=True).as_euler(seq.swapcase(), degrees=True)),
            [ANG], [ROWS]))
    for c in cases:
        c.numpy_ref = False
    return cases


def test_rotation(mesh2x4):
    compare_cases(_rot_cases(), mesh2x4)


def test_rotation_gradients():
    def loss(T):
        def f(q, v):
            r = T.Rotation.from_quat(q)
            return (r.apply(v) ** 2).sum() + r.as_euler("xyz").sum() + r.as_rotvec().sum()
        return f
    ours = shardc.jit(shardc.grad(loss(SR), argnums=(0, 1)))(Q, VEC)
    ref = jax.jit(jax.grad(loss(JR), argnums=(0, 1)))(Q, VEC)
    for o, r in zip(ours, ref):
        np.testing.assert_allclose(np.asarray(o), np.asarray(r), rtol=1e-4, atol=1e-4)


def test_eager(mesh2x4):
    """Outside jit: the solvers' loops run as compiled programs, the rest op by op."""
    compare_cases([
        Case("cg", lambda m, a, b: lin(m).cg(a, b), [SPD, B], [XY, P("x")],
             numpy_ref=False),
        Case("rotation", lambda m, q: mods(m)[2].Rotation.from_quat(q).as_matrix(),
             [Q], [ROWS], numpy_ref=False),
    ], mesh2x4, eager=True)


ERRORS = {  # jax rejects these; shardc must too, naming the user's line
    "cg-nonsquare": lambda s, x: s[0].cg(x[:, :3], x[:, 0]),
    "cg-x0-tree": lambda s, x: s[0].cg(x, x[:, 0], x0=(x[:, 0],)),
    "bicgstab-x0-shape": lambda s, x: s[0].bicgstab(x, x[:, 0], x0=x[:4, 0]),
    "gmres-method": lambda s, x: s[0].gmres(x, x[:, 0], solve_method="qr"),
    "minimize-method": lambda s, x: s[1].minimize(lambda v: (v ** 2).sum(), x[0],
                                                  method="nelder-mead"),
    "minimize-args": lambda s, x: s[1].minimize(lambda v, c: (v ** 2).sum(), x[0], [1.0],
                                                method="BFGS"),
    "euler-repeated": lambda s, x: s[2].Rotation.from_euler("xxy", x[0, :3]),
    "euler-mixed-case": lambda s, x: s[2].Rotation.from_euler("xYz", x[0, :3]),
    "as_euler-2axes": lambda s, x: s[2].Rotation.from_quat(x[:, :4]).as_euler("xy"),
    "single-getitem": lambda s, x: s[2].Rotation.from_quat(x[0, :4])[0],
    "mean-weights": lambda s, x: s[2].Rotation.from_quat(x[:, :4]).mean(x[:2, :4]),
    "random": lambda s, x: s[2].Rotation.random(None),
    "slerp-single": lambda s, x: s[2].Slerp.init(x[0, :1],
                                                 s[2].Rotation.from_quat(x[0, :4])),
    "slerp-times": lambda s, x: s[2].Slerp.init(x[0, :3],
                                                s[2].Rotation.from_quat(x[:, :4])),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors(name):
    fn = ERRORS[name]
    compare_cases([Case(name, lambda m, x: fn(mods(m), x), [SPD], numpy_ref=False)])


def test_namespace():
    import shardc.scipy.sparse
    import shardc.scipy.spatial
    assert shardc.scipy.sparse.linalg is SL and shardc.scipy.spatial.transform is SR
    for ours, theirs in ((SL, JL), (SO, JO), (SR, JR)):
        public = {n for n in dir(theirs) if not n.startswith("_")}
        assert not sorted(public - set(dir(ours))), sorted(public - set(dir(ours)))
    methods = {n for n in dir(JR.Rotation) if not n.startswith("_")}
    assert not sorted(methods - set(dir(SR.Rotation)))
    assert isinstance(SR.Rotation.identity(), tuple)    # a NamedTuple: a pytree, as jax's
