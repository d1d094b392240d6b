"""jax's debugging switches on shardc's dispatched calls, with jax's behaviour.

`jax_debug_nans` / `jax_debug_infs`: jaxlib's C++ dispatch runs jax's post-call hook
after every cached call while either is on. The hook checks the floating outputs and
reads the dispatcher's `_fun`: for a primitive, it raises "invalid value (nan)
encountered in <name>"; for a jitted function, it re-runs the function de-optimized
(ops one by one, each checked) to find the op, as jax.jit does. A call that misses
the cache runs in Python, so `check` runs the same hook on it.

`jax.disable_jit()`: the C++ dispatch then calls the function it was given, so a
jitted function runs as plain Python; single ops still compile (as jax's
apply_primitive, which turns the switch off around them)."""
from __future__ import annotations

import jax
import numpy as np
from jax._src.config import debug_infs, debug_nans, disable_jit  # noqa: F401

from ..ir import dtypes

__all__ = ["check", "check_op", "primitive_fun", "disable_jit"]


def check(dispatcher, args, kwargs, out):
    """Raise FloatingPointError, as jax's hook does, if a switch is on and `out` holds a
    NaN (or inf) from a call of `dispatcher`."""
    if not (debug_nans.value or debug_infs.value):
        return
    kind = _invalid(out)
    if kind is None:
        return
    f = getattr(dispatcher, "_fun", None)
    if f is None or getattr(f, "_apply_primitive", False):
        raise FloatingPointError(f"invalid value ({kind}) encountered in "
                                 f"{getattr(f, '__qualname__', 'jit')}")
    print("Invalid nan value encountered in the output of a jax.jit function. "
          "Calling the de-optimized version.")
    try:
        f(*args, **kwargs)
    except (FloatingPointError, ZeroDivisionError) as e:
        raise e from None
    raise FloatingPointError(
        f"('jit', '{kind}'). Because jax_config.debug_nans.value and/or "
        "config.jax_debug_infs is set, the de-optimized function (i.e., the function as "
        "if the `jit` decorator were removed) was called in an attempt to get a more "
        "precise error message. However, the de-optimized function did not produce "
        "invalid values during its execution. This behavior can result from `jit` "
        "optimizations causing the invalid value to be produced. It may also arise from "
        "having nan/inf literals as inputs or outputs, like `jax.jit(lambda ...: "
        "jax.numpy.nan)(...)`. \n\nIt may be possible to avoid the invalid value by "
        "removing the `jit` decorator, at the cost of losing optimizations. \n\nIf you "
        "see this error, consider opening a bug report at https://github.com/jax-ml/jax.")


def check_op(name, out):
    """check() for a result with no dispatcher: one op's, named `name`."""
    if debug_nans.value or debug_infs.value:
        kind = _invalid(out)
        if kind is not None:
            raise FloatingPointError(f"invalid value ({kind}) encountered in {name}")


def _invalid(out):
    """'nan' or 'inf' if a floating leaf of `out` holds one the switches look for."""
    for leaf in jax.tree_util.tree_leaves(out):
        if not isinstance(leaf, jax.Array) or not dtypes.is_inexact(leaf.dtype):
            continue
        for shard in leaf.addressable_shards:
            v = np.asarray(shard.data)
            if debug_nans.value and np.isnan(v).any():
                return "nan"
            if debug_infs.value and np.isinf(v).any():
                return "inf"
    return None


def primitive_fun(name):
    """A primitive's dispatcher's `_fun`: what the hook names in its error."""
    def fun(*args):
        raise AssertionError("a primitive's dispatcher is never called with jit disabled")
    fun._apply_primitive = True
    fun.__name__ = fun.__qualname__ = name
    return fun
