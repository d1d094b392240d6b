"""The LU-based parts of shardc.numpy.linalg (solve, inv, det, slogdet) and the matrix
helpers the others share, as jax.numpy.linalg computes them."""
from __future__ import annotations

import numpy as np

from ...errors import ShardcError
from ...ir import dtypes
from ...ops import lax as L
from .. import lax_linalg as lax_linalg
from ._linalg import matmul
from ._shapes import reshape
from ._util import aval, broadcast_shapes, broadcast_to, check_arraylike, promote_dtypes_inexact


def inexact(name, *xs):
    check_arraylike(name, *xs)
    return promote_dtypes_inexact(*xs)


def square(name, a):
    s = aval(a).shape
    if len(s) < 2 or s[-1] != s[-2]:
        raise ShardcError(f"{name}: argument must have shape [..., n, n], got {s}")


def mT(x):
    nd = aval(x).ndim
    return L.transpose(x, (*range(nd - 2), nd - 1, nd - 2))


def diagonal(x, offset=0):
    """The diagonal of each matrix (last two dims): one gather, as jnp.diagonal's
    x[..., i, j]."""
    from ...ops.indexing import gather_p
    from ._creation import asarray
    s = aval(x).shape
    nb = len(s) - 2
    m, n = s[-2:]
    size = max(0, min(m + min(offset, 0), n - max(offset, 0)))
    if size == 0:
        return L.zeros((*s[:-2], 0), aval(x).dtype)
    k = np.arange(size, dtype=np.int32)
    idx = np.stack([k, k + offset] if offset >= 0 else [k - offset, k], axis=1)
    return gather_p.bind(x, asarray(idx), offset_dims=tuple(range(nb)),
                         collapsed_slice_dims=(nb, nb + 1), start_index_map=(nb, nb + 1),
                         index_vector_dim=1, slice_sizes=(*s[:-2], 1, 1))


def permute_rows(perm, x):
    """x[..., perm, :] (perm (..., m) of the same batch dims) as a one-hot product."""
    pa = aval(perm)
    m = pa.shape[-1]
    onehot = L.convert_element_type(
        L.eq(L.broadcast_in_dim(perm, (*pa.shape, m), tuple(range(pa.ndim))),
             L.iota(dtypes.int32, (*pa.shape, m), pa.ndim)), aval(x).dtype)
    return matmul(onehot, x)


def lu_solve(lu, perm, b):
    x = permute_rows(perm, b)
    x = lax_linalg.triangular_solve(lu, x, left_side=True, lower=True, unit_diagonal=True)
    return lax_linalg.triangular_solve(lu, x, left_side=True, lower=False)


def solve(a, b):
    """x with a @ x = b (b a vector if 1-D, else a stack of matrices), by LU."""
    a, b = inexact("solve", a, b)
    sa, sb = aval(a).shape, aval(b).shape
    if len(sa) < 2:
        raise ShardcError(f"solve: left hand array must be at least two dimensional; got "
                          f"a.shape={sa}")
    square("solve", a)
    if len(sb) > 1 and len(sa) == len(sb) + 1 and sa[-1] == sb[-1] and sa[-1] != sb[-2]:
        raise ShardcError(f"Invalid shapes for solve: {sa}, {sb}. Prior to JAX v0.5.0, this "
                          "would have been treated as a batched 1-dimensional solve. To "
                          "recover this behavior, use solve(a, b[..., None]).squeeze(-1).")
    vec = len(sb) == 1
    if vec:
        b = reshape(b, (sb[0], 1))
        sb = aval(b).shape
    if sb[-2] != sa[-1]:
        raise ShardcError(f"solve: a {sa} and b {sb if not vec else sb[:1]} do not fit: b "
                          f"needs {sa[-1]} rows")
    batch = broadcast_shapes("solve", sa[:-2], sb[:-2])
    a = broadcast_to(a, (*batch, *sa[-2:]))
    b = broadcast_to(b, (*batch, *sb[-2:]))
    lu, _, perm = lax_linalg.lu(a)
    x = lu_solve(lu, perm, b)
    return reshape(x, aval(x).shape[:-1]) if vec else x


def inv(a):
    """The inverse of each square matrix (solve against the identity, as jax)."""
    (a,) = inexact("inv", a)
    square("inv", a)
    s = aval(a).shape
    n = s[-1]
    eye = L.convert_element_type(L.eq(L.iota(dtypes.int32, (n, n), 0),
                                      L.iota(dtypes.int32, (n, n), 1)), aval(a).dtype)
    return solve(a, broadcast_to(eye, s))
