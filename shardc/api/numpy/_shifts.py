"""Bit shifts and divmod, as jax.numpy builds them (the `<<`, `>>`, divmod() operators)."""
from __future__ import annotations

from ...ir import dtypes
from ...errors import ShardcTypeError
from ...ops import elementwise as ew
from ._ufuncs import floor_divide, remainder
from ._util import aval, promote_args_numeric


def _ints(name, x, y):
    x, y = promote_args_numeric(name, x, y)
    if not dtypes.is_int(aval(x).dtype):
        raise ShardcTypeError(f"{name} needs integer arrays, got {aval(x)}")
    return x, y


def left_shift(x, y, /):
    """x << y elementwise (as jnp.left_shift: lax.shift_left)."""
    return ew.shift_left_p.bind(*_ints("left_shift", x, y))


def right_shift(x, y, /):
    """x >> y elementwise: arithmetic for signed integers, logical for unsigned (as jnp)."""
    x, y = _ints("right_shift", x, y)
    prim = ew.shift_right_arithmetic_p if dtypes.is_signed(aval(x).dtype) \
        else ew.shift_right_logical_p
    return prim.bind(x, y)


bitwise_left_shift = left_shift
bitwise_right_shift = right_shift


def divmod(x, y, /):
    """(floor_divide(x, y), remainder(x, y)), as jnp.divmod."""
    x, y = promote_args_numeric("divmod", x, y)
    return floor_divide(x, y), remainder(x, y)
