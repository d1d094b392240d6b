"""jax's PRNG implementations, bit for bit: threefry2x32 (jax's default), rbg and
unsafe_rbg (XLA's bit generator, keyed by threefry's seeds and splits), and
threefry4x32, philox2x32 and philox4x32 (Random123's other hashes, _counters).

Each is a PRNGImpl of four functions on uint32 key data of shape (*B, key_size), B the
batch dims of a key array. A batch of keys behaves as jax's vmap of the function over B
makes it: threefry hashes each key's counters, while XLA's bit generator draws every
example's bits from the first key of the batch (jax's batching rule of
rng_bit_generator), so rbg's numbers over a batch of keys are not per key, as in jax.
Samplers call `split`, `random_bits` and `fold_in` here on a KeyArray, which carries
its impl.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from ...errors import ShardcError
from ...ops import lax as L
from . import _counters
from . import _threefry as tf


class PRNGImpl(NamedTuple):
    name: str
    key_size: int
    seed: Callable          # integer scalar -> (key_size,) data
    split: Callable         # (data, shape) -> (*B, *shape, key_size)
    fold_in: Callable       # (data, uint32 scalar) -> data
    random_bits: Callable   # (data, bit_width, shape) -> (*B, *shape) bits

    def __repr__(self):
        return f"PRNGImpl({self.name})"

    @property
    def jax(self):
        """jax's PRNGImpl of the same name (its key arrays' impl)."""
        from jax._src.random import prng
        return prng.prngs[self.name]


# ---------------------------------------------------------------- rbg and unsafe_rbg

def _batch(data):
    return tuple(L.aval(data).shape[:-1])


def _halves(data):
    """(*B, 4) key data as its two threefry keys, (*B, 2, 2)."""
    return L.reshape(data, (*_batch(data), 2, 2))


def _rbg_seed(s):
    from .. import numpy as jnp
    half = tf.seed(s)
    return jnp.concatenate([half, half])


def _rbg_split(data, shape):
    """Each half split by threefry; new key i is the two halves' key i side by side."""
    from .. import numpy as jnp
    b = _batch(data)
    keys = tf.split(_halves(data), shape)           # (*B, 2, *shape, 2)
    keys = jnp.moveaxis(keys, len(b), len(b) + len(shape))
    return L.reshape(keys, (*b, *shape, 4))


def _rbg_fold_in(data, msg):
    from ..vmap import vmap
    return _each(data, lambda d: L.reshape(
        vmap(lambda h: tf.fold_in(h, msg))(_halves(d)), (4,)))


def _each(data, fn):
    """fn on each key of a batch, as jax's vmap over the batch dims runs it."""
    from ..vmap import vmap
    for _ in _batch(data):
        fn = vmap(fn)
    return fn(data)


def _rng(key, shape, dtype):
    from ..lax_special import rng_bit_generator
    return rng_bit_generator(key, shape, dtype)


def _first(data):
    """The first key of a batch: the one XLA's bit generator draws from under vmap."""
    b = _batch(data)
    if not b:
        return data
    flat = L.reshape(data, (math.prod(b), 4))
    return L.reshape(L.slice(flat, (0, 0), (1, 4)), (4,))


def _rbg_bits(data, bit_width, shape):
    if bit_width not in (8, 16, 32, 64):
        raise ShardcError("requires 8-, 16-, 32- or 64-bit field width.")
    return _rng(_first(data), (*_batch(data), *shape), np.dtype(f"uint{bit_width}"))[1]


def _unsafe_split(data, shape):
    """Every tenth word of a draw of 10 * n keys (XLA's generator as a hash)."""
    b, n = _batch(data), math.prod(shape)
    keys = _rng(_first(data), (*b, 10 * n, 4), np.dtype(np.uint32))[1]
    keys = L.slice(keys, (0,) * (len(b) + 2), (*b, 10 * n, 4), (1,) * len(b) + (10, 1))
    return L.reshape(keys, (*b, *shape, 4))


def _unsafe_fold_in(data, msg):
    """The key xor the last of ten draws seeded by the message."""
    from .. import numpy as jnp
    bits = _rng(_rbg_seed(msg), (10, 4), np.dtype(np.uint32))[1]
    return jnp.bitwise_xor(data, bits[-1])


THREEFRY = PRNGImpl("threefry2x32", 2, tf.seed, tf.split, tf.fold_in, tf.random_bits)
RBG = PRNGImpl("rbg", 4, _rbg_seed, _rbg_split, _rbg_fold_in, _rbg_bits)
UNSAFE_RBG = PRNGImpl("unsafe_rbg", 4, _rbg_seed, _unsafe_split, _unsafe_fold_in, _rbg_bits)
IMPLS = {i.name: i for i in (THREEFRY, RBG, UNSAFE_RBG, *(
    PRNGImpl(name, *fns) for name, fns in _counters.FUNCTIONS.items()))}


def resolve(impl) -> PRNGImpl:
    """Ours for a name, jax's PRNGImpl or PRNGSpec, or a key dtype (as jax's
    resolve_prng_impl); jax's default (jax_default_prng_impl) for None."""
    if impl is None:
        import jax
        impl = jax.config.jax_default_prng_impl
    if isinstance(impl, PRNGImpl):
        return impl
    name = impl if isinstance(impl, str) else getattr(
        getattr(impl, "_impl", impl), "name", None)
    if name not in IMPLS:
        raise ShardcError(f"unrecognized PRNG implementation {impl!r}: shardc implements "
                          f"jax's {', '.join(map(repr, IMPLS))} (bit for bit)")
    return IMPLS[name]


def key_dtype(impl: PRNGImpl):
    from jax._src.random import prng
    return prng.KeyTy(impl.jax)
