"""shardc.numpy: jax.numpy's names and semantics, traced into shardc's IR.

Inside a traced function these record ops; on concrete arrays they run at once
(eager mode) and return jax.Arrays.
"""
from __future__ import annotations

# ruff: noqa: F401  (re-exports the public names of the submodules)

import numpy as _np

from ...ir import dtypes as _dtypes
from . import _names, linalg
from ._composite import allclose, isclose, linspace, repeat, roll, take, tile, tril, triu
from ._creation import (arange, array, asarray, empty, empty_like, eye, full, full_like,
    identity, iota, ones, ones_like, zeros, zeros_like)
from ._indexing import getitem as _getitem
from ._linalg import dot, einsum, inner, matmul, outer, tensordot, vdot
from ._methods import _attach
from ._reductions import (all, amax, amin, any, argmax, argmin, cumsum, max, mean, min, prod,
    std, sum, var)
from ._shapes import (array_split, atleast_1d, atleast_2d, broadcast_arrays, broadcast_to,
    concatenate, expand_dims, flip, hstack, moveaxis, pad, permute_dims, ravel, reshape, split,
    squeeze, stack, swapaxes, transpose, vstack)
from ._ufuncs import (abs, absolute, add, arccos, arcsin, arctan, arctan2, around, bitwise_and,
    bitwise_not, bitwise_or, bitwise_xor, ceil, clip, cos, cosh, divide, equal, erf, exp, expm1,
    floor, floor_divide, fmod, greater, greater_equal, invert, isfinite, isinf, isnan, less,
    less_equal, log, log1p, logical_and, logical_not, logical_or, logical_xor, logistic, maximum,
    minimum, mod, multiply, negative, not_equal, positive, pow, power, reciprocal, remainder,
    round, rsqrt, sign, sin, sinh, sqrt, square, subtract, tan, tanh, true_divide, where)
from ._shifts import bitwise_left_shift, bitwise_right_shift, divmod, left_shift, right_shift
from ...errors import wrap_public as _wrap_public
from ._eager import PYTHON_RESULTS as _PYTHON_RESULTS
from ._eager import eager_array as _eager_array
from ._util import aval as _aval
from ._util import canonical_dtype as _canonical_dtype
from ._util import convert as _convert

# jnp's scalar types: usable as dtypes, and callable like jnp.float32(x) (a cast that
# traces, giving an array), not NumPy's (which would need a concrete value)
bool_ = _names._scalar_type("bool_", _np.bool_)
int8, int16, int32, int64 = (_names._scalar_type(n, getattr(_np, n))
                             for n in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (_names._scalar_type(n, getattr(_np, n))
                                 for n in ("uint8", "uint16", "uint32", "uint64"))
float16, float32, float64 = (_names._scalar_type(n, getattr(_np, n))
                             for n in ("float16", "float32", "float64"))
bfloat16 = _names._scalar_type("bfloat16", _dtypes.bfloat16.type)
dtype = _np.dtype
iinfo = _np.iinfo
from ml_dtypes import finfo  # noqa: E402  (NumPy's finfo does not know bfloat16)
pi, e, inf, nan, newaxis = _np.pi, _np.e, _np.inf, _np.nan, None


def astype(x, dtype, copy=False, device=None):
    """x converted to `dtype` (as jnp.astype: complex to bool is x != 0, where
    lax.convert_element_type would read the real part only; None is the default float
    type, as jax's), placed on `device` (a device or sharding) when given."""
    dtype = _canonical_dtype(float if dtype is None else dtype)
    if dtype == _np.dtype(bool) and _dtypes.is_complex(_aval(x).dtype):
        out = not_equal(x, 0)
    else:
        out = _convert(x, dtype)
    if device is not None:
        from ._creation import _place
        out = _place(out, device, None, "astype", convert=True)
    return out


def ndim(a):
    return _aval(a).ndim


def shape(a):
    return _aval(a).shape


def size(a, axis=None):
    s = _aval(a).shape
    return int(_np.prod(s)) if axis is None else s[axis]


def result_type(*args):
    """jnp.result_type of arrays, Python scalars, dtypes and scalar types."""
    typed = []
    for a in args:
        if a is int or a is float:   # Python scalar types are weak, as their values
            typed.append((_canonical_dtype(a), True))
        elif isinstance(a, (_np.dtype, type, str)):
            typed.append((_canonical_dtype(a), False))
        else:
            av = _aval(a)
            typed.append((av.dtype, av.weak))
    return _dtypes.promote(*typed)[0]


from ._complex import *  # noqa: E402,F403  (complex functions, small dtypes' names)
from ._sorting import (argpartition, argsort, cumprod, cumproduct, cumulative_prod,  # noqa: E402
    cumulative_sum, digitize, lexsort, nancumprod, nancumsum, partition, searchsorted, sort,
    take_along_axis)
from ._setops import (argwhere, bincount, flatnonzero, intersect1d, isin, nonzero,  # noqa: E402
    setdiff1d, setxor1d, union1d, unique, unique_all, unique_counts, unique_inverse,
    unique_values)
from ._quantile import (histogram, histogram2d, histogram_bin_edges, histogramdd, median,  # noqa: E402,E501
    nanmedian,
    nanpercentile, nanquantile, percentile, quantile)
from ..conv import convolve, correlate  # noqa: E402
from ._names import *  # noqa: E402,F403  (issue 16: the rest of jax.numpy's names)

from ._vectorize import vectorize  # noqa: E402
from ._more3 import bitwise_count, i0, kaiser, put_along_axis, sort_complex  # noqa: E402

_attach()


from ..random._keyops import NUMPY as _KEY_FUNCTIONS, on_keys as _on_keys  # noqa: E402
_on_keys(globals(), _KEY_FUNCTIONS)
_wrap_public(globals(), _eager_array, _PYTHON_RESULTS)
from ._poly import poly, polyfit, roots  # noqa: E402
