"""Dtypes: short IR names, JAX's promotion lattice with weak types, x64 canonicalization."""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

bool_ = np.dtype(np.bool_)
int8, int16, int32, int64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
uint8, uint16, uint32, uint64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float16, float32, float64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))

# IR / StableHLO element-type spellings.
_SHORT = {
    bool_: "bool", int8: "i8", int16: "i16", int32: "i32", int64: "i64",
    uint8: "u8", uint16: "u16", uint32: "u32", uint64: "u64",
    bfloat16: "bf16", float16: "f16", float32: "f32", float64: "f64",
}
_FROM_SHORT = {v: k for k, v in _SHORT.items()}
_MLIR = {
    bool_: "i1", int8: "i8", int16: "i16", int32: "i32", int64: "i64",
    uint8: "ui8", uint16: "ui16", uint32: "ui32", uint64: "ui64",
    bfloat16: "bf16", float16: "f16", float32: "f32", float64: "f64",
}
SUPPORTED = frozenset(_SHORT)


def short_name(dtype: np.dtype) -> str:
    return _SHORT[dtype]


def from_short_name(name: str) -> np.dtype:
    return _FROM_SHORT[name]


def mlir_name(dtype: np.dtype) -> str:
    return _MLIR[dtype]


def is_float(dtype: np.dtype) -> bool:
    return dtype in (bfloat16, float16, float32, float64)


def is_int(dtype: np.dtype) -> bool:
    return dtype.kind in "iu"


def is_signed(dtype: np.dtype) -> bool:
    return dtype.kind == "i"


def x64_enabled() -> bool:
    import jax
    return bool(jax.config.jax_enable_x64)


_TO_32 = {int64: int32, uint64: uint32, float64: float32}


def canonicalize(dtype) -> np.dtype:
    """The dtype JAX would use for `dtype`: 64-bit types narrow unless x64 is on."""
    d = np.dtype(dtype)
    if d not in SUPPORTED:
        from ..errors import ShardcError
        raise ShardcError(f"shardc does not support dtype {d}; use one of "
                          + ", ".join(sorted(_SHORT.values())))
    return d if x64_enabled() else _TO_32.get(d, d)


def default_int() -> np.dtype:
    return canonicalize(int64)


def default_float() -> np.dtype:
    return canonicalize(float64)


# JAX's (non-strict) promotion lattice. "i*"/"f*" are the weak int/float types of
# Python scalars; each node lists the types immediately above it.
_LATTICE = {
    "bool": ["i*"], "i*": ["u8", "i8"],
    "u8": ["i16", "u16"], "u16": ["i32", "u32"], "u32": ["i64", "u64"], "u64": ["f*"],
    "i8": ["i16"], "i16": ["i32"], "i32": ["i64"], "i64": ["f*"],
    "f*": ["bf16", "f16"], "bf16": ["f32"], "f16": ["f32"], "f32": ["f64"], "f64": [],
}


@functools.lru_cache(maxsize=None)
def _upper_bounds(x64: bool) -> dict:
    lattice = dict(_LATTICE)
    if not x64:   # never form a 64-bit type from 32-bit inputs
        lattice["u32"] = ["i32", "u64"]
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
        return "f*" if is_float(dtype) else "i*" if is_int(dtype) else "bool"
    return _SHORT[dtype]


@functools.lru_cache(maxsize=4096)
def _promote(keys: tuple, x64: bool) -> tuple[np.dtype, bool]:
    ub = _upper_bounds(x64)
    dtypes = [d for d, _ in keys]
    weaks = [w for _, w in keys]
    if len(set(dtypes)) == 1 and not all(weaks):
        return dtypes[0], False
    if all(weaks):
        nodes = {_SHORT[d] for d in dtypes}
    else:
        nodes = {_node(d, w) for d, w in keys}
    common = frozenset.intersection(*(ub[n] for n in nodes))
    (lub,) = [c for c in common if common <= ub[c]]
    if all(weaks):
        out, weak = _FROM_SHORT[lub], True
    elif lub == "i*":
        out, weak = (int64 if x64 else int32), True
    elif lub == "f*":
        out, weak = (float64 if x64 else float32), True
    else:
        out, weak = _FROM_SHORT[lub], False
    out = out if x64 else _TO_32.get(out, out)
    return out, weak and out != bool_


def promote(*typed: tuple[np.dtype, bool]) -> tuple[np.dtype, bool]:
    """JAX's result type of (dtype, weak) pairs: the least upper bound on the lattice."""
    if len(typed) == 1:
        return typed[0]
    return _promote(tuple(typed), x64_enabled())


def python_scalar_dtype(x) -> np.dtype:
    """The (weak) dtype JAX gives a Python scalar."""
    if isinstance(x, bool):
        return bool_
    if isinstance(x, int):
        return default_int()
    if isinstance(x, float):
        return default_float()
    raise TypeError(f"shardc does not support Python {type(x).__name__} values")
