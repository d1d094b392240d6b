"""How a sampler runs: traced in place inside a trace; otherwise compiled once per
static parameters by shardc.jit and run (as jax.random's samplers are jitted)."""
from __future__ import annotations

import functools
import operator

import numpy as np

from ...errors import ArgumentError, ShardcTypeError
from ...ir import dtypes
from ...runtime import backend as runtime
from ...trace import core, pytree

_JITS: dict = {}


def run(fn, *args, **static):
    if core.current_builder() is not None and core.folds(pytree.tree_leaves(args)):
        with core.outside_traces():          # ensure_compile_time_eval: run it now
            return run(fn, *args, **static)
    if core.current_builder() is not None:
        # as arguments of jax's jitted samplers, Python scalars are weakly typed arrays
        # (so `x ** p` is lax.pow, not an unrolled integer power, as in jax)
        args = [_weak(a) if type(a) in (int, float) else a for a in args]
        return fn(*args, **static)
    k = (fn, tuple(sorted(static.items())), runtime.config_key())
    j = _JITS.get(k)
    if j is None:
        from ..jit import internal_jit
        j = _JITS[k] = internal_jit(functools.partial(fn, **static), fn.__name__.strip("_"))
    return j(*args)


def _weak(x):
    from ...ops import lax as L
    a = core.aval_of(x)
    return L.full((), x, a.dtype, weak=True)


def shape_of(shape, name="shape"):
    """A static shape tuple (a bare int is a 1-d shape, as core.canonicalize_shape)."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        dims = tuple(operator.index(d) for d in shape)    # not 2.0, as jax
    except TypeError:
        raise ShardcTypeError("Shapes must be 1D sequences of concrete values of integer "
                              f"type, got {shape!r}.") from None
    if any(d < 0 for d in dims):
        raise ArgumentError(f"negative dimensions are not allowed in {name}, got "
                              f"{dims}.")
    return dims


def float_dtype(dtype, name):
    from ...errors import ArgumentError
    d = dtypes.default_float() if dtype is None else dtypes.canonicalize(dtype)
    if not dtypes.is_float(d):
        raise ArgumentError(f"dtype argument to `{name}` must be a float dtype, got {d}")
    return d
