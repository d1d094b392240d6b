"""Checks of shardc.jit's arguments, and brief descriptions of pytrees for messages."""
from __future__ import annotations

import inspect

import numpy as np

from ..errors import ArgumentError, ShardcTypeError
from ..ir.program import Aval
from ..trace import pytree as _tree


def check_static(sig, pos, nums, names, donate=(), donate_names=()):
    """jax.jit's checks of static_argnums/static_argnames/donate_argnums against the
    signature: a position past the last parameter, or a name it does not have, is an
    error (unless the function takes *args / **kwargs)."""
    for what, ns in (("static_argnums", nums), ("donate_argnums", donate)):
        for i in ns:
            if not isinstance(i, (int, np.integer)) or isinstance(i, bool):
                raise ShardcTypeError(f"{what} must be ints, got {i!r}")
    if sig is None:
        return
    kinds = {p.kind for p in sig.parameters.values()}
    P = inspect.Parameter
    for what, ns in (("static_argnums", nums), ("donate_argnums", donate)):
        if P.VAR_POSITIONAL not in kinds and any(not -len(pos) <= i < len(pos) for i in ns):
            raise ArgumentError(f"shardc.jit: {what}={tuple(ns)} but the function takes "
                                f"only {len(pos)} positional argument(s)")
    for what, ns in (("static_argnames", names), ("donate_argnames", donate_names)):
        for n in ns:
            if not isinstance(n, str):
                raise ShardcTypeError(f"{what} must be strings, got {n!r}")
        if P.VAR_KEYWORD not in kinds:
            bad = sorted(n for n in ns if n not in sig.parameters
                         or sig.parameters[n].kind == P.POSITIONAL_ONLY)
            if bad:
                raise ArgumentError(f"shardc.jit: {what} {bad} are not parameters of the "
                                    f"function (it takes "
                                    f"{', '.join(sig.parameters) or 'none'})")


class _Short:
    """A pytree leaf shown briefly in messages: arrays as their type (f32[1000]), not
    their values."""

    def __init__(self, x):
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            try:
                self.text = str(Aval(tuple(x.shape), np.dtype(x.dtype)))
            except Exception:    # a dtype shardc has no short name for
                self.text = f"{type(x).__name__}{list(x.shape)}"
        else:
            r = repr(x)
            self.text = r if len(r) <= 60 else r[:57] + "..."

    def __repr__(self):
        return self.text


def summary(tree):
    leaves, td = _tree.tree_flatten(tree, is_leaf=lambda x: x is None)
    text = repr(_tree.tree_unflatten(td, [_Short(x) for x in leaves]))
    return text if len(text) <= 300 else text[:297] + "..."
