"""The reductions to condensed forms and pivoted QR, as jax.lax.linalg's CPU primitives:
schur (gees), hessenberg (gehrd), tridiagonal (sytrd / hetrd), geqp3 (column-pivoted
QR) and ormqr (Q of geqrf's reflectors applied without forming it; ormqr / unmqr).

Factor rule and batching as the other decompositions' (linalg_decomp): leading batch dims
pass, every matrix dim is whole. None has a derivative, as in jax; results are NaN where
LAPACK reports failure (schur, hessenberg, tridiagonal), as jax's lowerings make them."""
from __future__ import annotations

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.program import Aval
from .linalg_decomp import _batch_leading, _check_matrix, _out, _prim, _real
from .linalg_emit import Em, lapack_prefix

_L, _U, _N, _V = (ord(c) for c in "LUNV")


def _no_grad(name):
    def vjp(ctx, cts, *args, **params):
        raise ShardcError(f"Differentiation rule for '{name}' not implemented (as in jax)")
    return vjp


# ---------------------------------------------------------------- schur

def _schur_shape(a, *, compute_schur_vectors=True):
    _check_matrix("schur", a, square=True)
    return (_out(a, a.shape),) * (2 if compute_schur_vectors else 1)


def _schur_lower(ctx, x, *, compute_schur_vectors=True):
    """gees without sorting; a real matrix's eigenvalues come as (re, im), unused."""
    a = ctx.in_avals[0]
    nb = a.ndim - 2
    e = Em(ctx, nb)
    w = Aval(a.shape[:-1], a.dtype)
    info = Aval(a.shape[:nb], dtypes.int32)
    real = not dtypes.is_complex(a.dtype)
    outs = [a, a] + ([w, w] if real else [w]) + [info, info]
    t, vs, *_, ok = e.custom_call(f"lapack_{lapack_prefix(a.dtype)}gees_ffi", [(x, a)], outs,
                                  {"mode": _V if compute_schur_vectors else _N, "sort": _N})
    out = [e.nan_unless_ok(t, ok)[0]]
    if compute_schur_vectors:
        out.append(e.nan_unless_ok(vs, ok)[0])
    return out


schur_p = _prim("schur", _schur_shape, _schur_lower, multiple=True)


# ---------------------------------------------------------------- hessenberg

def _hess_shape(a):
    _check_matrix("hessenberg", a, square=True)
    return _out(a, a.shape), _out(a, (*a.shape[:-2], max(a.shape[-1] - 1, 0)))


def _hess_lower(ctx, x):
    """gehrd over the whole matrix (ilo=1, ihi=n): H above the subdiagonal, the
    reflectors below it, and their scales."""
    a = ctx.in_avals[0]
    nb = a.ndim - 2
    n = a.shape[-1]
    e = Em(ctx, nb)
    h, taus, info = e.custom_call(f"lapack_{lapack_prefix(a.dtype)}gehrd_ffi", [(x, a)],
                                  [a, ctx.out_avals[1], Aval(a.shape[:nb], dtypes.int32)],
                                  {"low": "1 : i32", "high": f"{n} : i32"})
    return [e.nan_unless_ok(h, info)[0], e.nan_unless_ok(taus, info)[0]]


hessenberg_p = _prim("hessenberg", _hess_shape, _hess_lower, multiple=True)


# ---------------------------------------------------------------- tridiagonal

def _tri_shape(a, *, lower=True):
    _check_matrix("tridiagonal", a, square=True)
    n = a.shape[-1]
    if n == 0:
        raise ShardcError(f"The input to tridiagonal must be a square matrix. Got shape "
                          f"{a.shape[-2:]}.")
    b = a.shape[:-2]
    r = _real(a.dtype)
    return (_out(a, a.shape), _out(a, (*b, n), r), _out(a, (*b, n - 1), r),
            _out(a, (*b, n - 1)))


def _tri_lower(ctx, x, *, lower=True):
    """sytrd (hetrd for complex): the reduced matrix with its reflectors, the diagonal
    d, the off-diagonal e and the reflectors' scales."""
    a = ctx.in_avals[0]
    nb = a.ndim - 2
    e = Em(ctx, nb)
    p = lapack_prefix(a.dtype)
    name = "hetrd" if p in "cz" else "sytrd"
    *outs, info = e.custom_call(f"lapack_{p}{name}_ffi", [(x, a)],
                                [*ctx.out_avals, Aval(a.shape[:nb], dtypes.int32)],
                                {"uplo": _L if lower else _U})
    return [e.nan_unless_ok(o, info)[0] for o in outs]


tridiagonal_p = _prim("tridiagonal", _tri_shape, _tri_lower, multiple=True)


# ---------------------------------------------------------------- geqp3

def _geqp3_shape(a, jpvt):
    _check_matrix("geqp3", a)
    n = a.shape[-1]
    if jpvt.shape != (*a.shape[:-2], n) or not dtypes.is_int(jpvt.dtype):
        raise ShardcError(f"geqp3 needs jpvt of shape {(*a.shape[:-2], n)} and an integer "
                          f"dtype for a of shape {a.shape}; got {jpvt}")
    return _out(a, a.shape), _out(jpvt, jpvt.shape), _out(a, (*a.shape[:-2], min(a.shape[-2:])))


def _geqp3_lower(ctx, x, jpvt):
    """R above the diagonal, reflectors below, the 1-based pivots (jpvt's nonzero entries
    fix their columns first, as LAPACK's) and the reflectors' scales."""
    a, j = ctx.in_avals
    e = Em(ctx, a.ndim - 2)
    outs = e.custom_call(f"lapack_{lapack_prefix(a.dtype)}geqp3_ffi", [(x, a), (jpvt, j)],
                         list(ctx.out_avals), {}, alias_operand={0: 0, 1: 1})
    return [o[0] for o in outs]


geqp3_p = _prim("geqp3", _geqp3_shape, _geqp3_lower, multiple=True)


# ---------------------------------------------------------------- ormqr

def _ormqr_shape(a, taus, c, *, left=True, transpose=False):
    _check_matrix("ormqr", a)
    m = a.shape[-2]
    if c.ndim != a.ndim or c.dtype != a.dtype or taus.dtype != a.dtype or \
            taus.shape[:-1] != a.shape[:-2] or c.shape[:-2] != a.shape[:-2]:
        raise ShardcError(f"ormqr needs a (..., m, n), taus (..., k) and c (..., rows, cols) "
                          f"of one dtype and batch; got {a}, {taus} and {c}")
    if left and c.shape[-2] != m:
        raise ShardcError("ormqr with left=True expects c to have the same number of rows as "
                          f"the Householder matrix a. Got a shape {a.shape[-2:]} and c shape "
                          f"{c.shape[-2:]}.")
    if not left and c.shape[-1] != m:
        raise ShardcError("ormqr with left=False expects c to have the same number of "
                          "columns as the Householder matrix a has rows. Got a shape "
                          f"{a.shape[-2:]} and c shape {c.shape[-2:]}.")
    return _out(c, c.shape)


def _ormqr_lower(ctx, x, taus, c, *, left=True, transpose=False):
    a, t, ca = ctx.in_avals
    p = lapack_prefix(a.dtype)
    flag = {True: "true", False: "false"}
    (out,) = Em(ctx, a.ndim - 2).custom_call(
        f"lapack_{p}{'unmqr' if p in 'cz' else 'ormqr'}_ffi", [(x, a), (taus, t), (c, ca)],
        [ca], {"left": flag[bool(left)], "transpose": flag[bool(transpose)]}, alias_operand=None)
    return [out[0]]


ormqr_p = _prim("ormqr", _ormqr_shape, _ormqr_lower)


for _p in (schur_p, hessenberg_p, tridiagonal_p, geqp3_p, ormqr_p):
    _p.batch = _batch_leading(_p)
    _p.vjp = _no_grad(_p.name)
