"""det and slogdet of shardc.numpy.linalg, with jax's derivative rules: slogdet's is
trace(solve(a, da)) (its sign has none, but a complex one's phase), det's goes through
the adjugate (jax's _cofactor_solve), so it stays finite at singular matrices."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ...errors import ShardcError, ShardcNotImplementedError
from ...ir import dtypes
from ...ops import lax as L
from ...ops import linalg_decomp as D
from ...transforms.custom_jvp import custom_jvp
from .. import lax_linalg as lax_linalg
from ._linalg_solve import diagonal, inexact, permute_rows, solve, square
from ._reductions import any as _any
from ._reductions import prod as _prod
from ._reductions import sum as _sum
from ._shapes import concatenate, reshape
from ._ufuncs import (abs, equal, exp, isinf, isnan, less, log, logical_or, not_equal,
                      remainder, sign, where)
from ._util import aval, broadcast_to


class SlogdetResult(NamedTuple):
    sign: object
    logabsdet: object


def _entry(a, i, j):
    s = aval(a).shape
    v = L.slice(a, (0,) * (len(s) - 2) + (i, j), (*s[:-2], i + 1, j + 1))
    return reshape(v, s[:-2])


def _real(x):
    from ._complex import real
    return real(x)


def _trace(x):
    return _sum(diagonal(x), axis=-1)


# ---------------------------------------------------------------- slogdet

def _slogdet_small_fn(a):
    """n = 1 or 2: the closed form (no LU), as jax."""
    d = _det_small(a)
    return sign(d), _real(log(abs(d)))


def _swaps(piv):
    """How many rows LU's pivots swapped, per matrix."""
    pa = aval(piv)
    iota = L.broadcast_in_dim(L.iota(dtypes.int32, pa.shape[-1:], 0), pa.shape,
                              (pa.ndim - 1,))
    return _sum(not_equal(piv, iota), axis=-1)


def _sign_of(count, dt):
    """(-1) ** count as `dt`."""
    return L.convert_element_type(L.sub(1, L.mul(2, remainder(count, 2))), dt)


def _slogdet_lu_fn(a):
    dt = aval(a).dtype
    lu, piv, _ = lax_linalg.lu(a)
    d, parity = diagonal(lu), _swaps(piv)
    is_zero = _any(equal(d, 0), axis=-1)
    if dtypes.is_complex(dt):
        s = _prod(L.div(d, L.convert_element_type(abs(d), dt)), axis=-1)
    else:
        s = L.full((), 1, dt)
        parity = L.add(parity, _sum(less(d, 0), axis=-1))
    s = where(is_zero, L.full((), 0, dt), L.mul(s, _sign_of(parity, dt)))
    logabs = _sum(log(abs(d)), axis=-1)       # real (of a complex a too)
    return s, where(is_zero, L.full((), -np.inf, aval(logabs).dtype), logabs)


def _slogdet_qr_fn(a):
    """Householder QR: |det| from R's diagonal, the sign from its signs and one -1 per
    reflection made (a nonzero tau among the first n - 1), as jax's."""
    if dtypes.is_complex(aval(a).dtype):
        raise ShardcNotImplementedError("slogdet method='qr' not implemented for complex "
                                        "inputs")
    n = aval(a).shape[-1]
    r, taus = D.geqrf_p.bind(a)
    d = diagonal(r)
    s = _prod(sign(d), axis=-1)
    t = L.slice(taus, (0,) * aval(taus).ndim, (*aval(taus).shape[:-1], n - 1))
    s = L.mul(s, _sign_of(_sum(not_equal(t, 0), axis=-1), aval(s).dtype))
    return s, _sum(log(abs(d)), axis=-1)


def _slogdet_tangent(a, s, da_over):
    """(sign_dot, logdet_dot) from d log det = `da_over` (a complex one's imaginary part
    turns the sign)."""
    if dtypes.is_complex(aval(a).dtype):
        return (L.mul(L.sub(da_over, L.convert_element_type(_real(da_over),
                                                            aval(da_over).dtype)), s),
                _real(da_over))
    return L.zeros_like(s), da_over


def _slogdet_jvp(primals, tangents, fn):
    (x,), (g,) = primals, tangents
    s, ans = fn(x)
    return (s, ans), _slogdet_tangent(x, s, _trace(solve(x, g)))


def _slogdet_small_jvp(primals, tangents):
    (x,), (g,) = primals, tangents
    s, ans = _slogdet_small_fn(x)
    if aval(x).shape[-1] == 1:
        dot = L.div(_entry(g, 0, 0), _entry(x, 0, 0))
    else:
        x00, x01, x10, x11 = (_entry(x, i, j) for i in (0, 1) for j in (0, 1))
        g00, g01, g10, g11 = (_entry(g, i, j) for i in (0, 1) for j in (0, 1))
        num = L.add(L.sub(L.sub(L.mul(g00, x11), L.mul(g01, x10)), L.mul(g10, x01)),
                    L.mul(g11, x00))
        dot = L.div(num, _det_small(x))
    return (s, ans), _slogdet_tangent(x, s, dot)


_slogdet_small = custom_jvp(_slogdet_small_fn)
_slogdet_small.defjvp(_slogdet_small_jvp)
_slogdet_lu = custom_jvp(_slogdet_lu_fn)
_slogdet_lu.defjvp(lambda p, t: _slogdet_jvp(p, t, _slogdet_lu_fn))
_slogdet_qr = custom_jvp(_slogdet_qr_fn)
_slogdet_qr.defjvp(lambda p, t: _slogdet_jvp(p, t, _slogdet_qr_fn))


def slogdet(a, *, method=None):
    """(sign, log|det|) of each square matrix: closed forms for n = 1, 2, else from its LU
    (method='lu', the default) or QR (method='qr') factors, as jax's."""
    (a,) = inexact("slogdet", a)
    square("slogdet", a)
    if method is None or method == "lu":
        n = aval(a).shape[-1]
        return SlogdetResult(*(_slogdet_small(a) if n in (1, 2) else _slogdet_lu(a)))
    if method == "qr":
        return SlogdetResult(*_slogdet_qr(a))
    raise ShardcError(f"Unknown slogdet method '{method}'. Supported methods are 'lu' "
                      "(`None`), and 'qr'.")


# ---------------------------------------------------------------- det

def _det_small(a):
    """The 1x1, 2x2 and 3x3 closed forms jax uses (real and complex)."""
    if aval(a).shape[-1] == 1:
        return _entry(a, 0, 0)
    if aval(a).shape[-1] == 2:
        return L.sub(L.mul(_entry(a, 0, 0), _entry(a, 1, 1)),
                     L.mul(_entry(a, 0, 1), _entry(a, 1, 0)))
    t = [[_entry(a, i, j) for j in range(3)] for i in range(3)]

    def p3(x, y, z):
        return L.mul(L.mul(x, y), z)
    out = L.add(L.add(p3(t[0][0], t[1][1], t[2][2]), p3(t[0][1], t[1][2], t[2][0])),
                p3(t[0][2], t[1][0], t[2][1]))
    out = L.sub(out, p3(t[0][2], t[1][1], t[2][0]))
    out = L.sub(out, p3(t[0][0], t[1][2], t[2][1]))
    return L.sub(out, p3(t[0][1], t[1][0], t[2][2]))


def _cofactor_solve(a, b):
    """(det(a), adj(a) @ b), finite for singular a too (jax's _cofactor_solve): from a's
    LU with the last pivot replaced, zero where a's rank is below n - 1."""
    s = aval(a).shape
    n, dt = s[-1], aval(a).dtype
    if n == 1:
        return _entry(a, 0, 0), b
    lu, piv, perm = lax_linalg.lu(a)
    d = diagonal(lu)
    sgn = _sign_of(_swaps(piv), dt)
    partial = L.mul(_cumprod(d), L.broadcast_in_dim(sgn, aval(d).shape,
                                                   tuple(range(len(s) - 2))))
    nb = len(s) - 2
    before_last = L.slice(partial, (0,) * nb + (n - 2,), (*s[:-2], n - 1))
    full = reshape(L.slice(partial, (0,) * nb + (n - 1,), (*s[:-2], n)), s[:-2])
    corner = L.div(L.full((), 1, dt), reshape(before_last, s[:-2]))
    mask = np.zeros((n, n), bool)
    mask[-1, -1] = True
    lu = where(broadcast_to(mask, s), L.broadcast_in_dim(corner, s, tuple(range(nb))), lu)
    ones = L.full((*s[:-1], 1), 1, dt)
    rank_low = lax_linalg.triangular_solve(lu, ones, left_side=True, lower=False)
    rank_low = _any(logical_or(isnan(rank_low), isinf(rank_low)), axis=(-2, -1))
    low = L.broadcast_in_dim(rank_low, aval(b).shape, tuple(range(nb)))
    zero = L.full((), 0, dt)
    x = where(low, zero, b)
    x = permute_rows(perm, x)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    m = aval(x).shape[-1]
    head = L.slice(x, (0,) * (nb + 2), (*s[:-2], n - 1, m))
    tail = L.slice(x, (0,) * nb + (n - 1, 0), (*s[:-2], n, m))
    scale = L.broadcast_in_dim(full, aval(head).shape, tuple(range(nb)))
    x = concatenate([L.mul(head, scale), tail], axis=-2)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)
    return full, where(low, zero, x)


def _cumprod(d):
    from ._sorting import cumprod
    return cumprod(d, axis=-1)


def _det_fn(a):
    s, logdet = slogdet(a)
    return L.mul(s, L.convert_element_type(exp(logdet), aval(s).dtype))


def _det_jvp(primals, tangents):
    (x,), (g,) = primals, tangents
    y, z = _cofactor_solve(x, g)
    return y, _trace(z)


_det = custom_jvp(_det_fn)
_det.defjvp(_det_jvp)


def det(a):
    """The determinant of each square matrix: closed forms for 2x2 and 3x3, else from
    slogdet with the adjugate as its derivative (as jax)."""
    (a,) = inexact("det", a)
    square("det", a)
    if aval(a).shape[-1] in (2, 3):
        return _det_small(a)
    return _det(a)

