"""shardc.scipy.optimize: minimize with BFGS and jax's experimental L-BFGS, as
jax.scipy.optimize's. Each is one while_loop over its state (a NamedTuple), stepping
along the quasi-Newton direction by a strong-Wolfe line search; gradients of the
objective come from shardc.value_and_grad."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..errors import ArgumentError, ShardcTypeError, wrap_public
from . import numpy as snp
from .control import fori_loop, while_loop
from .numpy._util import aval
from .scipy_linesearch import line_search

__all__ = ["minimize", "OptimizeResults"]

_HI = "highest"


def _dot(a, b):
    return snp.dot(a, b, precision=_HI)


class OptimizeResults(NamedTuple):
    """Results of `minimize` (jax's fields): x, success, status (0 converged, 1 max
    iterations, 3 zoom failed, 4 saddle point, 5 max line-search iterations, -1
    undefined), fun, jac, hess_inv (None for L-BFGS), nfev, njev, nit."""
    x: Any
    success: Any
    status: Any
    fun: Any
    jac: Any
    hess_inv: Any
    nfev: Any
    njev: Any
    nit: Any


class _BFGSResults(NamedTuple):
    converged: Any
    failed: Any
    k: Any
    nfev: Any
    ngev: Any
    nhev: Any
    x_k: Any
    f_k: Any
    g_k: Any
    H_k: Any
    old_old_fval: Any
    status: Any
    line_search_status: Any


def minimize_bfgs(fun, x0, maxiter=None, norm=np.inf, gtol=1e-5, line_search_maxiter=10):
    """BFGS (Wright & Nocedal, algorithm 6.1) from x0, the inverse Hessian estimate
    updated each step; stops when |grad|_norm < gtol."""
    from .grad import value_and_grad
    if maxiter is None:
        maxiter = np.size(x0) * 200
    d = aval(x0).shape[0]
    f_0, g_0 = value_and_grad(fun)(x0)
    state = _BFGSResults(
        converged=snp.linalg.norm(g_0, ord=norm) < gtol, failed=False, k=0, nfev=1, ngev=1,
        nhev=0, x_k=x0, f_k=f_0, g_k=g_0, H_k=snp.eye(d, dtype=aval(x0).dtype),
        old_old_fval=f_0 + snp.linalg.norm(g_0) / 2, status=0, line_search_status=0)

    def body(s):
        p_k = -_dot(s.H_k, s.g_k)
        ls = line_search(fun, s.x_k, p_k, old_fval=s.f_k, old_old_fval=s.old_old_fval,
                         gfk=s.g_k, maxiter=line_search_maxiter)
        s = s._replace(nfev=s.nfev + ls.nfev, ngev=s.ngev + ls.ngev, failed=ls.failed,
                       line_search_status=ls.status)
        s_k = ls.a_k * p_k
        y_k = ls.g_k - s.g_k
        rho = snp.reciprocal(_dot(y_k, s_k))
        w = snp.eye(d, dtype=aval(rho).dtype) - rho * (s_k[:, None] * y_k[None, :])
        H = (snp.einsum("ij,jk,lk", w, s.H_k, w, precision=_HI)
             + rho * s_k[:, None] * s_k[None, :])
        H = snp.where(snp.isfinite(rho), H, s.H_k)     # skip the update if y.s == 0
        return s._replace(converged=snp.linalg.norm(ls.g_k, ord=norm) < gtol, k=s.k + 1,
                          x_k=s.x_k + s_k, f_k=ls.f_k, g_k=ls.g_k, H_k=H,
                          old_old_fval=s.f_k)

    s = while_loop(lambda s: ~s.converged & ~s.failed & (s.k < maxiter), body, state)
    status = snp.where(s.converged, 0,
                       snp.where(s.k == maxiter, 1,
                                 snp.where(s.failed, 2 + s.line_search_status, -1)))
    return s._replace(status=status)


class _LBFGSResults(NamedTuple):
    converged: Any
    failed: Any
    k: Any
    nfev: Any
    ngev: Any
    x_k: Any
    f_k: Any
    g_k: Any
    s_history: Any
    y_history: Any
    rho_history: Any
    gamma: Any
    status: Any
    ls_status: Any


def _minimize_lbfgs(fun, x0, maxiter=None, norm=np.inf, maxcor=10,
                    ftol=2.220446049250313e-09, gtol=1e-05, maxfun=None, maxgrad=None,
                    maxls=20):
    """L-BFGS (Wright & Nocedal, algorithm 7.5; complex x as Sorber et al. 2012) with a
    history of `maxcor` steps. status: 0 converged, 1 maxiter, 2 maxfun, 3 maxgrad,
    4 progress below ftol, 5 line search failed."""
    from .grad import value_and_grad
    d = len(x0)
    dtype = aval(x0).dtype
    if maxiter is None and maxfun is None and maxgrad is None:
        maxiter = d * 200       # at least one limit
    maxiter = np.inf if maxiter is None else maxiter
    maxfun = np.inf if maxfun is None else maxfun
    maxgrad = np.inf if maxgrad is None else maxgrad
    f_0, g_0 = value_and_grad(fun)(x0)
    state = _LBFGSResults(
        converged=snp.array(False), failed=snp.array(False), k=0, nfev=1, ngev=1, x_k=x0,
        f_k=f_0, g_k=g_0, s_history=snp.zeros((maxcor, d), dtype=dtype),
        y_history=snp.zeros((maxcor, d), dtype=dtype),
        rho_history=snp.zeros((maxcor,), dtype=dtype), gamma=1.0, status=0, ls_status=0)

    def body(s):
        p_k = _two_loop_recursion(s)
        ls = line_search(f=fun, xk=s.x_k, pk=p_k, old_fval=s.f_k, gfk=s.g_k, maxiter=maxls)
        s_k = snp.astype(snp.asarray(ls.a_k), aval(p_k).dtype) * p_k
        y_k = ls.g_k - s.g_k
        rho_inv = snp.real(_dot(y_k, s_k))
        rho = snp.astype(snp.reciprocal(rho_inv), aval(y_k).dtype)
        gamma = rho_inv / snp.real(_dot(snp.conj(y_k), y_k))
        status = snp.array(0)
        status = snp.where(s.f_k - ls.f_k < ftol, 4, status)
        status = snp.where(s.ngev >= maxgrad, 3, status)
        status = snp.where(s.nfev >= maxfun, 2, status)
        status = snp.where(s.k >= maxiter, 1, status)
        status = snp.where(ls.failed, 5, status)
        converged = snp.linalg.norm(ls.g_k, ord=norm) < gtol
        gdt = aval(s.g_k).dtype
        return s._replace(
            converged=converged, failed=(status > 0) & ~converged, k=s.k + 1,
            nfev=s.nfev + ls.nfev, ngev=s.ngev + ls.ngev,
            x_k=snp.astype(s.x_k + s_k, aval(s.x_k).dtype),
            f_k=snp.astype(ls.f_k, aval(s.f_k).dtype), g_k=snp.astype(ls.g_k, gdt),
            s_history=_push(s.s_history, s_k), y_history=_push(s.y_history, y_k),
            rho_history=_push(s.rho_history, rho), gamma=snp.astype(gamma, gdt),
            status=snp.where(converged, 0, status), ls_status=ls.status)

    return while_loop(lambda s: ~s.converged & ~s.failed, body, state)


def _two_loop_recursion(s):
    """The L-BFGS direction -H g from the stored (s, y, rho) history (newest last)."""
    dtype = aval(s.rho_history).dtype
    n = aval(s.rho_history).shape[0]
    used = snp.where(s.k < n, s.k, n)

    def newest_first(j, carry):
        q, a_his = carry
        i = n - 1 - j
        a_i = s.rho_history[i] * snp.astype(snp.real(_dot(snp.conj(s.s_history[i]), q)),
                                            dtype)
        return q - a_i * snp.conj(s.y_history[i]), a_his.at[i].set(a_i)
    q, a_his = fori_loop(0, used, newest_first,
                         (-snp.conj(s.g_k), snp.zeros_like(s.rho_history)))
    q = s.gamma * q

    def oldest_first(j, q):
        i = n - used + j
        b_i = s.rho_history[i] * snp.astype(snp.real(_dot(s.y_history[i], q)), dtype)
        return q + (a_his[i] - b_i) * s.s_history[i]
    return fori_loop(0, used, oldest_first, q)


def _push(history, new):
    """The history rolled one step back, `new` as its last entry."""
    return snp.roll(history, -1, axis=0).at[-1].set(new)


def minimize(fun, x0, args=(), *, method, tol=None, options=None):
    """Minimize fun(x, *args) over a 1-d x from x0, as jax.scipy.optimize.minimize:
    method 'BFGS' or 'l-bfgs-experimental-do-not-rely-on-this'; options are the
    method's keyword arguments (maxiter, gtol, norm, ...). tol is accepted and unused,
    as jax's."""
    options = {} if options is None else options
    if not isinstance(args, tuple):
        raise ShardcTypeError(f"args argument to jax.scipy.optimize.minimize must be a tuple, "
                        f"got {args}")

    def fun_with_args(x):
        return fun(x, *args)
    if method.lower() == "bfgs":
        r = minimize_bfgs(fun_with_args, x0, **options)
        return OptimizeResults(x=r.x_k, success=r.converged & ~r.failed, status=r.status,
                               fun=r.f_k, jac=r.g_k, hess_inv=r.H_k, nfev=r.nfev,
                               njev=r.ngev, nit=r.k)
    if method.lower() == "l-bfgs-experimental-do-not-rely-on-this":
        r = _minimize_lbfgs(fun_with_args, x0, **options)
        return OptimizeResults(x=r.x_k, success=r.converged & ~r.failed, status=r.status,
                               fun=r.f_k, jac=r.g_k, hess_inv=None, nfev=r.nfev,
                               njev=r.ngev, nit=r.k)
    raise ArgumentError(f"Method {method} not recognized")


wrap_public(globals())
