"""jax's PRNG primitives on shardc's keys (bit-identical: shardc.random implements each
of jax's PRNGs), and the counter-based hashes under them (threefry2x32, threefry4x32,
philox2x32, philox4x32, iota_2x32_shape) as shardc's own.

Inside a trace a jax key array (dtype key<fry>, key<rbg>, ...) is shardc's KeyArray,
which is a jax tracer of shardc's trace, so jax.random's Python code takes it, and keys
pass freely between jax.random and shardc.random. Raw uint32 keys work as they are.
"""
from __future__ import annotations

import jax
import numpy as np

from ..api.random import _counters, _impls
from ..api.random import _threefry as tf
from ..api.random._keys import KeyArray, impl_of, keys_bits, keys_fold_in, keys_split
from ..api.random._run import run, shape_of
from ..trace import core
from .translate import RULES, rule, unsupported


def keys_of(x):
    if type(x) is KeyArray:
        return x
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        return KeyArray(x._base_array, impl_of(x))
    raise unsupported("a PRNG operation", f"on {type(x).__name__}")


def as_jax(keys):
    """Keys as a rule returns them: a KeyArray inside a trace."""
    if core.current_builder() is None or type(keys) is KeyArray:
        return keys
    return keys_of(keys)


def _data(x):
    return keys_of(x)._data


@rule("random_seed")
def _seed(seed, *, impl):
    from ..api.random import key
    return as_jax(key(seed, impl=_impls.resolve(impl)))


@rule("random_wrap")
def _wrap(data, *, impl):
    if type(data) is KeyArray:
        return as_jax(data)
    return as_jax(KeyArray(data, _impls.resolve(impl)))


@rule("random_unwrap")
def _unwrap(keys):
    return _data(keys)


@rule("random_bits")
def _bits(keys, *, bit_width, shape):
    return run(keys_bits, keys_of(keys), bit_width=bit_width, shape=shape_of(tuple(shape)))


def _split_data(keys, shape):
    return keys_split(keys, shape)._data


@rule("random_split")
def _split(keys, *, shape):
    keys = keys_of(keys)
    return as_jax(KeyArray(run(_split_data, keys, shape=shape_of(tuple(shape))), keys.impl))


def _fold_data(keys, msgs):
    """jax's fold_in on a batch of keys and messages: vmapped over the dims they
    share, a size-1 (or absent) dim of one side taken whole (as jax's
    iterated_vmap_binary_bcast; XLA's bit generator under vmap depends on it)."""
    from ..api.vmap import vmap
    from ..ops import lax as L
    msgs = L.convert_element_type(msgs, np.dtype(np.uint32))
    ks, ms = tuple(keys.shape), tuple(L.aval(msgs).shape)
    if ms and ks and len(ms) != len(ks):
        raise unsupported("random_fold_in", f"on keys {ks} and messages {ms}")
    fold = lambda k, m: keys_fold_in(k, m)._data  # noqa: E731
    nd = max(len(ks), len(ms))
    k_axes = [d < len(ks) and (not ms or ks[d] != 1 or ms[d] == 1) for d in range(nd)]
    m_axes = [d < len(ms) and (not ks or ms[d] != 1 or ks[d] == 1) for d in range(nd)]
    for kb, mb in reversed(list(zip(k_axes, m_axes))):
        fold = vmap(fold, in_axes=(0 if kb else None, 0 if mb else None))
    # a size-1 dim taken whole is squeezed out of its side
    if ks and not all(k_axes):
        keys = KeyArray(L.reshape(keys._data, (*[n for n, b in zip(ks, k_axes) if b],
                                               keys.impl.key_size)), keys.impl)
    if ms and not all(m_axes):
        msgs = L.reshape(msgs, tuple(n for n, b in zip(ms, m_axes) if b))
    return fold(keys, msgs)


@rule("random_fold_in")
def _fold_in(keys, msgs):
    keys = keys_of(keys)
    return as_jax(KeyArray(run(_fold_data, keys, msgs), keys.impl))


@rule("rng_bit_generator")
def _rng_bit_generator(key, *, shape, dtype, algorithm, out_sharding=None):
    from ..api.lax_special import rng_bit_generator
    from .translate import with_sharding
    new_key, bits = rng_bit_generator(key, shape, dtype, int(algorithm))
    return [new_key, with_sharding(out_sharding, lambda: bits)]


@rule("threefry2x32")
def _threefry2x32(k1, k2, x1, x2):
    return tf.threefry2x32(*_counters.broadcast(k1, k2, x1, x2))


rule("threefry4x32")(_counters.threefry4x32)
rule("philox2x32")(_counters.philox2x32)
rule("philox4x32")(_counters.philox4x32)


@rule("iota_2x32_shape")
def _iota_2x32_shape(*, shape):
    return list(tf.iota_2x32_shape(shape_of(tuple(shape))))


@rule("random_clone", "random_clone_p")
def _clone(keys):
    return keys


# ---------------------------------------------------------------- shape ops on key arrays

_BASE: dict = {}
_BASE_UNSTACK = RULES["unstack"]


def _phys(name, fn):
    """A shape op on key arrays: the op on the uint32 data, whose last dim is the
    impl's key size (`fn(size, *operands, **params)`; `_BASE[name]` is the op's rule
    for other values)."""
    base = _BASE[name] = RULES.get(name)

    def run(*args, **params):
        keys = [a for a in args if type(a) is KeyArray]
        if not keys:
            from .translate import _generic
            return (base or _generic(name))(*args, **params)
        impl = keys[0].impl
        return as_jax(KeyArray(fn(impl.key_size, *[_data(a) if type(a) is KeyArray else a
                                                   for a in args], **params), impl))
    RULES[name] = run


def _b(name, *args, **params):
    from .translate import _bind
    return _bind(name, *args, **params)


_phys("slice", lambda n, d, start_indices, limit_indices, strides=None: _b(
    "slice", d, start_indices=(*start_indices, 0), limit_indices=(*limit_indices, n),
    strides=None if strides is None else (*strides, 1)))
_phys("squeeze", lambda n, d, dimensions: _b(
    "reshape", d, shape=tuple(m for i, m in enumerate(core.aval_of(d).shape)
                              if i not in dimensions)))
_phys("reshape", lambda n, d, new_sizes, dimensions=None, sharding=None: _b(
    "reshape", d, shape=(*new_sizes, n)))
_phys("broadcast_in_dim", lambda n, d, shape, broadcast_dimensions, sharding=None: _b(
    "broadcast_in_dim", d, shape=(*shape, n),
    broadcast_dimensions=(*broadcast_dimensions, len(shape))))
_phys("concatenate", lambda n, *ds, dimension: _b("concatenate", *ds, dimension=dimension))
_phys("transpose", lambda n, d, permutation: _b(
    "transpose", d, permutation=(*permutation, len(permutation))))
_phys("rev", lambda n, d, dimensions: _b("rev", d, dimensions=tuple(dimensions)))


def _zero_like_index(starts):
    from .rules_indexing import _lit
    return _lit(0, core.aval_of(starts[0]).dtype if starts else np.dtype(np.int32))


_phys("dynamic_slice", lambda n, d, *starts, slice_sizes: _b(
    "dynamic_slice", d, *starts, _zero_like_index(starts), slice_sizes=(*slice_sizes, n)))
_phys("dynamic_update_slice", lambda n, d, u, *starts: _b(
    "dynamic_update_slice", d, u, *starts, _zero_like_index(starts)))
_phys("copy", lambda n, d: d)


def _base(name):
    from .translate import _generic
    return _BASE.get(name) or _generic(name)


def _gather_keys(n, d, idx, *, dimension_numbers, slice_sizes, **kw):
    dn = dimension_numbers
    out_rank = len(dn.offset_dims) + core.aval_of(idx).ndim - 1
    dn = dn._replace(offset_dims=(*dn.offset_dims, out_rank))
    return _base("gather")(d, idx, dimension_numbers=dn, slice_sizes=(*slice_sizes, n), **kw)


def _scatter_keys(n, d, idx, u, *, dimension_numbers, **kw):
    dn = dimension_numbers
    dn = dn._replace(update_window_dims=(*dn.update_window_dims, core.aval_of(u).ndim - 1))
    return _base("scatter")(d, idx, u, dimension_numbers=dn, **kw)


def _stack_keys(n, *ds, axis):
    rank = core.aval_of(ds[0]).ndim     # the keys' rank + 1: a stack's
    return _base("stack")(*ds, axis=axis + rank if axis < 0 else axis)


_phys("gather", _gather_keys)
_phys("scatter", _scatter_keys)
_phys("stack", _stack_keys)


@rule("unstack")
def _unstack_keys(x, *, axis):
    if type(x) is not KeyArray:
        return _BASE_UNSTACK(x, axis=axis)
    rank = len(x.shape)
    parts = _BASE_UNSTACK(x._data, axis=axis + rank if axis < 0 else axis)
    return [as_jax(KeyArray(p, x.impl)) for p in parts]


def _compare_keys(name, reduce):
    base = RULES.get(name)

    def run(x, y):
        if type(x) is not KeyArray and type(y) is not KeyArray:
            from .translate import _generic
            return (base or _generic(name))(x, y)
        same = _b(name, _data(x), _data(y))
        last = core.aval_of(same).ndim - 1
        return _b(reduce, same, axes=(last,))
    RULES[name] = run


_compare_keys("eq", "reduce_and")
_compare_keys("ne", "reduce_or")
_phys("copy_p", lambda n, d: d)


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


_phys("select_n", lambda n, which, *cases: _select_keys(which, *cases))



@rule("random_gamma")
def _gamma(keys, a, *, log_space):
    """jax's random_gamma: each key split into one key per element of a's dims past the
    keys' (a key per element of `a` when the key is one), as shardc.random.gamma."""
    from ..api.random._gamma import _random_gamma
    return _random_gamma(keys_of(keys), a, log_space)


__all__ = ["keys_of", "as_jax"]
