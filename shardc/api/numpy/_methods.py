"""Operators, array methods and NumPy's dispatch protocols on traced arrays.

`np.sin(t)`, `np.dot(t, w)` and `np.sum(t, axis=0)` on a traced array reach
shardc.numpy through `__array_ufunc__` / `__array_function__`, so plain NumPy
code traces too.
"""
from __future__ import annotations

import inspect

from ...trace.core import Tracer
from ...errors import ShardcError
from ...trace import pytree as _tree

_UFUNC_NAMES = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
    "true_divide": "divide", "floor_divide": "floor_divide", "remainder": "remainder",
    "mod": "remainder", "fmod": "fmod", "power": "power", "maximum": "maximum",
    "minimum": "minimum", "arctan2": "arctan2",
    "equal": "equal", "not_equal": "not_equal", "less": "less", "less_equal": "less_equal",
    "greater": "greater", "greater_equal": "greater_equal", "logical_and": "logical_and",
    "logical_or": "logical_or", "logical_xor": "logical_xor", "logical_not": "logical_not",
    "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
    "invert": "bitwise_not", "negative": "negative", "positive": "positive",
    "absolute": "abs", "fabs": "abs", "sign": "sign", "exp": "exp", "log": "log",
    "log1p": "log1p", "expm1": "expm1", "sqrt": "sqrt", "square": "square",
    "reciprocal": "reciprocal", "sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh",
    "arcsin": "arcsin", "arccos": "arccos", "arctan": "arctan", "sinh": "sinh",
    "cosh": "cosh", "floor": "floor", "ceil": "ceil", "rint": "round", "isnan": "isnan",
    "isfinite": "isfinite", "isinf": "isinf", "matmul": "matmul",
}
_REDUCE = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
           "logical_and": "all", "logical_or": "any"}
_ACCUMULATE = {"add": "cumsum"}


def _snp():
    snp = _SNP[0]
    if snp is None:
        from .. import numpy as snp
        _SNP[0] = snp
    return snp


_SNP = [None]


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    snp = _snp()
    if kwargs.get("out") is not None:
        raise ShardcError(f"np.{ufunc.__name__}(..., out=...) cannot write into a traced "
                          "array; use the returned value")
    kwargs.pop("out", None)
    if method == "__call__":
        # shardc.numpy's function of the ufunc's name (np.fmax is snp.fmax, which skips
        # NaNs as NumPy's: it was snp.maximum), else the aliases above
        name = ufunc.__name__ if callable(getattr(snp, ufunc.__name__, None)) else \
            _UFUNC_NAMES.get(ufunc.__name__)
        if name is None:
            raise ShardcError(f"np.{ufunc.__name__} is not supported on traced arrays by "
                              "shardc")
        if kwargs:
            raise ShardcError(f"np.{ufunc.__name__}: keyword arguments {sorted(kwargs)} are "
                              "not supported on traced arrays")
        return getattr(snp, name)(*inputs)
    if method == "reduce" and ufunc.__name__ in _REDUCE:
        axis = kwargs.pop("axis", 0)
        return getattr(snp, _REDUCE[ufunc.__name__])(inputs[0], axis=axis,
                                                     keepdims=kwargs.pop("keepdims", False))
    if method == "accumulate" and ufunc.__name__ in _ACCUMULATE:
        return getattr(snp, _ACCUMULATE[ufunc.__name__])(inputs[0], axis=kwargs.pop("axis", 0))
    raise ShardcError(f"np.{ufunc.__name__}.{method} is not supported on traced arrays")


def _numpy_name(func):
    """np.sum, np.linalg.norm, ...: how the user wrote the NumPy function."""
    mod = getattr(func, "__module__", None) or "numpy"
    sub = [p for p in mod.split(".")[1:] if not p.startswith("_")]
    return ".".join(["np", *sub, func.__name__])


def _call(what, impl, args, kwargs):
    """impl(*args, **kwargs), with arguments shardc does not take as a ShardcError."""
    try:
        inspect.signature(impl).bind(*args, **kwargs)
    except TypeError as e:
        raise ShardcError(f"{what}: {e} (shardc supports a subset of NumPy's arguments; "
                          "see shardc.numpy)") from None
    except ValueError:      # no signature to check
        pass
    return impl(*args, **kwargs)


def _array_function(self, func, types, args, kwargs):
    snp = _snp()
    name = _numpy_name(func)
    impl = getattr(snp, func.__name__, None) if name.count(".") == 1 else None
    if impl is None or not callable(impl):
        raise ShardcError(f"{name} is not supported on traced arrays by shardc; see "
                          "shardc.numpy for what is")
    return _call(name, impl, args, kwargs)


_JaxTracer = Tracer.__mro__[1]      # jax.core.Tracer


def _has_foreign(tree) -> bool:
    """Whether `tree` holds a jax transformation's tracer (jax code shardc runs, as a
    jax.lax.cond branch jax traces itself, indexing a shardc value with one)."""
    return any(type(x) is not Tracer and isinstance(x, _JaxTracer)
               for x in _tree.tree_leaves(tree))


def _binop(name, reflected=False):
    def op(self, other):
        if type(other) is not Tracer and isinstance(other, _JaxTracer):
            return NotImplemented   # a jax transform's tracer (jax.grad inside): jax's op
        f = getattr(_snp(), name)
        return f(other, self) if reflected else f(self, other)
    return op


def _round(self, ndigits=None):
    """round(x): jnp.round, then (with no ndigits) the default int type, as jax's
    __round__ (Python's round(7.5) is an int)."""
    out = _snp().round(self, ndigits or 0)
    return out.astype(int) if ndigits is None else out


def _attach():
    T = Tracer
    T.__array_ufunc__ = _array_ufunc
    T.__array_function__ = _array_function
    for dunder, name in [("add", "add"), ("sub", "subtract"), ("mul", "multiply"),
                         ("truediv", "divide"), ("floordiv", "floor_divide"),
                         ("mod", "remainder"), ("pow", "power"), ("matmul", "matmul"),
                         ("and", "bitwise_and"), ("or", "bitwise_or"),
                         ("xor", "bitwise_xor"), ("lshift", "left_shift"),
                         ("rshift", "right_shift"), ("divmod", "divmod")]:
        setattr(T, f"__{dunder}__", _binop(name))
        setattr(T, f"__r{dunder}__", _binop(name, reflected=True))
    for dunder, name in [("eq", "equal"), ("ne", "not_equal"), ("lt", "less"),
                         ("le", "less_equal"), ("gt", "greater"), ("ge", "greater_equal")]:
        setattr(T, f"__{dunder}__", _binop(name))
    T.__neg__ = lambda self: _snp().negative(self)
    T.__pos__ = lambda self: self
    T.__abs__ = lambda self: _snp().abs(self)
    T.__invert__ = lambda self: _snp().bitwise_not(self)
    T.__round__ = _round
    jax_getitem, jax_at = _JaxTracer.__getitem__, _JaxTracer.at.fget

    def getitem(self, idx):
        if _has_foreign(idx):      # an index of a jax transform's trace: jax's indexing
            return jax_getitem(self, idx)
        return _snp()._getitem(self, idx)
    T.__getitem__ = getitem

    def setitem(self, idx, value):
        raise ShardcError("traced arrays are immutable: `x[idx] = y` cannot work; use "
                          "`x = x.at[idx].set(y)` (a new array)")
    T.__setitem__ = setitem
    from ._at import _IndexUpdateHelper
    T.at = property(lambda self: _IndexUpdateHelper(self, jax_at))
    T.T = property(lambda self: _snp().transpose(self))
    T.mT = property(lambda self: _snp().swapaxes(self, -1, -2))
    T.real = property(lambda self: _snp().real(self))
    T.imag = property(lambda self: _snp().imag(self))
    T.conj = T.conjugate = lambda self: _snp().conjugate(self)
    T.astype = lambda self, dtype, copy=False, device=None: _snp().astype(
        self, dtype, copy=copy, device=device)

    def reshape(self, *shape, order="C", out_sharding=None):
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = shape[0]
        return _snp().reshape(self, shape, order, out_sharding=out_sharding)
    T.reshape = reshape

    def transpose(self, *axes):
        if len(axes) == 1 and not isinstance(axes[0], int):
            axes = axes[0]
        return _snp().transpose(self, axes or None)
    T.transpose = transpose
    for name in ("sum", "mean", "max", "min", "prod", "argmax", "argmin", "var", "std", "any",
                 "all", "cumsum", "squeeze", "ravel", "swapaxes", "clip", "dot",
                 "round", "sort", "argsort", "cumprod", "searchsorted", "nonzero"):
        setattr(T, name, (lambda n: lambda self, *a, **k: _call(
            f"x.{n}()", getattr(_snp(), n), (self, *a), k))(name))
    T.flatten = lambda self: _snp().ravel(self)
    T.item = lambda self: self.__float__()
    T.tolist = lambda self: self.__array__()
