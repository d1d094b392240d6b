"""Eager results of shardc.numpy's functions, as jnp's: arrays, not Python scalars."""
from __future__ import annotations

from ...ir.program import Lit
from ...trace import core
from . import _creation

SCALARS = (Lit, bool, int, float, complex)


def eager_array(out):
    """Outside a trace, a result that is a Python scalar or an IR literal (an op on a
    Python scalar folded away) is an array, as jnp's results are: snp.floor(2) is a weak
    int32 array."""
    if isinstance(out, SCALARS) and core.current_builder() is None:
        return _creation.full((), out)
    if type(out) in (tuple, list) and any(isinstance(o, SCALARS)
                                          for o in out) and core.current_builder() is None:
        return type(out)(eager_array(o) for o in out)
    return out


# the functions whose jnp namesakes return Python values
PYTHON_RESULTS = ("ndim", "size", "shape", "isscalar", "iscomplexobj", "isrealobj",
                  "iterable", "can_cast", "issubdtype", "isdtype", "result_type",
                  "promote_types", "broadcast_shapes")
