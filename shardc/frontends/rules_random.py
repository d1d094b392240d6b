"""jax's PRNG primitives on shardc's keys (bit-identical: shardc.random implements jax's
partitionable threefry).

Inside a trace a jax key array (dtype key<fry>) is shardc's KeyArray, which is a jax
tracer of shardc's trace, so jax.random's Python code takes it, and keys pass freely
between jax.random and shardc.random. Raw uint32 keys work as they are.
"""
from __future__ import annotations

import jax

from ..api import random as srandom
from ..errors import ShardcError
from ..api.random._keys import KeyArray
from ..trace import core
from .translate import RULES, rule, unsupported


def check_impl(impl):
    """jax keys of another PRNG (rbg, unsafe_rbg) would silently give threefry's
    numbers here: an error instead."""
    name = getattr(getattr(impl, "_impl", impl), "name", impl)
    if name != "threefry2x32":
        raise ShardcError(
            f"jax.random with {name!r} keys inside shardc.jit: shardc implements jax's "
            f"threefry2x32 PRNG only (bit for bit), so these keys' numbers would differ "
            f"from jax's; make keys with the default impl (not impl={name!r}, nor "
            "jax_default_prng_impl set to it)")


def keys_of(x):
    if type(x) is KeyArray:
        return x
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        check_impl(jax.random.key_impl(x))
        return KeyArray(jax.random.key_data(x))
    raise unsupported("a PRNG operation", f"on {type(x).__name__}")


def as_jax(keys):
    if core.current_builder() is None or type(keys) is KeyArray:
        return keys
    return KeyArray(srandom.key_data(keys))


def _data(x):
    return keys_of(x)._data


@rule("random_seed")
def _seed(seed, *, impl):
    check_impl(impl)
    return as_jax(srandom.key(seed))


@rule("random_wrap")
def _wrap(data, *, impl):
    check_impl(impl)
    if type(data) is KeyArray:
        return as_jax(keys_of(data))
    return as_jax(KeyArray(data))


@rule("random_unwrap")
def _unwrap(keys):
    return _data(keys)


@rule("random_bits")
def _bits(keys, *, bit_width, shape):
    from ..api.random._run import run
    from ..api.random import _threefry as tf
    from ..api.random._run import shape_of
    return run(tf.random_bits, _data(keys), bit_width=bit_width, shape=shape_of(tuple(shape)))


@rule("random_split")
def _split(keys, *, shape):
    from ..api.random._run import run
    from ..api.random import _threefry as tf
    from ..api.random._run import shape_of
    return as_jax(KeyArray(run(tf.split, _data(keys), shape=shape_of(tuple(shape)))))


@rule("random_fold_in")
def _fold_in(keys, msgs):
    from ..api.random._base import _fold_in as fold, run
    return as_jax(KeyArray(run(fold, _data(keys), msgs)))


@rule("rng_bit_generator")
def _rng_bit_generator(key, *, shape, dtype, algorithm, out_sharding=None):
    from ..api.lax_special import rng_bit_generator
    from .translate import with_sharding
    new_key, bits = rng_bit_generator(key, shape, dtype, int(algorithm))
    return [new_key, with_sharding(out_sharding, lambda: bits)]


@rule("random_clone", "random_clone_p")
def _clone(keys):
    return keys


# ---------------------------------------------------------------- shape ops on key arrays

def _phys(name, fn):
    """A shape op on key arrays: the op on the uint32 data, whose last dim is 2."""
    base = RULES.get(name)

    def run(*args, **params):
        if not any(type(a) is KeyArray for a in args):
            from .translate import _generic
            return (base or _generic(name))(*args, **params)
        return as_jax(KeyArray(fn(*[_data(a) if type(a) is KeyArray else a
                                    for a in args], **params)))
    RULES[name] = run


def _b(name, *args, **params):
    from .translate import _bind
    return _bind(name, *args, **params)


_phys("slice", lambda d, start_indices, limit_indices, strides=None: _b(
    "slice", d, start_indices=(*start_indices, 0), limit_indices=(*limit_indices, 2),
    strides=None if strides is None else (*strides, 1)))
_phys("squeeze", lambda d, dimensions: _b(
    "reshape", d, shape=tuple(n for i, n in enumerate(core.aval_of(d).shape)
                              if i not in dimensions)))
_phys("reshape", lambda d, new_sizes, dimensions=None, sharding=None: _b(
    "reshape", d, shape=(*new_sizes, 2)))
_phys("broadcast_in_dim", lambda d, shape, broadcast_dimensions, sharding=None: _b(
    "broadcast_in_dim", d, shape=(*shape, 2),
    broadcast_dimensions=(*broadcast_dimensions, len(shape))))
_phys("concatenate", lambda *ds, dimension: _b("concatenate", *ds, dimension=dimension))
_phys("transpose", lambda d, permutation: _b(
    "transpose", d, permutation=(*permutation, len(permutation))))
_phys("copy", lambda d: d)
_phys("copy_p", lambda d: d)


def _select_keys(which, *cases):
    from ..api.lax_ops import select_n
    from .translate import _bind
    w = which
    shape = core.aval_of(cases[0]).shape
    wa = core.aval_of(w)
    if wa.shape != shape:
        w = _bind("broadcast_in_dim", w, shape=shape,
                  broadcast_dimensions=tuple(range(len(wa.shape))))
    return select_n(w, *cases)


_phys("select_n", _select_keys)



@rule("random_gamma")
def _gamma(keys, a, *, log_space):
    """jax's random_gamma: each key split into one key per element of a's dims past the
    keys' (a key per element of `a` when the key is one), as shardc.random.gamma."""
    import math
    from ..api.random._gamma import _random_gamma
    from ..api.vmap import vmap
    data = _data(keys)
    kshape = tuple(core.aval_of(data).shape[:-1])
    if not kshape:
        return _random_gamma(data, a, log_space)
    ashape = tuple(core.aval_of(a).shape)
    n = math.prod(kshape)
    from .translate import _bind
    flat_d = _bind("reshape", data, shape=(n, 2))
    flat_a = _bind("reshape", a, shape=(n, *ashape[len(kshape):]))
    out = vmap(lambda d, x: _random_gamma(d, x, log_space))(flat_d, flat_a)
    return _bind("reshape", out, shape=ashape)
__all__ = ["keys_of", "as_jax"]
