"""Host callbacks of a lowered program (debug.print/callback, pure/io_callback): the
list jaxlib's compile takes, and the table it calls through.

The lowering names each callback by its position in the list of them it returns
(shardc.lower.emit.Lowering.host_call), so equal traces lower to equal text. XLA gets
one trampoline per position, calling the table's current entry: a program shared by
several traces of equal text (an eager transform traces on every call) runs each time
with the functions of the trace that called it (see HostTable.swap)."""
from __future__ import annotations

import re

import jax
import numpy as np

from ..errors import ShardcError

_INDEX = re.compile(r'backend_config = \{index = (\d+) : ui64\}, '
                    r'call_target_name = "xla_ffi(?:_partitioned)?_python_cpu_callback"')


class HostTable:
    """The host functions an executable calls, by the index its text names them by."""
    __slots__ = ("calls", "own")

    def __init__(self, calls):
        self.calls = list(calls)
        self.own = tuple(calls)     # the compiled trace's

    def owns(self, calls) -> bool:
        """Whether `calls` are the functions the program was compiled with."""
        return len(calls) == len(self.own) and all(a is b for a, b in zip(calls, self.own))

    def swap(self, calls) -> list:
        """Call `calls` from now on (another trace of the same text); the old ones back."""
        old, self.calls = self.calls, list(calls)
        return old


def host_callbacks(text: str, calls=()):
    """(HostTable, [what XLA calls]) for a lowered program and the host functions its
    lowering listed (`calls`), or (None, []) if it calls none."""
    used = [int(i) for i in _INDEX.findall(text)] if "_python_cpu_callback" in text else []
    if not used:
        return None, []
    if max(used) >= len(calls):
        raise ShardcError("this lowered program calls a Python function (debug.print or a "
                          "callback) that no longer exists here: compile it from its "
                          "trace (`.lower().compile()`), not from saved text")
    table = HostTable(calls)
    return table, [_host(table, i) for i in range(len(calls))]


def _host(table, i):
    """What XLA calls for index `i`: NumPy arrays in, the table's function on jax arrays
    on the host CPU (as jax's callbacks pass them); the operands past the user's values
    only order the call. An ordered call returns its token first, then what the
    function returned, checked against the types it declared (jax's errors)."""
    def call(*arrays):
        cb = table.calls[i]
        try:
            cpu = jax.local_devices(backend="cpu")[0]
            outs = cb(*jax.device_put(arrays[:cb.nargs], cpu))
            done = (np.array(False),) if cb.ordered else ()
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
