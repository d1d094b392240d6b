"""lax.scaled_dot: a dot of block-scaled operands (microscaling formats such as MXFP8),
`(lhs * lhs_scale) @ (rhs * rhs_scale)`, as jax computes it where XLA has no native
block-scaled dot: each scale repeated over its block of the contracting dim, operand
and scale in bfloat16, their product, then dot_general. jax wraps that decomposition
in an `xla.scaled_dot` composite for XLA to replace on GPUs; shardc emits the
decomposition itself, so the values are jax's (bit for bit on CPU) and the sharding of
every step propagates. Unlike jax's, it is differentiable.
"""
from __future__ import annotations

import numpy as np

from ..errors import ShardcTypeError, api_boundary
from ..ir import dtypes
from .numpy._util import aval


def _check(lhs, rhs, lhs_scale, rhs_scale, dn):
    """jax's checks, with jax's messages."""
    (lc, rc), (lb, rb) = dn
    ranks = {lhs.ndim, rhs.ndim, lhs_scale.ndim, rhs_scale.ndim}
    if len(ranks) != 1:
        raise ShardcTypeError(
            f"All input tensors must have the same rank. Got lhs rank: {lhs.ndim} rhs rank: "
            f"{rhs.ndim} lhs_scale rank: {lhs_scale.ndim} rhs_scale rank: {rhs_scale.ndim}.")
    if len(lb) != len(rb):
        raise ShardcTypeError("LHS and RHS must have the same number of batch dimensions, "
                              f"got {len(lb)} and {len(rb)}.")
    if len(lc) != len(rc):
        raise ShardcTypeError("LHS and RHS must have the same number of contracting "
                              f"dimensions, got {len(lc)} and {len(rc)}.")
    for i, j in zip(lb, rb):
        if len({lhs.shape[i], rhs.shape[j], lhs_scale.shape[i], rhs_scale.shape[j]}) != 1:
            raise ShardcTypeError("All input tensors must have the same batch dimension "
                                  f"size for batch dims ({i}, {j}).")
    for i, j in zip(lc, rc):
        if lhs.shape[i] != rhs.shape[j]:
            raise ShardcTypeError(f"LHS contracting dim {i} of size {lhs.shape[i]} does not "
                                  f"match RHS contracting dim {j} of size {rhs.shape[j]}.")
    for side, x, s, contracting in (("LHS", lhs, lhs_scale, lc), ("RHS", rhs, rhs_scale, rc)):
        for i, size in enumerate(x.shape):
            if i not in contracting:
                if s.shape[i] != size:
                    raise ShardcTypeError(f"{side} dim {i} of size {size} does not match "
                                          f"scale dim size {s.shape[i]}.")
            elif size % s.shape[i]:
                raise ShardcTypeError(f"{side} contracting dim {i} of size {size} must be "
                                      f"divisible by its scale's dim size {s.shape[i]}.")
            elif size // s.shape[i] < 2:
                raise ShardcTypeError(f"The ratio of {side} contracting dim {i} to its "
                                      f"scale's dim size ({size // s.shape[i]}) must be at "
                                      "least 2.")


def _scaled(x, scale, contracting):
    """x * scale in bfloat16, each scale repeated over its block of x's contracting dims."""
    from . import numpy as snp
    shape = aval(x).shape
    for i in contracting:
        n = aval(scale).shape[i]
        if n != shape[i]:
            s = aval(scale).shape
            scale = snp.broadcast_to(snp.expand_dims(scale, i + 1),
                                     s[:i + 1] + (shape[i] // n,) + s[i + 1:])
            scale = snp.reshape(scale, s[:i] + (shape[i],) + s[i + 1:])
    return x.astype(dtypes.bfloat16) * scale.astype(dtypes.bfloat16)


@api_boundary
def scaled_dot(lhs, rhs, *, lhs_scale=None, rhs_scale=None, dimension_numbers=None,
               preferred_element_type=None):
    """jax.lax.scaled_dot: dot_general of `lhs * lhs_scale` and `rhs * rhs_scale`, a
    scale per block of the contracting dims (a missing scale is one); the result is
    `preferred_element_type`, bfloat16 by default."""
    from . import numpy as snp
    from .lax import dot_general
    from .numpy._util import canonical_dtype
    lhs, rhs = snp.asarray(lhs), snp.asarray(rhs)
    if dimension_numbers is None:
        n = lhs.ndim
        if n < 2:
            raise ShardcTypeError("scaled_dot does not support 0-rank and 1-rank operands.")
        dimension_numbers = (((n - 1,), (n - 2,)), (tuple(range(n - 2)),) * 2)
    (lc, rc), (lb, rb) = dimension_numbers
    dn = ((tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)))

    def one(x, contracting):     # jax's dummy scale: a single block per contracting dim
        shape = tuple(1 if i in contracting else d for i, d in enumerate(x.shape))
        return snp.ones(shape, dtypes.float8_e8m0fnu)
    lhs_scale = one(lhs, dn[0][0]) if lhs_scale is None else snp.asarray(lhs_scale)
    rhs_scale = one(rhs, dn[0][1]) if rhs_scale is None else snp.asarray(rhs_scale)
    _check(lhs, rhs, lhs_scale, rhs_scale, dn)
    out = dtypes.bfloat16 if preferred_element_type is None else \
        canonical_dtype(preferred_element_type)
    return dot_general(_scaled(lhs, lhs_scale, dn[0][0]), _scaled(rhs, rhs_scale, dn[0][1]),
                       dn, preferred_element_type=np.dtype(out))
