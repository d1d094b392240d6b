"""MLIR tensor type text of an aval, cached: every lowered op spells its types."""
from __future__ import annotations

from ..ir import dtypes
from ..ir.program import Aval

_TYPES: dict = {}


def tensor_type(aval: Aval) -> str:
    t = _TYPES.get(aval)
    if t is None:
        dims = "".join(f"{d}x" for d in aval.shape)
        t = f"tensor<{dims}{dtypes.mlir_name(aval.dtype)}>"
        if len(_TYPES) < 4096:
            _TYPES[aval] = t
    return t
