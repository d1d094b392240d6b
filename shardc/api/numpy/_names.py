"""The rest of jax.numpy's names that are composites of shardc's ops (issue 16), gathered
for shardc.numpy's namespace: the functions of _math, _nanred, _construct, _more and
_more2, dtype utilities and scalar types, index tricks (mgrid ogrid r_ c_ s_ index_exp)."""
from __future__ import annotations

# ruff: noqa: F401  (re-exports the public names of the submodules)

import numpy as _np

from ...errors import ArgumentError, ShardcError, wrap_public
from ...ir import dtypes as _dtypes
from ...trace import core as _core
from ._construct import (bartlett, blackman, copy, diag, diag_indices, diag_indices_from,
    diagflat, diagonal, fill_diagonal, frombuffer, fromfunction, fromstring, geomspace,
    hamming, hanning, indices, ix_, logspace, mask_indices, meshgrid, trace, tri,
    tril_indices, tril_indices_from, triu_indices, triu_indices_from, vander)
from ._math import (acos, acosh, arccosh, arcsinh, arctanh, asin, asinh, atan, atan2, atanh,
    bitwise_invert, copysign, deg2rad, degrees, fabs, float_power, fmax, fmin, gcd, heaviside,
    hypot, isneginf, isposinf, lcm, ldexp, log10, log2, modf, nan_to_num,
    rad2deg, radians, rint, signbit, sinc, trunc)
from ._more import (append, apply_along_axis, apply_over_axes, choose, compress, cross,
    delete, diff, ediff1d, extract, fliplr, flipud, insert, kron, matrix_transpose, matvec,
    piecewise, resize, rollaxis, rot90, select, vecdot, vecmat)
from ._stacking import (atleast_3d, block, column_stack, concat, dsplit, dstack, hsplit,
    unstack, vsplit)
from ._more2 import (array_equal, array_equiv, corrcoef, cov, gradient, interp, packbits,
    place, put, ravel_multi_index, trapezoid, trim_zeros, unpackbits, unravel_index, unwrap)
from ._polyarith import polyadd, polyder, polydiv, polyint, polymul, polysub, polyval
from . import _ufunc_methods as _um
from ._composite import logaddexp as _logaddexp
from ._math import logaddexp2 as _logaddexp2
from ._ufunc_methods import frompyfunc, ufunc
from ._nanred import (average, count_nonzero, nanargmax, nanargmin, nanmax, nanmean, nanmin,
    nanprod, nanstd, nansum, nanvar, ptp)
from ._eager import PYTHON_RESULTS, eager_array
from ._util import aval as _aval
from ._util import canonical_dtype as _canonical

# ---------------------------------------------------------------- dtypes and scalar types

# NumPy's own abstract scalar types, as jax.numpy's
generic, number, inexact, floating = _np.generic, _np.number, _np.inexact, _np.floating
integer, signedinteger, unsignedinteger = _np.integer, _np.signedinteger, _np.unsignedinteger
character, flexible, complexfloating = _np.character, _np.flexible, _np.complexfloating
object_ = _np.object_
euler_gamma = float(_np.euler_gamma)
ComplexWarning = _np.exceptions.ComplexWarning
get_printoptions, set_printoptions, printoptions = (_np.get_printoptions,
                                                    _np.set_printoptions, _np.printoptions)


def _scalar_type(name, dt):
    """jnp's scalar types: callable like a dtype's type, giving a shardc array."""
    def make(x):
        from ._creation import asarray
        return asarray(x, dtype=_canonical(dt))
    make.__name__ = name
    make.dtype = _np.dtype(dt)
    return make


bool = _scalar_type("bool", _np.bool_)
int_ = _scalar_type("int_", _np.int64)
uint = _scalar_type("uint", _np.uint64)
float_ = double = _scalar_type("float_", _np.float64)
single = _scalar_type("single", _np.float32)


def _dt(x):
    if isinstance(x, _np.dtype):
        return x
    if callable(x) and hasattr(x, "dtype") and isinstance(x.dtype, _np.dtype):
        return x.dtype
    if _core.is_tracer(x) or hasattr(x, "aval"):
        return _aval(x).dtype
    return _np.dtype(x)


def issubdtype(arg1, arg2):
    if isinstance(arg2, type) and issubclass(arg2, _np.generic) and \
            arg2 in (_np.generic, _np.number, _np.inexact, _np.floating, _np.integer,
                     _np.signedinteger, _np.unsignedinteger, _np.complexfloating):
        d = _dt(arg1)
        if d == _dtypes.bfloat16 or d.name.startswith("float8"):
            return arg2 in (_np.generic, _np.number, _np.inexact, _np.floating)
        return _np.issubdtype(d, arg2)
    return _np.issubdtype(_dt(arg1), _dt(arg2))


def isdtype(dtype, kind):
    """The array API's dtype kinds ('bool', 'signed integer', 'real floating', ...)."""
    d = _dt(dtype)
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if isinstance(k, str):
            ok = {"bool": d == _np.bool_,
                  "signed integer": d.kind == "i",
                  "unsigned integer": d.kind == "u",
                  "integral": d.kind in "iu",
                  "real floating": _dtypes.is_float(d),
                  "complex floating": d.kind == "c",
                  "numeric": d.kind in "iuc" or _dtypes.is_float(d)}.get(k)
            if ok is None:
                raise ShardcError(f"Unrecognized data type kind: {k!r}")
            if ok:
                return True
        elif _dt(k) == d:
            return True
    return False


def promote_types(a, b):
    """jnp.promote_types: the strong promotion of two dtypes (jax's lattice)."""
    return _np.dtype(_dtypes.promote((_np.dtype(_dt(a)), False), (_np.dtype(_dt(b)), False))[0])


def can_cast(from_, to, casting="safe"):
    return _np.can_cast(_dt(from_), _dt(to), casting)


def isscalar(element):
    # (a shardc tracer's __jax_array__ is None: it is no jax array-like)
    if not _core.is_tracer(element) and callable(getattr(element, "__jax_array__", None)):
        element = element.__jax_array__()
    if _core.is_tracer(element) or hasattr(element, "aval"):
        return _aval(element).ndim == 0
    return _np.isscalar(element)


def iterable(y):
    try:
        iter(y)
    except TypeError:
        return False
    return True


def broadcast_shapes(*shapes):
    if not shapes:
        return ()
    shapes = [(s,) if _np.ndim(s) == 0 else tuple(s) for s in shapes]
    try:
        return tuple(_np.broadcast_shapes(*shapes))
    except ValueError:
        raise ShardcError(f"Incompatible shapes for broadcasting: shapes={shapes}") from None


def array_repr(arr, max_line_width=None, precision=None, suppress_small=None):
    return _np.array_repr(_np.asarray(arr), max_line_width, precision, suppress_small)


def array_str(a, max_line_width=None, precision=None, suppress_small=None):
    return _np.array_str(_np.asarray(a), max_line_width, precision, suppress_small)


def einsum_path(subscripts, /, *operands, optimize="auto"):
    """NumPy's einsum_path on the operands' shapes (jax's is opt_einsum's)."""
    arrays = [_np.empty(_aval(o).shape, _np.float32) for o in operands]
    path, info = _np.einsum_path(subscripts, *arrays, optimize="greedy"
                                 if optimize == "auto" else optimize)
    return [tuple(p) for p in path if p != "einsum_path"], info


# ---------------------------------------------------------------- I/O and interop (host side)

save, savez = _np.save, _np.savez


def load(file, *args, **kwargs):
    """np.load, as a shardc array when it is one array (bfloat16 'V2' data restored)."""
    out = _np.load(file, *args, **kwargs)
    if isinstance(out, _np.ndarray):
        if out.dtype == "V2":
            out = out.view(_dtypes.bfloat16)
        from ._creation import asarray
        out = asarray(out)
    return out


def _impure(name):
    def f(*args, **kwargs):
        raise ShardcError(f"shardc.numpy.{name}() is not implemented because it may be "
                          "non-pure; use shardc.numpy.asarray(numpy." + name + "(...)) instead")
    f.__name__ = name
    return f


fromfile, fromiter = _impure("fromfile"), _impure("fromiter")


def from_dlpack(x, /, *, device=None, copy=None):  # noqa: F811  (jax's parameter name)
    import jax.dlpack
    return jax.dlpack.from_dlpack(x, device=device, copy=copy)


# ---------------------------------------------------------------- logaddexp's ufuncs

def _logsumexp(a, axis=None, dtype=None, keepdims=False, initial=None, where=None):
    """log(sum(exp(a))) past the max (held constant for the gradient), as jax's
    logaddexp.reduce (which checks dtype but does not use it)."""
    from ...ops.common import norm_axes
    from ...transforms.ad import stop_gradient
    from ._complex import real
    from ._shapes import expand_dims
    from ._ufuncs import add, exp, isfinite, log, subtract, where as where_
    from ._util import convert, promote_dtypes_inexact
    _canonical(dtype)
    (a,) = promote_dtypes_inexact(_um.asarray_checked("logsumexp", a))
    axes = norm_axes("logsumexp", axis, _aval(a).ndim)
    amax = _um.reduction(real(a), "max", "max", -_np.inf, has_identity=False, axis=axes,
                         keepdims=keepdims, initial=-_np.inf, where=where)
    amax = stop_gradient(where_(isfinite(amax), amax, convert(0, _aval(amax).dtype)))
    kept = amax if keepdims else expand_dims(amax, axes)
    exp_a = exp(subtract(a, convert(kept, _aval(a).dtype)))
    sumexp = _um.add_reduce(exp_a, axis=axes, keepdims=keepdims, where=where)
    out = add(log(sumexp), convert(amax, _aval(sumexp).dtype))
    return out if initial is None else _logaddexp(initial, out)


def _logsumexp2(a, axis=None, dtype=None, keepdims=False, initial=None, where=None):
    """log2(sum(2 ** a)): logaddexp's reduction of a * ln 2, as jax's."""
    from ._ufuncs import divide, multiply
    _canonical(dtype)
    ln2 = float(_np.log(2))
    a = multiply(_um.asarray_checked("logsumexp2", a), ln2)
    initial = None if initial is None else multiply(initial, ln2)
    return divide(_logsumexp(a, axis, None, keepdims, initial, where), ln2)


# jnp.logaddexp and logaddexp2 are ufunc objects: their reduce is a logsumexp
logaddexp = _um.builtin(_logaddexp, 2, -_np.inf, reduce=_logsumexp)
logaddexp2 = _um.builtin(_logaddexp2, 2, -_np.inf, reduce=_logsumexp2)


# ---------------------------------------------------------------- index tricks

class _Grid:
    def __init__(self, sparse):
        self.sparse = sparse

    def __getitem__(self, key):
        from ._composite import linspace
        from ._creation import arange
        from ._shapes import stack
        single = isinstance(key, slice)
        keys = (key,) if single else key
        axes = []
        for k in keys:
            start = 0 if k.start is None else k.start
            step = 1 if k.step is None else k.step
            if isinstance(step, complex):
                axes.append(linspace(start, k.stop, int(abs(step))))
            else:
                axes.append(arange(start, k.stop, step))
        if single:
            return axes[0]
        grids = meshgrid(*axes, indexing="ij", sparse=self.sparse)
        if self.sparse:
            return grids
        return stack(grids, 0) if grids else arange(0)


mgrid = _Grid(False)
ogrid = _Grid(True)
s_, index_exp = _np.s_, _np.index_exp


class _Concat:
    """r_ and c_: concatenation along the first (r_) or last (c_) axis of slices, scalars
    and arrays, with NumPy's (and jax's) leading string directive: "axis[,ndmin[,trans1d]]",
    or "r" / "c" for a 1-d result made a row / column."""

    def __init__(self, axis, ndmin, trans1d):
        self.axis, self.ndmin, self.trans1d = axis, ndmin, trans1d

    def _params(self, directive):
        params = [self.axis, self.ndmin, self.trans1d, -1]
        if directive in ("r", "c"):
            params[-1] = 0 if directive == "r" else 1
            return params
        vec = directive.split(",")
        vec = vec + params[len(vec):] if len(vec) < 4 else vec[:3] + [params[-1]]
        try:
            return [int(v) for v in vec]
        except ValueError:
            raise ArgumentError(f"could not understand directive {directive!r}") from None

    def __getitem__(self, key):
        from ._composite import linspace
        from ._creation import arange, asarray
        from ._shapes import concatenate, expand_dims, reshape, transpose
        key = key if isinstance(key, tuple) else (key,)
        params = [self.axis, self.ndmin, self.trans1d, -1]
        if key and isinstance(key[0], str):
            params, key = self._params(key[0]), key[1:]
        axis, ndmin, trans1d, matrix = params
        parts = []
        for k in key:
            if isinstance(k, str):
                raise ArgumentError("string directive must be placed at the beginning")
            if isinstance(k, slice):
                step = 1 if k.step is None else k.step
                start = 0 if k.start is None else k.start
                a = linspace(start, k.stop, int(abs(step))) if isinstance(step, complex) \
                    else arange(start, k.stop, step)
                nd = 0
            else:
                a = asarray(k)
                nd = _aval(a).ndim
            s = _aval(a).shape
            if len(s) < ndmin:          # as np.array(ndmin=): leading 1s
                a = reshape(a, (1,) * (ndmin - len(s)) + s)
            if trans1d != -1 and ndmin - nd > 0:    # NumPy's: where the item's axes go
                shifts = ndmin - abs(ndmin + trans1d + 1) % ndmin
                order = tuple(range(ndmin))
                a = transpose(a, order[shifts:] + order[:shifts])
            parts.append(a)
        out = concatenate(parts, axis=axis)
        return expand_dims(out, matrix) if matrix != -1 and _aval(out).ndim == 1 else out


r_ = _Concat(0, 1, -1)
c_ = _Concat(-1, 2, 0)

ndarray = __import__("jax").Array

wrap_public(globals(), eager_array, PYTHON_RESULTS)

__all__ = [n for n in list(globals()) if not n.startswith("_") and n not in (
    "annotations", "ArgumentError", "ShardcError", "wrap_public")]
