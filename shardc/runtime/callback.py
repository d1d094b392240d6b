"""Host callbacks of a lowered program (debug.print/callback): the list jaxlib's
compile takes, and the program text with its callbacks numbered into that list.

The lowering names each callback by its global id (shardc.ops.callback.CALLBACKS);
jaxlib's CPU callback custom call names it by its position in the executable's list."""
from __future__ import annotations

import re

import jax
import numpy as np

from ..errors import ShardcError
from ..ops.callback import CALLBACKS

_INDEX = re.compile(r'(backend_config = \{index = )(\d+)( : ui64\}, '
                    r'call_target_name = "xla_ffi(?:_partitioned)?_python_cpu_callback")')


def host_callbacks(text: str):
    """(text with local indices, [host callables]) for a lowered program."""
    if "_python_cpu_callback" not in text:
        return text, []
    order: dict = {}

    def renumber(m):
        k = order.setdefault(int(m.group(2)), len(order))
        return f"{m.group(1)}{k}{m.group(3)}"
    text = _INDEX.sub(renumber, text)
    hosts = []
    for i in order:
        cb = CALLBACKS.get(i)
        if cb is None:
            raise ShardcError("this lowered program calls a Python function (debug.print or "
                              "debug.callback) that no longer exists: compile it from its "
                              "trace (`.lower().compile()`), not from saved text")
        hosts.append(_host(cb))
    return text, hosts


def _host(cb):
    """What XLA calls: NumPy arrays in, the user's function on jax arrays on the host
    CPU (as jax's callbacks pass them); the operands past the user's values only
    order the call. An ordered call returns its token first, then what the function
    returned, checked against the types it declared (jax's errors)."""
    n = cb.nargs
    done = (np.array(False),) if cb.ordered else ()

    def call(*arrays):
        try:
            cpu = jax.local_devices(backend="cpu")[0]
            outs = cb(*jax.device_put(arrays[:n], cpu))
            return done + (() if cb.results is None else check_results(cb.results, outs))
        except BaseException as e:
            _FAILED.append((cb, e))
            raise
    return call


_FAILED: list = []      # (callback, its exception) since the last run that raised


def raised(e: BaseException) -> BaseException:
    """The error to raise for a run that failed with `e`: if a host callback raised,
    that error, at the line that made the callback (XLA's own is an internal
    traceback); else `e`."""
    if not _FAILED:
        return e
    cb, err = _FAILED[0]
    _FAILED.clear()
    msg = f"{cb.name} raised {type(err).__name__}: {err}"
    out = ShardcError(msg, loc=cb.loc)
    out.__cause__ = err
    return out


def check_results(avals, outs) -> tuple:
    """A pure/io callback's flat results as NumPy arrays of the declared types."""
    if len(outs) != len(avals):
        raise RuntimeError("Mismatched number of outputs from callback. "
                           f"Expected: {len(avals)}, Actual: {len(outs)}")
    got = []
    for i, (o, a) in enumerate(zip(outs, avals)):
        o = np.asarray(o)
        o = o.astype(jax.dtypes.canonicalize_dtype(o.dtype), copy=False)
        if o.shape != tuple(a.shape):
            raise RuntimeError(f"Incorrect output shape for return value #{i}: "
                               f"Expected: {tuple(a.shape)}, Actual: {o.shape}")
        if o.dtype != a.dtype:
            raise RuntimeError(f"Incorrect output dtype for return value #{i}: "
                               f"Expected: {np.dtype(a.dtype)}, Actual: {o.dtype}")
        got.append(o)
    return tuple(got)
