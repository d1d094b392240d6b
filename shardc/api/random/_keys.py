"""PRNG keys: raw uint32 (..., n) arrays (PRNGKey; n is 2 for threefry, 4 for rbg) and
typed keys (`key`).

Outside a trace a typed key is jax's own key array (so it interoperates with
jax.random); inside one it is a KeyArray over a traced uint32 (..., n) array and its
PRNG impl (_impls), whose shape is the keys' batch shape and whose dtype is jax's
key<fry> (key<rbg>, key<urbg>). To jax it is a leaf,
as jax's key arrays are; shardc's transforms flatten it to its data (trace.pytree). A
KeyArray rebuilt from concrete data (a jit's result) becomes a jax key array again.
A KeyArray is also a jax tracer of shardc's trace (as shardc's Tracer is), so jax.random
and jax.numpy take it inside a trace and their primitives on it are translated
(shardc.frontends.rules_random).

Uses jax's private prng module (jax 0.10.2, pinned in pyproject) only to convert jax
key arrays to and from their uint32 data and to name their dtype.
"""
from __future__ import annotations

import jax
import numpy as np
from jax._src.random import prng as _jprng

from ...errors import ArgumentError, ShardcError, ShardcTypeError
from ...trace import core, pytree
from . import _impls
from ._impls import THREEFRY

JaxKey = _jprng.PRNGKeyArray
U32 = np.dtype(np.uint32)


def _aval(x):
    from ..numpy._util import aval
    return aval(x)


class KeyArray(jax.core.Tracer):
    """Typed PRNG keys inside a trace: `shape` is the batch shape, `dtype` jax's key
    type of `impl`; the uint32 key data is `_data`, of shape (*shape, impl.key_size)."""
    __slots__ = ("_data", "impl")

    def __init__(self, data, impl=THREEFRY):
        self._data = data
        self.impl = impl

    @property
    def dtype(self):
        return _impls.key_dtype(self.impl)

    @property
    def aval(self):
        """jax's type of the keys: their data's without its last dim (in explicit mode
        the data's sharding types the keys, as jax's key arrays are typed)."""
        if not core.is_tracer(self._data):
            return jax.core.ShapedArray(self.shape, self.dtype)
        a = self._data.aval
        spec = tuple(a.sharding.spec)[:a.ndim - 1]
        return a.update(shape=a.shape[:-1], dtype=self.dtype, weak_type=False,
                        sharding=a.sharding.update(spec=jax.sharding.PartitionSpec(*spec)))
    _trace = property(lambda self: core.JAX_BRIDGE["jax_trace"])

    @property
    def shape(self):
        return tuple(_aval(self._data).shape[:-1])

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        return int(np.prod(self.shape))

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        if any(isinstance(i, jax.core.Tracer) and not core.is_tracer(i)
               and type(i) is not KeyArray for i in idx):
            # an index of a jax transformation's trace (a jax fori_loop body shardc
            # runs): jax's indexing, which takes these keys in as a value from outside
            return jax.core.Tracer.__getitem__(self, idx if len(idx) > 1 else idx[0])
        if any(i is Ellipsis for i in idx):
            raise ShardcError("indexing a key array with ... is not supported; index its "
                              "leading dims")
        return KeyArray(self._data[idx], self.impl)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def reshape(self, *shape):
        from .. import numpy as jnp
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return KeyArray(jnp.reshape(self._data, (*shape, self.impl.key_size)), self.impl)

    def __repr__(self):
        return f"KeyArray(shape={self.shape}, dtype={self.dtype})"


def _unflatten(impl, children):
    (data,) = children
    if isinstance(data, jax.core.Tracer):
        if core.is_tracer(data):
            return KeyArray(data, impl)
        # jax's own tracer (values a jax transform traces, rebuilt by shardc's
        # flattening): jax's key array over it, as jax would rebuild it
        return _jprng.random_wrap(data, impl=impl.jax)
    if isinstance(data, jax.Array) and getattr(data, "dtype", None) == U32 and \
            data.ndim >= 1 and data.shape[-1] == impl.key_size:
        return JaxKey(impl.jax, data)       # a concrete result: a jax key array again
    return KeyArray(data, impl)


# a leaf to jax (jax's loops and jits inside a trace carry it as a key); shardc's own
# flattening (trace.pytree) takes it apart into its uint32 data, its impl the aux data
pytree.expand(KeyArray, lambda k: ((k._data,), k.impl), _unflatten)


def is_typed_key(x):
    return type(x) is KeyArray or isinstance(x, JaxKey)


def _is_jax_key(x):
    return isinstance(x, JaxKey)


def wrap_jax_keys(tree):
    """`tree` with each jax key array as a KeyArray over its uint32 data (at the jit
    boundary, so the keys flatten to arrays shardc traces)."""
    leaves = jax.tree_util.tree_leaves(tree, is_leaf=_is_jax_key)
    if not any(map(_is_jax_key, leaves)):
        return tree
    return jax.tree_util.tree_map(
        lambda x: KeyArray(x._base_array, impl_of(x)) if _is_jax_key(x) else x, tree,
        is_leaf=_is_jax_key)


def impl_of(x):
    """Our PRNGImpl of a jax key array (an error for a PRNG shardc does not have, whose
    numbers would silently be another's)."""
    return _impls.resolve(x._impl)


def has_jax_keys(tree):
    return any(map(_is_jax_key, jax.tree_util.tree_leaves(tree, is_leaf=_is_jax_key)))


def make_typed(keys):
    """Typed keys from a KeyArray: a jax key array if its data is concrete."""
    data = keys._data
    if not isinstance(data, jax.core.Tracer) and not isinstance(data, jax.Array):
        data = jax.device_put(np.asarray(data))         # NumPy data (wrap_key_data)
    return _unflatten(keys.impl, (data,))


def keys_of(key, name, allow_batched=False):
    """(`key` as a KeyArray, whether it was typed), as jax's _check_prng_key: raw keys
    are uint32 arrays whose last dim is the default impl's key size."""
    if isinstance(key, JaxKey):
        keys, typed = KeyArray(key._base_array, impl_of(key)), True
    elif type(key) is KeyArray:
        keys, typed = key, True
    else:
        if isinstance(key, (list, tuple)):
            raise ShardcTypeError(f"unexpected PRNG key type {type(key)}")
        if not core.is_tracer(key) and not all(hasattr(key, a) for a in ("ndim", "shape",
                                                                         "dtype")):
            raise ShardcTypeError(
                "JAX encountered invalid PRNG key data: expected key_data to have ndim, "
                f"shape, and dtype attributes. Got {key}")
        a = _aval(key)
        impl = _impls.resolve(None)
        if a.ndim < 1 or a.shape[-1] != impl.key_size:
            raise ShardcTypeError(
                "JAX encountered invalid PRNG key data: expected key_data.shape to end "
                f"with ({impl.key_size},); got shape={a.shape} for impl={impl!r}")
        if a.dtype != U32:
            raise ShardcTypeError(
                "JAX encountered invalid PRNG key data: expected key_data.dtype = uint32; "
                f"got dtype={a.dtype}")
        keys, typed = KeyArray(key, impl), False
    if not allow_batched and keys.shape:
        raise ArgumentError(f"{name} accepts a single key, but was given a key array of "
                          f"shape {keys.shape} != (). Use jax.vmap for batching.")
    return keys, typed


def as_output(keys, typed):
    """Keys a function returns: typed if its key was, else their raw data."""
    return make_typed(keys) if typed else keys._data


# ---------------------------------------------------------------- the PRNG's functions
# on KeyArrays (samplers call these; each dispatches on the keys' impl)

def as_keys(x):
    """A KeyArray or a jax key array, as a KeyArray."""
    return KeyArray(x._base_array, impl_of(x)) if isinstance(x, JaxKey) else x


def keys_split(keys, shape):
    """`shape` new keys from each key: a KeyArray of shape (*keys.shape, *shape)."""
    return KeyArray(keys.impl.split(keys._data, tuple(shape)), keys.impl)


def keys_bits(keys, bit_width, shape):
    """Random bits of `shape` (after the keys' batch dims)."""
    return keys.impl.random_bits(keys._data, bit_width, tuple(shape))


def keys_fold_in(keys, msg):
    return KeyArray(keys.impl.fold_in(keys._data, msg), keys.impl)
