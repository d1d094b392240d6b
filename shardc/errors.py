"""User-facing errors: name the user's file and line, and hide shardc's own frames."""
from __future__ import annotations

import functools
import os
import sys
import types

from jax._src.source_info_util import current_name_stack as _name_stack  # (pinned jax)

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _install_dirs():
    """(internal, libraries, stdlib): where shardc, numpy, jax, jaxlib are installed;
    where third-party libraries are (site-packages: flax, optax); the standard library.
    Frames from any of them are never "the user's line" (a user's own directory named
    jax is); a library's innermost frame is kept beside it (`Loc.lib`)."""
    import importlib.util
    import site
    import sysconfig

    def norm(ds):
        return tuple(dict.fromkeys(os.path.abspath(d) + os.sep for d in ds))
    core = [_PKG_DIR]
    for name in ("numpy", "jax", "jaxlib", "ml_dtypes"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            core += list(spec.submodule_search_locations)
    paths = sysconfig.get_paths()
    libs = [paths["purelib"], paths["platlib"], *site.getsitepackages()]
    return norm(core), norm(libs), norm([paths["stdlib"], paths["platstdlib"]])


_CORE_DIRS, _LIB_DIRS, _STD_DIRS = _install_dirs()
_SKIP_DIRS = _CORE_DIRS + _LIB_DIRS + _STD_DIRS
USER, INTERNAL, LIBRARY = 0, 1, 2


def _kind(filename: str) -> int:
    if filename.startswith(_CORE_DIRS) or filename.startswith("<frozen "):
        return INTERNAL
    if filename.startswith(_LIB_DIRS):
        return LIBRARY
    return INTERNAL if filename.startswith(_STD_DIRS) else USER


def _is_internal(filename: str) -> bool:
    return _kind(filename) != USER


def lib_path(filename: str) -> str:
    """A library file as its package path (flax/linen/linear.py)."""
    for d in _LIB_DIRS:
        if filename.startswith(d):
            return filename[len(d):]
    return os.path.basename(filename) if os.path.isabs(filename) else filename


class Loc(tuple):
    """A user source location: (file, line); `lib`, when the user's line called into a
    library (flax, optax) that bound the op, is that library's innermost line (a Loc);
    `scope`, the named scopes the op was bound in ("block/mlp": named_scope, a flax
    module's path), which name it in XLA's op metadata and profiles."""
    __slots__ = ()

    def __new__(cls, file: str, line: int, lib: Loc | None = None, scope: str | None = None):
        if scope:
            return tuple.__new__(cls, (file, line, lib, scope))
        return tuple.__new__(cls, (file, line) if lib is None else (file, line, lib))

    @property
    def scope(self):
        return self[3] if len(self) > 3 else None

    @property
    def file(self):
        return self[0]

    @property
    def line(self):
        return self[1]

    @property
    def lib(self):
        return self[2] if len(self) > 2 else None

    def _via(self):
        lib = self.lib
        return "" if lib is None else f" (in {lib_path(lib[0])}:{lib[1]})"

    def __str__(self):
        return f"{self[0]}:{self[1]}{self._via()}"

    def short(self):
        return f"{os.path.basename(self[0])}:{self[1]}{self._via()}"


UNKNOWN = Loc("<unknown>", 0)
_new_loc = tuple.__new__     # Loc(file, line) without a Python-level __new__ call
_loc_cache: dict = {}


# The last walk's outermost internal frame (the one the user's frame called), that user
# frame and the location found there. While that internal frame runs, its caller is
# the same user frame at the same line, so a later walk reaching it can stop there: ops
# bound deep inside shardc (gradients, jnp functions of many ops) walk only a few
# frames. (The caller and its line are checked again: a generator's frame can be
# resumed from elsewhere.) When a library's frame is on the way, the anchor is the frame
# that library frame called, checked against the library's line. forget_frames() drops
# the references when a trace ends.
_anchor = (None, None, None, 0)
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


# Named scopes: jax's name stack (jax.named_scope, which shardc.named_scope is;
# named_call; a flax module's path; jax.grad's jvp(...) inside shardc.jit), then the
# scopes of the imported jaxpr equation being translated (relative to it, as jax's
# lowering extends them).
SCOPE: list = [""]
_scoped_cache: dict = {}
_stacks: dict = {}


def current_scope() -> str:
    ns = _name_stack()
    own = SCOPE[0]
    if not ns.stack:
        return own
    text = _stacks.get(ns)
    if text is None:
        text = str(ns)
        if len(_stacks) < 1024:
            _stacks[ns] = text
    return f"{text}/{own}" if own else text


class in_scope:
    """`with in_scope(name):` ops bound inside are in the named scope `name`, inside the
    scopes open already (an imported equation's name stack)."""
    __slots__ = ("name", "prev")

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.prev = prev = SCOPE[0]
        if self.name:
            SCOPE[0] = f"{prev}/{self.name}" if prev else self.name

    def __exit__(self, *exc):
        SCOPE[0] = self.prev


def scoped(loc: Loc, scope: str) -> Loc:
    """`loc` inside the named scope `scope` (outside the scope it already has)."""
    key = (loc, scope)
    got = _scoped_cache.get(key)
    if got is None:
        inner = loc.scope
        got = Loc(loc[0], loc[1], loc.lib, f"{scope}/{inner}" if inner else scope)
        if len(_scoped_cache) < 4096:
            _scoped_cache[key] = got
    return got


def user_loc(depth=1) -> Loc:
    """The innermost stack frame that is user code (not shardc, numpy, jax, the standard
    library or a library in site-packages), starting `depth` frames above this call
    (callers may skip frames they know are internal); with the innermost library frame
    on the way, if any, as its `lib`; in the named scopes open now."""
    loc = _user_loc(depth + 1)
    scope = current_scope()
    return scoped(loc, scope) if scope else loc


def _user_loc(depth) -> Loc:
    global _anchor
    if _AT[0] is not None:
        return _AT[0]
    f = sys._getframe(depth)
    cache = _loc_cache
    anchor, anchor_caller, anchor_loc, anchor_line = _anchor
    prev = lib = lib_callee = None
    while f is not None:
        if f is anchor:
            u = f.f_back
            if u is anchor_caller and u.f_lineno == anchor_line:
                return anchor_loc
        file = f.f_code.co_filename
        kind = cache.get(file)
        if kind is None:
            kind = cache[file] = _kind(file)
        if kind == USER:
            if lib is None:
                loc = _new_loc(Loc, (file, f.f_lineno))
                if prev is not None and TRACING[0]:
                    _anchor = (prev, f, loc, f.f_lineno)
            else:
                loc = Loc(file, f.f_lineno, Loc(lib.f_code.co_filename, lib.f_lineno))
                if lib_callee is not None and TRACING[0]:
                    _anchor = (lib_callee, lib, loc, lib.f_lineno)
            return loc
        if kind == LIBRARY and lib is None:
            lib, lib_callee = f, prev
        prev = f
        f = f.f_back
    return UNKNOWN


def loc_of_frames(frames) -> Loc | None:
    """The location of (file, line) pairs listed innermost first, as user_loc finds it
    on the stack (for an imported jaxpr equation's traceback). jax keeps only the
    innermost frames: if they hold no user frame, the user's line is the one being
    traced now (user_loc), with the library line found in them."""
    lib = None
    for file, line in frames:
        kind = _loc_cache.get(file)
        if kind is None:
            kind = _loc_cache[file] = _kind(file)
        if kind == USER:
            return Loc(file, line, lib)
        if kind == LIBRARY and lib is None:
            lib = Loc(file, line)
    if lib is None:
        return None
    here = user_loc(2)
    return here if here is UNKNOWN else Loc(here[0], here[1], lib)


def forget_frames() -> None:
    """Drop user_loc's references to frames (at the end of a trace)."""
    global _anchor
    _anchor = (None, None, None, 0)


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


class AxisError(ShardcError, ValueError, IndexError):
    """An axis out of bounds (as NumPy's AxisError, both; jax raises either)."""


class ShardcTypeError(ShardcError, TypeError):
    """An operand of the wrong type (where jax raises TypeError)."""


class ShardingTypeError(ShardcError, TypeError):
    """Explicit sharding mode: operands whose types' shardings do not fit the op
    (where jax raises core.ShardingTypeError)."""


class ShardcNotImplementedError(ShardcError, NotImplementedError):
    """What jax does not implement either (where jax raises NotImplementedError)."""


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


def api_boundary(fun, result=None):
    """An entry point of shardc's API: exceptions leave it with shardc's internal frames
    removed from their traceback (as jax's traceback_util.api_boundary). `result`, if
    given, maps what `fun` returns."""
    @functools.wraps(fun)
    def wrapper(*args, **kwargs):
        try:
            out = fun(*args, **kwargs)
        except Exception as e:
            cleaned(e)
            raise
        return out if result is None else result(out)
    return wrapper


def wrap_public(namespace: dict, result=None, keep=()) -> None:
    """Make each public function defined in shardc in a module's `namespace` an API
    boundary (shardc.numpy, .lax, .nn: errors from eager calls end at the user's line);
    `result` maps the results of all but the functions named in `keep`."""
    for k, v in list(namespace.items()):
        if not k.startswith("_") and isinstance(v, types.FunctionType) and \
                v.__module__.startswith("shardc.") and not hasattr(v, "__wrapped__"):
            namespace[k] = api_boundary(v, None if k in keep else result)
