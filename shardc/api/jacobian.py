"""jacfwd, jacrev, hessian, as jax's: the JVP (or VJP) mapped over the standard basis of
the inputs (or outputs) with shardc.vmap, the blocks unravelled into the tree product
of the outputs' and inputs' structures. Without vmap (`_USE_VMAP` off) the basis is
walked in a Python loop and the results stacked: the same values, a longer program."""
from __future__ import annotations

import functools
import math

import numpy as np

from ..errors import ShardcError, ShardcTypeError, api_boundary
from ..ir import dtypes
from ..trace import core
from .grad import _argnums, _check_input, _check_output, _eager, _fname, _hold, jvp, vjp
from ..trace import pytree as _tree

_USE_VMAP = True


def _vmap():
    if not _USE_VMAP:
        return None
    try:
        from .vmap import vmap
    except ImportError:     # (before shardc.vmap exists)
        return None
    return vmap


def _dtype_name(x):
    return np.dtype(core.aval_of(x).dtype).name


def _check_jacfwd_inputs(leaves, holomorphic):
    for x in leaves:
        dt = core.aval_of(x).dtype
        if holomorphic and not np.issubdtype(dt, np.complexfloating):
            raise ShardcTypeError(f"jacfwd with holomorphic=True requires inputs with "
                                  f"complex dtype, but got {_dtype_name(x)}.")
        if not holomorphic and not dtypes.is_float(dt):
            raise ShardcTypeError(
                f"jacfwd requires real-valued inputs (input dtype that is a sub-dtype of "
                f"np.floating), but got {_dtype_name(x)}. For holomorphic differentiation, "
                f"pass holomorphic=True. For differentiation of non-holomorphic functions "
                f"involving complex inputs or integer inputs, use shardc.jvp directly.")


def _check_jacfwd_outputs(leaves, holomorphic):
    for y in leaves:
        if holomorphic and not dtypes.is_complex(core.aval_of(y).dtype):
            raise ShardcTypeError(f"jacfwd with holomorphic=True requires outputs with "
                                  f"complex dtype, but got {_dtype_name(y)}.")


def _std_basis(leaves):
    """Per leaf, its part of the identity over all leaves' elements: (n, *leaf.shape)."""
    from . import numpy as snp
    from .numpy._util import aval, convert
    sizes = [math.prod(core.aval_of(x).shape) for x in leaves]
    n = sum(sizes)
    dt = np.result_type(*[core.aval_of(x).dtype for x in leaves])
    eye = snp.eye(n, dtype=dt)
    out, off = [], 0
    for x, k in zip(leaves, sizes):
        a = aval(x)
        part = snp.reshape(eye[:, off:off + k], (n,) + tuple(a.shape))
        out.append(convert(part, a.dtype, False))
        off += k
    return n, out


def _map_basis(fn, basis, n):
    """fn(*row leaves) -> list of arrays, stacked over the n rows of `basis`."""
    vmap = _vmap()
    if vmap is not None:
        return list(vmap(lambda *row: list(fn(*row)))(*basis))
    from . import numpy as snp
    rows = [list(fn(*[b[i] for b in basis])) for i in range(n)]
    return [snp.stack([r[j] for r in rows]) for j in range(len(rows[0]))]


def _partial(fun, args, kwargs, nums):
    def f(*ws):
        full = list(args)
        for i, w in zip(nums, ws):
            full[i] = w
        return fun(*full, **kwargs)
    return f


def _split_aux(has_aux, got):
    if not has_aux:
        return got, None
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        raise ShardcError("has_aux=True needs the function to return (output, aux)")
    return got[0], got[1]


@api_boundary
def jacfwd(fun, argnums=0, has_aux=False, holomorphic=False):
    """The Jacobian of fun by forward mode, column by column (as jax.jacfwd): for each
    output leaf of shape s and input leaf of shape t, a block of shape s + t."""
    if not callable(fun):
        raise ShardcTypeError(f"Expected a callable value, got {fun!r}")

    @functools.wraps(fun)
    @_eager(f"jacfwd({_fname(fun)})")
    @api_boundary
    def jacfun(*args, **kwargs):
        from .numpy._util import aval, convert
        single, nums = _argnums(argnums, len(args))
        dyn = tuple(args[i] for i in nums)
        f = _partial(fun, args, kwargs, nums)
        leaves, tree = _tree.tree_flatten(dyn)
        _check_jacfwd_inputs(leaves, holomorphic)
        y, aux = _split_aux(has_aux, f(*dyn))
        y_leaves, y_tree = _tree.tree_flatten(y)
        _check_jacfwd_outputs(y_leaves, holomorphic)
        n, basis = _std_basis(leaves)

        def push(*row):
            t = _tree.tree_unflatten(tree, list(row))
            out = jvp(lambda *w: _split_aux(has_aux, f(*w))[0], dyn, t)[1]
            # an integer output's float0 tangent: zeros of its dtype, as jax's jacfwd
            return [snp.zeros(o.shape, aval(y).dtype) if dtypes.is_float0(o) else o
                    for o, y in zip(_tree.tree_leaves(out), y_leaves)]
        from . import numpy as snp
        cols = _map_basis(push, basis, n)      # per output leaf: (n, *y.shape)
        example = dyn[0] if single else dyn
        ex_leaves, ex_tree = _tree.tree_flatten(example)
        blocks = []
        for yl, c in zip(y_leaves, cols):
            ya = aval(yl)
            c = snp.moveaxis(c, 0, -1)
            parts, off = [], 0
            for x in ex_leaves:
                xs = tuple(aval(x).shape)
                k = math.prod(xs)
                parts.append(convert(snp.reshape(c[..., off:off + k], tuple(ya.shape) + xs),
                                     ya.dtype, ya.weak))
                off += k
            blocks.append(_tree.tree_unflatten(ex_tree, parts))
        jac = _tree.tree_unflatten(y_tree, blocks)
        return (jac, _hold(aux)) if has_aux else jac
    return jacfun


@api_boundary
def jacrev(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False):
    """The Jacobian of fun by reverse mode, row by row (as jax.jacrev): for each output
    leaf of shape s and input leaf of shape t, a block of shape s + t."""
    if not callable(fun):
        raise ShardcTypeError(f"Expected a callable value, got {fun!r}")

    @functools.wraps(fun)
    @_eager(f"jacrev({_fname(fun)})")
    @api_boundary
    def jacfun(*args, **kwargs):
        from .numpy._util import aval, convert
        single, nums = _argnums(argnums, len(args))
        dyn = tuple(args[i] for i in nums)
        f = _partial(fun, args, kwargs, nums)
        leaves, tree = _tree.tree_flatten(dyn)
        for x in leaves:
            _check_input("jacrev", x, holomorphic, allow_int)
        # (allow_int: integer inputs are not differentiated; their blocks are zeros)
        diff = [k for k, x in enumerate(leaves) if dtypes.is_inexact(core.aval_of(x).dtype)]

        def f_diff(*ws):
            ls = list(leaves)
            for k, w in zip(diff, ws):
                ls[k] = w
            return f(*_tree.tree_unflatten(tree, ls))
        wrt = [leaves[k] for k in diff]
        got = vjp(f_diff, *wrt, has_aux=has_aux)
        y, aux = got[0], (got[2] if has_aux else None)
        y_leaves, y_tree = _tree.tree_flatten(y)
        for yl in y_leaves:
            _check_output("jacrev", core.aval_of(yl).dtype, holomorphic)
        m, basis = _std_basis(y_leaves)

        def pull(*row):
            # (the VJP taken inside the mapped function: its forward ops read nothing
            # mapped, so vmap emits them once; its backward ops are batched)
            pb = vjp(f_diff, *wrt, has_aux=has_aux)[1] if _vmap() is not None else got[1]
            return _tree.tree_leaves(pb(_tree.tree_unflatten(y_tree, list(row))))
        rows = dict(zip(diff, _map_basis(pull, basis, m) if diff else []))
        from . import numpy as snp
        ex_tree = _tree.tree_structure(dyn[0] if single else dyn)
        blocks = []
        off = 0
        sizes = [math.prod(aval(yl).shape) for yl in y_leaves]
        for yl, k in zip(y_leaves, sizes):
            ys = tuple(aval(yl).shape)
            parts = []
            for j, x in enumerate(leaves):
                xa = aval(x)
                if j not in rows:
                    parts.append(snp.zeros(ys + tuple(xa.shape), xa.dtype))
                    continue
                parts.append(convert(snp.reshape(rows[j][off:off + k], ys + tuple(xa.shape)),
                                     xa.dtype, xa.weak))
            blocks.append(_tree.tree_unflatten(ex_tree, parts))
            off += k
        jac = _tree.tree_unflatten(y_tree, blocks)
        return (jac, _hold(aux)) if has_aux else jac
    return jacfun


jacobian = jacrev


@api_boundary
def hessian(fun, argnums=0, has_aux=False, holomorphic=False):
    """jacfwd(jacrev(fun)): the Hessian, blocks in the tree product output x input x
    input (as jax.hessian)."""
    return jacfwd(jacrev(fun, argnums, has_aux=has_aux, holomorphic=holomorphic),
                  argnums, has_aux=has_aux, holomorphic=holomorphic)
