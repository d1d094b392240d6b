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
    CPU (as jax.debug.callback passes them); the operands past the user's values only
    order the call, and an ordered call returns its token."""
    n = cb.nargs
    done = (np.array(False),) if cb.ordered else ()

    def call(*arrays):
        cpu = jax.local_devices(backend="cpu")[0]
        cb(*jax.device_put(arrays[:n], cpu))
        return done
    return call
