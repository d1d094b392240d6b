"""lax.custom_linear_solve and lax.custom_root: solves differentiated implicitly.

Both are custom_vjp calls (shardc.transforms.ad) whose functions are closure-converted
first (api.closures), so the traced values the user's matvec / f / solvers close over
are explicit arguments: their cotangents come from the implicit function theorem, not
by differentiating through the solver (which may be a while loop). As jax's, the
transposed linear system of custom_linear_solve's backward pass is itself a
custom_linear_solve (with the solvers swapped), so its derivatives stay implicit too.
"""
from __future__ import annotations

import numpy as np

from ..errors import ArgumentError
from ..ir import dtypes
from ..trace import core
from ..transforms.ad import custom_vjp
from .closures import closure_convert
from ..trace import pytree as _tree


def _check(what, got_tree, got, want_tree, want, has_aux=False):
    if has_aux:
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            raise ArgumentError(f"{what}() must return a pair (solution, aux) when "
                                "has_aux=True")
        got = got[0]
        got_tree = _tree.tree_structure(got)
    if got_tree != want_tree:
        raise ArgumentError(f"{what}() output pytree structure must match {want}, got "
                            f"{got_tree} and {want_tree}")
    return got


def _shapes_match(what, want, ys):
    got = [np.shape(y) for y in _tree.tree_leaves(ys)]
    if got != [np.shape(w) for w in _tree.tree_leaves(want)]:
        raise ArgumentError(f"{what}() output shapes must match b, got {got} and "
                            f"{[np.shape(w) for w in _tree.tree_leaves(want)]}")


def _zeros(x):
    from ..ops import lax as L
    return _tree.tree_map(lambda v: L.zeros(np.shape(v), core.aval_of(v).dtype), x)


def _is_float(v) -> bool:
    return dtypes.is_inexact(core.aval_of(v).dtype)


def _vjp_wrt_floats(fun, consts, ct):
    """Cotangents of `consts` (zeros for non-float ones) of `fun(*consts)` for `ct`."""
    from .grad import vjp
    idx = [i for i, c in enumerate(consts) if _is_float(c)]
    out = [_zeros(c) for c in consts]
    if not idx:
        return out

    def f(*fs):
        full = list(consts)
        for i, v in zip(idx, fs):
            full[i] = v
        return fun(*full)
    _, pull = vjp(f, *[consts[i] for i in idx])
    for i, g in zip(idx, pull(ct)):
        out[i] = g
    return out


def custom_linear_solve(matvec, b, solve, transpose_solve=None, symmetric=False,
                        has_aux=False):
    """lax.custom_linear_solve: `solve(matvec, b)`, differentiated as the solution x of
    `matvec(x) == b` (not through `solve`). `transpose_solve(vecmat, b)` solves the
    transposed system (reverse mode needs it, or `symmetric=True`, which uses
    `solve`); with `has_aux` the solvers return (x, aux) and so does this."""
    from .grad import vjp
    if transpose_solve is None and symmetric:
        transpose_solve = solve
    b_tree = _tree.tree_structure(b)

    def checked(fun, what, aux=False):
        def f(x):
            y = fun(x)
            y0 = _check(what, _tree.tree_structure(y), y, b_tree, "b", aux)
            _shapes_match(what, b, y0)
            return y
        return f
    mv, mv_c = closure_convert(checked(matvec, "matvec"), b)
    sv, sv_c = closure_convert(checked(lambda r: solve(matvec, r), "solve", has_aux), b)
    tv, tv_c = None, []
    if transpose_solve is not None:
        if symmetric:
            vecmat = matvec
        else:
            def vecmat(y):
                _, pull = vjp(matvec, _zeros(b))
                return pull(y)[0]
        tv, tv_c = closure_convert(
            checked(lambda r: transpose_solve(vecmat, r), "transpose_solve", has_aux), b)

    def primal(b, mvc, svc, tvc):
        return sv(b, *svc)

    def fwd(b, mvc, svc, tvc):
        out = sv(b, *svc)
        x = out[0] if has_aux else out
        return out, (x, mvc, svc, tvc)

    def bwd(res, ct):
        x, mvc, svc, tvc = res
        if tv is None:
            raise ArgumentError("transpose_solve required for backwards mode automatic "
                                "differentiation of custom_linear_solve.")
        x_ct = ct[0] if has_aux else ct
        # the transposed system, solved implicitly as well: solvers swapped
        lam = custom_linear_solve(
            lambda y: vecmat_of(mvc, x)(y), x_ct,
            solve=lambda _, r: _first(tv(r, *tvc), has_aux),
            transpose_solve=lambda _, r: _first(sv(r, *svc), has_aux))
        neg = _tree.tree_map(lambda v: -v, lam)
        mvc_ct = _vjp_wrt_floats(lambda *cs: mv(x, *cs), list(mvc), neg)
        return lam, mvc_ct, _zeros(list(svc)), _zeros(list(tvc))

    def vecmat_of(mvc, x):
        def vm(y):
            _, pull = vjp(lambda v: mv(v, *mvc), x)
            return pull(y)[0]
        return vm

    f = custom_vjp(primal)
    f.defvjp(fwd, bwd)
    return f(b, list(mv_c), list(sv_c), list(tv_c))


def _first(out, has_aux):
    return out[0] if has_aux else out


def custom_root(f, initial_guess, solve, tangent_solve, has_aux=False):
    """lax.custom_root: `solve(f, initial_guess)`, a root of `f`, differentiated by the
    implicit function theorem with respect to what `f` closes over: the tangent
    system `g(x) = y` (g: f linearized at the root) is solved by
    `tangent_solve(g, y)`. With `has_aux`, solve returns (root, aux) and so does
    this."""
    from .grad import jvp, vjp
    g_tree = _tree.tree_structure(initial_guess)

    def checked(fun, what, aux=False):
        def h(x):
            y = fun(x)
            _check(what, _tree.tree_structure(y), y, g_tree, "initial_guess", aux)
            return y
        return h
    fc, f_c = closure_convert(checked(f, "f"), initial_guess)
    sv, sv_c = closure_convert(checked(lambda g: solve(f, g), "solve", has_aux),
                               initial_guess)

    def primal(guess, fcs, svc):
        return sv(guess, *svc)

    def fwd(guess, fcs, svc):
        out = sv(guess, *svc)
        return out, (_first(out, has_aux), fcs, svc)

    def bwd(res, ct):
        x, fcs, svc = res
        x_ct = _first(ct, has_aux)

        def lin(v):      # f linearized at the root, in its argument
            return jvp(lambda u: fc(u, *fcs), (x,), (v,))[1]
        # mu = J_x^{-T} x_ct: the transpose of the (linear) tangent solve, applied
        _, pull = vjp(lambda y: tangent_solve(lin, y), _zeros(x))
        (mu,) = pull(x_ct)
        neg = _tree.tree_map(lambda v: -v, mu)
        return _zeros(x), _vjp_wrt_floats(lambda *cs: fc(x, *cs), list(fcs), neg), \
            _zeros(list(svc))

    r = custom_vjp(primal)
    r.defvjp(fwd, bwd)
    return r(initial_guess, list(f_c), list(sv_c))
