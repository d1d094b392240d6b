"""jax.numpy functions composed of other shardc.numpy functions (no primitives of their
own, so their sharding rules and gradients are those of the ops they become):
linspace, tril, triu, roll, tile, repeat, take, logaddexp, isclose, allclose."""
from __future__ import annotations

import numpy as np

from ...trace import core
from ...ir import dtypes
from ...errors import ArgumentError, ShardcError, ShardingTypeError
from ...ir.sharding import Sharding
from ...trace import types
from ...transforms.ct_type import retype
from ...ops.common import check_axis
from ..explicit import takes_out_sharding
from ._creation import iota, zeros
from ._indexing import getitem
from ._reductions import all as _all
from ._shapes import broadcast_to, concatenate, expand_dims, ravel, reshape
from ._ufuncs import (abs, add, equal, exp, floor, greater_equal, isinf, isnan, less, less_equal,
    log, logical_and, logical_or, maximum, multiply, remainder, subtract, where)
from ._util import (aval, canonical_dtype, check_arraylike, convert, default_fill,
    index_for_dim,
                    promote_args_inexact)


def _static_seq(v):
    """NumPy arrays of static ints as Python ints or tuples of them."""
    if isinstance(v, np.ndarray):
        return v.tolist() if v.ndim else int(v)
    return v


def _static_int(name, what, v):
    if core.is_tracer(v) or not isinstance(v, (int, np.integer)) or isinstance(v, bool):
        raise ShardcError(f"{name}: {what} must be a static Python int (it decides the "
                          f"result's shape or layout), got {type(v).__name__}")
    return int(v)


# ---------------------------------------------------------------- creation

def linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0, *,
             device=None):
    """`num` evenly spaced values from start to stop (as jnp.linspace)."""
    out = _linspace(start, stop, num, endpoint, retstep, dtype, axis)
    if device is None:
        return out
    from ._creation import _place
    if retstep:
        return _place(out[0], device, None, "linspace", convert=True), out[1]
    return _place(out, device, None, "linspace", convert=True)


def _strong(x):
    """x strongly typed (also a concrete array, which convert leaves as it is)."""
    a = aval(x)
    if not a.weak:
        return x
    from ...ops.lax import Lit, is_py_scalar
    if isinstance(x, Lit) or is_py_scalar(x):
        return convert(x, a.dtype)
    from ...ops import elementwise as ew
    return ew.convert_element_type_p.bind(x, new_dtype=a.dtype, weak_type=False)


def _linspace(start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    num = _static_int("linspace", "num", num)
    if num < 0:
        raise ShardcError(f"linspace: num must be non-negative, got {num}")
    dt = canonical_dtype(dtype)
    start, stop = promote_args_inexact("linspace", start, stop)
    # strongly typed, as jnp's astype(computation_dtype): Python-scalar bounds made the
    # result (num 0 or 1) and retstep's step weak
    start, stop = (_strong(x) for x in (start, stop))
    shape = np.broadcast_shapes(aval(start).shape, aval(stop).shape)
    start, stop = broadcast_to(start, shape), broadcast_to(stop, shape)
    ft = aval(start).dtype
    axis = check_axis("linspace", axis, len(shape) + 1)
    div = (num - 1) if endpoint else num
    delta = subtract(stop, start)
    step = delta / div if div > 0 else delta * np.nan
    b0 = expand_dims(start, axis)
    out_shape = shape[:axis] + (num,) + shape[axis:]
    if num > 1 or (num == 1 and not endpoint):
        n = num - 1 if endpoint else num
        k = iota(ft, n, dimension=axis, shape=shape[:axis] + (n,) + shape[axis:])
        out = add(b0, multiply(k, expand_dims(step, axis)))
        if endpoint:
            out = concatenate([out, expand_dims(stop, axis)], axis)
    elif num == 1:
        out = b0
    else:
        out = broadcast_to(b0, out_shape)
    if dt is not None and dtypes.is_int(dt):
        out = floor(out)
    out = convert(out, dt if dt is not None else ft)     # strongly typed, as jnp's
    return (out, convert(step, dt if dt is not None and not dtypes.is_int(dt) else ft)) \
        if retstep else out


def _tri_mask(m, k, lower, name):
    check_arraylike(name, m)
    s = aval(m).shape
    if len(s) < 2:
        raise ShardcError(f"{name}: the argument must be at least 2-D, got shape {s}")
    it = dtypes.default_int()
    rows = iota(it, 0, dimension=0, shape=s[-2:])
    cols = iota(it, 0, dimension=1, shape=s[-2:])
    k = _static_int(name, "k", k)
    return less_equal(cols, add(rows, k)) if lower else greater_equal(cols, add(rows, k))


def tril(m, k=0):
    """m with the elements above the k-th diagonal zeroed (last two dims)."""
    return where(_tri_mask(m, k, True, "tril"), m, convert(0, aval(m).dtype))


def triu(m, k=0):
    """m with the elements below the k-th diagonal zeroed (last two dims)."""
    return where(_tri_mask(m, k, False, "triu"), m, convert(0, aval(m).dtype))


# ---------------------------------------------------------------- rearranging

def roll(a, shift, axis=None):
    """Elements shifted along `axis` (all of them, flattened, if None), wrapping round; a
    traced shift is a dynamic slice of the axis doubled (as jnp.roll)."""
    check_arraylike("roll", a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), aval(a).shape)
    nd = aval(a).ndim
    axes = tuple(check_axis("roll", ax, nd) for ax in np.atleast_1d(_static_seq(axis)).tolist())
    shift = _static_seq(shift)
    flat = shift if isinstance(shift, (tuple, list)) else [shift]
    if any(core.is_tracer(s) for s in flat):
        return _roll_dynamic(a, shift, axes)
    shifts = [_static_int("roll", "shift", s) for s in flat]
    try:
        pairs = zip(*np.broadcast_arrays(np.array(axes), np.array(shifts)))
    except ValueError:
        raise ShardcError(f"roll: {len(shifts)} shifts for {len(axes)} axes") from None
    for ax, s in pairs:
        n = aval(a).shape[ax]
        s = int(-s) % n if n else 0
        if s:
            lead = (slice(None),) * int(ax)
            a = concatenate([getitem(a, lead + (slice(s, None),)),
                             getitem(a, lead + (slice(0, s),))], int(ax))
    return a


def _roll_dynamic(a, shift, axes):
    from ..lax_sorting import dynamic_slice_in_dim
    from ._creation import asarray
    shift = asarray(shift)
    sh = aval(shift)
    if sh.ndim > 1:
        raise ShardcError("'shift' and 'axis' arguments to roll must be scalars or 1D arrays")
    k = max(sh.shape[0] if sh.ndim else 1, len(axes))
    if sh.ndim and sh.shape[0] not in (1, k) or len(axes) not in (1, k):
        raise ShardcError("'shift' and 'axis' arguments to roll must be scalars or 1D arrays "
                          "of the same length")
    for i in range(k):
        ax = axes[i if len(axes) > 1 else 0]
        x = getitem(shift, i if sh.ndim and sh.shape[0] > 1 else (0 if sh.ndim else ()))
        n = aval(a).shape[ax]
        x = remainder(convert(x, np.dtype(np.int32), False), max(n, 1))
        a = dynamic_slice_in_dim(concatenate([a, a], ax), subtract(n, x), n, axis=ax)
    return a


def tile(A, reps):
    """A repeated `reps` times along each axis (as jnp.tile)."""
    check_arraylike("tile", A)
    reps = _static_seq(reps)
    reps = (reps,) if not isinstance(reps, (tuple, list)) else tuple(reps)
    reps = tuple(_static_int("tile", "reps", r) for r in reps)
    s = aval(A).shape
    nd = max(len(s), len(reps))
    A = expand_dims(A, tuple(range(nd - len(s))))    # a broadcast: types keep their axes
    s = (1,) * (nd - len(s)) + s
    reps = (1,) * (nd - len(reps)) + reps
    b, ts = _explicit(A)
    if b is None:
        return _tile(A, s, reps)
    for i, (r, d) in enumerate(zip(reps, ts.dims)):
        if r != 1 and d:
            raise ShardingTypeError(
                f"tile: the operand is sharded on dimension {i} ({_spec_text(ts)}), which "
                f"is tiled {r} times (reps {reps}); reshard it first "
                "(shardc.reshard(x, P(...))), as jax's lax.tile asks")
    return _untyped_as(b, ts, lambda: _tile(A, s, reps))


def _tile(A, s, reps):
    # (n0, n1, ...) -> (1, n0, 1, n1, ...) -> (r0, n0, r1, n1, ...) -> (r0*n0, r1*n1, ...)
    inter = tuple(x for n in s for x in (1, n))
    big = tuple(x for r, n in zip(reps, s) for x in (r, n))
    out = broadcast_to(reshape(A, inter), big)
    return reshape(out, tuple(r * n for r, n in zip(reps, s)))


def _explicit(a):
    """(builder, a's type) when tracing in explicit mode with a typed, else (None, None)."""
    b = core.current_builder()
    ts = aval(a).ts
    if b is None or ts is None or types.is_lenient() or not types.explicit_axes_of(b):
        return None, None
    return b, ts


def _untyped_as(b, ts, fn):
    """fn() traced untyped (its broadcasts and reshapes have no type to name), its result
    given the type ts (as jax's tile and repeat type theirs)."""
    with types.lenient():
        out = fn()
    return retype(out, Sharding(ts.dims), b, primal=True)


@takes_out_sharding
def repeat(a, repeats, axis=None, *, total_repeat_length=None):
    """Each element repeated `repeats` times along `axis` (flattened if None), as
    jnp.repeat. With total_repeat_length (static) the result has that length along axis,
    as jax's: the repeats cut at it, or the last positions repeated up to it, and
    `repeats` may be traced. In explicit mode the result has a's type, and a sharded
    axis needs out_sharding= (jax's rule)."""
    check_arraylike("repeat", a)
    if axis is None:
        a, axis = ravel(a), 0
    b, ts = _explicit(a)
    if b is None:
        return _repeat(a, repeats, axis, total_repeat_length)
    axis = check_axis("repeat", axis, aval(a).ndim)
    if ts.dims[axis]:
        raise ArgumentError(
            f"repeat: axis {axis} of the operand is sharded ({_spec_text(ts)}), so the "
            "result's sharding is ambiguous; pass it with out_sharding= (as jax's "
            "jnp.repeat asks)")
    return _untyped_as(b, ts, lambda: _repeat(a, repeats, axis, total_repeat_length))


def _spec_text(ts):
    return "P(" + ", ".join("None" if not d else repr(d[0]) if len(d) == 1 else repr(d)
                            for d in ts.dims) + ")"


def _repeat(a, repeats, axis, total):
    s = aval(a).shape
    if total is not None:
        total = _static_int("repeat", "total_repeat_length", total)
    if not s:
        if np.shape(repeats) not in ((), (1,)):
            raise ArgumentError("`repeat` with a scalar parameter `a` is only implemented "
                                "for scalar values of the parameter `repeats`.")
        if total is None:
            total = _static_int("repeat", "repeats", _static_seq(np.ravel(repeats)[0]))
        return broadcast_to(a, (total,))
    axis = check_axis("repeat", axis, len(s))
    if total is None and core.is_tracer(repeats):
        raise ShardcError("repeat: traced repeats give a data-dependent shape; pass them "
                          "as a static int or NumPy array, or pass total_repeat_length=")
    if total is None:
        reps = np.asarray(repeats)
        if reps.shape == (1,) and s[axis] != 1:      # one count for every element
            reps = reps.reshape(())
        if reps.ndim == 0:
            r = int(reps)
            big = s[:axis + 1] + (r,) + s[axis + 1:]
            out = broadcast_to(expand_dims(a, axis + 1), big)
            return reshape(out, s[:axis] + (s[axis] * r,) + s[axis + 1:])
        if reps.shape != (s[axis],):
            raise ShardcError(f"repeat: {reps.shape[0]} repeats for an axis of size "
                              f"{s[axis]}")
        return getitem(a, (slice(None),) * axis + (np.repeat(np.arange(s[axis]), reps),))
    if total == 0 or s[axis] == 0:
        return a if s[axis] == 0 else reshape(a[(slice(None),) * axis + (slice(0, 0),)],
                                              s[:axis] + (0,) + s[axis + 1:])
    idx = _repeat_positions(repeats, s[axis], total)
    return getitem(a, (slice(None),) * axis + (idx,))


def _repeat_positions(repeats, n, total):
    """Which of the n positions each of the `total` results reads, as jax's repeat with
    total_repeat_length: a run starts where the repeats before it add up to (starts past
    the end are dropped), so the last run that starts extends to the end."""
    if not core.is_tracer(repeats):
        reps = np.broadcast_to(np.ravel(np.asarray(repeats, np.int64)), (n,))
        starts = np.concatenate([[0], np.cumsum(reps[:-1])])
        starts = np.where(starts < 0, starts + total, starts)     # as .at[] reads them
        marks = np.bincount(starts[(starts >= 0) & (starts < total)], minlength=total)
        return np.cumsum(marks[:total]) - 1
    from ._reductions import cumsum
    reps = broadcast_to(ravel(repeats), (n,))
    starts = cumsum(concatenate([zeros((1,), aval(reps).dtype), reps[:-1]]))
    marks = zeros((total,), dtypes.int32).at[starts].add(1)
    return subtract(cumsum(marks), 1)


def take(a, indices, axis=None, out=None, mode=None, unique_indices=False,
         indices_are_sorted=False, fill_value=None):
    """Elements of `a` at `indices` along `axis` (as jnp.take). Out-of-bound indices:
    mode "fill" (the default) gives `fill_value` (NaN, or the dtype's minimum for
    integers, as jax), "clip" clamps, "wrap" wraps; negative ones count from the end."""
    check_arraylike("take", a)
    if out is not None:
        raise ShardcError("The 'out' argument to shardc.numpy.take is not supported.")
    if axis is None:
        a, axis = ravel(a), 0
    nd = aval(a).ndim
    axis = check_axis("take", axis, nd)
    n = aval(a).shape[axis]
    mode = "fill" if mode is None else mode
    if mode not in ("fill", "clip", "wrap"):
        raise ShardcError(f"take: mode must be 'fill', 'clip' or 'wrap', got {mode!r}")
    idx = indices if core.is_tracer(indices) else np.asarray(indices)
    if isinstance(idx, np.ndarray) and idx.size == 0:
        idx = idx.astype(np.int32)
    ia = aval(idx)
    if not dtypes.is_int(ia.dtype):
        raise ShardcError(f"take: indices must be integers, got {ia.dtype}")
    if n == 0 and int(np.prod(ia.shape)) > 0:
        raise ShardcError(f"take: axis {axis} is empty, there is nothing to take")
    idx = index_for_dim(idx, n)     # (i + n, i < n, the clamp to n - 1: not in int8)
    unsigned = not dtypes.is_signed(aval(idx).dtype)    # kept, as jax's: never negative
    if mode == "wrap":
        idx = np.mod(idx, n) if isinstance(idx, np.ndarray) else remainder(idx, n)
    elif mode == "clip":
        idx = np.clip(idx, 0, n - 1) if isinstance(idx, np.ndarray) else \
            where(less(idx, 0), 0, where(less(idx, n), idx, n - 1))
    lead = (slice(None),) * axis
    given = idx
    if ia.ndim == 0:
        idx = reshape(idx, (1,)) if core.is_tracer(idx) else idx.reshape(1)
    out = getitem(a, lead + (idx,))
    if ia.ndim == 0:
        out = reshape(out, aval(out).shape[:axis] + aval(out).shape[axis + 1:])
    if mode != "fill":
        return out
    idx = given
    if isinstance(idx, np.ndarray):
        valid = (idx >= -n) & (idx < n)
        if valid.all():
            return out
    elif unsigned:      # (-n would wrap around)
        valid = less(idx, n)
    else:
        valid = logical_and(greater_equal(idx, -n), less(idx, n))
    dt = aval(a).dtype
    if fill_value is None:      # jax's: NaN, True, the largest negative or positive int
        fill_value = default_fill(dt)
    valid = reshape(valid, (1,) * axis + aval(valid).shape + (1,) * (nd - axis - 1))
    return where(valid, out, np.asarray(fill_value).astype(dt))


# ---------------------------------------------------------------- comparisons

def logaddexp(x1, x2, /):
    """log(exp(x1) + exp(x2)), without overflow. The max is held constant for the
    gradient, which is then exp(x - out) for each argument, ties and all (as jax's)."""
    from ...transforms.ad import stop_gradient
    x1, x2 = promote_args_inexact("logaddexp", x1, x2)
    amax = maximum(x1, x2)
    inf = isinf(amax)
    # the finite branch on finite inputs only, so its gradient is never inf/inf
    f1, f2 = where(inf, 0, x1), where(inf, 0, x2)
    m = stop_gradient(maximum(f1, f2))
    grad_form = add(m, log(add(exp(subtract(f1, m)), exp(subtract(f2, m)))))
    # the value as jax computes it (log1p keeps low precisions' digits: 1 + e^-3 in
    # bfloat16 loses 6 %); the gradient grad_form's (their difference is 0)
    core_ = grad_form
    if not dtypes.is_complex(aval(x1).dtype):
        from ._ufuncs import log1p, negative
        precise = add(maximum(f1, f2), log1p(exp(negative(abs(subtract(f1, f2))))))
        core_ = add(stop_gradient(precise), subtract(grad_form, stop_gradient(grad_form)))
    return where(isnan(subtract(x1, x2)), add(x1, x2), where(inf, amax, core_))


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """|a - b| <= atol + rtol * |b| elementwise; infinities are close only to themselves."""
    a, b = promote_args_inexact("isclose", a, b)     # integers compare as floats, as jax
    out = less_equal(abs(subtract(a, b)), add(atol, multiply(rtol, abs(b))))
    out = where(logical_or(isinf(a), isinf(b)), equal(a, b), out)
    if equal_nan:
        out = logical_or(out, logical_and(isnan(a), isnan(b)))
    return out


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return _all(isclose(a, b, rtol, atol, equal_nan))

