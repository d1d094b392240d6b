"""User-facing errors: name the user's file and line, and hide shardc's own frames."""
from __future__ import annotations

import functools
import os
import sys
import types

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _install_dirs():
    """Where shardc, numpy, jax, jaxlib and the standard library are installed: frames
    from there are never "the user's line" (a user's own directory named jax is)."""
    import importlib.util
    import sysconfig
    dirs = [_PKG_DIR]
    for name in ("numpy", "jax", "jaxlib", "ml_dtypes"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            dirs += [os.path.abspath(d) + os.sep for d in spec.submodule_search_locations]
    for key in ("stdlib", "platstdlib"):
        dirs.append(os.path.abspath(sysconfig.get_paths()[key]) + os.sep)
    return tuple(dict.fromkeys(dirs))


_SKIP_DIRS = _install_dirs()


def _is_internal(filename: str) -> bool:
    return filename.startswith(_SKIP_DIRS) or filename.startswith("<frozen ")


class Loc(tuple):
    """A user source location: (file, line)."""
    __slots__ = ()

    def __new__(cls, file: str, line: int):
        return tuple.__new__(cls, (file, line))

    @property
    def file(self):
        return self[0]

    @property
    def line(self):
        return self[1]

    def __str__(self):
        return f"{self[0]}:{self[1]}"

    def short(self):
        return f"{os.path.basename(self[0])}:{self[1]}"


UNKNOWN = Loc("<unknown>", 0)
_new_loc = tuple.__new__     # Loc(file, line) without a Python-level __new__ call
_loc_cache: dict = {}


# The last walk's outermost internal frame (the one the user's frame called), that user
# frame and the location found there. While that internal frame runs, its caller is
# the same user frame at the same line, so a later walk reaching it can stop there: ops
# bound deep inside shardc (gradients, jnp functions of many ops) walk only a few
# frames. (The caller and its line are checked again: a generator's frame can be
# resumed from elsewhere.) forget_frames() drops the references when a trace ends.
_anchor = (None, None, None)
TRACING = [0]     # how many traces are active (core.trace_context); anchors only then


_AT: list = [None]   # a location set by at_loc (an imported jaxpr equation's line)


class at_loc:
    """`with at_loc(loc):` ops bound inside get `loc` (None: found from the stack)."""
    __slots__ = ("loc", "prev")

    def __init__(self, loc):
        self.loc = loc

    def __enter__(self):
        self.prev = _AT[0]
        if self.loc is not None:
            _AT[0] = self.loc

    def __exit__(self, *exc):
        _AT[0] = self.prev


def user_loc(depth=1) -> Loc:
    """The innermost stack frame that is user code (not shardc, numpy or jax), starting
    `depth` frames above this call (callers may skip frames they know are internal)."""
    global _anchor
    if _AT[0] is not None:
        return _AT[0]
    f = sys._getframe(depth)
    cache = _loc_cache
    anchor, anchor_user, anchor_loc = _anchor
    prev = None
    while f is not None:
        if f is anchor:
            u = f.f_back
            if u is anchor_user and u.f_lineno == anchor_loc[1]:
                return anchor_loc
        file = f.f_code.co_filename
        internal = cache.get(file)
        if internal is None:
            internal = cache[file] = _is_internal(file)
        if not internal:
            loc = _new_loc(Loc, (file, f.f_lineno))
            if prev is not None and TRACING[0]:
                _anchor = (prev, f, loc)
            return loc
        prev = f
        f = f.f_back
    return UNKNOWN


def forget_frames() -> None:
    """Drop user_loc's references to frames (at the end of a trace)."""
    global _anchor
    _anchor = (None, None, None)


class ShardcError(Exception):
    """An error in the user's program or arguments, reported at the user's line."""

    def __init__(self, message: str, loc: Loc | None = None):
        self.message = message
        self.loc = loc if loc is not None else user_loc()
        super().__init__(self._render())

    def _render(self):
        where = "" if self.loc is UNKNOWN else f"{self.loc}: "
        return f"{where}{self.message}"


class ArgumentError(ShardcError, ValueError):
    """A bad argument to a shardc API (where jax raises ValueError)."""


class ShardcTypeError(ShardcError, TypeError):
    """An operand of the wrong type (where jax raises TypeError)."""


class ShardingTypeError(ShardcError, TypeError):
    """Explicit sharding mode: operands whose types' shardings do not fit the op
    (where jax raises core.ShardingTypeError)."""


class TracerError(ShardcError, TypeError):
    """A traced value was used where Python needs a concrete one."""


def _filter_tb(tb):
    frames = []
    while tb is not None:
        if not _is_internal(tb.tb_frame.f_code.co_filename):
            frames.append(tb)
        tb = tb.tb_next
    out = None
    for t in reversed(frames):
        out = types.TracebackType(out, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return out


FILTER_NOTE = ("--------------------\nshardc removed its internal frames from the traceback "
               "of this exception; set SHARDC_TRACEBACK_FILTERING=off to include them.")


def filtering() -> bool:
    """Whether tracebacks leaving shardc's API lose shardc's own frames: as jax's
    JAX_TRACEBACK_FILTERING, SHARDC_TRACEBACK_FILTERING=off shows every frame (so does
    SHARDC_TRACEBACK=1, which `shardc --traceback` sets)."""
    mode = os.environ.get("SHARDC_TRACEBACK_FILTERING", "").strip().lower()
    if mode:
        return mode not in ("off", "0", "false", "no")
    return not os.environ.get("SHARDC_TRACEBACK")


def cleaned(e: BaseException) -> BaseException:
    """`e` with the frames of shardc (and of numpy, jax and the standard library)
    removed from its traceback, which then ends at the user's innermost frame, for an
    API entry point to re-raise with a bare `raise` (which adds no frame of its own).
    A ShardcError hides the internal exception it came from; any other exception
    keeps its chain and gets a note saying how to see the frames."""
    if not filtering():
        return e
    e.with_traceback(_filter_tb(e.__traceback__))
    if isinstance(e, ShardcError):
        e.__cause__ = None
        e.__suppress_context__ = True
    elif FILTER_NOTE not in getattr(e, "__notes__", ()):
        e.add_note(FILTER_NOTE)
    return e


def api_boundary(fun):
    """An entry point of shardc's API: exceptions leave it with shardc's internal frames
    removed from their traceback (as jax's traceback_util.api_boundary)."""
    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        try:
            return fun(*args, **kwargs)
        except Exception as e:
            cleaned(e)
            raise
    return wrapper


def wrap_public(namespace: dict) -> None:
    """Make each public function defined in shardc in a module's `namespace` an API
    boundary (shardc.numpy, .lax, .nn: errors from eager calls end at the user's line)."""
    for k, v in list(namespace.items()):
        if not k.startswith("_") and isinstance(v, types.FunctionType) and \
                v.__module__.startswith("shardc.") and not hasattr(v, "__wrapped__"):
            namespace[k] = api_boundary(v)
