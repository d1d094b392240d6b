"""shardc.numpy's and shardc.lax's structural functions on typed PRNG keys, as jax's.

jax lets key arrays through the functions that move, pick or copy elements (reshape,
concatenate, where, take, flip, dynamic_slice, ...) and compares them with == and !=;
arithmetic on keys is its TypeError. A key is its uint32 data's last dim, so each such
function on keys is the function vmapped over that dim of every key operand: the data
of every key moves together, which is the keys' semantics by construction. Comparisons
then ask every word to agree (==) or one to differ (!=).
"""
from __future__ import annotations

from ...errors import ArgumentError, ShardcTypeError
from ...trace import pytree
from ._keys import JaxKey, KeyArray, as_keys, make_typed

NUMPY = (
    "append", "array", "array_split", "asarray", "atleast_1d", "atleast_2d", "atleast_3d",
    "block", "broadcast_arrays", "broadcast_to", "column_stack", "concat", "concatenate",
    "copy", "delete", "diagonal", "dsplit", "dstack", "empty_like", "expand_dims", "flip",
    "fliplr", "flipud", "full", "full_like", "hsplit", "hstack", "insert", "meshgrid",
    "moveaxis", "pad", "ravel", "repeat", "reshape", "resize", "roll", "rot90", "select",
    "split", "squeeze", "stack", "swapaxes", "take", "take_along_axis", "tile", "transpose",
    "tril", "triu", "unstack", "vsplit", "vstack", "where", "zeros_like",
    "equal", "not_equal", "array_equal")
LAX = (
    "broadcast", "broadcast_in_dim", "collapse", "concatenate", "dynamic_index_in_dim",
    "dynamic_slice", "dynamic_slice_in_dim", "dynamic_update_index_in_dim",
    "dynamic_update_slice", "dynamic_update_slice_in_dim", "expand_dims", "gather",
    "index_in_dim", "reshape", "rev", "select", "select_n", "slice", "slice_in_dim",
    "squeeze", "transpose", "eq", "ne")
# the operands that become elements of the result (positions, or keyword names): jax
# converts each to the keys' dtype, which only keys are (a number there is its
# ValueError, not a key made of the number's bits)
_VALUES = {
    "where": (1, 2, "x", "y"), "select": (1, 2, "choicelist", "default"),
    "insert": (2, "values"), "append": (0, 1, "arr", "values"), "array": (0, "object"),
    "asarray": (0, "a"), "block": (0, "arrays"), "column_stack": (0, "tup"),
    "concat": (0, "arrays"), "concatenate": (0, "arrays", "operands"),
    "dstack": (0, "tup"), "hstack": (0, "tup"), "stack": (0, "arrays"),
    "vstack": (0, "tup"), "select_n": (1, 2, 3, 4, 5, 6, 7, 8),
    "dynamic_update_slice": (0, 1, "operand", "update"),
    "dynamic_update_slice_in_dim": (0, 1, "operand", "update"),
    "dynamic_update_index_in_dim": (0, 1, "operand", "update")}
_ALL_WORDS = ("equal", "array_equal", "eq")    # keys are equal where all words are
_ANY_WORD = ("not_equal", "ne")


def _is_key(x):
    return type(x) is KeyArray or isinstance(x, JaxKey)


def _keys_in(x, found):
    """The keys of `x`, itself or in its (nested) lists and tuples, appended to found."""
    if _is_key(x):
        found.append(x)
    elif type(x) in (list, tuple):
        for y in x:
            _keys_in(y, found)
    return found


def _all_keys(x):
    """Every leaf of `x` (nested lists and tuples) is keys."""
    if type(x) in (list, tuple):
        return all(map(_all_keys, x))
    return _is_key(x)


def _replaced(x, words):
    """`x` with each key in it replaced by the next of `words`."""
    if _is_key(x):
        return next(words)
    if type(x) in (list, tuple):
        return type(x)(_replaced(y, words) for y in x)
    return x


def on_keys(namespace: dict, names) -> None:
    """Let each function named in `names` of `namespace` take typed keys, as jax's."""
    for name in names:
        namespace[name] = _through_keys(namespace[name], name)


def _through_keys(fun, name):
    def wrapper(*args, **kwargs):
        if not _keys_in((args, tuple(kwargs.values())), []):
            return fun(*args, **kwargs)
        return _on_key_data(fun, name, args, kwargs)
    # not functools.wraps: the namespace's wrap_public still makes it an API boundary
    wrapper.__name__, wrapper.__qualname__ = fun.__name__, fun.__qualname__
    wrapper.__doc__, wrapper.__module__ = fun.__doc__, fun.__module__
    return wrapper


def _on_key_data(fun, name, args, kwargs):
    from ..vmap import vmap
    if name == "pad" and kwargs.get("mode", args[2] if len(args) > 2 else "constant") \
            == "constant":
        raise ShardcTypeError("Cannot convert_element_type from int32 to key<fry>: "
                              "jnp.pad pads keys only by copying them (mode='edge', ...)")
    if name in _ALL_WORDS + _ANY_WORD and not all(map(_is_key, args[:2])):
        # (compared word by word with a number, a key would silently equal its data)
        kinds = ", ".join(str(getattr(a, "dtype", type(a).__name__)) for a in args[:2])
        raise ShardcTypeError(f"{name} does not accept dtypes {kinds}.")
    for where in _VALUES.get(name, ()):
        v = kwargs.get(where) if type(where) is str else \
            args[where] if where < len(args) else None
        if v is not None and not _all_keys(v):
            raise ArgumentError(f"{name}: an operand that becomes elements of the result "
                                "mixes PRNG keys with other values; make every such "
                                "operand keys (jax.random.key_data reads a key's words)")
    keys = [as_keys(k) for k in _keys_in((args, tuple(kwargs.values())), [])]
    impl = keys[0].impl
    if any(k.impl is not impl for k in keys):
        raise ShardcTypeError(f"{name}: keys of different PRNG implementations "
                              f"({', '.join(sorted({str(k.dtype) for k in keys}))})")

    def on_words(*words):
        words = iter(words)
        a = _replaced(args, words)
        return fun(*a, **{k: _replaced(v, words) for k, v in kwargs.items()})
    outs = vmap(on_words, in_axes=-1, out_axes=-1)(*(k._data for k in keys))
    return pytree.tree_map(lambda o: _result(o, name, impl), outs)


def _result(out, name, impl):
    from .. import numpy as snp
    if name in _ALL_WORDS:
        return snp.all(out, axis=-1)
    if name in _ANY_WORD:
        return snp.any(out, axis=-1)
    return make_typed(KeyArray(out, impl))
