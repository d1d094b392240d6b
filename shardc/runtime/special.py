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

from jax._src.api import _nan_check_posthook
from jax._src.config import debug_infs, debug_nans, disable_jit  # noqa: F401

__all__ = ["check", "primitive_fun", "disable_jit"]


def check(dispatcher, args, kwargs, out):
    """Raise FloatingPointError, as jax does, if a switch is on and `out` holds a NaN
    (or inf) from a call of `dispatcher`."""
    if debug_nans.value or debug_infs.value:
        _nan_check_posthook(dispatcher, args, kwargs, out)


def primitive_fun(name):
    """A primitive's dispatcher's `_fun`: what the hook names in its error."""
    def fun(*args):
        raise AssertionError("a primitive's dispatcher is never called with jit disabled")
    fun._apply_primitive = True
    fun.__name__ = fun.__qualname__ = name
    return fun
