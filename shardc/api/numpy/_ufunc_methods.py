"""jnp.ufunc: a function of `nin` arrays with NumPy's ufunc methods (reduce, accumulate,
at, reduceat, outer), as jax's; frompyfunc; and the fast paths of jax.numpy's fourteen
ufunc objects (add.reduce is a sum, add.at a scatter-add, ...). The generic methods loop
with shardc's scan, never unrolled in Python. This module imports only _util at load time:
_ufuncs builds its ufuncs from it, and everything else imports _ufuncs."""
from __future__ import annotations

import math
import operator

import numpy as np

from ...errors import (ArgumentError, ShardcNotImplementedError, ShardcTypeError,
                       api_boundary, cleaned)
from ...ir import dtypes
from ...ops import reduce as red
from ...ops.common import check_axis, norm_axes
from ._util import aval, canonical_dtype, check_arraylike, convert

_AT_INPLACE_WARNING = """\
Because JAX arrays are immutable, jnp.ufunc.at() cannot operate inplace like
np.ufunc.at(). Instead, you can pass inplace=False and capture the result; e.g.
>>> arr = jnp.add.at(arr, ind, val, inplace=False)
"""


def _asarray(x):
    from ._creation import asarray
    return asarray(x)


def asarray_checked(name, x):
    check_arraylike(name, x)
    return _asarray(x)


def _astype(x, dt):
    """x.astype(dt) as jnp's: complex to bool is x != 0 (convert would read the real part)."""
    if dt == dtypes.bool_ and dtypes.is_complex(aval(x).dtype):
        from ._ufuncs import not_equal
        return not_equal(x, 0)
    return convert(x, dt)


def _static(i):
    return isinstance(i, slice) or i is None or i is Ellipsis


def _index_tuple(indices):
    """jax's eliminate_deprecated_list_indexing: a list is no multi-dimensional index."""
    if isinstance(indices, tuple):
        return indices
    if isinstance(indices, list):
        raise ShardcTypeError("Using a non-tuple sequence for multidimensional indexing is not "
                              "allowed; use `arr[array(seq)]` instead of `arr[seq]`.")
    return (indices,)


class ufunc:
    """Universal functions which operate element-by-element on arrays (jnp.ufunc)."""

    def __init__(self, func, /, nin, nout, *, name=None, nargs=None, identity=None,
                 call=None, reduce=None, accumulate=None, at=None, reduceat=None):
        self.__doc__ = getattr(func, "__doc__", None)
        self.__name__ = name or func.__name__
        # read-only, as jax's: a ufunc may be a static argument (hashed, compared)
        self.__props = {"func": func, "nin": operator.index(nin),
                        "nout": operator.index(nout), "nargs": operator.index(nargs or nin),
                        "identity": identity, "reduce": reduce, "accumulate": accumulate,
                        "at": at, "reduceat": reduceat}
        self.__call, self.__nin = call, self.__props["nin"]

    _func = property(lambda self: self.__props["func"])
    nin = property(lambda self: self.__props["nin"])
    nout = property(lambda self: self.__props["nout"])
    nargs = property(lambda self: self.__props["nargs"])
    identity = property(lambda self: self.__props["identity"])

    def _key(self):
        return (self._func, self.__name__, self.identity, self.nin, self.nout, self.nargs)

    def __hash__(self):
        return hash(self._key())

    def __eq__(self, other):
        return isinstance(other, ufunc) and self._key() == other._key()

    def __repr__(self):
        return f"<jnp.ufunc '{self.__name__}'>"

    def __call__(self, *args, out=None, where=None):
        call = self.__call
        if call is None or len(args) != self.__nin or out is not None or where is not None:
            return self.__checked_call(args, out, where)
        try:
            return call(*args)
        except Exception as e:  # an API boundary, as the plain functions' (no extra frame)
            cleaned(e)
            raise

    def __checked_call(self, args, out, where):
        if out is not None:
            raise ShardcNotImplementedError(f"out argument of {self}")
        if where is not None:
            raise ShardcNotImplementedError(f"where argument of {self}")
        if len(args) != self.nin:
            raise ShardcTypeError(f"{self.__name__}() takes {self.nin} positional arguments "
                                  f"but {len(args)} were given")
        if self.__call is None:     # frompyfunc's: the scalar function mapped over elements
            from ._vectorize import vectorize
            self.__call = vectorize(self._func)
        return self(*args)

    def _binary(self, method):
        if self.nin != 2:
            raise ArgumentError(f"{method} only supported for binary ufuncs")
        if self.nout != 1:
            raise ArgumentError(f"{method} only supported for functions returning a single "
                                "value")

    def _result_dtype(self, *xs):
        """The dtype of func on scalars of xs' dtypes (jax's eval_shape on lax._one)."""
        import jax

        from ..transforms import eval_shape
        ones = [jax.ShapeDtypeStruct((), a.dtype, weak_type=a.weak) for a in map(aval, xs)]
        return eval_shape(self._func, *ones).dtype

    # ------------------------------------------------------------ reduce

    @api_boundary
    def reduce(self, a, axis=0, dtype=None, out=None, keepdims=False, initial=None,
               where=None):
        """The binary function folded over `axis` (jnp.ufunc.reduce)."""
        name = f"{self.__name__}.reduce"
        check_arraylike(name, a)
        self._binary("reduce")
        if out is not None:
            raise ShardcNotImplementedError(f"out argument of {self.__name__}.reduce()")
        if initial is not None:
            check_arraylike(name, initial)
        if where is not None:
            check_arraylike(name, where)
            if self.identity is None and initial is None:
                raise ArgumentError(f"reduction operation {self.__name__!r} does not have an "
                                    "identity, so to use a where mask one has to specify "
                                    "'initial'.")
            if aval(where).dtype != dtypes.bool_:
                raise ArgumentError(f"where argument must have dtype=bool; got "
                                    f"dtype={aval(where).dtype}")
        reduce = self.__props["reduce"] or self._reduce_via_scan
        return reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial,
                      where=where)

    def _reduce_via_scan(self, arr, axis=0, dtype=None, keepdims=False, initial=None,
                         where=None):
        from ..control import scan
        from ._creation import full
        from ._indexing import getitem
        from ._shapes import broadcast_to, moveaxis, ravel, reshape
        from ._ufuncs import where as select
        arr = _asarray(arr)
        if initial is None:
            initial = self.identity
        dtype = self._result_dtype(arr, arr) if dtype is None else canonical_dtype(dtype)
        shape = aval(arr).shape
        if where is not None:
            where = broadcast_to(where, shape)
        if isinstance(axis, tuple):
            for d in axis:
                check_axis(self.__name__, d, len(shape))
            raise ShardcNotImplementedError("tuple of axes")
        if axis is None:
            final_shape = (1,) * len(shape) if keepdims else ()
            arr, axis = ravel(arr), 0
            where = None if where is None else ravel(where)
        else:
            axis = check_axis(self.__name__, axis, len(shape))
            final_shape = shape[:axis] + (1,) * keepdims + shape[axis + 1:]
        if axis != 0:
            arr = moveaxis(arr, axis, 0)
            where = None if where is None else moveaxis(where, axis, 0)
        n = aval(arr).shape[0]
        if n == 0:
            if initial is None:
                raise ArgumentError(f"zero-size array to reduction operation {self.__name__} "
                                    "which has no identity")
            return full(final_shape, initial, dtype)
        start = 1 if initial is None else 0
        init = getitem(arr, 0) if initial is None else _asarray(initial)
        init = broadcast_to(_astype(init, dtype), aval(arr).shape[1:])

        def body(val, xs):
            new = self(val, _astype(xs[0], dtype))
            return (new if where is None else select(xs[1], new, val)), None
        rest = slice(start, None)     # (getitem: eager arrays are jax's, whose [] is jnp's)
        xs = (getitem(arr, rest), None if where is None else getitem(where, rest))
        result = init if n == start else scan(body, init, xs)[0]
        return reshape(result, final_shape) if keepdims else result

    # ------------------------------------------------------------ accumulate

    @api_boundary
    def accumulate(self, a, axis=0, dtype=None, out=None):
        """The running fold along `axis` (jnp.ufunc.accumulate)."""
        self._binary("accumulate")
        if out is not None:
            raise ShardcNotImplementedError(f"out argument of {self.__name__}.accumulate()")
        accumulate = self.__props["accumulate"] or self._accumulate_via_scan
        return accumulate(a, axis=axis, dtype=dtype)

    def _accumulate_via_scan(self, arr, axis=0, dtype=None):
        from ..control import scan
        from ._creation import full
        from ._indexing import getitem
        from ._shapes import moveaxis
        from ._ufuncs import equal
        from ._ufuncs import where as select
        check_arraylike(f"{self.__name__}.accumulate", arr)
        arr = _asarray(arr)
        dtype = self._result_dtype(arr, arr) if dtype is None else canonical_dtype(dtype)
        if axis is None or isinstance(axis, tuple):
            raise ArgumentError("accumulate does not allow multiple axes")
        a = aval(arr)
        axis = check_axis(self.__name__, axis, a.ndim)
        if a.size == 0:
            return full(a.shape, 0, dtype)
        arr = moveaxis(arr, axis, 0)
        first = _astype(getitem(arr, 0), dtype)

        def body(carry, x):     # as jax's: step 0 keeps the first element
            i, acc = carry
            x = _astype(x, dtype)
            y = select(equal(i, 0), x, self(_astype(acc, dtype), x))
            return (i + 1, y), y
        return moveaxis(scan(body, (0, first), arr)[1], 0, axis)

    # ------------------------------------------------------------ at

    @api_boundary
    def at(self, a, indices, b=None, /, *, inplace=True):
        """A copy of `a` with the function applied at `indices` (inplace=False required)."""
        if inplace:
            raise ShardcNotImplementedError(_AT_INPLACE_WARNING)
        _index_tuple(indices)
        at = self.__props["at"] or self._at_via_scan
        return at(a, indices) if b is None else at(a, indices, b)

    def _at_via_scan(self, a, indices, *args):
        from ..control import scan
        from ._at import _IndexUpdateRef as Ref
        from ._shapes import broadcast_to, ravel, reshape
        from ._util import broadcast_shapes
        check_arraylike(f"{self.__name__}.at", a, *args)
        dtype = self._result_dtype(a, *args)
        a = _astype(_asarray(a), dtype)
        args = tuple(_astype(_asarray(x), dtype) for x in args)
        indices = _index_tuple(indices)
        if not indices:
            return a
        shapes = [aval(i).shape for i in indices if not _static(i)]
        shape = shapes and broadcast_shapes(f"{self.__name__}.at", *shapes)
        if not shape:
            return Ref(a, indices).set(self(Ref(a, indices).get(), *args))
        n = math.prod(shape)
        if args:
            rest = aval(args[0]).shape[len(shape):]
            args = (reshape(broadcast_to(args[0], (*shape, *rest)), (n, *rest)),)
        arrays = [ravel(broadcast_to(i, shape)) for i in indices if not _static(i)]

        def body(x, xs):    # one index at a time: repeated indices apply in turn
            it = iter(xs[0])
            idx = tuple(i if _static(i) else next(it) for i in indices)
            ref = Ref(x, idx)
            return ref.set(self(ref.get(), *xs[1])), None
        return scan(body, a, (arrays, args))[0]

    # ------------------------------------------------------------ reduceat

    @api_boundary
    def reduceat(self, a, indices, axis=0, dtype=None, out=None):
        """The fold of each segment [indices[k], indices[k+1]) along `axis`."""
        self._binary("reduceat")
        if out is not None:
            raise ShardcNotImplementedError(f"out argument of {self.__name__}.reduceat()")
        reduceat = self.__props["reduceat"] or self._reduceat_via_scan
        return reduceat(a, indices, axis=axis, dtype=dtype)

    def _reduceat_via_scan(self, a, indices, axis=0, dtype=None):
        from ..control import scan
        from ._composite import take
        from ._indexing import getitem
        from ._more import append
        from ._shapes import expand_dims, moveaxis
        from ._ufuncs import greater, less, logical_and
        from ._ufuncs import where as select
        check_arraylike(f"{self.__name__}.reduceat", a, indices)
        a, indices = _asarray(a), _asarray(indices)
        shape = aval(a).shape
        if not shape:
            raise ArgumentError(f"reduceat: a must have 1 or more dimension, got a.shape={shape}")
        if aval(indices).ndim != 1:
            raise ArgumentError(f"reduceat: indices must be one-dimensional, got "
                                f"indices.shape={aval(indices).shape}")
        # (jax's reduceat ignores dtype, and so does this)
        if axis is None or isinstance(axis, (tuple, list)):
            raise ArgumentError("reduceat requires a single integer axis.")
        axis = check_axis(self.__name__, axis, len(shape))
        out = take(a, indices, axis=axis)
        ind = expand_dims(append(indices, shape[axis]),
                          [d for d in range(len(shape)) if d != axis])
        k = aval(ind).shape[axis]
        ind_start = getitem(ind, (slice(None),) * axis + (slice(0, k - 1),))
        ind_end = getitem(ind, (slice(None),) * axis + (slice(1, k),))

        def body(carry, x):     # element i joins each segment that has start < i < end
            i, acc = carry
            inside = logical_and(greater(i, ind_start), less(i, ind_end))
            return (i + 1, select(inside, self(acc, expand_dims(x, axis)), acc)), None
        return scan(body, (0, out), moveaxis(a, axis, 0))[0][1]

    # ------------------------------------------------------------ outer

    @api_boundary
    def outer(self, A, B, /):
        """The function of every pair of elements of A and B: shape A.shape + B.shape."""
        from ._shapes import reshape
        self._binary("outer")
        check_arraylike(f"{self.__name__}.outer", A, B)
        sa, sb = aval(A).shape, aval(B).shape
        na, nb = math.prod(sa), math.prod(sb)
        if getattr(self, "_elementwise", False):    # vmap of an elementwise function: a
            out = self(reshape(A, (na, 1)), reshape(B, (1, nb)))    # broadcast
        else:
            from ..vmap import vmap
            a, b = reshape(A, (na,)), reshape(B, (nb,))
            out = vmap(vmap(self, (None, 0)), (0, None))(a, b)
        return reshape(out, (*sa, *sb))


def frompyfunc(func, /, nin, nout, *, identity=None):
    """A jnp.ufunc of a scalar function: called elementwise over broadcast arguments."""
    return ufunc(func, nin, nout, identity=identity)


def builtin(func, nin, identity=None, **methods):
    """One of jax.numpy's ufunc objects: `func` as the call, its methods' fast paths."""
    u = ufunc(func, nin, 1, name=func.__name__, call=func, identity=identity, **methods)
    u._elementwise = True
    return u


# ---------------------------------------------------------------- the fast paths

def _init_val(dt, value):
    """jax's _reduction_init_val: the identity in dt (the extreme finite value or int where
    dt has no infinity)."""
    if dt == dtypes.bool_:
        return np.array(value > 0, np.bool_)
    if np.isinf(value) and dtypes.is_float(dt) and not dtypes.has_inf(dt):
        return np.array(dtypes.finfo(dt).min if value < 0 else dtypes.finfo(dt).max, dt)
    try:
        return np.array(value, dt)
    except OverflowError:
        return np.array(np.iinfo(dt).min if value < 0 else np.iinfo(dt).max, dt)


def reduction(a, name, kind, init, *, has_identity=True, preproc=None, upcast_f16=False,
              promote_integers=False, axis=None, dtype=None, keepdims=False, initial=None,
              where=None):
    """jnp's _reduction: convert to the computation dtype, mask, reduce with the monoid
    `kind`, combine `initial` (which may be traced), re-insert kept axes, convert."""
    from . import _ufuncs as uf
    from ._reductions import _BOOL_OPS, _keepdims, _upcast
    check_arraylike(name, a)
    a = _asarray(a)
    if initial is None and not has_identity and where is not None:
        raise ArgumentError(f"reduction operation {name} does not have an identity, so to "
                            "use a where mask one has to specify 'initial'")
    a = preproc(a) if preproc else a
    axes = norm_axes(name, axis, aval(a).ndim)
    if initial is None and not has_identity and any(aval(a).shape[d] == 0 for d in axes):
        raise ArgumentError(f"zero-size array to reduction operation {name} which has no "
                            "identity")
    out_dt = canonical_dtype(dtype) or (_upcast(aval(a).dtype) if promote_integers
                                        else aval(a).dtype)
    comp = dtypes.float32 if upcast_f16 and dtype is None and \
        out_dt in (dtypes.float16, dtypes.bfloat16) else out_dt
    a = convert(a, comp)
    prims = {"add": red.reduce_sum_p, "mul": red.reduce_prod_p, "max": red.reduce_max_p,
             "min": red.reduce_min_p, "and": red.reduce_and_p, "or": red.reduce_or_p}
    ops = {"add": uf.add, "mul": uf.multiply, "max": uf.maximum, "min": uf.minimum,
           "and": uf.bitwise_and, "or": uf.bitwise_or, "xor": uf.bitwise_xor}
    if where is not None:
        a = uf.where(where, a, _init_val(comp, init))
    if kind == "xor":
        from ..lax_reduce import reduce_xor
        out = reduce_xor(a, axes)
    else:
        prim = prims[kind]
        prim = _BOOL_OPS.get(prim, prim) if comp == dtypes.bool_ else prim
        out = prim.bind(a, axes=axes)
    if initial is not None:
        ini = convert(_asarray(initial), comp)
        if aval(ini).shape != ():
            raise ArgumentError(f"initial value must be a scalar. Got array of shape "
                                f"{aval(ini).shape}")
        out = ops[kind](ini, out)
    return convert(_keepdims(a, out, axes, keepdims), out_dt)


def _numeric(a):
    from ._util import promote_dtypes_numeric
    return promote_dtypes_numeric(a)[0]


def _require_integer(a):
    dt = aval(a).dtype
    if not (dt == dtypes.bool_ or dtypes.is_int(dt)):
        raise ArgumentError(f"integer argument required; got dtype={dt}")
    return a


def _cast_to_bool(a):
    if dtypes.is_complex(aval(a).dtype):
        from ._complex import real
        a = real(a)
    return convert(a, dtypes.bool_)


def reducer(name, kind, init, **options):
    def reduce(a, axis=None, dtype=None, keepdims=False, initial=None, where=None):
        return reduction(a, name, kind, init, axis=axis, dtype=dtype, keepdims=keepdims,
                         initial=initial, where=where, **options)
    return reduce


add_reduce = reducer("sum", "add", 0, preproc=_numeric, upcast_f16=True,
                     promote_integers=True)
multiply_reduce = reducer("prod", "mul", 1, preproc=_numeric, upcast_f16=True,
                          promote_integers=True)
# (jax's maximum.reduce raises for a dtype, a jit bug; shardc converts, as minimum's)
maximum_reduce = reducer("max", "max", -np.inf, has_identity=False)
minimum_reduce = reducer("min", "min", np.inf, has_identity=False)


def _bitwise(name, kind, init):
    def reduce(a, axis=None, dtype=None, keepdims=False, initial=None, where=None):
        check_arraylike(name, a)
        dt = canonical_dtype(dtype) or aval(a).dtype
        return reduction(a, name, kind, np.array(init).astype(dt).item(),
                         preproc=_require_integer, axis=axis, dtype=dtype, keepdims=keepdims,
                         initial=initial, where=where)
    return reduce


bitwise_and_reduce = _bitwise("reduce_bitwise_and", "and", -1)
bitwise_or_reduce = _bitwise("reduce_bitwise_or", "or", 0)
bitwise_xor_reduce = _bitwise("reduce_bitwise_xor", "xor", 0)
logical_and_reduce = reducer("reduce_logical_and", "and", True, preproc=_cast_to_bool)
logical_or_reduce = reducer("reduce_logical_or", "or", False, preproc=_cast_to_bool)
logical_xor_reduce = reducer("reduce_logical_xor", "xor", False, preproc=_cast_to_bool)


def add_accumulate(a, axis=None, dtype=None):
    from ._reductions import cumsum
    return cumsum(a, axis=axis, dtype=dtype)


def multiply_accumulate(a, axis=None, dtype=None):
    from ._sorting import cumprod
    return cumprod(a, axis=axis, dtype=dtype)


def _scatter_at(method, bool_ok):
    """add.at / multiply.at / subtract.at: one x.at[indices] update (booleans go through
    int32, as jax's)."""
    def at(a, indices, b=None):
        from ._at import _IndexUpdateRef as Ref
        if b is None:
            raise ShardcTypeError(f"{method}.at() missing 1 required positional argument: "
                                  "'b'")
        a = _asarray(a)
        if bool_ok and aval(a).dtype == dtypes.bool_:
            b = convert(convert(_asarray(b), dtypes.bool_), dtypes.int32)
            out = getattr(Ref(convert(a, dtypes.int32), indices), method)(b)
            return convert(out, dtypes.bool_)
        return getattr(Ref(a, indices), method)(b)
    return at


add_at = _scatter_at("add", True)
multiply_at = _scatter_at("multiply", True)
subtract_at = _scatter_at("subtract", False)
