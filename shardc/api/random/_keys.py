"""PRNG keys: raw uint32 (..., 2) arrays (PRNGKey) and typed keys (`key`).

Outside a trace a typed key is jax's own key array (so it interoperates with
jax.random); inside one it is a KeyArray over a traced uint32 (..., 2) array, whose
shape is the keys' batch shape and whose dtype is jax's key<fry>. To jax it is a leaf,
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

IMPL = _jprng.prngs["threefry2x32"]
KEY_DTYPE = _jprng.KeyTy(IMPL)
JaxKey = _jprng.PRNGKeyArray
U32 = np.dtype(np.uint32)


def _aval(x):
    from ..numpy._util import aval
    return aval(x)


class KeyArray(jax.core.Tracer):
    """Typed PRNG keys inside a trace: `shape` is the batch shape, `dtype` key<fry>;
    the uint32 key data is `_data`, of shape (*shape, 2)."""
    __slots__ = ("_data",)

    def __init__(self, data):
        self._data = data

    @property
    def aval(self):
        """jax's type of the keys: their data's without its last dim (in explicit mode
        the data's sharding types the keys, as jax's key arrays are typed)."""
        if not core.is_tracer(self._data):
            return jax.core.ShapedArray(self.shape, KEY_DTYPE)
        a = self._data.aval
        spec = tuple(a.sharding.spec)[:a.ndim - 1]
        return a.update(shape=a.shape[:-1], dtype=KEY_DTYPE, weak_type=False,
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

    dtype = KEY_DTYPE

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __getitem__(self, idx):
        idx = idx if isinstance(idx, tuple) else (idx,)
        if any(i is Ellipsis for i in idx):
            raise ShardcError("indexing a key array with ... is not supported; index its "
                              "leading dims")
        return KeyArray(self._data[idx])

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def reshape(self, *shape):
        from .. import numpy as jnp
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return KeyArray(jnp.reshape(self._data, (*shape, 2)))

    def __repr__(self):
        return f"KeyArray(shape={self.shape}, dtype=key<fry>)"


def _unflatten(_, children):
    (data,) = children
    if isinstance(data, jax.core.Tracer):
        if core.is_tracer(data):
            return KeyArray(data)
        # jax's own tracer (values a jax transform traces, rebuilt by shardc's
        # flattening): jax's key array over it, as jax would rebuild it
        return _jprng.random_wrap(data, impl=IMPL)
    if isinstance(data, jax.Array) and getattr(data, "dtype", None) == U32 and \
            data.ndim >= 1 and data.shape[-1] == 2:
        return JaxKey(IMPL, data)       # a concrete result: a jax key array again
    return KeyArray(data)


# a leaf to jax (jax's loops and jits inside a trace carry it as a key); shardc's own
# flattening (trace.pytree) takes it apart into its uint32 data
pytree.expand(KeyArray, lambda k: (k._data,), lambda children: _unflatten(None, children))


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
    for x in leaves:
        name = getattr(getattr(x, "_impl", None), "name", "threefry2x32") \
            if _is_jax_key(x) else "threefry2x32"
        if name != "threefry2x32":      # its numbers would silently be threefry's
            raise ShardcError(f"a jax key array of the {name!r} PRNG was passed to shardc; "
                              "shardc implements jax's threefry2x32 PRNG only (bit for "
                              "bit): make the keys with the default impl")
    return jax.tree_util.tree_map(
        lambda x: KeyArray(x._base_array) if _is_jax_key(x) else x, tree, is_leaf=_is_jax_key)


def has_jax_keys(tree):
    return any(map(_is_jax_key, jax.tree_util.tree_leaves(tree, is_leaf=_is_jax_key)))


def make_typed(data):
    """Typed keys over uint32 data (..., 2): a jax key array if concrete."""
    return _unflatten(None, (data,))


def key_data_of(key, name, allow_batched=False):
    """(uint32 data of shape (*batch, 2), whether `key` was typed), as jax's
    _check_prng_key: raw keys must be uint32 arrays whose last dim is 2."""
    if isinstance(key, JaxKey):
        data, typed = key._base_array, True
    elif type(key) is KeyArray:
        data, typed = key._data, True
    else:
        if isinstance(key, (list, tuple)):
            raise ShardcTypeError(f"unexpected PRNG key type {type(key)}")
        if not core.is_tracer(key) and not all(hasattr(key, a) for a in ("ndim", "shape",
                                                                         "dtype")):
            raise ShardcTypeError(
                "JAX encountered invalid PRNG key data: expected key_data to have ndim, "
                f"shape, and dtype attributes. Got {key}")
        a = _aval(key)
        if a.ndim < 1 or a.shape[-1] != 2:
            raise ShardcTypeError(
                "JAX encountered invalid PRNG key data: expected key_data.shape to end "
                f"with (2,); got shape={a.shape} for impl=PRNGImpl(threefry2x32)")
        if a.dtype != U32:
            raise ShardcTypeError(
                "JAX encountered invalid PRNG key data: expected key_data.dtype = uint32; "
                f"got dtype={a.dtype}")
        data, typed = key, False
    batch = _aval(data).shape[:-1]
    if not allow_batched and batch:
        raise ArgumentError(f"{name} accepts a single key, but was given a key array of "
                          f"shape {batch} != (). Use jax.vmap for batching.")
    return data, typed


def as_output(data, typed):
    return make_typed(data) if typed else data
