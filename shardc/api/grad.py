"""grad, value_and_grad, vjp, jvp: the user-facing wrappers of the backward pass.

Inside a trace they differentiate in place (shardc.transforms.ad); called outside any
trace, each compiles itself with shardc.jit. Forward mode (`jvp`) transposes the
reverse pass (the VJP of a VJP is the JVP).
"""
from __future__ import annotations

import functools

import jax
import numpy as np

from ..errors import ShardcError, ShardcNotImplementedError, ShardcTypeError, api_boundary
from ..ir import dtypes
from ..trace import core
from ..ir.program import Lit
from ..ops import lax as L
from ..ops.region import placement_of, trace_region
from ..transforms.ad import _is_float, _traced_vjp, eval_ops
from ..transforms.forward import jvp_region, needs_forward, zeros_varying_as
from ..trace import pytree as _tree


def _is_arraylike(x):
    return isinstance(x, (bool, int, float, np.generic, np.ndarray, jax.Array))


class _Held:
    """An aux leaf that is no traced value (a string, a NumPy constant): it leaves an
    eager transform's jit in the output's tree structure, as itself, as jax's eager
    transforms return it."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


_tree.register_pytree_node(_Held, lambda h: ((), h), lambda h, _: h)


def _hold(tree):
    return _tree.tree_map(lambda x: x if core.is_tracer(x) else _Held(x), tree)


def _release(tree):
    return _tree.tree_map(lambda x: x.value if isinstance(x, _Held) else x, tree,
                          is_leaf=lambda x: isinstance(x, _Held))


def _eager(name):
    """A decorator: run `fn` under shardc.jit when called outside a trace, traced again
    on every call as jax's eager transforms run it, an equal program's executable reused
    (`name` in NaN errors); arguments with no array leaves (flags, functions) are
    static, as jax.grad allows."""
    return functools.partial(_eager_fn, name=name)


def _fname(fun):
    return getattr(fun, "__name__", "fun")


def _eager_fn(fn, name):
    jitted = {}

    @functools.wraps(fn)
    @api_boundary
    def wrapper(*args, **kwargs):
        if core.current_builder() is not None:
            return _release(fn(*args, **kwargs))
        static = tuple(i for i, a in enumerate(args)
                       if not all(map(_is_arraylike, _tree.tree_leaves(a))))
        j = jitted.get(static)
        if j is None:
            from .jit import internal_jit
            j = jitted[static] = internal_jit(fn, name, retrace=True,
                                                   static_argnums=static)
        return _release(j(*args, **kwargs))
    return wrapper


def _argnums(argnums, n):
    single = isinstance(argnums, int)
    nums = (argnums,) if single else tuple(argnums)
    if not all(isinstance(i, int) for i in nums):
        raise ShardcTypeError(f"argnums must be an int or a tuple of ints, got {argnums!r}")
    for i in nums:
        if not -n <= i < n:
            raise ShardcError(f"argnums {argnums} is out of range for {n} positional arguments")
    return single, tuple(i % n for i in nums)


@api_boundary
def value_and_grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False,
                   reduce_axes=()):
    """(f(x), df/dx) for a scalar-valued f, as jax.value_and_grad: real or complex inputs
    (a real output; holomorphic=True: complex inputs and output), and integer or bool
    inputs with allow_int=True, whose gradients are float0 zeros."""
    if not callable(fun):
        raise ShardcTypeError(f"Expected a callable value, got {fun!r}")
    if reduce_axes:
        raise ShardcNotImplementedError("reduce_axes argument to grad is deprecated")

    @_eager(f"grad({_fname(fun)})")
    @api_boundary
    def vg(*args, **kwargs):
        single, nums = _argnums(argnums, len(args))
        leaves, tree = _tree.tree_flatten(tuple(args[i] for i in nums))
        for x in leaves:
            _check_input("grad", x, holomorphic, allow_int)
        diff = [k for k, x in enumerate(leaves)
                if dtypes.is_inexact(core.aval_of(x).dtype)]

        def f_of(*ws):
            ls = list(leaves)
            for k, w in zip(diff, ws):
                ls[k] = w
            full = list(args)
            for i, w in zip(nums, _tree.tree_unflatten(tree, ls)):
                full[i] = w
            return fun(*full, **kwargs)
        out, aux, vjp_fn = _traced_vjp(f_of, tuple(leaves[k] for k in diff), has_aux)
        oa = core.aval_of(out) if not isinstance(out, (tuple, list, dict)) else None
        if oa is None or oa.shape != ():
            raise ShardcError("grad requires a function with a scalar output, got "
                              f"{oa if oa is not None else type(out).__name__}")
        _check_output("grad", oa.dtype, holomorphic)
        gl = [np.zeros(core.aval_of(x).shape, jax.dtypes.float0) for x in leaves]
        # the seed is 1 of the output's type, weak if it is (as jax's `_one(ans)`)
        for k, g in zip(diff, vjp_fn(L.full((), 1, oa.dtype, weak=oa.weak))):
            gl[k] = g
        g = _tree.tree_unflatten(tree, gl)
        g = g[0] if single else g
        return ((out, _hold(aux)), g) if has_aux else (out, g)
    return vg


def _check_input(name, x, holomorphic, allow_int):
    """jax's checks of a differentiated input's dtype."""
    dt = np.dtype(core.aval_of(x).dtype)
    if holomorphic and not dtypes.is_complex(dt):
        raise ShardcTypeError(f"{name} with holomorphic=True requires inputs with complex "
                              f"dtype, but got {dt.name}.")
    if dtypes.is_int(dt) or dt == dtypes.bool_:
        if not allow_int:
            raise ShardcTypeError(
                f"{name} requires real- or complex-valued inputs (input dtype that is a "
                f"sub-dtype of np.inexact), but got {dt.name}. If you want to use Boolean- "
                "or integer-valued inputs, use vjp or set allow_int to True.")
    elif not dtypes.is_inexact(dt):
        raise ShardcTypeError(f"{name} requires numerical-valued inputs (input dtype that is "
                              f"a sub-dtype of np.bool_ or np.number), but got {dt.name}.")


def _check_output(name, dt, holomorphic):
    """jax's checks of the differentiated output's dtype."""
    dt = np.dtype(dt)
    if holomorphic:
        if not dtypes.is_complex(dt):
            raise ShardcTypeError(f"{name} with holomorphic=True requires outputs with "
                                  f"complex dtype, but got {dt.name}.")
    elif dtypes.is_complex(dt):
        raise ShardcTypeError(
            f"{name} requires real-valued outputs (output dtype that is a sub-dtype of "
            f"np.floating), but got {dt.name}. For holomorphic differentiation, pass "
            "holomorphic=True. For differentiation of non-holomorphic functions involving "
            "complex outputs, use shardc.vjp directly.")
    elif not dtypes.is_float(dt):
        raise ShardcTypeError(
            f"{name} requires real-valued outputs (output dtype that is a sub-dtype of "
            f"np.floating), but got {dt.name}. For differentiation of functions with integer "
            "outputs, use shardc.vjp directly.")


@api_boundary
def grad(fun, argnums=0, has_aux=False, holomorphic=False, allow_int=False, reduce_axes=()):
    """The gradient of a scalar-valued f, as jax.grad."""
    vg = value_and_grad(fun, argnums, has_aux, holomorphic, allow_int, reduce_axes)

    @functools.wraps(fun)
    @api_boundary
    def g(*args, **kwargs):
        res = vg(*args, **kwargs)
        if has_aux:
            (_, aux), gr = res
            return gr, aux
        return res[1]
    return g


_eager_vjps: dict = {}


@api_boundary
def vjp(fun, *primals, has_aux=False):
    """(f(*primals), vjp_fn[, aux]) where vjp_fn(ct) gives the cotangents of the primals;
    vjp_fn is a pytree of residuals, as jax's (it may leave and enter jitted functions).
    Outside a trace the forward pass runs compiled, once per function and signature."""
    if core.current_builder() is None:
        key = (fun, has_aux)
        fwd = _eager_vjps.get(key)
        if fwd is None:
            from .jit import internal_jit
            fwd = _eager_vjps[key] = internal_jit(
                lambda *p: _hold(vjp(fun, *p, has_aux=has_aux)), f"vjp({_fname(fun)})",
                retrace=True)
        return _release(fwd(*primals))
    from .vjp_fn import Float0Fill, make_vjp
    leaves, tree = _tree.tree_flatten(primals)
    diff = [k for k, x in enumerate(leaves) if dtypes.is_inexact(core.aval_of(x).dtype)]
    if len(diff) == len(leaves):
        out, aux, fn = _traced_vjp(fun, primals, has_aux)
        return (out, make_vjp(fn, out), aux) if has_aux else (out, make_vjp(fn, out))

    def f_of(*ws):      # integer and bool primals are held constant (float0 cotangents)
        full = list(leaves)
        for k, w in zip(diff, ws):
            full[k] = w
        return fun(*_tree.tree_unflatten(tree, full))
    out, aux, fn = _traced_vjp(f_of, tuple(leaves[k] for k in diff), has_aux)
    fill = Float0Fill(tree, tuple(diff), tuple(tuple(core.aval_of(x).shape) for x in leaves))
    fn = make_vjp(fn, out, fill)
    return (out, fn, aux) if has_aux else (out, fn)


def _dtype_shape(x):
    if dtypes.is_float0(x):
        return x.dtype, np.shape(x)
    a = core.aval_of(x)
    return a.dtype, a.shape


def _check_tangent(p, t):
    """As jax.jvp: a tangent has its primal's dtype (float0, or the same, for an integer
    or bool primal) and shape."""
    (pd, ps), (td, ts) = _dtype_shape(p), _dtype_shape(t)
    ok = td == (pd if dtypes.is_inexact(pd) else jax.dtypes.float0)
    if not ok:
        raise ShardcTypeError("primal and tangent arguments to jvp do not match; dtypes must "
                              "be equal, or in case of int/bool primal dtype the tangent "
                              f"dtype must be float0. Got primal dtype {pd} and so "
                              f"expected tangent dtype {pd}, but got tangent dtype {td} "
                              "instead.")
    if tuple(ps) != tuple(ts):
        raise ValueError("jvp called with different primal and tangent shapes; Got primal "
                         f"shape {tuple(ps)} and tangent shape as {tuple(ts)}")


def _float0_tangents(out, t_out):
    """Outside a trace, an integer or bool output's tangent is float0 zeros, as jax's."""
    return out, _tree.tree_map(
        lambda t: t if dtypes.is_inexact(t.dtype) else np.zeros(t.shape, jax.dtypes.float0),
        t_out)


@api_boundary
def jvp(fun, primals, tangents, has_aux=False):
    """(f(*primals), J·tangents): forward mode, as the transpose of the reverse pass.
    has_aux: fun returns (output, aux), and jvp (output, its tangent, aux)."""
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise ShardcTypeError("primal and tangent arguments to jvp must be tuples or lists; "
                              f"found {type(primals).__name__} and {type(tangents).__name__}.")
    if has_aux:
        return _jvp_aux(fun, primals, tangents)
    primals, tangents = tuple(primals), tuple(tangents)
    p_leaves, p_tree = _tree.tree_flatten(primals)
    t_leaves, t_tree = _tree.tree_flatten(tangents)
    if p_tree != t_tree:
        raise ShardcTypeError("primal and tangent arguments to jvp must have the same tree "
                              f"structure; primals have tree structure {p_tree} whereas "
                              f"tangents have tree structure {t_tree}.")
    for p, t in zip(p_leaves, t_leaves):
        _check_tangent(p, t)
    fixed = [not dtypes.is_inexact(_dtype_shape(p)[0]) for p in p_leaves]
    if any(fixed):      # integer and bool primals (float0 tangents) are held constant
        def inner(ints, fl, ft):
            def g(*xs):
                ii, it = iter(ints), iter(xs)
                full = [next(ii) if k else next(it) for k in fixed]
                return fun(*_tree.tree_unflatten(p_tree, full))
            return jvp(g, fl, ft)
        ints = [p for p, k in zip(p_leaves, fixed) if k]
        fl = tuple(p for p, k in zip(p_leaves, fixed) if not k)
        ft = tuple(t for t, k in zip(t_leaves, fixed) if not k)
        if core.current_builder() is None:
            from .jit import internal_jit
            run = internal_jit(inner, f"jvp({_fname(fun)})", retrace=True)
            return _float0_tangents(*run(ints, fl, ft))
        return inner(ints, fl, ft)
    if core.current_builder() is None:
        from .jit import internal_jit
        run = internal_jit(lambda p, t: jvp(fun, p, t), f"jvp({_fname(fun)})", retrace=True)
        return _float0_tangents(*run(primals, tangents))
    leaves, tree = _tree.tree_flatten(primals)
    region, caps, out_tree = _scratch(fun, leaves, tree)
    if any(needs_forward(op) for op in region.ops):
        t_leaves = _tree.tree_leaves(tangents)
        outs, touts = jvp_region(region, leaves + caps, t_leaves + [None] * len(caps))
        outs = [o.value if isinstance(o, Lit) else o for o in outs]
        touts = [t if t is not None else _zero_tangent(o) for t, o in zip(touts, outs)]
        out = _tree.tree_unflatten(out_tree, outs)
        t_out = _tree.tree_unflatten(out_tree, touts)
    else:
        is_f = [_is_float(v.aval) for v in region.outputs]

        def f(*ps):        # float outputs are differentiated, the others ride along
            got = eval_ops(region, list(_tree.tree_leaves(ps)) + caps)
            got = [g.value if isinstance(g, Lit) else g for g in got]
            return ([g for g, k in zip(got, is_f) if k],
                    [g for g, k in zip(got, is_f) if not k])
        fo, io, vjp_fn = _traced_vjp(f, primals, has_aux=True)
        touts = []
        if fo:
            ct0 = [zeros_varying_as(o) for o in fo]
            _, _, transpose = _traced_vjp(lambda c: vjp_fn(c), (ct0,))
            (touts,) = transpose(tangents)
        fi, ti, ii = iter(fo), iter(touts), iter(io)
        outs, tans = [], []
        for k in is_f:        # (an integer output's tangent is zero, as jax's float0)
            o = next(fi) if k else next(ii)
            outs.append(o)
            tans.append(next(ti) if k else _zero_tangent(o))
        out = _tree.tree_unflatten(out_tree, outs)
        t_out = _tree.tree_unflatten(out_tree, tans)
    from .numpy._util import aval as aval_of, convert
    t_out = _tree.tree_map(lambda t, o: t if dtypes.is_float0(t) else convert(
        t, aval_of(o).dtype, aval_of(o).weak), t_out, out)
    return out, t_out


def _jvp_aux(fun, primals, tangents):
    """jvp with has_aux: aux's arrays ride along as outputs whose tangents are dropped
    (still differentiable by an outer transform, as jax's); its other leaves (strings,
    NumPy constants) are kept from the trace, as themselves."""
    kept = []

    def with_aux(*p):
        got = fun(*p)
        if not (isinstance(got, (tuple, list)) and len(got) == 2):
            raise ShardcError("has_aux=True needs the function to return (output, aux)")
        leaves, tree = _tree.tree_flatten(got[1])
        arrays = [k for k, x in enumerate(leaves) if core.is_tracer(x)]
        kept[:] = [leaves, tree, arrays]
        return got[0], [leaves[k] for k in arrays]
    (out, vals), (t_out, _) = jvp(with_aux, primals, tangents)
    leaves, tree, arrays = kept
    leaves = list(leaves)
    for k, v in zip(arrays, vals):
        leaves[k] = v
    return out, t_out, _tree.tree_unflatten(tree, leaves)


def _zero_tangent(o):
    """A zero tangent of `o`: float0 zeros for an integer or bool output, as jax's."""
    a = core.aval_of(o)
    if not dtypes.is_inexact(a.dtype):
        return np.zeros(a.shape, jax.dtypes.float0)
    return L.zeros(a.shape, a.dtype)


def _scratch(fun, leaves, tree):
    """fun traced once into a closed region (not part of the program): what forward
    mode walks, or re-traces into the program for the reverse-mode route."""
    out_tree = []

    def body(*xs):
        outs, t = _tree.tree_flatten(fun(*_tree.tree_unflatten(tree, list(xs))))
        out_tree.append(t)
        return outs, None
    region, caps, _ = trace_region([core.aval_of(x) for x in leaves], body, "jvp",
                                   *placement_of(leaves))
    return region, caps, out_tree[0]
