"""jax.lax.reduce_window and the window selections its max/min gradients are made of
(XLA's select_and_gather_add and select_and_scatter_add, which jax's own gradient of a
max pool binds).

A monoid's window (sum, max, min) is folded one dim at a time, innermost first: the
window offsets along a dim are strided slices of the padded (base-dilated) operand,
combined in order. An associative, commutative reducer makes a rectangular window
separable; a selection too, as a scan whose state says whether a NaN reset it (see
_scan_combine). A reducer of the user's is folded as XLA:CPU does: from the init value
over the window in row-major order. The slices are ordinary shardc ops, so the result
propagates shardings and differentiates like any other; a max/min window's gradient goes
to the one element the selection picks, as jax's does (not shared between ties).
"""
from __future__ import annotations

import itertools
import math

from ..errors import ShardcError, ShardingTypeError
from ..ir import dtypes
from ..ops import lax as L
from ..trace import core, types
from ..transforms.ad import custom_vjp
from ..transforms.ct_type import retype
from ..transforms.custom_jvp import custom_jvp
from .numpy._util import aval, convert
from ..trace import pytree as _tree


def _normalize(shape, window_dimensions, window_strides, padding, base_dilation,
               window_dilation):
    nd = len(shape)
    wd = tuple(int(w) for w in window_dimensions)
    st = tuple(int(s) for s in window_strides)
    bd = tuple(base_dilation) if base_dilation is not None else (1,) * nd
    wdl = tuple(window_dilation) if window_dilation is not None else (1,) * nd
    if not (len(wd) == len(st) == len(bd) == len(wdl) == nd):
        raise ShardcError(f"reduce_window: window_dimensions {wd}, window_strides {st}, "
                          f"base_dilation {bd} and window_dilation {wdl} must each have one "
                          f"entry per operand dim ({nd})")
    if isinstance(padding, str) or hasattr(padding, "name"):
        from .lax_ops import padtype_to_pads
        dilated = tuple((n - 1) * b + 1 if n else 0 for n, b in zip(shape, bd))
        eff = tuple((w - 1) * d + 1 for w, d in zip(wd, wdl))
        padding = padtype_to_pads(dilated, eff, st, padding)
    pads = tuple((int(lo), int(hi)) for lo, hi in padding)
    return wd, st, pads, bd, wdl


def fold_windows(xs, inits, combine, window_dimensions, window_strides, padding,
                 base_dilation=None, window_dilation=None):
    """Operands `xs` (one shape) reduced over windows by `combine(acc, part)` (lists of
    arrays, one per operand; acc is None at a dim's first offset)."""
    wd, st, pads, bd, wdl = _normalize(aval(xs[0]).shape, window_dimensions, window_strides,
                                       padding, base_dilation, window_dilation)
    typed = _typed(fold_windows, xs, inits, combine, wd, st, pads, bd, wdl)
    if typed is not None:
        return typed
    cfg = tuple((lo, hi, b - 1) for (lo, hi), b in zip(pads, bd))
    if any(lo or hi or i for lo, hi, i in cfg):
        xs = [L.pad(x, v, cfg) for x, v in zip(xs, inits)]
    for d in reversed(range(len(wd))):
        if wd[d] == 1 and st[d] == 1:
            continue
        shape = aval(xs[0]).shape
        m = (shape[d] - (wd[d] - 1) * wdl[d] - 1) // st[d] + 1
        if m <= 0:          # a window larger than the (padded) dim: no windows, as XLA
            xs = [L.slice(x, (0,) * len(shape), shape[:d] + (0,) + shape[d + 1:])
                  for x in xs]
            continue
        acc = None
        for o in range(wd[d]):
            start = [0] * len(shape)
            limit = list(shape)
            strides = [1] * len(shape)
            start[d] = o * wdl[d]
            limit[d] = start[d] + (m - 1) * st[d] + 1
            strides[d] = st[d]
            part = [L.slice(x, start, limit, strides) for x in xs]
            acc = part if acc is None else combine(acc, part)
        xs = acc
    return xs


def _typed(fold, xs, inits, combine, wd, st, pads, bd, wdl):
    """Explicit mode: `fold` run untyped, its results given the operand's type, as jax's
    reduce_window types them (the padded and strided intermediates have no layout a type
    could name); None outside explicit mode."""
    b = core.current_builder()
    ts = aval(xs[0]).ts
    if b is None or ts is None or not types.explicit_axes_of(b) or types.is_lenient():
        return None
    _check_divides(aval(xs[0]).shape, ts, wd, st, pads, bd, wdl, b)
    with types.lenient():
        outs = fold(xs, inits, combine, wd, st, pads, bd, wdl)
    return [retype(o, ts, b, primal=True) for o in outs]


def _check_divides(shape, ts, wd, st, pads, bd, wdl, b):
    sizes = b.meshes.info.shape.sizes
    for d, axes in enumerate(ts.dims):
        if not axes:
            continue
        n = (shape[d] - 1) * bd[d] + 1 if shape[d] else 0
        out = max((n + pads[d][0] + pads[d][1] - (wd[d] - 1) * wdl[d] - 1) // st[d] + 1, 0)
        k = math.prod(sizes[a] for a in axes)
        if out % k:
            raise ShardingTypeError(
                f"reduce_window on sharded dims where out dim ({out}) is not divisible by "
                f"mesh axes ({k}) with spec ({', '.join(axes)}) is not implemented: reshard "
                f"the operand (jax.sharding.reshard) so that dim {d} is not sharded")


# ---------------------------------------------------------------- selections
#
# jax's max-pool derivatives are two XLA ops that are not each other's transposes, and
# jax's AD pairs them anyway: the JVP is select_and_gather_add, a reduce_window over
# (operand, tangent) pairs from the init (-inf, 0) that skips padding; its transpose,
# the gradient, is select_and_scatter_add, which (padding expanded with -inf on CPU)
# starts from a window's first element, padding included. Each scans its window in
# row-major order keeping the current pick while select(pick, next) holds, so a NaN is
# picked when met and replaced by the next element. They differ where a window is all
# -inf (the JVP keeps the init's 0, the gradient picks the first element) and where a
# NaN is followed by padding. Both are reproduced here, and each one's transpose is the
# other (a custom_vjp pair), as jax's AD has them.


def _scan_combine(select, pads):
    """combine for a window scan's state (value, tangent, reset[, pad]): `reset` says a
    NaN was met, so the pick no longer depends on what came before; `pad` marks
    skipped padding (an identity). Folding a window's parts in order is then
    associative, so a rectangular window folds one dim at a time."""
    def combine(acc, part):
        (av, at, ar, *ap), (bv, bt, br, *bp) = acc, part
        take = L.select(select(av, bv), br, True)
        extra = []
        if pads:
            take = L.select(ap[0], True, L.select(bp[0], False, take))
            extra = [L.bitwise_and(ap[0], bp[0])]
        return [L.select(take, bv, av), L.select(take, bt, at), L.bitwise_or(ar, br),
                *extra]
    return combine


def _scan_select(tangents, operand, select_prim, window_dimensions, window_strides, padding,
                 base_dilation, window_dilation, gather):
    """Per window, the tangent at the element the scan picks: select_and_gather_add's
    (`gather`: from the init, padding skipped) or select_and_scatter_add's (from the
    first element, padding and dilation holes taking part as -inf elements of tangent
    0, so its transpose is jax's gradient)."""
    select, sign = _selector(select_prim)
    a = aval(operand)
    low = convert(_lowest(a.dtype, sign), a.dtype)
    nan = L.ne(operand, operand) if dtypes.is_float(a.dtype) else \
        L.full(a.shape, False, dtypes.bool_)
    xs = [operand, tangents, nan]
    inits = [low, convert(0, aval(tangents).dtype), convert(False, dtypes.bool_)]
    _, _, pads, bd, _ = _normalize(a.shape, window_dimensions, window_strides, padding,
                                   base_dilation, window_dilation)
    skip = gather and (any(lo or hi for lo, hi in pads) or any(b != 1 for b in bd))
    if skip:
        xs.append(L.full(a.shape, False, dtypes.bool_))
        inits.append(convert(True, dtypes.bool_))
    v, t, reset, *_ = fold_windows(xs, inits, _scan_combine(select, skip),
                                   window_dimensions, window_strides, padding,
                                   base_dilation, window_dilation)
    if not gather:
        return t
    # the init (tangent 0) stays picked unless the scan passed it: a NaN met, or a
    # value beyond the init (an all-padding window ends at the init's value)
    return L.select(L.select(reset, False, L.eq(v, low)), L.zeros_like(t), t)


def _selector(select_prim):
    name = getattr(select_prim, "name", select_prim)
    if name in ("ge", "gt"):
        return L.ge, -1
    if name in ("le", "lt"):
        return L.le, 1
    raise ShardcError(f"select_and_gather_add: select_prim must be ge or le, got {name}")


def _lowest(dt, sign):
    """The init value a max (sign -1) or min (+1) window pads with."""
    if dtypes.is_float(dt):
        return sign * float("inf")
    info = dtypes.iinfo(dt)
    return info.min if sign < 0 else info.max


def _scatter_transposed(source, operand, cfg):
    """select_and_scatter_add's values: the transpose of its scan in the tangents."""
    from .grad import vjp
    from .numpy._creation import zeros_like
    like = zeros_like(operand)      # typed as the operand (explicit mode), as jax's result
    _, back = vjp(lambda t: _scan_select(t, operand, *cfg, gather=False), like)
    return back(source)[0]


def _gather_pair(cfg):
    """select_and_gather_add as a custom_vjp whose transpose is select_and_scatter_add
    (and that one's is this: see _scatter_pair), as jax's transpose rules pair them."""
    @custom_vjp
    def gather(t, x):
        return _scan_select(t, x, *cfg, gather=True)
    gather.defvjp(lambda t, x: (gather(t, x), x),
                  lambda x, ct: (_scatter_pair(cfg)(ct, x), None))
    return gather


def _scatter_pair(cfg):
    @custom_vjp
    def scatter(s, x):
        return _scatter_transposed(s, x, cfg)
    scatter.defvjp(lambda s, x: (scatter(s, x), x),
                   lambda x, ct: (_gather_pair(cfg)(ct, x), None))
    return scatter


def select_and_gather_add(tangents, operand, select_prim, window_dimensions,
                          window_strides, padding, base_dilation=None, window_dilation=None):
    """Per window, the tangent at the element the window's selection (ge: its first
    maximum; le: its first minimum; a NaN as XLA's scan meets it) picks, or 0 where
    the window holds nothing beyond the init value."""
    cfg = (select_prim, tuple(window_dimensions), tuple(window_strides),
           padding if isinstance(padding, str) else tuple(map(tuple, padding)),
           None if base_dilation is None else tuple(base_dilation),
           None if window_dilation is None else tuple(window_dilation))
    return _gather_pair(cfg)(tangents, operand)


def select_and_scatter_add(source, operand, select_prim, window_dimensions, window_strides,
                           padding):
    """Each window's `source` value added at the element the selection picks (jax's
    transpose of select_and_gather_add, with the window scanned from its first element,
    padding included)."""
    cfg = (select_prim, tuple(window_dimensions), tuple(window_strides),
           padding if isinstance(padding, str) else tuple(map(tuple, padding)), None, None)
    return _scatter_pair(cfg)(source, operand)


# ---------------------------------------------------------------- max/min windows

def _extreme_window(x, sign, window_dimensions, window_strides, padding, base_dilation,
                    window_dilation):
    """max (sign -1) / min (+1) over windows, whose derivative is the tangent of the
    element the selection picks (jax's select_and_gather_add; its transpose, the
    gradient, is select_and_scatter_add). A custom_jvp, so a derivative of the gradient
    differentiates the rule again and ties go to the first extreme at every order."""
    dt = aval(x).dtype
    pick = L.max if sign < 0 else L.min
    cfg = (tuple(window_dimensions), tuple(window_strides),
           tuple(map(tuple, padding)) if not isinstance(padding, str) else padding,
           None if base_dilation is None else tuple(base_dilation),
           None if window_dilation is None else tuple(window_dilation))

    def values(x):
        return fold_windows([x], [convert(_lowest(dt, sign), dt)],
                            lambda a, b: [pick(a[0], b[0])], *cfg)[0]
    if not dtypes.is_float(dt):
        return values(x)
    f = custom_jvp(values)

    @f.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return f(x), select_and_gather_add(t, x, "ge" if sign < 0 else "le", *cfg)
    return f(x)


def reduce_window_max(x, window_dimensions, window_strides, padding, base_dilation=None,
                      window_dilation=None):
    return _extreme_window(x, -1, window_dimensions, window_strides, padding, base_dilation,
                           window_dilation)


def reduce_window_min(x, window_dimensions, window_strides, padding, base_dilation=None,
                      window_dilation=None):
    return _extreme_window(x, 1, window_dimensions, window_strides, padding, base_dilation,
                           window_dilation)


def reduce_window_sum(x, window_dimensions, window_strides, padding, base_dilation=None,
                      window_dilation=None):
    dt = aval(x).dtype
    return fold_windows([x], [convert(0, dt)], lambda a, b: [L.add(a[0], b[0])],
                        window_dimensions, window_strides, padding, base_dilation,
                        window_dilation)[0]


_MONOIDS = {"add": reduce_window_sum, "max": reduce_window_max, "min": reduce_window_min}


def reduce_window(operand, init_value, computation, window_dimensions, window_strides,
                  padding, base_dilation=None, window_dilation=None):
    """jax.lax.reduce_window: `computation` over windows of `operand` (a pytree, with
    init_value of the same structure); padding a sequence of (low, high) or 'SAME' /
    'VALID'."""
    flat, tree = _tree.tree_flatten(operand)
    inits, init_tree = _tree.tree_flatten(init_value)
    if tree != init_tree:
        raise ShardcError(f"reduce_window: operand {tree} and init_value {init_tree} must "
                          "have the same structure")
    from .lax_ops import _arr
    from .lax_reduce import _identity, _monoid
    from .lax_special import _static
    flat = [_arr(x) for x in flat]
    inits = [convert(v, aval(x).dtype) for v, x in zip(inits, flat)]
    kind = _monoid(computation) if len(flat) == 1 else None
    if kind in _MONOIDS and _static(inits[0]) == _identity(kind, aval(flat[0]).dtype):
        return _tree.tree_unflatten(tree, [_MONOIDS[kind](
            flat[0], window_dimensions, window_strides, padding, base_dilation,
            window_dilation)])

    def combine(acc, part):
        out = computation(_tree.tree_unflatten(tree, acc),
                          _tree.tree_unflatten(tree, part))
        return _tree.tree_leaves(out)
    return _tree.tree_unflatten(tree, fold_with_init(
        flat, inits, combine, window_dimensions, window_strides, padding, base_dilation,
        window_dilation))


def fold_with_init(xs, inits, combine, window_dimensions, window_strides, padding,
                   base_dilation=None, window_dilation=None):
    """A reducer that need not be associative, folded as XLA:CPU folds each window: from
    its init value, element by element in row-major window order (one strided slice
    per window offset)."""
    wd, st, pads, bd, wdl = _normalize(aval(xs[0]).shape, window_dimensions, window_strides,
                                       padding, base_dilation, window_dilation)
    typed = _typed(fold_with_init, xs, inits, combine, wd, st, pads, bd, wdl)
    if typed is not None:
        return typed
    cfg = tuple((lo, hi, b - 1) for (lo, hi), b in zip(pads, bd))
    valid = None
    if any(lo or hi or i for lo, hi, i in cfg):
        # padding and dilation holes take no part in a window, as in XLA (the init value
        # is folded in once per window, not once per padded element)
        valid = L.pad(L.full(aval(xs[0]).shape, True, dtypes.bool_), False, cfg)
        xs = [L.pad(x, v, cfg) for x, v in zip(xs, inits)]
    shape = aval(xs[0]).shape
    out = tuple(max(0, (n - (w - 1) * d - 1) // s + 1)
                for n, w, s, d in zip(shape, wd, st, wdl))
    acc = [L.broadcast_in_dim(v, out, ()) for v in inits]
    if 0 in out:            # a window larger than the (padded) operand: no windows
        return acc
    for offs in itertools.product(*[range(w) for w in wd]):
        start = tuple(o * d for o, d in zip(offs, wdl))
        limit = tuple(b + (m - 1) * s + 1 for b, m, s in zip(start, out, st))
        new = combine(acc, [L.slice(x, start, limit, st) for x in xs])
        if valid is not None:
            keep = L.slice(valid, start, limit, st)
            new = [L.select(keep, n, a) for n, a in zip(new, acc)]
        acc = new
    return acc


__all__ = ["reduce_window"]
