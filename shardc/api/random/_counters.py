"""jax's other counter-based PRNGs from Random123, bit for bit: threefry4x32 (20 rounds
of Threefish over 4 words), philox2x32 and philox4x32 (10 rounds of multiply-xor).

Each hashes counters under a key as jax's threefry2x32 does: element i of a shape has
the counter words (hi, lo) of i (iota_2x32_shape, so each shard hashes its own), and a
batch of keys (*B, key_size) hashes every counter under every key, as jax's vmap of the
impl does. The word layouts of seed, split, fold_in and bits are jax's
(jax/_src/random/{threefry4x32,philox2x32,philox4x32}.py); the hashes are also the
frontend's translations of jax's primitives of the same names.
"""
from __future__ import annotations

import numpy as np

from ...errors import ShardcError
from ...ops import lax as L
from . import _threefry as tf

U32 = np.dtype(np.uint32)
_ROT4 = ((10, 26), (11, 21), (13, 27), (23, 5), (6, 20), (17, 11), (25, 10), (18, 20))


def _u32(v):
    return L.full((), v, U32)


def _rotl(x, r):
    return tf.bitor(tf.shl(x, r), tf.shr(x, 32 - r))


def broadcast(*xs):
    """uint32 operands as arrays of one shape (scalars broadcast, as jax's
    broadcasting_shape_rule lets them)."""
    from .. import numpy as jnp
    xs = [L.full((), x, U32) if isinstance(x, (int, np.integer)) else x for x in xs]
    for x in xs:
        if L.aval(x).dtype != U32:
            raise ShardcError(f"the counter-based hashes take uint32 arrays; got "
                              f"{L.aval(x).dtype}")
    return jnp.broadcast_arrays(*xs)


def threefry4x32(k0, k1, k2, k3, x0, x1, x2, x3):
    """The Threefry-4x32 hash: 20 rounds, a key injection after every 4."""
    k0, k1, k2, k3, x0, x1, x2, x3 = broadcast(k0, k1, k2, k3, x0, x1, x2, x3)
    ks = [k0, k1, k2, k3, tf.xor(tf.xor(tf.xor(tf.xor(k0, k1), k2), k3), 0x1BD11BDA)]
    x = [L.add(x0, k0), L.add(x1, k1), L.add(x2, k2), L.add(x3, k3)]
    for rnd in range(20):
        r0, r1 = _ROT4[rnd % 8]
        a, b, c, d = (0, 1, 2, 3) if rnd % 2 == 0 else (0, 3, 2, 1)
        x[a] = L.add(x[a], x[b])
        x[b] = tf.xor(x[a], _rotl(x[b], r0))
        x[c] = L.add(x[c], x[d])
        x[d] = tf.xor(x[c], _rotl(x[d], r1))
        if rnd % 4 == 3:
            j = rnd // 4
            x = [L.add(x[i], ks[(1 + i + j) % 5]) for i in range(4)]
            x[3] = L.add(x[3], _u32(1 + j))
    return x


def _mulhilo(m, x):
    """The low and high words of the 64-bit product m * x."""
    from ..lax_special import mulhi
    m = L.full(L.aval(x).shape, m, U32)
    return L.mul(m, x), mulhi(m, x)


def philox2x32(k0, x0, x1):
    """The Philox-2x32 hash: 10 rounds, the key bumped by a Weyl constant between."""
    k0, x0, x1 = broadcast(k0, x0, x1)
    for rnd in range(10):
        if rnd:
            k0 = L.add(k0, 0x9E3779B9)
        lo, hi = _mulhilo(0xD256D193, x0)
        x0, x1 = tf.xor(tf.xor(hi, x1), k0), lo
    return [x0, x1]


def philox4x32(k0, k1, x0, x1, x2, x3):
    """The Philox-4x32 hash: 10 rounds, the key bumped by Weyl constants between."""
    k0, k1, x0, x1, x2, x3 = broadcast(k0, k1, x0, x1, x2, x3)
    for rnd in range(10):
        if rnd:
            k0, k1 = L.add(k0, 0x9E3779B9), L.add(k1, 0xBB67AE85)
        lo0, hi0 = _mulhilo(0xD2511F53, x0)
        lo1, hi1 = _mulhilo(0xCD9E8D57, x2)
        x0, x1, x2, x3 = tf.xor(tf.xor(hi1, x1), k0), lo1, tf.xor(tf.xor(hi0, x3), k1), lo0
    return [x0, x1, x2, x3]


# ---------------------------------------------------------------- the impls' functions

def _key_words(data, shape):
    """The key words of `data` (*B, n) and the counter words (hi, lo) of `shape`, each
    of shape (*B, *shape), and zeros of that shape."""
    batch = tuple(L.aval(data).shape[:-1])
    full, nb = (*batch, *shape), len(batch)
    words = [L.broadcast_in_dim(L.reshape(L.slice(data, (0,) * nb + (i,),
                                                  (*batch, i + 1)), batch), full, range(nb))
             for i in range(L.aval(data).shape[-1])]
    hi, lo = (L.broadcast_in_dim(c, full, range(nb, len(full)))
              for c in tf.iota_2x32_shape(shape))
    return words, (hi, lo), L.full(full, 0, U32)


def _stack(words):
    from .. import numpy as jnp
    return jnp.stack(words, axis=L.aval(words[0]).ndim)


def _bits(outs, bit_width, hi_lo):
    """Random bits from the hash's words: 64-bit values join two words (or xors of
    two), narrower ones are the xor of all (truncated below 32)."""
    if bit_width not in (8, 16, 32, 64):
        raise ShardcError("requires 8-, 16-, 32- or 64-bit field width.")
    dtype = np.dtype(f"uint{bit_width}")
    if bit_width == 64:
        hi, lo = (L.convert_element_type(w, dtype) for w in hi_lo(outs))
        return tf.bitor(tf.shl(hi, 32), lo)
    bits = outs[0]
    for w in outs[1:]:
        bits = tf.xor(bits, w)
    return bits if bit_width == 32 else L.convert_element_type(bits, dtype)


def _seed_words(s):
    """The seed's (hi, lo) uint32 words, as jax's seeds split it."""
    hi_lo = tf.seed(s)
    return L.reshape(L.slice(hi_lo, (0,), (1,)), ()), L.reshape(L.slice(hi_lo, (1,), (2,)), ())


def _fold_words(data, msg):
    words, _, zeros = _key_words(data, ())
    return words, zeros, L.broadcast_in_dim(msg, L.aval(zeros).shape, ())


# threefry4x32: the key's four words, the counters (hi, lo, 0, 0) for bits and
# (0, 0, hi, lo) for split
def _t4_seed(s):
    hi, lo = _seed_words(s)
    z = _u32(0)
    return _stack(threefry4x32(hi, lo, z, z, z, z, z, z))


def _t4_split(data, shape):
    ks, (hi, lo), z = _key_words(data, shape)
    return _stack(threefry4x32(*ks, z, z, hi, lo))


def _t4_fold_in(data, msg):
    ks, z, m = _fold_words(data, msg)
    return _stack(threefry4x32(*ks, z, z, z, m))


def _t4_bits(data, bit_width, shape):
    ks, (hi, lo), z = _key_words(data, shape)
    return _bits(threefry4x32(*ks, hi, lo, z, z), bit_width,
                 lambda o: (tf.xor(o[0], o[2]), tf.xor(o[1], o[3])))


# philox2x32: a one-word key, the counters (hi, lo); a new key is the first word
def _p2_seed(s):
    hi, lo = _seed_words(s)
    return _stack(philox2x32(_u32(0), hi, lo)[:1])


def _p2_split(data, shape):
    (k,), (hi, lo), _ = _key_words(data, shape)
    return _stack(philox2x32(k, hi, lo)[:1])


def _p2_fold_in(data, msg):
    (k,), z, m = _fold_words(data, msg)
    return _stack(philox2x32(k, z, m)[:1])


def _p2_bits(data, bit_width, shape):
    (k,), (hi, lo), _ = _key_words(data, shape)
    return _bits(philox2x32(k, hi, lo), bit_width, lambda o: o[:2])


# philox4x32: a two-word key, the counters (hi, lo, 0, 0) for bits and (0, 0, hi, lo)
# for split; a new key is the first two words
def _p4_seed(s):
    hi, lo = _seed_words(s)
    z = _u32(0)
    return _stack(philox4x32(z, z, hi, lo, z, z)[:2])


def _p4_split(data, shape):
    ks, (hi, lo), z = _key_words(data, shape)
    return _stack(philox4x32(*ks, z, z, hi, lo)[:2])


def _p4_fold_in(data, msg):
    ks, z, m = _fold_words(data, msg)
    return _stack(philox4x32(*ks, z, z, z, m)[:2])


def _p4_bits(data, bit_width, shape):
    ks, (hi, lo), z = _key_words(data, shape)
    return _bits(philox4x32(*ks, hi, lo, z, z), bit_width, lambda o: o[:2])


FUNCTIONS = {   # name: (key_size, seed, split, fold_in, random_bits)
    "threefry4x32": (4, _t4_seed, _t4_split, _t4_fold_in, _t4_bits),
    "philox2x32": (1, _p2_seed, _p2_split, _p2_fold_in, _p2_bits),
    "philox4x32": (2, _p4_seed, _p4_split, _p4_fold_in, _p4_bits),
}
