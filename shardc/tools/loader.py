"""What the command line compiles: FILE.py:FUNC, a --mesh and --arg types with specs.

Parsing (`parse_mesh`, `parse_arg`) needs no jax; `load_target` imports the user's
file; `stage(target, mesh, args)` gives the Traced program. Every mistake is a
`UsageError` with one message (and the user's file:line when it is in their code).
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import os
import re
import sys
import traceback

_SHORT = {"bool": "bool", "pred": "bool", "i8": "int8", "i16": "int16", "i32": "int32",
          "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32",
          "u64": "uint64", "bf16": "bfloat16", "f16": "float16", "f32": "float32",
          "f64": "float64", "c64": "complex64", "c128": "complex128", "i4": "int4",
          "u4": "uint4", "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2"}
_ARG_RE = re.compile(r"^\s*([A-Za-z_]\w*)\s*\[\s*([\d\s,]*)\]\s*(?:@\s*(.*?))?\s*$")


class UsageError(Exception):
    """A mistake in the command line or the user's program: shown as one message."""

    def __init__(self, message, where=None):
        self.message, self.where = message, where
        super().__init__(f"{where}: {message}" if where else message)


# ---------------------------------------------------------------- --mesh, --arg


def parse_mesh(text: str):
    """'data=2,model=4' -> (('data', 2), ('model', 4))."""
    axes = []
    for part in (p.strip() for p in text.split(",")):
        m = re.fullmatch(r"([A-Za-z_]\w*)\s*=\s*(\d+)", part)
        if not m:
            raise UsageError(f"--mesh {text!r}: expected NAME=SIZE pairs separated by "
                             "commas, e.g. --mesh data=2,model=4")
        name, size = m.group(1), int(m.group(2))
        if size < 1:
            raise UsageError(f"--mesh {text!r}: axis {name!r} has size {size}; sizes "
                             "must be at least 1")
        if name in dict(axes):
            raise UsageError(f"--mesh {text!r}: axis {name!r} is named twice")
        axes.append((name, size))
    return tuple(axes)


class ArgType:
    """One --arg: dtype name, shape and an optional PartitionSpec (entries as tuples)."""

    def __init__(self, text, dtype, shape, spec):
        self.text, self.dtype, self.shape, self.spec = text, dtype, shape, spec


def _spec_entries(text, what):
    """The entries of `P(...)`/`PartitionSpec(...)`/`(...)` as Python literals."""
    m = re.fullmatch(r"\s*(?:P|PartitionSpec)?\s*\((.*)\)\s*", text, re.S)
    if not m:
        raise UsageError(f"{what}: the sharding {text!r} is not a PartitionSpec; write "
                         "it as in Python, e.g. @P('data',None) or @P(('data','model'))")
    try:
        entries = ast.literal_eval("(" + m.group(1) + ",)") if m.group(1).strip() else ()
    except (ValueError, SyntaxError):
        raise UsageError(f"{what}: cannot read {text!r}; entries of a PartitionSpec are "
                         "None, an axis name in quotes, or a tuple of them") from None
    for e in entries:
        ok = e is None or isinstance(e, str) or (
            isinstance(e, tuple) and all(isinstance(a, str) for a in e))
        if not ok:
            raise UsageError(f"{what}: bad PartitionSpec entry {e!r} in {text!r}; use "
                             "None, 'axis' or ('axis1', 'axis2')")
    return entries


def parse_arg(text: str, i: int = 0) -> ArgType:
    """'f32[64,256]@P('data',None)' -> ArgType."""
    what = f"--arg {i + 1} ({text!r})" if i >= 0 else f"--arg {text!r}"
    m = _ARG_RE.match(text)
    if not m:
        raise UsageError(f"{what}: expected DTYPE[SHAPE] optionally followed by "
                         "@PartitionSpec, e.g. \"f32[64,256]@P('data',None)\"")
    dt, dims, spec = m.group(1), m.group(2), m.group(3)
    name = _SHORT.get(dt, dt)
    if name not in _SHORT.values():
        raise UsageError(f"{what}: unknown dtype {dt!r}; use one of "
                         f"{', '.join(sorted(set(_SHORT) - {'pred'}))}")
    shape = tuple(int(d) for d in dims.replace(" ", "").split(",") if d)
    entries = _spec_entries(spec, what) if spec else None
    if entries is not None and len(entries) > len(shape):
        raise UsageError(f"{what}: the PartitionSpec has {len(entries)} entries but the "
                         f"array has rank {len(shape)}")
    return ArgType(text, name, shape, entries)


def check_spec(arg: ArgType, i: int, mesh_axes):
    """Unknown axes, axes used twice, and shapes the spec does not divide."""
    if arg.spec is None:
        return
    sizes = dict(mesh_axes)
    what = f"--arg {i + 1} ({arg.text!r})"
    if not sizes:
        raise UsageError(f"{what} has a PartitionSpec but no --mesh was given; add e.g. "
                         "--mesh data=2,model=4")
    seen = set()
    for d, e in enumerate(arg.spec):
        axes = () if e is None else (e,) if isinstance(e, str) else e
        k = 1
        for a in axes:
            if a not in sizes:
                raise UsageError(f"{what}: unknown mesh axis {a!r}; the mesh has axes "
                                 f"{', '.join(sizes)}")
            if a in seen:
                raise UsageError(f"{what}: mesh axis {a!r} is used twice")
            seen.add(a)
            k *= sizes[a]
        if arg.shape[d] % k:
            raise UsageError(f"{what}: dimension {d} (size {arg.shape[d]}) cannot be split "
                             f"into {k} parts over {' x '.join(axes)}")


# ---------------------------------------------------------------- the user's function


def user_frame(tb, files=()):
    """(file, line) of the innermost traceback frame in the user's code, or None."""
    from ..errors import _is_internal
    best = None
    for fs in traceback.extract_tb(tb):
        if fs.filename in files or not _is_internal(fs.filename):
            if not fs.filename.startswith("<") and fs.filename != sys.argv[0]:
                best = (fs.filename, fs.lineno)
    return best


def load_function(target: str):
    """'path/to/file.py:func' (or 'package.module:func') -> the object it names."""
    return load_target(target)[1]


def load_target(target: str):
    """'path/to/file.py:func' -> (the module, the object it names)."""
    path, sep, attr = target.rpartition(":")
    if not sep or not path or not attr:
        raise UsageError(f"{target!r}: expected FILE.py:FUNCTION, e.g. model.py:forward")
    if path.endswith(".py") or os.sep in path or os.path.exists(path):
        if not os.path.isfile(path):
            raise UsageError(f"no such file: {path}")
        module = _import_file(path)
    else:
        try:
            module = importlib.import_module(path)
        except ImportError as e:
            raise UsageError(f"cannot import module {path!r}: {e}") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = sorted(n for n, v in vars(module).items()
                           if callable(v) and not n.startswith("_")
                           and getattr(v, "__module__", module.__name__) == module.__name__)
            hint = f" (it defines: {', '.join(names)})" if names else ""
            raise UsageError(f"{path} has no function {attr!r}{hint}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise UsageError(f"{path}:{attr} is a {type(obj).__name__}, not a function")
    return module, obj


def _import_file(path):
    path = os.path.abspath(path)
    name = "__shardc_main__"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:   # (no filename or line for null bytes: name the file)
        where = f"{e.filename or path}" + (f":{e.lineno}" if e.lineno else "")
        msg = e.msg
        if "null bytes" in msg or "unicode error" in msg:
            msg += " (is it a Python source file?)"
        raise UsageError(f"SyntaxError: {msg}", where) from None
    except SystemExit:
        raise UsageError(f"{path} called exit() while being imported") from None
    except Exception as e:
        from ..errors import ShardcError
        if isinstance(e, ShardcError):
            raise
        where = user_frame(e.__traceback__, (path,))
        raise UsageError(f"while importing {os.path.basename(path)}: "
                         f"{type(e).__name__}: {e}",
                         f"{where[0]}:{where[1]}" if where else None) from e
    return module


# ---------------------------------------------------------------- example arguments


def example_args_function(module, target, name):
    """The function that builds `target`'s example arguments: `name` (--example-args),
    else FUNC_args if the file defines it; None when there is neither."""
    func = target.rpartition(":")[2].rpartition(".")[2]
    given = name is not None
    name = name if given else f"{func}_args"
    obj = getattr(module, name, None)
    if obj is None:
        if given:
            raise UsageError(f"--example-args {name}: {target.rpartition(':')[0]} defines "
                             f"no {name!r}")
        return None
    if not callable(obj):
        if given:
            raise UsageError(f"--example-args {name}: {name!r} is a "
                             f"{type(obj).__name__}, not a function")
        return None
    return obj


def example_args(builder, path):
    """Call the builder; its tuple of arguments, each leaf abstract (ShapeDtypeStruct,
    keeping a jax.Array's sharding) so that nothing is computed on them."""
    import jax
    import numpy as np
    name = getattr(builder, "__name__", "the example-arguments function")
    try:
        values = builder()
    except Exception as e:
        from ..errors import ShardcError
        if isinstance(e, ShardcError):
            raise
        where = user_frame(e.__traceback__, (os.path.abspath(path),))
        raise UsageError(f"while building example arguments with {name}(): "
                         f"{type(e).__name__}: {e}",
                         f"{where[0]}:{where[1]}" if where else None) from e
    if not isinstance(values, (tuple, list)):
        raise UsageError(f"{name}() returned a {type(values).__name__}; it should return "
                         "a tuple of the function's arguments (arrays, "
                         "jax.ShapeDtypeStructs or pytrees of them)")

    def abstract(a):
        if isinstance(a, jax.Array):
            return jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=a.sharding)
        if isinstance(a, np.ndarray):
            return jax.ShapeDtypeStruct(a.shape, a.dtype)
        return a
    return tuple(jax.tree.map(abstract, tuple(values)))


# ---------------------------------------------------------------- staging


def _check_arity(fun, n, given_by=None):
    try:
        sig = inspect.signature(fun)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*range(n))
    except TypeError:
        params = [p for p in sig.parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        need = [p.name for p in params if p.default is p.empty]
        name = getattr(fun, "__name__", "the function")
        raise UsageError(f"{name}({', '.join(p.name for p in params)}) needs "
                         f"{len(need)} argument{'s' if len(need) != 1 else ''} but "
                         + (f"{given_by} gave {n}" if given_by else
                            f"{n} --arg {'were' if n != 1 else 'was'} given")
                         + ("" if n or given_by else "; give one --arg per argument, or "
                            f"--example-args NAME (or define {name}_args in the file)")
                         ) from None


def stage(fun, mesh, args, given_by=None):
    """Trace `fun` (a function or shardc.jit object) on `args` over `mesh`: --arg types,
    or the example arguments from the user's file (abstract values with shardings)."""
    import jax
    import numpy as np

    from jax.sharding import NamedSharding, PartitionSpec

    from ..api.jit import Jitted, jit
    from ..runtime.meshes import set_mesh
    base = fun.fun if isinstance(fun, Jitted) else fun
    _check_arity(base, len(args), given_by)
    if not all(isinstance(a, ArgType) for a in args):   # built by the user's file
        jitted = fun if isinstance(fun, Jitted) else jit(fun)
        if mesh is not None:
            with set_mesh(mesh):
                return jitted.trace(*args)
        return jitted.trace(*args)
    named = [NamedSharding(mesh, PartitionSpec(*a.spec)) if a.spec is not None else None
             for a in args]
    avals = [jax.ShapeDtypeStruct(a.shape, np.dtype(_dtype(a.dtype))) for a in args]
    if isinstance(fun, Jitted):
        jitted = fun
        if any(s is not None for s in named):
            jitted = Jitted(fun.fun, in_shardings=_merge(fun.in_shardings, named),
                            out_shardings=fun.out_shardings,
                            static_argnums=fun.static_argnums,
                            static_argnames=fun.static_argnames,
                            donate_argnums=fun.donate_argnums,
                            memory_budget=fun.memory_budget)
    else:
        given = tuple(named) if any(s is not None for s in named) else None
        jitted = jit(fun, in_shardings=given)
    if mesh is not None:
        with set_mesh(mesh):
            return jitted.trace(*avals)
    return jitted.trace(*avals)


def _dtype(name):
    import ml_dtypes
    # (ml_dtypes' types, by name: NumPy reads "int4" as its 4-byte int)
    return getattr(ml_dtypes, name, None) or name


def _merge(orig, named):
    """The decorator's in_shardings, overridden where an --arg gives a spec."""
    n = len(named)
    if orig is None:
        base = [None] * n
    elif isinstance(orig, (tuple, list)):
        if len(orig) != n:
            raise UsageError(f"the function's in_shardings has {len(orig)} entries but "
                             f"{n} --arg were given")
        base = list(orig)
    else:
        base = [orig] * n
    return tuple(s if s is not None else b for s, b in zip(named, base))
