"""Threefry-2x32 from shardc's own uint32 ops, with jax's two counter layouts. The
partitionable one (`jax_threefry_partitionable=True`, jax's default): the counters of
element i of a shape are the high and low words of i, computed per element from
iotas (so each shard hashes its own counters and nothing is gathered). The original
one (the flag False): a flat run of counters whose first half is paired with its
second, the hashes concatenated (and, for 8/16/64-bit values, words split or joined).
The flag is read when a program is traced, and is part of shardc.jit's cache key."""
from __future__ import annotations

import math

import numpy as np

from ...errors import ShardcError
from ...ir import dtypes
from ...ops import elementwise as ew
from ...ops import lax as L
from ...ops.bits import bitcast_convert_type_p

U32 = np.dtype(np.uint32)
U64 = np.dtype(np.uint64)
_BLOCK = 2 ** 32 - 1     # the original layout hashes at most this many counters per key
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


def partitionable():
    import jax
    return bool(jax.config.jax_threefry_partitionable)


def iota_2x32_shape(shape):
    """(hi, lo) uint32 words of the row-major flat index of each element of `shape`:
    summed in uint32 while every index fits, in uint64 beyond (as jax's lowering)."""
    if not shape:
        return u32(0), u32(0)
    shape = tuple(int(d) for d in shape)
    n = math.prod(shape)
    if n > 2 ** 64:
        raise ShardcError(f"random bits array of size exceeding 2 ** 64 (shape {shape})")
    dt = U64 if n > 2 ** 32 else U32
    lo = None
    stride = 1
    for d in reversed(range(len(shape))):
        term = L.iota(dt, shape, d)
        if stride != 1:
            term = L.mul(term, L.full((), stride, dt))
        lo = term if lo is None else L.add(term, lo)
        stride *= shape[d]
    if dt == U32:
        return L.full(shape, 0, U32), lo
    return (L.convert_element_type(shr(lo, L.full((), 32, U64)), U32),
            L.convert_element_type(lo, U32))


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
    if not partitionable():
        batch = tuple(L.aval(data).shape[:-1])
        return L.reshape(_hash_flat(data, 2 * math.prod(shape)), (*batch, *shape, 2))
    b1, b2 = _hash(data, shape)
    return jnp.stack([b1, b2], axis=L.aval(b1).ndim)


def _hash_flat(data, n):
    """jax's original layout: the hashes of the counters 0..n-1 under each key of
    `data` (*B, 2), (*B, n) uint32: counter i < n/2 is paired with counter i + n/2 (an
    odd n pairs its middle one with 0 and drops that pair's second hash), the pairs'
    two hashes concatenated."""
    from .. import numpy as jnp
    batch = tuple(L.aval(data).shape[:-1])
    nb, h = len(batch), (n + 1) // 2
    x1 = L.iota(U32, (*batch, h), nb)
    x2 = L.add(x1, u32(h))
    if n % 2:       # the pad counter is 0
        x2 = jnp.where(L.lt(x1, u32(h - 1)), x2, u32(0))
    k1, k2 = data[..., 0], data[..., 1]
    if batch:
        k1, k2 = (L.broadcast_in_dim(k, (*batch, h), range(nb)) for k in (k1, k2))
    else:
        k1, k2 = jnp.reshape(k1, ()), jnp.reshape(k2, ())
    y1, y2 = threefry2x32(k1, k2, x1, x2)
    out = jnp.concatenate([y1, y2], axis=nb)
    return out[..., :n] if n % 2 else out


def _bits_original(data, bit_width, shape):
    """jax's original random bits: ceil(bit_width * size / 32) hashed counters, in
    blocks of _BLOCK under keys split off `data` when there are more."""
    from .. import numpy as jnp
    batch = tuple(L.aval(data).shape[:-1])
    nb, size = len(batch), math.prod(shape)
    count = -(-bit_width * size // 32)
    nblocks, rem = divmod(count, _BLOCK)
    if not nblocks:
        bits = _hash_flat(data, rem)
    else:
        keys = split(data, (nblocks + 1,))
        blocks = _hash_flat(keys[..., :-1, :], _BLOCK)
        bits = jnp.concatenate([L.reshape(blocks, (*batch, nblocks * _BLOCK)),
                                _hash_flat(keys[..., -1, :], rem)], axis=nb)
    dtype = np.dtype(f"uint{bit_width}")
    if bit_width == 64:     # the first half's words are the high ones
        hi, lo = (L.convert_element_type(b, dtype) for b in jnp.split(bits, 2, axis=nb))
        bits = bitor(shl(hi, 32), lo)
    elif bit_width < 32:    # each word's values from its low bits up
        per = 32 // bit_width
        wide = (*batch, count, per)
        words = L.broadcast_in_dim(bits, wide, range(nb + 1))
        shifts = L.mul(L.iota(U32, wide, nb + 1), u32(bit_width))
        parts = ew.and_p.bind(*L._operands(shr(words, shifts), u32(2 ** bit_width - 1)))
        bits = L.convert_element_type(L.reshape(parts, (*batch, count * per)), dtype)
        bits = bits[..., :size]
    return L.reshape(bits, (*batch, *shape))


def fold_in(data, msg):
    """A new key from a key and a uint32 scalar: the hash of the counter (0, msg)."""
    from .. import numpy as jnp
    k1, k2 = jnp.reshape(data[..., 0], ()), jnp.reshape(data[..., 1], ())
    b1, b2 = threefry2x32(k1, k2, u32(0), msg)
    return jnp.stack([b1, b2])


def random_bits(data, bit_width, shape):
    """Random bits of `shape` (after the keys' batch dims, if any)."""
    if not partitionable():
        return _bits_original(data, bit_width, tuple(int(d) for d in shape))
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
