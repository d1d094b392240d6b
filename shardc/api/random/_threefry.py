"""Threefry-2x32 from shardc's own uint32 ops, as jax's partitionable scheme
(`jax_threefry_partitionable=True`): the counters of element i of a shape are the
high and low words of i, computed per element from iotas (so each shard hashes its
own counters and nothing is gathered)."""
from __future__ import annotations

import math

import numpy as np

from ...errors import ShardcError
from ...ir import dtypes
from ...ops import elementwise as ew
from ...ops import lax as L
from ...ops.bits import bitcast_convert_type_p

U32 = np.dtype(np.uint32)
_ROT = ((13, 15, 26, 6), (17, 29, 16, 24))


def xor(x, y):
    return ew.xor_p.bind(*L._operands(x, y))


def shl(x, y):
    return ew.shift_left_p.bind(*L._operands(x, y))


def shr(x, y):
    return ew.shift_right_logical_p.bind(*L._operands(x, y))


def bitor(x, y):
    return ew.or_p.bind(*L._operands(x, y))


def bitcast(x, dtype):
    return bitcast_convert_type_p.bind(x, new_dtype=np.dtype(dtype))


def u32(v):
    return L.full((), v, U32)


def _rotl(x, r):
    """x rotated left by r (a uint32 scalar, traced in the rolled loop)."""
    return bitor(shl(x, r), shr(x, L.sub(u32(32), r) if not isinstance(r, int) else 32 - r))


def threefry2x32(k1, k2, x1, x2):
    """The Threefry-2x32 hash of counters (x1, x2) under key (k1, k2): 20 rounds with
    a key injection every 4. As jax's CPU lowering, the 5 blocks of rounds are a rolled
    loop carrying the key schedule and rotations: so XLA fuses the float code that
    follows as it does jax's, and the values stay bit-identical."""
    from ..control import fori_loop
    ks = [k1, k2, xor(xor(k1, k2), 0x1BD11BDA)]
    x = [L.add(x1, ks[0]), L.add(x2, ks[1])]
    rots = [np.array(r, U32) for r in _ROT]

    def step(i, state):
        x, ks, rots = state
        for j in range(4):
            r = L.reshape(L.slice(rots[0], (j,), (j + 1,)), ())
            x0 = L.add(x[0], x[1])
            x = [x0, xor(x0, _rotl(x[1], r))]
        i1 = L.convert_element_type(L.add(i, 1), U32)
        new_x = [L.add(x[0], ks[0]), L.add(L.add(x[1], ks[1]), i1)]
        return new_x, ks[1:] + ks[:1], rots[1:] + rots[:1]
    from .. import numpy as jnp
    x, _, _ = fori_loop(0, 5, step, (x, ks[1:] + ks[:1], [jnp.asarray(r) for r in rots]))
    return x


def iota_2x32_shape(shape):
    """(hi, lo) uint32 words of the row-major flat index of each element of `shape`."""
    if not shape:
        return u32(0), u32(0)
    shape = tuple(int(d) for d in shape)
    if math.prod(shape) > 2 ** 32:
        raise ShardcError(f"random arrays of more than 2**32 elements (shape {shape}) are "
                          "not supported yet")
    lo = None
    stride = 1
    for d in reversed(range(len(shape))):
        term = L.iota(U32, shape, d)
        if stride != 1:
            term = L.mul(term, stride)
        lo = term if lo is None else L.add(term, lo)
        stride *= shape[d]
    return L.full(shape, 0, U32), lo


def _hash(data, shape):
    """threefry2x32 of the counters of `shape` under each key of `data` (*B, 2): two
    uint32 arrays of shape (*B, *shape). Batched keys (B non-empty, as under jax.vmap)
    hash every counter under every key."""
    from .. import numpy as jnp
    batch = tuple(L.aval(data).shape[:-1])
    k1, k2 = data[..., 0], data[..., 1]
    c1, c2 = iota_2x32_shape(shape)
    if batch:
        full = (*batch, *shape)
        nb = len(batch)
        k1, k2 = (L.broadcast_in_dim(k, full, range(nb)) if shape else k for k in (k1, k2))
        c1, c2 = (L.broadcast_in_dim(c, full, range(nb, len(full))) for c in (c1, c2))
    else:
        k1, k2 = jnp.reshape(k1, ()), jnp.reshape(k2, ())
    return threefry2x32(k1, k2, c1, c2)


def split(data, shape):
    """`shape` new keys (uint32 (*B, *shape, 2)) from each key of `data`."""
    from .. import numpy as jnp
    b1, b2 = _hash(data, shape)
    return jnp.stack([b1, b2], axis=L.aval(b1).ndim)


def fold_in(data, msg):
    """A new key from a key and a uint32 scalar: the hash of the counter (0, msg)."""
    from .. import numpy as jnp
    k1, k2 = jnp.reshape(data[..., 0], ()), jnp.reshape(data[..., 1], ())
    b1, b2 = threefry2x32(k1, k2, u32(0), msg)
    return jnp.stack([b1, b2])


def random_bits(data, bit_width, shape):
    """Random bits of `shape` (after the keys' batch dims, if any)."""
    b1, b2 = _hash(data, shape)
    dtype = np.dtype(f"uint{bit_width}")
    if bit_width == 64:
        hi = L.convert_element_type(b1, dtype)
        lo = L.convert_element_type(b2, dtype)
        return bitor(shl(hi, 32), lo)
    bits = xor(b1, b2)
    return bits if bit_width == 32 else L.convert_element_type(bits, dtype)


def seed(s):
    """Key data from an integer seed: its high and low 32-bit words (jax's
    threefry_seed; a 32-bit seed's high word is 0)."""
    from .. import numpy as jnp
    a = L.aval(s)
    if not dtypes.is_int(a.dtype):
        raise ShardcError(f"PRNG key seed must be an integer; got {a}")
    s = L.convert_element_type(s, a.dtype)   # strong
    if a.dtype.itemsize == 8:
        hi = L.convert_element_type(shr(s, 32), U32)
    else:
        hi = u32(0)
    lo = L.convert_element_type(s, U32)
    return jnp.stack([hi, lo])
