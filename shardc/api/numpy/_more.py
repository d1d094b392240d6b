"""Rearranging, stacking and selecting in shardc.numpy, composed as jax.numpy composes
them: append insert delete select piecewise choose compress extract rot90 fliplr flipud
kron cross diff ediff1d resize rollaxis matrix_transpose vecdot matvec vecmat
apply_along_axis apply_over_axes (stacking and splitting: _stacking.py)."""
from __future__ import annotations

import math
import operator

import numpy as np

from ...errors import ShardcError
from ...ir import dtypes
from ...ops import elementwise as ew
from ...ops import shape as shp
from ...ops.common import check_axis
from ...trace import core
from . import _reductions as R
from ._composite import tile
from ._creation import asarray
from ._indexing import getitem
from ._shapes import (broadcast_arrays, concatenate, expand_dims, flip, moveaxis, ravel,
    reshape, swapaxes, transpose)
from ._ufuncs import (equal, logical_and, multiply, not_equal, remainder, subtract, where)
from ._util import aval, check_arraylike, convert, is_py_scalar, promote_dtypes


def _at(axis, idx):
    return (slice(None),) * axis + (idx,)


def append(arr, values, axis=None):
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis=axis)


def _static(name, what, v):
    if core.is_tracer(v):
        raise ShardcError(f"{name}: a traced {what} gives a data-dependent layout; pass it "
                          "as a static int, slice or NumPy array")
    return np.asarray(v)


def insert(arr, obj, values, axis=None):
    """values inserted before the static indices `obj` along `axis` (one gather from the
    array and the values concatenated, in NumPy's order)."""
    check_arraylike("insert", arr, values, *(() if isinstance(obj, slice) else (obj,)))
    a = arr
    if axis is None:
        a, axis = ravel(a), 0
    nd = aval(a).ndim
    axis = check_axis("insert", axis, nd)
    n = aval(a).shape[axis]
    idx = np.arange(*obj.indices(n)) if isinstance(obj, slice) else \
        _static("insert", "obj", obj)
    if idx.ndim > 1:
        raise ShardcError(f"shardc.numpy.insert(): obj must be a slice, a one-dimensional "
                          f"array, or a scalar; got {obj}")
    if idx.dtype.kind not in "iu":
        if idx.size == 0:
            idx = idx.astype(int)
        else:
            raise ShardcError(f"shardc.numpy.insert(): index array must be integer typed; "
                              f"got {obj}")
    v = convert(asarray(values), aval(a).dtype)
    if aval(v).ndim < nd:
        v = reshape(v, (1,) * (nd - aval(v).ndim) + aval(v).shape)
    if idx.size == 1:
        index = int(idx.reshape(-1)[0])
        if idx.ndim == 0:
            v = moveaxis(v, 0, axis)
        idx = np.full(aval(v).shape[axis], index)
    try:
        n_insert = np.broadcast_shapes(idx.shape, (aval(v).shape[axis],))[0]
    except ValueError:
        raise ShardcError(f"insert: {idx.size} indices for {aval(v).shape[axis]} values "
                          f"along axis {axis}") from None
    idx = np.broadcast_to(idx, (n_insert,))
    idx = np.clip(np.where(idx < 0, idx + n, idx), 0, n)
    target = list(aval(a).shape)
    target[axis] = n_insert
    from ._shapes import broadcast_to
    v = broadcast_to(v, tuple(target))
    # NumPy's placement: values go before a[idx], stably in the order given
    order = np.argsort(idx, kind="stable")
    values_ind = np.empty(n_insert, int)
    values_ind[order] = idx[order] + np.arange(n_insert)
    mask = np.ones(n + n_insert, bool)
    mask[values_ind] = False
    src = np.empty(n + n_insert, np.int32)
    src[mask] = np.arange(n)
    src[values_ind] = n + np.arange(n_insert)
    both = concatenate([a, v], axis)
    return getitem(both, _at(axis, src))


def delete(arr, obj, axis=None, *, assume_unique_indices=False):
    check_arraylike("delete", arr)
    a = arr
    if axis is None:
        a, axis = ravel(a), 0
    axis = check_axis("delete", axis, aval(a).ndim)
    n = aval(a).shape[axis]
    try:
        i = operator.index(obj)
    except TypeError:
        pass
    else:
        i = check_axis("delete", i, n)
        return concatenate([getitem(a, _at(axis, slice(0, i))),
                            getitem(a, _at(axis, slice(i + 1, None)))], axis=axis)
    if isinstance(obj, slice):
        obj = np.arange(n)[obj]
    check_arraylike("delete", obj)
    o = _static("delete", "obj", obj)
    if o.dtype.kind in "iu":
        mask = np.ones(n, bool)
        mask[o] = False
    elif o.dtype == np.bool_:
        if o.shape != (n,):
            raise ShardcError("np.delete(arr, obj): for boolean indices, obj must be "
                              "one-dimensional with length matching specified axis.")
        mask = ~o
    else:
        raise ShardcError(f"np.delete(arr, obj): got obj.dtype={o.dtype}; must be integer "
                          "or bool.")
    return getitem(a, _at(axis, np.nonzero(mask)[0].astype(np.int32)))


def select(condlist, choicelist, default=0):
    """The first choice whose condition holds, else default (nested selects from the last
    condition to the first, which picks what jax's argmax + select_n picks)."""
    if len(condlist) != len(choicelist):
        raise ShardcError(f"condlist must have length equal to choicelist "
                          f"({len(condlist)} vs {len(choicelist)})")
    if not condlist:
        raise ShardcError("condlist must be non-empty")
    check_arraylike("select", *condlist, *choicelist, default)
    conds = [asarray(c) for c in condlist]
    conds = [c if aval(c).dtype == dtypes.bool_ else not_equal(c, 0) for c in conds]
    def arr(c):      # Python scalars stay weakly typed (jnp.asarray(2) is weak)
        return c if is_py_scalar(c) else asarray(c)
    choices = promote_dtypes(arr(default), *[arr(c) for c in choicelist])
    everything = broadcast_arrays(*conds, *choices)
    conds, choices = everything[:len(conds)], everything[len(conds):]
    out = choices[0]
    for c, v in zip(conds[::-1], choices[:0:-1]):
        out = where(c, v, out)
    return out


def piecewise(x, condlist, funclist, *args, **kw):
    """funclist[i] where condlist[i] holds (the last true one wins), as jnp.piecewise;
    every function is evaluated on all of x (jax's vmapped switch does the same)."""
    check_arraylike("piecewise", x)
    nc, nf = len(condlist), len(funclist)
    if nf == nc + 1:
        funclist = list(funclist[-1:]) + list(funclist[:-1])
    elif nf == nc:
        funclist = [0] + list(funclist)
    else:
        raise ShardcError(f"with {nc} condition(s), either {nc} or {nc + 1} functions are "
                          f"expected; got {nf}")
    dt = aval(x).dtype
    conds = [convert(asarray(c), dtypes.bool_) for c in condlist]
    out = None
    from ._shapes import broadcast_to
    shape = aval(x).shape
    for i, f in enumerate(funclist):
        v = convert(f(x, *args, **kw), dt) if callable(f) else convert(asarray(f), dt)
        v = broadcast_to(v, shape)
        out = v if out is None else where(broadcast_to(conds[i - 1], shape), v, out)
    return out


def choose(a, choices, out=None, mode="raise"):
    if out is not None:
        raise ShardcError("The 'out' argument to shardc.numpy.choose is not supported.")
    check_arraylike("choose", a, *choices)
    if not dtypes.is_int(aval(a).dtype):
        raise ShardcError("`a` array must be integer typed")
    N = len(choices)
    if mode == "raise":
        if core.is_tracer(a):
            raise ShardcError("choose with mode='raise' needs concrete indices; use "
                              "mode='wrap' or mode='clip' under shardc.jit")
        if np.any((np.asarray(a) < 0) | (np.asarray(a) >= N)):
            raise ShardcError("invalid entry in choice array")
        arr = a
    elif mode == "wrap":
        arr = remainder(a, N)
    elif mode == "clip":
        from ._ufuncs import clip
        arr = clip(a, 0, N - 1)
    else:
        raise ShardcError(f"mode={mode!r} not understood. Must be 'raise', 'wrap', or 'clip'")
    arr, *chs = broadcast_arrays(arr, *promote_dtypes(*choices))
    # one gather from the choices stacked and flattened (jax gathers from the stack with
    # an index per dim; this is the same element, and the same gather of the choices)
    from ._shapes import stack
    from ._creation import iota
    shape = aval(arr).shape
    size = math.prod(shape)
    flat = reshape(stack(chs), (N * size,))
    it = aval(arr).dtype if dtypes.is_signed(aval(arr).dtype) else dtypes.default_int()
    pos = reshape(iota(it, size), shape) if shape else convert(0, it)
    idx = ew.add_p.bind(ew.mul_p.bind(convert(arr, it), convert(size, it)), pos)
    return getitem(flat, idx)


def compress(condition, a, axis=None, *, size=None, fill_value=0, out=None):
    """The slices of `a` along `axis` where condition holds. A traced condition needs
    `size` (the result's length), as under jax.jit."""
    check_arraylike("compress", condition, a, fill_value)
    if out is not None:
        raise ShardcError("The 'out' argument to shardc.numpy.compress is not supported.")
    cond = condition if core.is_tracer(condition) else np.asarray(condition).astype(bool)
    if aval(cond).ndim != 1:
        raise ShardcError("condition must be a 1D array")
    if axis is None:
        axis, arr = 0, ravel(a)
    else:
        arr = moveaxis(a, axis, 0)
    n = aval(arr).shape[0]
    k = aval(cond).shape[0]
    extra = None
    if k > n:
        extra = getitem(cond, slice(n, None)) if core.is_tracer(cond) else cond[n:]
        cond = getitem(cond, slice(0, n)) if core.is_tracer(cond) else cond[:n]
    arr = getitem(arr, slice(0, min(k, n)))
    if size is None:
        if core.is_tracer(cond):
            raise ShardcError("compress of a traced condition has a data-dependent shape; "
                              "pass size= (and fill_value=)")
        if extra is not None and np.any(extra):
            raise ShardcError("condition contains entries that are out of bounds")
        res = getitem(arr, np.nonzero(cond)[0].astype(np.int32))
    elif not 0 <= size <= aval(arr).shape[0]:
        raise ShardcError(f"size must be positive and not greater than the size of the "
                          f"array axis; got size={size!r} for a.shape[axis]="
                          f"{aval(arr).shape[0]}")
    else:
        res = _first_true(cond, arr, size, fill_value)
    return moveaxis(res, 0, axis)


def _first_true(cond, arr, size, fill_value):
    """arr's rows where cond holds, the first `size` of them in order, padded with
    fill_value: row k is the j with cond[j] and cumsum(cond)[j] == k + 1."""
    from ._creation import iota
    c = convert(asarray(cond), dtypes.bool_)
    m = aval(c).shape[0]
    rank = R.cumsum(convert(c, dtypes.default_int()))
    it = dtypes.default_int()
    ks = iota(it, 0, 0, (size, m))
    hit = logical_and(equal(expand_dims(rank, 0), ks + 1),
                      shp.broadcast_in_dim_p.bind(c, shape=(size, m), broadcast_dimensions=(1,)))
    j = R.argmax(hit, axis=1)
    valid = R.any(hit, axis=1)
    rows = getitem(arr, j)
    fill = convert(asarray(fill_value), aval(arr).dtype)
    valid = reshape(valid, (size,) + (1,) * (aval(arr).ndim - 1))
    return where(valid, rows, fill)


def extract(condition, arr, *, size=None, fill_value=0):
    check_arraylike("extract", condition, arr, fill_value)
    c = ravel(condition) if core.is_tracer(condition) else np.ravel(condition)
    return compress(c, ravel(arr), size=size, fill_value=fill_value)


def rot90(m, k=1, axes=(0, 1)):
    check_arraylike("rot90", m)
    nd = aval(m).ndim
    if nd < 2:
        raise ShardcError(f"rot90 requires its first argument to have ndim at least two, "
                          f"but got first argument of shape {aval(m).shape}, which has ndim "
                          f"{nd}")
    ax1, ax2 = check_axis("rot90", axes[0], nd), check_axis("rot90", axes[1], nd)
    if ax1 == ax2:
        raise ShardcError("Axes must be different")
    k = k % 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, ax1), ax2)
    perm = list(range(nd))
    perm[ax1], perm[ax2] = perm[ax2], perm[ax1]
    return transpose(flip(m, ax2), perm) if k == 1 else flip(transpose(m, perm), ax2)


def fliplr(m):
    check_arraylike("fliplr", m)
    return flip(m, 1)


def flipud(m):
    check_arraylike("flipud", m)
    return flip(m, 0)


def kron(a, b):
    check_arraylike("kron", a, b)
    a, b = promote_dtypes(a, b)
    na, nb = aval(a).ndim, aval(b).ndim
    if na < nb:
        a = expand_dims(a, tuple(range(nb - na)))
    elif nb < na:
        b = expand_dims(b, tuple(range(na - nb)))
    n = aval(a).ndim
    ar = expand_dims(a, tuple(range(1, 2 * n, 2)))
    br = expand_dims(b, tuple(range(0, 2 * n, 2)))
    out_shape = tuple(int(x) * int(y) for x, y in zip(aval(a).shape, aval(b).shape))
    return reshape(multiply(ar, br), out_shape)


def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    check_arraylike("cross", a, b)
    if axis is not None:
        axisa = axisb = axisc = axis
    a, b = moveaxis(a, axisa, -1), moveaxis(b, axisb, -1)
    na, nb = aval(a).shape[-1], aval(b).shape[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ShardcError("Dimension must be either 2 or 3 for cross product")

    def c(x, i):
        return getitem(x, (Ellipsis, i))
    if na == 2 and nb == 2:
        return subtract(multiply(c(a, 0), c(b, 1)), multiply(c(a, 1), c(b, 0)))
    from ._creation import zeros_like
    a0, a1, b0, b1 = c(a, 0), c(a, 1), c(b, 0), c(b, 1)
    a2 = c(a, 2) if na == 3 else zeros_like(a0)
    b2 = c(b, 2) if nb == 3 else zeros_like(b0)
    from ._shapes import stack
    out = stack([subtract(multiply(a1, b2), multiply(a2, b1)),
                 subtract(multiply(a2, b0), multiply(a0, b2)),
                 subtract(multiply(a0, b1), multiply(a1, b0))])
    return moveaxis(out, 0, axisc)


def diff(a, n=1, axis=-1, prepend=None, append=None):
    check_arraylike("diff", a)
    n, axis = operator.index(n), operator.index(axis)
    if n == 0:
        return a
    if n < 0:
        raise ShardcError(f"order must be non-negative but got {n}")
    nd = aval(a).ndim
    if nd == 0:
        raise ShardcError(f"diff requires input that is at least one dimensional; got {a}")
    axis = check_axis("diff", axis, nd)
    parts = []
    from ._shapes import broadcast_to
    for extra in (prepend, None, append):
        if extra is None:
            continue
        extra = asarray(extra)
        if not aval(extra).ndim:
            s = list(aval(a).shape)
            s[axis] = 1
            extra = broadcast_to(extra, tuple(s))
        parts.append(extra)
    arr = concatenate([parts[0], a] + parts[1:], axis) if prepend is not None else \
        concatenate([a] + parts, axis) if parts else a
    hi, lo = _at(axis, slice(1, None)), _at(axis, slice(None, -1))
    for _ in range(n):
        x, y = getitem(arr, hi), getitem(arr, lo)
        arr = not_equal(x, y) if aval(arr).dtype == dtypes.bool_ else subtract(x, y)
    return arr


def ediff1d(ary, to_end=None, to_begin=None):
    check_arraylike("ediff1d", ary, *(t for t in (to_end, to_begin) if t is not None))
    arr = ravel(ary)
    from ...ops import elementwise as ew
    res = ew.sub_p.bind(getitem(arr, slice(1, None)), getitem(arr, slice(None, -1)))
    dt = aval(arr).dtype
    if to_begin is not None:
        res = concatenate([ravel(convert(asarray(to_begin), dt)), res])
    if to_end is not None:
        res = concatenate([res, ravel(convert(asarray(to_end), dt))])
    return res


def resize(a, new_shape):
    check_arraylike("resize", a)
    new_shape = (new_shape,) if isinstance(new_shape, int) else tuple(new_shape)
    if any(d < 0 for d in new_shape):
        raise ShardcError("all elements of `new_shape` must be non-negative")
    arr = ravel(a)
    size, new_size = aval(arr).size, math.prod(new_shape)
    if size == 0 or new_size == 0:
        from ._creation import zeros_like
        return zeros_like(arr, shape=new_shape)
    arr = getitem(tile(arr, -(-new_size // size)), slice(0, new_size))
    return reshape(arr, new_shape)


def rollaxis(a, axis, start=0):
    check_arraylike("rollaxis", a)
    start = operator.index(start)
    nd = aval(a).ndim
    axis = check_axis("rollaxis", axis, nd)
    if not -nd <= start <= nd:
        raise ShardcError(f"start={start!r} must satisfy {-nd}<=start<={nd}")
    if start < 0:
        start += nd
    if start > axis:
        start -= 1
    return moveaxis(a, axis, start)


def matrix_transpose(x, /):
    check_arraylike("matrix_transpose", x)
    nd = aval(x).ndim
    if nd < 2:
        raise ShardcError(f"x must be at least two-dimensional for matrix_transpose; got "
                          f"ndim={nd!r}")
    return shp.transpose_p.bind(x, permutation=(*range(nd - 2), nd - 1, nd - 2))


def vecdot(x1, x2, /, *, axis=-1, precision=None, preferred_element_type=None):
    """sum(conj(x1) * x2) over `axis`, broadcasting the rest (a dot_general, as jax's)."""
    check_arraylike("vecdot", x1, x2)
    x1 = _conj_if_complex(x1)
    if aval(x1).shape[axis] != aval(x2).shape[axis]:
        raise ShardcError(f"axes must match; got shapes {aval(x1).shape} and "
                          f"{aval(x2).shape} with axis={axis!r}")
    from ._linalg import matmul
    a = expand_dims(moveaxis(x1, axis, -1), -2)
    b = expand_dims(moveaxis(x2, axis, -1), -1)
    out = matmul(a, b)
    s = aval(out).shape
    out = reshape(out, s[:-2])
    if preferred_element_type is not None:
        from ._util import canonical_dtype
        out = convert(out, canonical_dtype(preferred_element_type))
    return out


def _conj_if_complex(x):
    if dtypes.is_complex(aval(x).dtype):
        from ...ops.complex import conj_p
        return conj_p.bind(x)
    return x


def matvec(x1, x2, /):
    from ._linalg import matmul
    check_arraylike("matvec", x1, x2)
    out = matmul(x1, expand_dims(x2, -1))
    return reshape(out, aval(out).shape[:-1])


def vecmat(x1, x2, /):
    from ._linalg import matmul
    check_arraylike("vecmat", x1, x2)
    out = matmul(expand_dims(_conj_if_complex(x1), -2), x2)     # conj(x1) @ x2, as jnp
    s = aval(out).shape
    return reshape(out, s[:-2] + s[-1:])


def apply_along_axis(func1d, axis, arr, *args, **kwargs):
    """func1d applied to each 1-D slice along `axis` (with shardc.vmap when it exists,
    else slice by slice, stacked)."""
    check_arraylike("apply_along_axis", arr)
    nd = aval(arr).ndim
    axis = check_axis("apply_along_axis", axis, nd)
    arr = moveaxis(arr, axis, -1)
    lead = aval(arr).shape[:-1]
    flat = reshape(arr, (math.prod(lead), aval(arr).shape[-1]))
    from ._shapes import stack
    outs = [asarray(func1d(getitem(flat, i), *args, **kwargs))
            for i in range(aval(flat).shape[0])]
    out = stack(outs)
    out = reshape(out, lead + aval(out).shape[1:])
    k = aval(out).ndim - len(lead)
    # the function's result dims go where `axis` was
    perm = list(range(axis)) + [len(lead) + i for i in range(k)] + \
        list(range(axis, len(lead)))
    return transpose(out, perm)


def apply_over_axes(func, a, axes):
    check_arraylike("apply_over_axes", a)
    for axis in axes:
        b = func(a, axis)
        if aval(b).ndim == aval(a).ndim:
            a = b
        elif aval(b).ndim == aval(a).ndim - 1:
            a = expand_dims(b, axis)
        else:
            raise ShardcError("function is not returning an array of the correct shape")
    return a


_ = swapaxes
