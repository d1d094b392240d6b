"""`func` applied at indexed elements, once per index that names them: lax.scatter_apply
and x.at[idx].apply with indices that may repeat (XLA's scatter with jax's update
function applies it again for each repeat: x.at[[0, 0]].apply(f)[0] is f(f(x[0]))).

No scatter region runs a user function here. A scatter-add counts how often each
element is named, and `func` (a function of a scalar, vmapped over x's dims) is
applied where the count exceeds the round, for as many rounds as the largest count
(one round when the indices are promised unique). The values and shardings are those
of elementwise ops and a scatter-add; the rounds are a while loop, so this is not
reverse-differentiable when the count is traced (jax's scatter_apply is not
differentiable at all).
"""
from __future__ import annotations

import numpy as np

from ..trace import core
from .numpy._util import aval, convert


def elementwise(func, x):
    """func, a function of a scalar, applied to every element of x, in x's dtype (as
    jax's update computation, whose result is the operand's dtype)."""
    from .vmap import vmap
    f = func
    for _ in range(aval(x).ndim):
        f = vmap(f)
    out = f(x)
    xa = aval(out) if core.is_tracer(out) else None
    if xa is not None and xa.shape != aval(x).shape:
        from ..errors import ShardcError
        raise ShardcError(f"apply: func must map a scalar to a scalar, got shape "
                          f"{xa.shape[aval(x).ndim:]}")
    dt = aval(x).dtype
    return out if aval(out).dtype == dt else convert(out, dt)


def apply_counted(x, counts, func, unique=False):
    """x with func applied counts[e] times at each element e (int32 counts of x's
    shape); once where counts > 0 when `unique` (a promise, as jax's unique_indices)."""
    from .numpy._reductions import max as amax
    from .numpy._ufuncs import greater, where
    if int(np.prod(aval(x).shape, dtype=np.int64)) == 0:
        return x
    if unique:
        return where(greater(counts, 0), elementwise(func, x), x)
    from .control import fori_loop

    def round_(i, y):
        return where(greater(counts, i), elementwise(func, y), y)
    return fori_loop(np.int32(0), amax(counts), round_, x)
