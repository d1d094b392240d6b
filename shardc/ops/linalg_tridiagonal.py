"""tridiagonal_solve: A x = b for a tridiagonal A given by its three diagonals, as
jax.lax.linalg's CPU primitive: LAPACK's gtsv (Gaussian elimination with partial
pivoting; NaN where A is singular) or, with perturb_singular, jaxlib's kernel that nudges
tiny pivots so that inverse iteration gets a finite answer.

Factor rule as jax's custom call's: leading batch dims pass, the rest is whole. The
gradient is the transpose of jax's jvp rule: b's cotangent is a solve with A^T, the
diagonals' are minus its products with the solution, one diagonal each."""
from __future__ import annotations

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.program import Aval
from ..ir.rules import NEED_REPLICATION, RuleBuilder
from ..ir.primitive import PropKind
from ..trace.core import Primitive
from . import lax as L
from .linalg_decomp import _batch_leading
from .linalg_emit import Em, lapack_prefix


def _shape(dl, d, du, b, *, perturb_singular=False):
    if any(a.dtype != b.dtype for a in (dl, d, du)):
        raise ShardcError("tridiagonal_solve needs dl, d, du and b of one dtype, got "
                          f"{dl}, {d}, {du} and {b}")
    if lapack_prefix(b.dtype) is None:
        raise ShardcError(f"tridiagonal_solve needs float32, float64, complex64 or "
                          f"complex128 arrays (LAPACK's), got {b.dtype}")
    if b.ndim < 2 or any(a.shape != b.shape[:-1] for a in (dl, d, du)):
        raise ShardcError(f"tridiagonal_solve needs diagonals [..., m] and b [..., m, n]; "
                          f"got {dl}, {d}, {du} and {b}")
    return Aval(b.shape, b.dtype, False)


def _rule(in_avals, out_avals, **_):
    """Batch dims (all but b's last two) pass; the rest of every tensor is whole."""
    b_aval = in_avals[3]
    nb = b_aval.ndim - 2
    rb = RuleBuilder(in_avals, out_avals)
    for k in range(nb):
        rb.factor([k] * 4, [k], b_aval.shape[k])
    for i, a in enumerate(in_avals):
        for k in range(nb, a.ndim):
            rb.factor([k if j == i else None for j in range(4)], [None], a.shape[k],
                      NEED_REPLICATION)
    out = out_avals[0]
    for k in range(nb, out.ndim):
        rb.factor([None] * 4, [k], out.shape[k], NEED_REPLICATION)
    return rb.build()


def _lower(ctx, dl, d, du, b, *, perturb_singular=False):
    avals = ctx.in_avals
    ba = avals[3]
    e = Em(ctx, ba.ndim - 2)
    ins = list(zip((dl, d, du, b), avals))
    if perturb_singular:
        (x,) = e.custom_call("tridiagonal_solve_perturbed_ffi", ins, [ba], {},
                             alias_operand=None)
        return [x[0]]
    info = Aval(ba.shape[:-2], dtypes.int32)
    *_, x, ok = e.custom_call(f"lapack_{lapack_prefix(ba.dtype)}gtsv_ffi", ins,
                              [*avals, info], {}, alias_operand={i: i for i in range(4)})
    return [e.nan_unless_ok(x, ok)[0]]


tridiagonal_solve_p = Primitive("tridiagonal_solve", shape_rule=_shape, sharding_rule=_rule,
                                lower=_lower, prop_kind=PropKind.NONE)
tridiagonal_solve_p.batch = _batch_leading(tridiagonal_solve_p)


def _shift(v, k):
    """v[..., i - k] along the second-to-last dim of v, zero where out of range."""
    a = L.aval(v)
    m, nd = a.shape[-2], a.ndim
    if m <= abs(k):
        return L.zeros_like(v)
    zeros = L.zeros((*a.shape[:-2], abs(k), a.shape[-1]), a.dtype)
    if k > 0:
        kept = L.slice(v, (0,) * nd, (*a.shape[:-2], m - k, a.shape[-1]))
        return L.concatenate([zeros, kept], nd - 2)
    kept = L.slice(v, (0,) * (nd - 2) + (-k, 0), a.shape)
    return L.concatenate([kept, zeros], nd - 2)


def _vjp(ctx, cts, dl, d, du, b, *, perturb_singular=False):
    (g,) = cts
    x = ctx.out
    nd = L.aval(b).ndim
    col = (*range(nd - 1),)

    def diag_shift(v, k):     # a diagonal [..., m] shifted by k along m
        return L.reshape(_shift(L.broadcast_in_dim(v, (*L.aval(v).shape, 1), col), k),
                         L.aval(v).shape)
    # A^T's diagonals: its sub-diagonal is A's super-diagonal moved down a row
    bbar = tridiagonal_solve_p.bind(diag_shift(du, 1), d, diag_shift(dl, -1), g,
                                    perturb_singular=perturb_singular)

    def minus_sum(p):
        return L.neg(L.reduce_sum(p, (nd - 1,)))
    # dA x (jax's _tridiagonal_product) reads dl[i] x[i-1] and du[i] x[i+1]
    return [minus_sum(L.mul(bbar, _shift(x, 1))), minus_sum(L.mul(bbar, x)),
            minus_sum(L.mul(bbar, _shift(x, -1))), bbar]


tridiagonal_solve_p.vjp = _vjp
