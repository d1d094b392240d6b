"""Matrix decompositions (cholesky, triangular_solve, lu, qr, eigh, svd) as jax's
primitives, lowered as jaxlib lowers them on CPU (LAPACK custom calls).

Factor rule (Shardy's for these custom calls): the leading batch dims pass through every
operand and result; each matrix dim is a factor of its own that needs replication, so a
stack of matrices sharded on its batch dims stays sharded and a sharded matrix dim is
gathered first. Gradients (linalg_grad) and batching rules are registered below."""
from __future__ import annotations

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.primitive import PropKind, nondiff
from ..ir.program import Aval
from ..ir.rules import NEED_REPLICATION, RuleBuilder
from ..trace.core import Primitive
from .common import i64_array
from .linalg_emit import Em, lapack_prefix

# LAPACK's character flags, as jaxlib passes them (ui8 codes)
_L, _U, _N, _T, _C, _R, _V, _A, _S = (ord(c) for c in "LUNTCRVAS")


def _check_float(name, a):
    if lapack_prefix(a.dtype) is None:
        raise ShardcError(f"{name} needs a float32 or float64 array (LAPACK's types), got {a}; "
                          "convert it with .astype(jnp.float32)")


def _check_matrix(name, a, square=False):
    if a.ndim < 2:
        raise ShardcError(f"{name} needs an array of at least 2 dims (a stack of matrices), "
                          f"got {a}")
    if square and a.shape[-1] != a.shape[-2]:
        raise ShardcError(f"{name} needs square matrices, got {a}")
    _check_float(name, a)


def batch_rule(in_avals, out_avals, **_):
    """Batch dims (all but the last two of the first operand) pass; matrix dims of every
    tensor are factors of their own that need replication."""
    nb = in_avals[0].ndim - 2
    b = RuleBuilder(in_avals, out_avals)
    for d in range(nb):
        b.factor([d] * len(in_avals), [d if a.ndim > d else None for a in out_avals],
                 in_avals[0].shape[d])
    for i, a in enumerate(in_avals):
        for d in range(nb, a.ndim):
            b.factor([d if j == i else None for j in range(len(in_avals))],
                     [None] * len(out_avals), a.shape[d], NEED_REPLICATION)
    for i, a in enumerate(out_avals):
        for d in range(nb, a.ndim):
            b.factor([None] * len(in_avals),
                     [d if j == i else None for j in range(len(out_avals))],
                     a.shape[d], NEED_REPLICATION)
    return b.build()


def _prim(name, shape_rule, lower, multiple=False):
    return Primitive(name, shape_rule=shape_rule, sharding_rule=batch_rule, lower=lower,
                     prop_kind=PropKind.NONE, multiple_results=multiple)


def _out(a, shape, dtype=None):
    return Aval(tuple(shape), dtype or a.dtype, False)


# ---------------------------------------------------------------- cholesky

def _chol_shape(a):
    _check_matrix("cholesky", a, square=True)
    return _out(a, a.shape)


def _chol_lower(ctx, x):
    a = ctx.in_avals[0]
    nb = a.ndim - 2
    e = Em(ctx, nb)
    info_a = Aval(a.shape[:nb], dtypes.int32)
    fac, info = e.custom_call(f"lapack_{lapack_prefix(a.dtype)}potrf_ffi", [(x, a)],
                              [a, info_a], {"uplo": _L})
    return [e.triangle(e.nan_unless_ok(fac, info), lower=True)[0]]


cholesky_p = _prim("cholesky", _chol_shape, _chol_lower)


# ---------------------------------------------------------------- triangular_solve

def _tri_shape(a, b, *, left_side=False, lower=False, transpose_a=False, conjugate_a=False,
               unit_diagonal=False):
    _check_matrix("triangular_solve", a, square=True)
    _check_matrix("triangular_solve", b)
    if a.dtype != b.dtype:
        raise ShardcError(f"triangular_solve needs a and b of one dtype, got {a} and {b}")
    if a.ndim != b.ndim or a.shape[:-2] != b.shape[:-2]:
        raise ShardcError(f"triangular_solve needs a and b with the same batch dims, got {a} "
                          f"and {b}")
    k = b.shape[-2] if left_side else b.shape[-1]
    if k != a.shape[-1]:
        raise ShardcError(f"triangular_solve: a {a} does not fit b {b} "
                          f"({'left' if left_side else 'right'} side: b's "
                          f"{'rows' if left_side else 'columns'} must be {a.shape[-1]})")
    return _out(b, b.shape)


def _tri_lower(ctx, a, b, *, left_side=False, lower=False, transpose_a=False,
               conjugate_a=False, unit_diagonal=False):
    aa, ba = ctx.in_avals
    e = Em(ctx, aa.ndim - 2)
    if conjugate_a and not transpose_a and dtypes.is_complex(aa.dtype):
        # LAPACK conjugates only with a transpose: conj(a) = complex(re, -im) first
        pa = aa.update(dtype=dtypes.real_dtype(aa.dtype))
        ((re, _),), ((im, _),) = (e.op(f"stablehlo.{p}", [(a, aa)], [pa]) for p in ("real", "imag"))
        (neg,) = e.op("stablehlo.negate", [(im, pa)], [pa])
        ((a, _),) = e.op("stablehlo.complex", [(re, pa), neg], [aa])
    trans = (_C if conjugate_a else _T) if transpose_a else _N
    (x,) = e.custom_call(f"lapack_{lapack_prefix(aa.dtype)}trsm_ffi", [(a, aa), (b, ba)], [ba],
                         {"side": _L if left_side else _R, "uplo": _L if lower else _U,
                          "trans_x": trans, "diag": _U if unit_diagonal else _N},
                         alias_operand=1)
    return [x[0]]


triangular_solve_p = _prim("triangular_solve", _tri_shape, _tri_lower)


# ---------------------------------------------------------------- lu

def _lu_shape(a):
    _check_matrix("lu", a)
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    return (_out(a, a.shape), _out(a, (*batch, min(m, n)), dtypes.int32),
            _out(a, (*batch, m), dtypes.int32))


def _lu_lower(ctx, x):
    a = ctx.in_avals[0]
    nb = a.ndim - 2
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:nb]
    e = Em(ctx, nb)
    piv_a, info_a = Aval((*batch, k), dtypes.int32), Aval(batch, dtypes.int32)
    lu, piv, info = e.custom_call(f"lapack_{lapack_prefix(a.dtype)}getrf_ffi", [(x, a)],
                                  [a, piv_a, info_a], {})
    piv = e.binary("subtract", piv, e.const(1, piv_a))      # LAPACK's pivots count from 1
    lu = e.nan_unless_ok(lu, info, "GE")
    return [lu[0], piv[0], _permutation(e, piv, m)[0]]


def _permutation(e, piv, m):
    """The row permutation the pivots' swaps make (a while loop, as jax's CPU lowering):
    perm = arange(m); for i < k: swap perm[..., i] and perm[..., piv[..., i]]."""
    nb = e.nb
    batch = piv[1].shape[:nb]
    k = piv[1].shape[-1]
    pa = Aval((*batch, m), dtypes.int32)
    perm0 = e.iota(pa, nb)
    if k == 0:
        return perm0
    i32 = Aval((), dtypes.int32)
    avals = [i32, piv[1], pa]
    col = Aval((*batch, 1), dtypes.int32)

    def cond(cx, i, *_):
        lim = e.const(k, i32)
        return [e.compare("LT", (i, i32), lim)[0]]

    def body(cx, i, pv, perm):
        i_, pv, perm = (i, i32), (pv, piv[1]), (perm, pa)
        zero = e.const(0, i32)
        starts = [zero] * nb + [i_]

        def dyn(x):
            return e.op("stablehlo.dynamic_slice", [x] + starts, [col],
                        {"slice_sizes": i64_array(col.shape)})[0]
        pi = e.bcast(dyn(pv), pa.shape, range(nb + 1))          # the row swapped with i
        at_i = e.bcast(dyn(perm), pa.shape, range(nb + 1))      # perm[..., i]
        idx = e.iota(pa, nb)
        is_p = e.compare("EQ", idx, pi)
        is_i = e.compare("EQ", idx, e.bcast(i_, pa.shape, ()))
        # perm[..., piv_i]: the one entry where idx == pi, summed out
        sel = e.select(is_p, perm, e.const(0, pa))
        red = Aval(batch, dtypes.int32)
        from .reduce import monoid_region
        (at_p,) = e.op("stablehlo.reduce", [sel, e.const(0, i32)], [red],
                       {"dimensions": i64_array([nb])},
                       regions=[monoid_region(e.ctx, "add", pa)])
        at_p = e.bcast(at_p, pa.shape, range(nb))
        new = e.select(is_i, at_p, e.select(is_p, at_i, perm))
        nxt = e.binary("add", i_, e.const(1, i32))
        return [nxt[0], pv[0], new[0]]

    zero = e.const(0, i32)
    outs = e.op("stablehlo.while", [zero, piv, perm0], avals,
                regions=[e.region(avals, cond), e.region(avals, body)], shard=False)
    return outs[2]


lu_p = _prim("lu", _lu_shape, _lu_lower, multiple=True)


def _p2p_shape(p, *, permutation_size):
    if p.dtype != dtypes.int32 or p.ndim < 1:
        raise ShardcError(f"lu_pivots_to_permutation needs int32 pivots of at least 1 dim, "
                          f"got {p}")
    if permutation_size < p.shape[-1]:
        raise ShardcError(f"lu_pivots_to_permutation: permutation_size ({permutation_size}) "
                          f"must be at least the number of pivots ({p.shape[-1]})")
    return _out(p, (*p.shape[:-1], permutation_size))


def _p2p_rule(in_avals, out_avals, **_):
    """Batch dims pass; the pivots' and the permutation's last dims need replication."""
    nb = in_avals[0].ndim - 1
    b = RuleBuilder(in_avals, out_avals)
    for d in range(nb):
        b.factor([d], [d], in_avals[0].shape[d])
    b.factor([nb], [None], in_avals[0].shape[nb], NEED_REPLICATION)
    b.factor([None], [nb], out_avals[0].shape[nb], NEED_REPLICATION)
    return b.build()


def _p2p_lower(ctx, p, *, permutation_size):
    a = ctx.in_avals[0]
    return [_permutation(Em(ctx, a.ndim - 1), (p, a), permutation_size)[0]]


lu_pivots_to_permutation_p = Primitive(
    "lu_pivots_to_permutation", shape_rule=_p2p_shape, sharding_rule=_p2p_rule,
    lower=_p2p_lower, prop_kind=PropKind.NONE)


# ---------------------------------------------------------------- qr

def _qr_shape(a, *, full_matrices=True):
    _check_matrix("qr", a)
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    if full_matrices:
        return _out(a, (*batch, m, m)), _out(a, a.shape)
    return _out(a, (*batch, m, k)), _out(a, (*batch, k, n))


def _qr_lower(ctx, x, *, full_matrices=True):
    """geqrf, then the Householder product (orgqr) of its reflectors, as jax's _qr_lowering."""
    a = ctx.in_avals[0]
    nb = a.ndim - 2
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:nb]
    e = Em(ctx, nb)
    p = lapack_prefix(a.dtype)
    r, taus = e.custom_call(f"lapack_{p}geqrf_ffi", [(x, a)], [a, Aval((*batch, k), a.dtype)],
                            {})
    zeros = (0,) * nb
    if m < n:
        q = e.slice(r, zeros + (0, 0), (*batch, m, m))
    elif full_matrices:
        q = e.pad(r, [0] * (nb + 1) + [m - n]) if m > n else r
    else:
        q = r
    orgqr = "ungqr" if p in "cz" else "orgqr"
    (q,) = e.custom_call(f"lapack_{p}{orgqr}_ffi", [q, taus], [q[1]], {})
    if not full_matrices and m > n:
        r = e.slice(r, zeros + (0, 0), (*batch, n, n))
    return [q[0], e.triangle(r, lower=False)[0]]


qr_p = _prim("qr", _qr_shape, _qr_lower, multiple=True)


# geqrf and householder_product: QR's two LAPACK halves, as jax.lax.linalg's (R above
# the diagonal, the reflectors below it and their scales `taus`; then the product Q).
# Neither has a derivative (as jax's): qr's and slogdet's gradients have their own.

def _geqrf_shape(a):
    _check_matrix("geqrf", a)
    return _out(a, a.shape), _out(a, (*a.shape[:-2], min(a.shape[-2:])))


def _geqrf_lower(ctx, x):
    a = ctx.in_avals[0]
    nb = a.ndim - 2
    r, taus = Em(ctx, nb).custom_call(f"lapack_{lapack_prefix(a.dtype)}geqrf_ffi", [(x, a)],
                                      [a, ctx.out_avals[1]], {})
    return [r[0], taus[0]]


def _hp_shape(a, taus):
    _check_matrix("householder_product", a)
    m, n = a.shape[-2:]
    if m < n or taus.shape[:-1] != a.shape[:-2] or taus.shape[-1] > n or \
            taus.dtype != a.dtype:
        raise ShardcError(f"householder_product needs a of shape (..., m, n) with m >= n and "
                          f"taus (..., k) with k <= n of its batch dims and dtype; got {a} "
                          f"and {taus}")
    return _out(a, a.shape)


def _hp_lower(ctx, x, taus):
    a, t = ctx.in_avals
    p = lapack_prefix(a.dtype)
    (q,) = Em(ctx, a.ndim - 2).custom_call(
        f"lapack_{p}{'ungqr' if p in 'cz' else 'orgqr'}_ffi", [(x, a), (taus, t)], [a], {})
    return [q[0]]


geqrf_p = _prim("geqrf", _geqrf_shape, _geqrf_lower, multiple=True)
householder_product_p = _prim("householder_product", _hp_shape, _hp_lower)


# ---------------------------------------------------------------- eigh

def _real(dtype):
    return {getattr(dtypes, "complex64", None): dtypes.float32,
            getattr(dtypes, "complex128", None): dtypes.float64}.get(dtype, dtype)


def _eigh_shape(a, *, lower=True, sort_eigenvalues=True):
    _check_matrix("eigh", a, square=True)
    return _out(a, a.shape), _out(a, a.shape[:-1], _real(a.dtype))


def _eigh_lower(ctx, x, *, lower=True, sort_eigenvalues=True):
    a = ctx.in_avals[0]
    nb = a.ndim - 2
    batch = a.shape[:nb]
    e = Em(ctx, nb)
    p = lapack_prefix(a.dtype)
    name = "heevd" if p in "cz" else "syevd"
    v, w, info = e.custom_call(f"lapack_{p}{name}_ffi", [(x, a)],
                               [a, Aval(a.shape[:-1], _real(a.dtype)), Aval(batch, dtypes.int32)],
                               {"mode": _V, "uplo": _L if lower else _U})
    return [e.nan_unless_ok(v, info)[0], e.nan_unless_ok(w, info)[0]]


eigh_p = _prim("eigh", _eigh_shape, _eigh_lower, multiple=True)


# ---------------------------------------------------------------- svd

def _svd_avals(a, full_matrices, compute_uv):
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    s = _out(a, (*batch, k), _real(a.dtype))
    if full_matrices or not compute_uv:
        return s, _out(a, (*batch, m, m)), _out(a, (*batch, n, n))
    return s, _out(a, (*batch, m, k)), _out(a, (*batch, k, n))


def _svd_shape(a, *, full_matrices=True, compute_uv=True, algorithm="gesdd"):
    _check_matrix("svd", a)
    if algorithm not in ("gesdd", "gesvd"):
        raise ShardcError(f"svd: unknown LAPACK routine {algorithm!r} (gesdd or gesvd)")
    s, u, vt = _svd_avals(a, full_matrices, compute_uv)
    return (s, u, vt) if compute_uv else (s,)


def _svd_lower(ctx, x, *, full_matrices=True, compute_uv=True, algorithm="gesdd"):
    """gesdd (divide and conquer, jax's default) or gesvd (its SvdAlgorithm.QR)."""
    a = ctx.in_avals[0]
    nb = a.ndim - 2
    e = Em(ctx, nb)
    s_a, u_a, vt_a = _svd_avals(a, full_matrices, compute_uv)
    mode = (_A if full_matrices else _S) if compute_uv else _N
    _, s, u, vt, info = e.custom_call(
        f"lapack_{lapack_prefix(a.dtype)}{algorithm}_ffi", [(x, a)],
        [a, s_a, u_a, vt_a, Aval(a.shape[:nb], dtypes.int32)], {"mode": mode})
    s = e.nan_unless_ok(s, info)[0]
    if not compute_uv:
        return [s]
    return [s, e.nan_unless_ok(u, info)[0], e.nan_unless_ok(vt, info)[0]]


svd_p = _prim("svd", _svd_shape, _svd_lower, multiple=True)


# ---------------------------------------------------------------- eig (CPU only, as jax)

def _complex(dtype):
    return dtypes.complex_dtype(dtype) if not dtypes.is_complex(dtype) else dtype


def _eig_shape(a, *, compute_left_eigenvectors=True, compute_right_eigenvectors=True):
    _check_matrix("eig", a, square=True)
    c = _complex(a.dtype)
    n = 1 + compute_left_eigenvectors + compute_right_eigenvectors
    return (_out(a, a.shape[:-1], c),) + (_out(a, a.shape, c),) * (n - 1)


def _eig_lower(ctx, x, *, compute_left_eigenvectors=True, compute_right_eigenvectors=True):
    """geev (jax's _eig_cpu_lowering): a real matrix's eigenvalues come as (re, im)."""
    a = ctx.in_avals[0]
    nb = a.ndim - 2
    e = Em(ctx, nb)
    c = _complex(a.dtype)
    real = not dtypes.is_complex(a.dtype)
    w_a = Aval(a.shape[:-1], a.dtype if real else c)
    v_a = Aval(a.shape, c)
    outs = [w_a, w_a] if real else [w_a]
    outs += [v_a, v_a, Aval(a.shape[:nb], dtypes.int32)]
    res = e.custom_call(f"lapack_{lapack_prefix(a.dtype)}geev_ffi", [(x, a)], outs,
                        {"compute_left": _V if compute_left_eigenvectors else _N,
                         "compute_right": _V if compute_right_eigenvectors else _N},
                        alias_operand=None)
    *w, vl, vr, info = res
    if real:
        wc = Aval(a.shape[:-1], c)
        (w,) = e.op("stablehlo.complex", [w[0], w[1]], [wc])
    else:
        w = w[0]
    out = [e.nan_unless_ok(w, info)[0]]
    if compute_left_eigenvectors:
        out.append(e.nan_unless_ok(vl, info)[0])
    if compute_right_eigenvectors:
        out.append(e.nan_unless_ok(vr, info)[0])
    return out


eig_p = _prim("eig", _eig_shape, _eig_lower, multiple=True)


def _eig_vjp(ctx, cts, x, **params):
    # (shardc.lax.linalg.eig wraps the primitive in a custom_jvp with jax's rule)
    raise ShardcError("eig_p has no gradient of its own: differentiate "
                      "shardc.lax.linalg.eig, which carries jax's rule")


eig_p.vjp = _eig_vjp


def _no_grad(name):
    def vjp(ctx, cts, *args, **params):
        raise ShardcError(f"Differentiation rule for '{name}' not implemented (as in jax); "
                          "differentiate qr, or slogdet(method='qr'), instead")
    return vjp


geqrf_p.vjp = _no_grad("geqrf")
householder_product_p.vjp = _no_grad("householder_product")


# ---------------------------------------------------------------- batching
# The mapped dim is one more leading batch dim: every operand gets it, params unchanged.

def _batch_leading(prim):
    def rule(ctx, args, batched, **params):
        from .batching import materialize
        outs = prim.bind(*materialize(ctx, args, batched), **params)
        if prim.multiple_results:
            return outs, [True] * len(outs)
        return outs, True
    return rule


for _p in (cholesky_p, triangular_solve_p, lu_p, qr_p, eigh_p, svd_p, eig_p,
           lu_pivots_to_permutation_p, geqrf_p, householder_product_p):
    _p.batch = _batch_leading(_p)

lu_pivots_to_permutation_p.vjp = nondiff

from . import linalg_grad  # noqa: E402,F401  (registers the gradients)
