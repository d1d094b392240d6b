"""debug.print and debug.callback: a Python function run on the host with values.

Outside a trace they run now; traced (shardc.jit, shard_map, vmap, grad, control
flow) they become a debug_callback op that runs with the runtime values each time the
program does (shardc.ops.callback says where). As jax's, the function gets jax arrays
on the host CPU; leaves of the arguments that are not arrays or scalars pass as they are.
"""
from __future__ import annotations

import copy
import logging
import string
import sys

import jax
import numpy as np

from ..errors import ArgumentError
from ..ops.callback import emit_flat
from ..trace import core
from ..trace import pytree as _tree


def _is_dynamic(x) -> bool:
    return core.is_tracer(x) or isinstance(x, (jax.Array, np.ndarray, np.generic, bool, int,
                                               float, complex))


def _emit(fn, args, kwargs, ordered, partitioned, name):
    leaves, tree = _tree.tree_flatten((args, kwargs))
    dyn = [i for i, x in enumerate(leaves) if _is_dynamic(x)]
    static = [None if i in set(dyn) else x for i, x in enumerate(leaves)]   # no tracers kept

    def flat(*vals):
        full = list(static)
        for i, v in zip(dyn, vals):
            full[i] = v
        a, k = _tree.tree_unflatten(tree, full)
        fn(*a, **k)

    emit_flat(flat, [leaves[i] for i in dyn], ordered, partitioned, name)


def callback(callback=None, *args, ordered: bool = False, partitioned: bool = False,
             **kwargs):
    """jax.debug.callback: call `callback(*args, **kwargs)` with the runtime values.

    `ordered`: in program order with the other ordered callbacks (one device only, as
    jax); `partitioned`: outside shard_map, once per device with its shard instead of
    once with the whole value. Also `callback(ordered=...)(fn, *args)`."""
    def _callback(fn, *c_args, **c_kwargs):
        if not callable(fn):
            raise TypeError("first argument to jax.debug.callback must be callable, but "
                            f"got an object of type {type(fn)}")
        _emit(fn, c_args, c_kwargs, ordered, partitioned,
              f"debug.callback({getattr(fn, '__name__', type(fn).__name__)})")

    if callback is not None:
        _callback(callback, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError("debug_callback received unexpected arguments in the two-call form:"
                        f" {args=} {kwargs=}")
    return _callback


class _FormatChecker(string.Formatter):
    """Checks a format string against its arguments without formatting (jax's)."""

    def format_field(self, value, format_spec):
        return ""

    def check_unused_args(self, used_args, args, kwargs):
        unused = [a for i, a in enumerate(args) if i not in used_args]
        if unused:
            raise ValueError(f"Unused positional arguments to `jax.debug.print`: {unused}")
        unused = [k for k in kwargs if k not in used_args]
        if unused:
            raise ValueError(f"Unused keyword arguments to `jax.debug.print`: {unused}. You "
                             "may be passing an f-string (i.e, `f\"{x}\"`) into "
                             "`jax.debug.print` and instead should pass in a regular string.")


_checker = _FormatChecker()


def print(fmt=None, *args, ordered: bool = False, partitioned: bool = False,  # noqa: A001
          skip_format_check: bool = False, **kwargs):
    """jax.debug.print: `fmt.format(*args, **kwargs)` of the runtime values, on stdout.

    Options as debug.callback's; `skip_format_check` skips checking `fmt` against the
    arguments now. Also `print(ordered=...)(fmt, *args)`."""
    return _print(fmt, args, kwargs, ordered, partitioned, skip_format_check, None)


LOGGER = logging.getLogger("shardc.debug")


def log(fmt=None, *args, ordered: bool = False, partitioned: bool = False,
        skip_format_check: bool = False, **kwargs):
    """jax.debug.log: as print, but each message is a logging record at INFO (logger
    "shardc.debug") naming the line that called log."""
    from ..errors import user_loc
    loc = user_loc()
    record = LOGGER.makeRecord(LOGGER.name, logging.INFO, loc[0] if loc else "(unknown file)",
                               loc[1] if loc else 0, "", (), None)
    return _print(fmt, args, kwargs, ordered, partitioned, skip_format_check, record)


def _print(fmt, args, kwargs, ordered, partitioned, skip_format_check, record):
    def _debug_print(fmt, *c_args, **c_kwargs):
        if not skip_format_check:
            try:
                _checker.format(fmt, *c_args, **c_kwargs)
            except (ValueError, KeyError, IndexError, AttributeError, TypeError) as e:
                msg = f"{type(e).__name__}: {e}" if not isinstance(e, ValueError) else str(e)
                raise ArgumentError(f"debug.print: the format string {fmt!r} does not fit "
                                    f"its arguments: {msg}") from None
        has_placeholders = False
        if fmt:
            _, field, *_ = next(iter(string.Formatter().parse(fmt)))
            has_placeholders = field is not None
        options = np.get_printoptions()

        def show(*a, **k):
            if has_placeholders:
                with np.printoptions(**options):
                    msg = fmt.format(*a, **k)
            else:
                msg = " ".join((fmt, *(str(x) for x in a)))
            if record is None:
                sys.stdout.write(msg + "\n")
            else:
                r = copy.copy(record)
                r.msg = msg
                LOGGER.handle(r)
        _emit(show, c_args, c_kwargs, ordered, partitioned,
              "debug.print" if record is None else "debug.log")

    if fmt is not None:
        _debug_print(fmt, *args, **kwargs)
        return None
    if args or kwargs:
        raise TypeError("debug_print received unexpected arguments in the two-call form:"
                        f" {args=} {kwargs=}")
    return _debug_print
