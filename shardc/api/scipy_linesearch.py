"""The strong-Wolfe line search of shardc.scipy.optimize (jax's
jax._src.scipy.optimize.line_search: Wright & Nocedal's algorithms 3.5 and 3.6).
Both loops are while_loops whose branches are selects, never conds: each iteration
evaluates every candidate update and keeps the one its predicate picks."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import numpy as snp
from .control import while_loop
from .numpy._util import aval, promote_dtypes_inexact, result_type

_HI = "highest"


def _dot(a, b):
    return snp.dot(a, b, precision=_HI)


def _cubicmin(a, fa, fpa, b, fb, c, fc):
    """The minimizer of the cubic through (a, fa) with slope fpa, (b, fb), (c, fc)."""
    dtype = result_type(a, fa, fpa, b, fb, c, fc)[0]
    db, dc = b - a, c - a
    denom = (db * dc) ** 2 * (db - dc)
    d1 = snp.array([[dc ** 2, -db ** 2], [-dc ** 3, db ** 3]], dtype=dtype)
    d2 = snp.array([fb - fa - fpa * db, fc - fa - fpa * dc], dtype=dtype)
    coef = _dot(d1, d2) / denom
    A, B = coef[0], coef[1]
    return a + (-B + snp.sqrt(B * B - 3.0 * A * fpa)) / (3.0 * A)


def _quadmin(a, fa, fpa, b, fb):
    """The minimizer of the quadratic through (a, fa) with slope fpa and (b, fb)."""
    db = b - a
    B = (fb - fa - fpa * db) / (db ** 2)
    return a - fpa / (2.0 * B)


def _select(pred, state, new):
    """state with the fields of `new` replaced where pred holds."""
    return state._replace(**{k: snp.where(pred, v, getattr(state, k))
                             for k, v in new.items()})


class _ZoomState(NamedTuple):
    done: object
    failed: object
    j: object
    a_lo: object
    phi_lo: object
    dphi_lo: object
    a_hi: object
    phi_hi: object
    dphi_hi: object
    a_rec: object
    phi_rec: object
    a_star: object
    phi_star: object
    dphi_star: object
    g_star: object
    nfev: object
    ngev: object


def _zoom(value_and_slope, wolfe_one, wolfe_two, a_lo, phi_lo, dphi_lo, a_hi, phi_hi,
          dphi_hi, g_0, pass_through):
    """Shrink [a_lo, a_hi] (cubic, quadratic or bisection steps) to a point meeting
    both Wolfe conditions; skipped entirely where `pass_through`."""
    state = _ZoomState(done=False, failed=False, j=0, a_lo=a_lo, phi_lo=phi_lo,
                       dphi_lo=dphi_lo, a_hi=a_hi, phi_hi=phi_hi, dphi_hi=dphi_hi,
                       a_rec=(a_lo + a_hi) / 2.0, phi_rec=(phi_lo + phi_hi) / 2.0,
                       a_star=1.0, phi_star=phi_lo, dphi_star=dphi_lo, g_star=g_0,
                       nfev=0, ngev=0)
    delta1, delta2 = 0.2, 0.1

    def body(s):
        dalpha = s.a_hi - s.a_lo
        lo = snp.minimum(s.a_hi, s.a_lo)
        hi = snp.maximum(s.a_hi, s.a_lo)
        cchk, qchk = delta1 * dalpha, delta2 * dalpha
        # an interval this small stops the search (and, unsatisfied, the minimizer)
        threshold = 1e-10 if np.finfo(aval(dalpha).dtype).bits >= 64 else 1e-5
        s = s._replace(failed=s.failed | (dalpha <= threshold))
        a_cubic = _cubicmin(s.a_lo, s.phi_lo, s.dphi_lo, s.a_hi, s.phi_hi, s.a_rec,
                            s.phi_rec)      # may be NaN: the bounds check then fails
        use_cubic = (s.j > 0) & (a_cubic > lo + cchk) & (a_cubic < hi - cchk)
        a_quad = _quadmin(s.a_lo, s.phi_lo, s.dphi_lo, s.a_hi, s.phi_hi)
        use_quad = (~use_cubic) & (a_quad > lo + qchk) & (a_quad < hi - qchk)
        use_bisect = (~use_cubic) & (~use_quad)
        a_j = snp.where(use_cubic, a_cubic, s.a_rec)
        a_j = snp.where(use_quad, a_quad, a_j)
        a_j = snp.where(use_bisect, (s.a_lo + s.a_hi) / 2.0, a_j)
        phi_j, dphi_j, g_j = value_and_slope(a_j)
        phi_j = snp.astype(phi_j, aval(s.phi_lo).dtype)
        dphi_j = snp.astype(dphi_j, aval(s.dphi_lo).dtype)
        g_j = snp.astype(g_j, aval(s.g_star).dtype)
        s = s._replace(nfev=s.nfev + 1, ngev=s.ngev + 1)
        hi_to_j = wolfe_one(a_j, phi_j) | (phi_j >= s.phi_lo)
        star_to_j = wolfe_two(dphi_j) & (~hi_to_j)
        hi_to_lo = (dphi_j * (s.a_hi - s.a_lo) >= 0.0) & (~hi_to_j) & (~star_to_j)
        lo_to_j = (~hi_to_j) & (~star_to_j)
        s = _select(hi_to_j, s, dict(a_hi=a_j, phi_hi=phi_j, dphi_hi=dphi_j, a_rec=s.a_hi,
                                     phi_rec=s.phi_hi))
        s = _select(star_to_j, s._replace(done=star_to_j | s.done),
                    dict(a_star=a_j, phi_star=phi_j, dphi_star=dphi_j, g_star=g_j))
        s = _select(hi_to_lo, s, dict(a_hi=s.a_lo, phi_hi=s.phi_lo, dphi_hi=s.dphi_lo,
                                      a_rec=s.a_hi, phi_rec=s.phi_hi))
        s = _select(lo_to_j & ~hi_to_lo, s, dict(a_rec=s.a_lo, phi_rec=s.phi_lo))
        s = _select(lo_to_j, s, dict(a_lo=a_j, phi_lo=phi_j, dphi_lo=dphi_j))
        # (jax's cap, higher than SciPy's 10)
        return s._replace(j=s.j + 1, failed=s.failed | (s.j + 1 >= 30))

    return while_loop(lambda s: (~s.done) & (~pass_through) & (~s.failed), body, state)


class _LineSearchState(NamedTuple):
    done: object
    failed: object
    i: object
    a_i1: object
    phi_i1: object
    dphi_i1: object
    nfev: object
    ngev: object
    a_star: object
    phi_star: object
    dphi_star: object
    g_star: object


class _LineSearchResults(NamedTuple):
    failed: object
    nit: object
    nfev: object
    ngev: object
    k: object
    a_k: object
    f_k: object
    g_k: object
    status: object


def line_search(f, xk, pk, old_fval=None, old_old_fval=None, gfk=None, c1=1e-4, c2=0.9,
                maxiter=20):
    """A step a along pk from xk meeting the strong Wolfe conditions (c1, c2)."""
    from .grad import value_and_grad
    xk, pk = promote_dtypes_inexact(xk, pk)
    pdt = aval(pk).dtype

    def value_and_slope(t):
        phi, g = value_and_grad(f)(xk + snp.asarray(t, dtype=pdt) * pk)
        return phi, snp.real(_dot(g, pk)), g

    fresh = old_fval is None or gfk is None
    if fresh:
        phi_0, dphi_0, gfk = value_and_slope(0)
    else:
        phi_0, dphi_0 = old_fval, snp.real(_dot(gfk, pk))
    if old_old_fval is not None:
        cand = 1.01 * 2 * (phi_0 - old_old_fval) / dphi_0
        start = snp.where(cand > 1, 1.0, cand)
    else:
        start = 1

    def wolfe_one(a_i, phi_i):      # sufficient decrease fails
        return phi_i > phi_0 + c1 * a_i * dphi_0

    def wolfe_two(dphi_i):          # curvature holds
        return snp.abs(dphi_i) <= -c2 * dphi_0

    # as jax: the iteration starts at 1 (Wright and Nocedal; scipy starts at 0)
    state = _LineSearchState(
        done=snp.array(False), failed=snp.array(False), i=1, a_i1=0.0, phi_i1=phi_0,
        dphi_i1=dphi_0, nfev=int(fresh), ngev=int(fresh), a_star=0.0, phi_star=phi_0,
        dphi_star=dphi_0, g_star=gfk)
    keys = ("a_star", "phi_star", "dphi_star", "g_star")

    def body(s):
        a_i = snp.where(s.i == 1, start, s.a_i1 * 2.0)     # no amax: doubles, as scipy
        phi_i, dphi_i, g_i = value_and_slope(a_i)
        s = s._replace(nfev=s.nfev + 1, ngev=s.ngev + 1)
        to_zoom1 = wolfe_one(a_i, phi_i) | ((phi_i >= s.phi_i1) & (s.i > 1))
        to_i = wolfe_two(dphi_i) & (~to_zoom1)
        to_zoom2 = (dphi_i >= 0.0) & (~to_zoom1) & (~to_i)
        z1 = _zoom(value_and_slope, wolfe_one, wolfe_two, s.a_i1, s.phi_i1, s.dphi_i1,
                   a_i, phi_i, dphi_i, gfk, ~to_zoom1)
        s = s._replace(nfev=s.nfev + z1.nfev, ngev=s.ngev + z1.ngev)
        z2 = _zoom(value_and_slope, wolfe_one, wolfe_two, a_i, phi_i, dphi_i, s.a_i1,
                   s.phi_i1, s.dphi_i1, gfk, ~to_zoom2)
        s = s._replace(nfev=s.nfev + z2.nfev, ngev=s.ngev + z2.ngev)
        s = _select(to_zoom1, s._replace(done=to_zoom1 | s.done,
                                         failed=(to_zoom1 & z1.failed) | s.failed),
                    {k: getattr(z1, k) for k in keys})
        s = _select(to_i, s._replace(done=to_i | s.done),
                    dict(a_star=a_i, phi_star=phi_i, dphi_star=dphi_i, g_star=g_i))
        s = _select(to_zoom2, s._replace(done=to_zoom2 | s.done,
                                         failed=(to_zoom2 & z2.failed) | s.failed),
                    {k: getattr(z2, k) for k in keys})
        return s._replace(i=s.i + 1, a_i1=a_i, phi_i1=phi_i, dphi_i1=dphi_i)

    s = while_loop(lambda s: (~s.done) & (s.i <= maxiter) & (~s.failed), body, state)
    status = snp.where(s.failed, snp.array(1),
                       snp.where(s.i > maxiter, snp.array(3), snp.array(0)))
    # a floor on the step in < 64 bits, where tiny steps stall the minimizer
    alpha = snp.asarray(s.a_star)
    if np.finfo(aval(alpha).dtype).bits != 64:
        alpha = snp.where(snp.abs(alpha) < 1e-8, snp.sign(alpha) * 1e-8, alpha)
    return _LineSearchResults(failed=s.failed | (~s.done), nit=s.i - 1, nfev=s.nfev,
                              ngev=s.ngev, k=s.i, a_k=alpha, f_k=s.phi_star, g_k=s.g_star,
                              status=status)
