"""Array construction and diagonals of shardc.numpy, as jax.numpy builds them: diag
diagonal diagflat trace fill_diagonal tri *_indices indices ix_ meshgrid logspace
geomspace vander window functions fromfunction frombuffer fromstring copy."""
from __future__ import annotations

import operator

import numpy as np

from ...errors import ShardcError
from ...ir import dtypes
from ...ops import elementwise as ew
from ...ops import shape as shp
from ...ops.common import check_axis
from . import _reductions as R
from ._composite import linspace, _static_int
from ._creation import asarray, eye, full, iota, zeros_like
from ._shapes import moveaxis, ravel, reshape, stack, transpose
from ._ufuncs import abs as _abs, cos, multiply, power, sign, subtract, where
from ._util import aval, canonical_dtype, check_arraylike, convert, result_type


def _axes2(name, a, axis1, axis2):
    nd = aval(a).ndim
    if nd < 2:
        raise ShardcError(f"{name} requires an array of at least two dimensions.")
    a1, a2 = check_axis(name, axis1, nd), check_axis(name, axis2, nd)
    if a1 == a2:
        raise ShardcError(f"axis1 and axis2 can not be same. axis1={axis1} and axis2={axis2}")
    return a1, a2


def diagonal(a, offset=0, axis1=0, axis2=1):
    """The offset-th diagonal of the (axis1, axis2) planes, last: one gather over the plane
    flattened (jax gathers with two index arrays; the elements are the same)."""
    check_arraylike("diagonal", a)
    offset = _static_int("diagonal", "offset", offset)
    a1, a2 = _axes2("diagonal", a, axis1, axis2)
    s = aval(a).shape
    a = moveaxis(a, (a1, a2), (-2, -1))
    n, m = s[a1], s[a2]
    size = max(0, min(n + min(offset, 0), m - max(offset, 0)))
    i = np.arange(size)
    j = np.arange(abs(offset), abs(offset) + size)
    rows, cols = (i, j) if offset >= 0 else (j, i)
    flat = reshape(a, aval(a).shape[:-2] + (n * m,))
    from ._indexing import getitem
    return getitem(flat, (Ellipsis, (rows * m + cols).astype(np.int32)))


def diag(v, k=0):
    check_arraylike("diag", v)
    k = operator.index(k)
    nd = aval(v).ndim
    if nd == 1:
        n = aval(v).shape[0] + abs(k)
        zero = convert(0, aval(v).dtype, aval(v).weak)
        v = shp.pad_p.bind(v, zero, padding_config=((max(0, -k), max(0, k), 0),))
        mask = eye(n, k=k, dtype=bool)
        col = shp.broadcast_in_dim_p.bind(v, shape=(n, n), broadcast_dimensions=(0,))
        return where(mask, col, zero)
    if nd == 2:
        return diagonal(v, offset=k)
    raise ShardcError("diag input must be 1d or 2d")


def diagflat(v, k=0):
    check_arraylike("diagflat", v)
    return diag(ravel(v), operator.index(k))


def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    check_arraylike("trace", a)
    if out is not None:
        raise ShardcError("The 'out' argument to shardc.numpy.trace is not supported.")
    a1, a2 = _axes2("trace", a, axis1, axis2)
    s = aval(a).shape
    a = moveaxis(a, (a1, a2), (-2, -1))
    mask = eye(s[a1], s[a2], k=_static_int("trace", "offset", offset), dtype=bool)
    a = where(mask, a, zeros_like(a))
    return R.sum(a, axis=(-2, -1), dtype=dtype)


def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """a with its main diagonal set to val (tiled to the diagonal's length); inplace=False
    is required (arrays are immutable, as in jax)."""
    if inplace:
        raise ShardcError("shardc arrays are immutable: call fill_diagonal(..., inplace=False)")
    if wrap:
        raise ShardcError("wrap=True is not implemented, must use wrap=False")
    check_arraylike("fill_diagonal", a, val)
    s = aval(a).shape
    if len(s) < 2:
        raise ShardcError("array must be at least 2-d")
    if len(s) > 2 and not all(n == s[0] for n in s[1:]):
        raise ShardcError("All dimensions of input must be of equal length")
    val = convert(val if not isinstance(val, (list, tuple)) else asarray(val), aval(a).dtype)
    it = dtypes.default_int()
    mask = None
    for d in range(1, len(s)):
        eq = ew.eq_p.bind(iota(it, 0, 0, s), iota(it, 0, d, s))
        mask = eq if mask is None else ew.and_p.bind(mask, eq)
    if aval(val).ndim:
        flat = ravel(val)
        k = aval(flat).shape[0]
        reps = -(-s[0] // k) if k else 0
        from ._composite import tile
        flat = tile(flat, reps)
        if aval(flat).shape[0] != s[0]:
            flat = shp.slice_p.bind(flat, start_indices=(0,), limit_indices=(s[0],))
        val = shp.broadcast_in_dim_p.bind(flat, shape=s, broadcast_dimensions=(0,))
    return where(mask, val, a)


def tri(N, M=None, k=0, dtype=None):
    dt = canonical_dtype(dtype) or np.dtype(np.float32)
    M = N if M is None else M
    it = dtypes.default_int()
    rows = iota(it, 0, 0, (N, M))
    cols = iota(it, 0, 1, (N, M))
    k = _static_int("tri", "k", k)
    mask = ew.ge_p.bind(ew.add_p.bind(rows, convert(k, it)), cols) if k else \
        ew.ge_p.bind(rows, cols)
    return convert(mask, dt)


def _index_pair(i, j):
    it = dtypes.default_int()
    return asarray(i.astype(it)), asarray(j.astype(it))


def tril_indices(n, k=0, m=None):
    return _index_pair(*np.tril_indices(n, k, m))


def triu_indices(n, k=0, m=None):
    return _index_pair(*np.triu_indices(n, k, m))


def _shape2(name, arr):
    s = arr.shape if hasattr(arr, "shape") and not hasattr(arr, "value") else aval(arr).shape
    if len(s) != 2:
        raise ShardcError(f"{name} only supports 2D arrays, got shape {tuple(s)}")
    return s


def tril_indices_from(arr, k=0):
    n, m = _shape2("tril_indices_from", arr)
    return tril_indices(n, k=k, m=m)


def triu_indices_from(arr, k=0):
    n, m = _shape2("triu_indices_from", arr)
    return triu_indices(n, k=k, m=m)


def diag_indices(n, ndim=2):
    n, ndim = operator.index(n), operator.index(ndim)
    if n < 0:
        raise ShardcError(f"n argument to diag_indices must be nonnegative, got {n}")
    if ndim < 0:
        raise ShardcError(f"ndim argument to diag_indices must be nonnegative, got {ndim}")
    return (iota(dtypes.default_int(), n),) * ndim


def diag_indices_from(arr):
    check_arraylike("diag_indices_from", arr)
    s = aval(arr).shape
    if len(s) < 2:
        raise ShardcError("input array must be at least 2-d")
    if len(set(s)) != 1:
        raise ShardcError("All dimensions of input must be of equal length")
    return diag_indices(s[0], len(s))


def mask_indices(n, mask_func, k=0, *, size=None):
    """Indices where mask_func(ones((n, n)), k) is nonzero: computed at trace time (the
    mask is static); `size` pads or truncates as jax's."""
    m = np.asarray(mask_func(np.ones((n, n), np.int32), k))
    i, j = np.nonzero(m)
    if size is not None:
        i, j = (np.resize(np.concatenate([x, np.zeros(max(0, size - len(x)), x.dtype)]),
                          size) for x in (i, j))
    return _index_pair(i, j)


def indices(dimensions, dtype=None, sparse=False):
    dt = canonical_dtype(int if dtype is None else dtype)
    dims = tuple(operator.index(d) for d in dimensions)
    n = len(dims)
    out = []
    for i, d in enumerate(dims):
        idx = iota(dt, d)
        s = (1,) * i + (d,) + (1,) * (n - i - 1) if sparse else dims
        out.append(shp.broadcast_in_dim_p.bind(idx, shape=s, broadcast_dimensions=(i,)))
    if sparse:
        return tuple(out)
    return stack(out, 0) if out else asarray(np.array([], dtype=dt))


def ix_(*args):
    check_arraylike("ix_", *args)
    n = len(args)
    out = []
    for i, a in enumerate(args):
        s = aval(a).shape
        if len(s) != 1:
            raise ShardcError(f"Arguments to shardc.numpy.ix_ must be 1-dimensional, got "
                              f"shape {s}")
        if aval(a).dtype == dtypes.bool_:
            raise ShardcError("Boolean arguments to shardc.numpy.ix_ are not implemented")
        shape = [1] * n
        shape[i] = s[0]
        if s[0] == 0:
            out.append(full(shape, np.zeros((), dtypes.default_int())))
        else:
            out.append(shp.broadcast_in_dim_p.bind(asarray(a), shape=tuple(shape),
                                                   broadcast_dimensions=(i,)))
    return tuple(out)


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    check_arraylike("meshgrid", *xi)
    args = [asarray(a) for a in xi]
    if not copy:
        raise ShardcError("shardc.numpy.meshgrid only supports copy=True")
    if indexing not in ("xy", "ij"):
        raise ShardcError(f"Valid values for indexing are 'xy' and 'ij', got {indexing}")
    if any(aval(a).ndim != 1 for a in args):
        raise ShardcError(f"Arguments to shardc.numpy.meshgrid must be 1D, got shapes "
                          f"{[aval(a).shape for a in args]}")
    if indexing == "xy" and len(args) >= 2:
        args[0], args[1] = args[1], args[0]
    shape = [1 if sparse else aval(a).shape[0] for a in args]

    def a_shape(i, a):
        return (*shape[:i], aval(a).shape[0], *shape[i + 1:]) if sparse else tuple(shape)
    out = [shp.broadcast_in_dim_p.bind(a, shape=a_shape(i, a), broadcast_dimensions=(i,))
           for i, a in enumerate(args)]
    if indexing == "xy" and len(args) >= 2:
        out[0], out[1] = out[1], out[0]
    return out


def _to_inexact(dt):
    return dt if dtypes.is_inexact(dt) else dtypes.default_float()


def logspace(start, stop, num=50, endpoint=True, base=10.0, dtype=None, axis=0):
    num, axis = operator.index(num), operator.index(axis)
    dt = canonical_dtype(dtype) or _to_inexact(result_type(start, stop)[0])
    comp = _to_inexact(dt)
    start, stop = convert(start, comp), convert(stop, comp)
    lin = linspace(start, stop, num, endpoint=endpoint, retstep=False, dtype=None, axis=axis)
    return convert(power(base, lin), dt)


def geomspace(start, stop, num=50, endpoint=True, dtype=None, axis=0):
    from ._math import log10
    dt = canonical_dtype(dtype) or _to_inexact(result_type(start, stop)[0])
    comp = _to_inexact(dt)
    start, stop = convert(start, comp), convert(stop, comp)
    sgn = sign(start)
    res = multiply(sgn, logspace(log10(ew.div_p.bind(start, sgn)),
                                 log10(ew.div_p.bind(stop, sgn)), num, endpoint=endpoint,
                                 base=10.0, dtype=comp, axis=0))
    nd = aval(res).ndim
    axis = check_axis("geomspace", axis, nd)
    if axis != 0:
        res = transpose(res, (*range(1, axis + 1), 0, *range(axis + 1, nd)))
    return convert(res, dt)


def vander(x, N=None, increasing=False):
    check_arraylike("vander", x)
    s = aval(x).shape
    if len(s) != 1:
        raise ShardcError("x must be a one-dimensional array")
    N = s[0] if N is None else operator.index(N)
    if N < 0:
        raise ShardcError("N must be nonnegative")
    dt = aval(x).dtype
    k = iota(dt, N)
    if not increasing:
        k = ew.sub_p.bind(convert(N - 1, dt), k)
    col = shp.broadcast_in_dim_p.bind(x, shape=(s[0], 1), broadcast_dimensions=(0,))
    return power(col, shp.broadcast_in_dim_p.bind(k, shape=(1, N), broadcast_dimensions=(1,)))


def _window(M, name, f):
    M = operator.index(M)
    dt = dtypes.default_float()
    if M <= 1:
        return full((M,), 1, dt)
    return f(iota(dt, M), M)


def hamming(M):
    return _window(M, "hamming", lambda n, M: subtract(0.54, multiply(0.46, cos(
        ew.div_p.bind(multiply(2 * np.pi, n), convert(M - 1, aval(n).dtype, True))))))


def hanning(M):
    return _window(M, "hanning", lambda n, M: multiply(0.5, subtract(1, cos(
        ew.div_p.bind(multiply(2 * np.pi, n), convert(M - 1, aval(n).dtype, True))))))


def blackman(M):
    def f(n, M):
        d = convert(M - 1, aval(n).dtype, True)
        return ew.add_p.bind(
            subtract(0.42, multiply(0.5, cos(ew.div_p.bind(multiply(2 * np.pi, n), d)))),
            multiply(0.08, cos(ew.div_p.bind(multiply(4 * np.pi, n), d))))
    return _window(M, "blackman", f)


def bartlett(M):
    def f(n, M):
        t = ew.sub_p.bind(ew.add_p.bind(multiply(2, n), convert(1, aval(n).dtype, True)),
                          convert(M, aval(n).dtype, True))
        return subtract(1, ew.div_p.bind(_abs(t), convert(M - 1, aval(n).dtype, True)))
    return _window(M, "bartlett", f)


def fromfunction(function, shape, *, dtype=float, **kwargs):
    """function(*indices) over a grid of `shape` (jax maps it with vmap over each axis;
    here it gets the whole index arrays, which gives the same result for elementwise
    functions, the common case)."""
    shape = tuple(operator.index(d) for d in shape)
    idx = indices(shape, dtype=dtype)
    return function(*[idx[i] for i in range(len(shape))], **kwargs) if shape else \
        function(**kwargs)


def frombuffer(buffer, dtype=float, count=-1, offset=0):
    dt = canonical_dtype(dtype)
    return asarray(np.frombuffer(buffer, dtype=dt, count=count, offset=offset))


def fromstring(string, dtype=float, count=-1, *, sep):
    return asarray(np.fromstring(string, dtype=canonical_dtype(dtype), count=count, sep=sep))


def copy(a, order=None):
    check_arraylike("copy", a)
    return asarray(a) if not isinstance(a, (int, float, bool)) else asarray(np.asarray(a))
