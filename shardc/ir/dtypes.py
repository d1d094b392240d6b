"""Dtypes: short IR names, JAX's promotion lattice with weak types, x64 canonicalization."""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

from ..errors import ShardcError

# jax.dtypes.float0: the tangent type of integers and bools, which holds no data
FLOAT0 = np.dtype([("float0", np.void, 0)])


def is_float0(x) -> bool:
    return isinstance(getattr(x, "dtype", None), np.dtype) and x.dtype == FLOAT0

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
int2, uint2, int4, uint4 = (np.dtype(getattr(ml_dtypes, n))
                            for n in ("int2", "uint2", "int4", "uint4"))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
complex64, complex128 = np.dtype(np.complex64), np.dtype(np.complex128)

# The small floats (float8s, float4; as jax: no implicit promotion but from weak scalars),
# by name -> MLIR element type.
_SMALL_FLOATS = {
    "float8_e4m3fn": "f8E4M3FN", "float8_e5m2": "f8E5M2", "float8_e4m3fnuz": "f8E4M3FNUZ",
    "float8_e5m2fnuz": "f8E5M2FNUZ", "float8_e4m3b11fnuz": "f8E4M3B11FNUZ",
    "float8_e3m4": "f8E3M4", "float8_e4m3": "f8E4M3", "float8_e8m0fnu": "f8E8M0FNU",
    "float4_e2m1fn": "f4E2M1FN",
}
SMALL_FLOATS = {np.dtype(getattr(ml_dtypes, n)): m for n, m in _SMALL_FLOATS.items()}
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)
_FLOATS = frozenset([*SMALL_FLOATS, bfloat16, float16, float32, float64])
_COMPLEX = frozenset([complex64, complex128])
_SINTS = frozenset([int2, int4, int8, int16, int32, int64])
_UINTS = frozenset([uint2, uint4, uint8, uint16, uint32, uint64])
_INTN = frozenset([int2, uint2, int4, uint4])

# IR / StableHLO element-type spellings.
_SHORT = {
    bool_: "bool", int8: "i8", int16: "i16", int32: "i32", int64: "i64",
    uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
    int2: "i2", uint2: "u2", int4: "i4", uint4: "u4",
    bfloat16: "bf16", float16: "f16", float32: "f32", float64: "f64",
    complex64: "c64", complex128: "c128",
    **{d: m.lower() for d, m in SMALL_FLOATS.items()},
}
_FROM_SHORT = {v: k for k, v in _SHORT.items()}
_MLIR = {
    bool_: "i1", int8: "i8", int16: "i16", int32: "i32", int64: "i64",
    uint8: "ui8", uint16: "ui16", uint32: "ui32", uint64: "ui64",
    int2: "i2", uint2: "ui2", int4: "i4", uint4: "ui4",
    bfloat16: "bf16", float16: "f16", float32: "f32", float64: "f64",
    complex64: "complex<f32>", complex128: "complex<f64>", **SMALL_FLOATS,
}
SUPPORTED = frozenset(_SHORT)


def short_name(dtype: np.dtype) -> str:
    return _SHORT[dtype]


def from_short_name(name: str) -> np.dtype:
    return _FROM_SHORT[name]


def mlir_name(dtype: np.dtype) -> str:
    return _MLIR[dtype]


def is_float(dtype: np.dtype) -> bool:
    """A real floating-point dtype (float8s and bfloat16 included)."""
    return dtype in _FLOATS


def is_complex(dtype: np.dtype) -> bool:
    return dtype in _COMPLEX


def is_inexact(dtype: np.dtype) -> bool:
    """Floating or complex: the dtypes that carry gradients (jnp.inexact)."""
    return dtype in _FLOATS or dtype in _COMPLEX


def is_int(dtype: np.dtype) -> bool:
    return dtype in _SINTS or dtype in _UINTS


def is_signed(dtype: np.dtype) -> bool:
    return dtype in _SINTS


def real_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype of a complex dtype's parts (a real dtype is its own)."""
    return float32 if dtype == complex64 else float64 if dtype == complex128 else dtype


def complex_dtype(dtype: np.dtype) -> np.dtype:
    """The complex dtype whose parts are `dtype` (jax: float64 -> complex128, others c64)."""
    if dtype in _COMPLEX:
        return dtype
    return complex128 if dtype == float64 else complex64


def bit_width(dtype: np.dtype) -> int:
    """Bits per element (int4 is 4 though NumPy stores it in a byte; bool is 1)."""
    if dtype == bool_:
        return 1
    if dtype in _INTN:
        return ml_dtypes.iinfo(dtype).bits
    if dtype in SMALL_FLOATS:
        return ml_dtypes.finfo(dtype).bits
    return dtype.itemsize * 8


def has_inf(dtype: np.dtype) -> bool:
    """Whether the float dtype has infinities (float8_e4m3fn and the fnuz types do not)."""
    with np.errstate(all="ignore"):
        return bool(np.isinf(np.array(np.inf, np.float32).astype(dtype)))


def iinfo(dtype):
    return ml_dtypes.iinfo(dtype)


def finfo(dtype):
    return ml_dtypes.finfo(dtype)


class TypePromotionError(ShardcError, ValueError):
    """Dtypes with no implicit promotion path (a ValueError, as jax.dtypes')."""


def x64_enabled() -> bool:
    import jax
    return bool(jax.config.jax_enable_x64)


_TO_32 = {int64: int32, uint64: uint32, float64: float32, complex128: complex64}


def canonicalize(dtype) -> np.dtype:
    """The dtype JAX would use for `dtype`: 64-bit types narrow unless x64 is on."""
    d = np.dtype(dtype)
    if d not in SUPPORTED:
        raise ShardcError(f"shardc does not support dtype {d}; use one of "
                          + ", ".join(sorted(str(t) for t in SUPPORTED)))
    return d if x64_enabled() else _TO_32.get(d, d)


def default_int() -> np.dtype:
    return canonicalize(int64)


def default_float() -> np.dtype:
    return canonicalize(float64)


def default_complex() -> np.dtype:
    return canonicalize(complex128)


# JAX's (non-strict) promotion lattice. "i*"/"f*"/"c*" are the weak int/float/complex
# types of Python scalars; each node lists the types immediately above it. The small
# ints and floats sit only above the weak scalars: they never promote implicitly.
_SMALL = [_SHORT[d] for d in SMALL_FLOATS]
_LATTICE = {
    "bool": ["i*"], "i*": ["u8", "i8", "u2", "u4", "i2", "i4"],
    "u8": ["i16", "u16"], "u16": ["i32", "u32"], "u32": ["i64", "u64"], "u64": ["f*"],
    "i8": ["i16"], "i16": ["i32"], "i32": ["i64"], "i64": ["f*"],
    "u2": [], "u4": [], "i2": [], "i4": [],
    "f*": [*_SMALL, "bf16", "f16", "c*"], **{s: [] for s in _SMALL},
    "bf16": ["f32"], "f16": ["f32"], "f32": ["f64", "c64"], "f64": ["c128"],
    "c*": ["c64"], "c64": ["c128"], "c128": [],
}


@functools.lru_cache(maxsize=None)
def _upper_bounds(x64: bool, strict: bool = False) -> dict:
    lattice = dict(_LATTICE)
    if not x64:   # never form a 64-bit type from 32-bit inputs
        lattice["u32"] = ["i32", "u64"]
    if strict:    # jax_numpy_dtype_promotion='strict': only weak scalars promote
        lattice = {n: [] for n in lattice}
        real = [n for n in lattice if n in _FROM_SHORT and n != "bool"]
        lattice.update({"i*": ["f*"] + [n for n in real if is_int(_FROM_SHORT[n])],
                        "f*": ["c*"] + [n for n in real if is_float(_FROM_SHORT[n])],
                        "c*": ["c64", "c128"]})
    ub = {}
    for node in lattice:
        seen, todo = {node}, [node]
        while todo:
            for up in lattice[todo.pop()]:
                if up not in seen:
                    seen.add(up)
                    todo.append(up)
        ub[node] = frozenset(seen)
    return ub


def _node(dtype: np.dtype, weak: bool) -> str:
    if weak:
        return ("c*" if is_complex(dtype) else "f*" if is_float(dtype)
                else "i*" if is_int(dtype) else "bool")
    return _SHORT[dtype]


def _no_path(keys, strict=False):
    names = tuple(str(d) for d, _ in keys)
    if strict:
        raise TypePromotionError(
            f"Input dtypes {names} have no available implicit dtype promotion path when "
            "jax_numpy_dtype_promotion=strict. Try explicitly casting inputs to the "
            "desired output type, or set jax_numpy_dtype_promotion=standard.")
    small = [d for d, _ in keys if d in SMALL_FLOATS or d in _INTN]
    why = (f"to avoid unintended promotion, {small[0]} does not promote implicitly; "
           "convert explicitly, e.g. x.astype('float32')") if small else \
        "convert the inputs to the type you want explicitly"
    raise TypePromotionError(f"Input dtypes {names} have no implicit promotion path: {why}")


@functools.lru_cache(maxsize=4096)
def _promote(keys: tuple, x64: bool, strict: bool = False) -> tuple[np.dtype, bool]:
    ub = _upper_bounds(x64, strict)
    dtypes = [d for d, _ in keys]
    weaks = [w for _, w in keys]
    if len(set(dtypes)) == 1 and not all(weaks):
        return dtypes[0], False
    concrete = all(weaks) and not strict    # as jax: strict mode keeps the weak nodes
    if concrete:
        nodes = {_SHORT[d] for d in dtypes}
    else:
        nodes = {_node(d, w) for d, w in keys}
    common = frozenset.intersection(*(ub[n] for n in nodes))
    lubs = [c for c in common if common <= ub[c]]
    if len(lubs) != 1:
        _no_path(keys, strict)
    (lub,) = lubs
    if concrete:
        out, weak = _FROM_SHORT[lub], True
    elif lub == "i*":
        out, weak = (int64 if x64 else int32), True
    elif lub == "f*":
        out, weak = (float64 if x64 else float32), True
    elif lub == "c*":
        out, weak = (complex128 if x64 else complex64), True
    else:
        out, weak = _FROM_SHORT[lub], False
    out = out if x64 else _TO_32.get(out, out)
    return out, weak and out != bool_


def promote(*typed: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """JAX's result type of (dtype, weak) pairs: the least upper bound on the lattice."""
    if len(typed) == 1:
        return typed[0]
    return _promote(tuple(typed), x64_enabled(), _strict())


def _strict() -> bool:
    from jax._src.config import numpy_dtype_promotion   # thread-aware, as x64
    return numpy_dtype_promotion.value == "strict"


def python_scalar_dtype(x) -> np.dtype:
    """The (weak) dtype JAX gives a Python scalar."""
    if isinstance(x, bool):
        return bool_
    if isinstance(x, int):
        return default_int()
    if isinstance(x, float):
        return default_float()
    if isinstance(x, complex):
        return default_complex()
    raise TypeError(f"shardc does not support Python {type(x).__name__} values")
