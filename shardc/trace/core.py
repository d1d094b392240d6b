"""Abstract values, primitives and the tracer that records user code into IR.

`bind(prim, *args, **params)` is the one entry point for every operation: inside a
trace it appends an `Op` to the innermost active `Builder`; outside any trace it runs
the primitive at once (eager mode) and returns a `jax.Array`.
"""
from __future__ import annotations


import threading

import jax
import numpy as np

from ..ir import dtypes
from ..errors import TRACING, ShardcError, TracerError, forget_frames, user_loc
from ..ir import primitive as _primitive
from ..ir.primitive import (PRIMITIVES, Primitive, Vma, _shape_sig,  # noqa: F401
                            abstract_eval, set_binder)
from ..ir.program import Aval, Lit, Op, Program, Value
from . import types as _types

# ---------------------------------------------------------------- tracing


# How jax sees shardc's tracers (set by shardc.frontends): `jax_aval(tracer)` is its
# jax type, `jax_trace` the jax Trace that takes every jax primitive bound while shardc
# traces, and `enter()` a context manager making that trace jax's current one; `folding()`
# says whether jax.ensure_compile_time_eval is on, and `leave()` makes jax's eager trace
# current (what shardc's eager ops run under).
JAX_BRIDGE = {"jax_aval": None, "jax_trace": None, "enter": None, "folding": None,
              "leave": None}


class Tracer(jax.core.Tracer):
    """A value being traced: stands for an IR `Value` of one `Builder`.

    It is a jax tracer too, so jax code (jax.numpy, flax, optax) takes it: `aval` is its
    jax type (a ShapedArray), and the primitives jax binds on it are translated into
    shardc's ops (shardc.frontends). shardc's own type is `value.aval`."""
    __slots__ = ("builder", "value")
    __array_priority__ = 1000

    def __init__(self, builder, value):
        self.builder = builder
        self.value = value

    aval = property(lambda self: JAX_BRIDGE["jax_aval"](self))
    _trace = property(lambda self: JAX_BRIDGE["jax_trace"])
    shape = property(lambda self: self.value.aval.shape)
    dtype = property(lambda self: self.value.aval.dtype)
    ndim = property(lambda self: len(self.value.aval.shape))
    size = property(lambda self: self.value.aval.size)
    weak_type = property(lambda self: self.value.aval.weak)

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of unsized (rank-0) traced array")
        return self.shape[0]

    def _concrete_error(self, what, instead):
        return TracerError(
            f"{what} needs a concrete value, but this is a traced array "
            f"{self.value.aval} inside a traced function, whose value is not known until it "
            f"runs. {instead}")

    def __bool__(self):
        raise self._concrete_error(
            "Python `if`/`while`/`bool()` on an array",
            "Use shardc.numpy.where(cond, x, y) to choose between values, or pass the "
            "value as a static argument (static_argnums) if it decides the program's shape.")

    def __int__(self):
        raise self._concrete_error("int()", "Keep it an array (e.g. x.astype(jnp.int32)), "
                                   "or mark the argument static with static_argnums.")

    def __float__(self):
        raise self._concrete_error("float()", "Keep it an array, or mark the argument "
                                   "static with static_argnums.")

    def __index__(self):
        raise self._concrete_error("Using an array as a Python index or size",
                                   "Index with arrays directly (x[idx]) or mark it static.")

    __complex__ = __float__

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a rank-0 traced array")
        return iter([self[i] for i in range(self.shape[0])])

    def __hash__(self):
        raise TypeError("traced arrays are not hashable")

    def __repr__(self):
        return f"Traced<{self.value.aval}>"

    def __array__(self, dtype=None, copy=None):
        raise self._concrete_error(
            "Converting to a NumPy array (np.asarray)",
            "Use shardc.numpy (or plain NumPy functions, which are traced) on it instead.")


class Builder:
    """Records ops into a Program. One per active trace; they nest (regions, grad)."""

    def __init__(self, name="fun", parent=None, meshes=None):
        self.program = Program(name)
        self.parent = parent
        # the mesh the program runs on, shared with nested builders (meshes.MeshSlot)
        self.meshes = meshes if meshes is not None else (parent.meshes if parent else None)
        self.manual = None    # shard_map.ManualCtx while tracing a shard_map body
        self.captured: dict[int, tuple] = {}   # id(outer value) -> (outer tracer, inner Value)
        self.alive = True
        self.host: set = set()  # the values in pinned host memory (ops.memory)
        # a top-level trace's closed-over arrays taken as extra inputs (see lift_array):
        # {id(array): (array, input Value)}, or None where they are constants
        self.lifted: dict | None = None

    def new_input(self, aval: Aval, name: str | None = None) -> Tracer:
        v = Value(aval, name=name)
        self.program.inputs.append(v)
        return Tracer(self, v)

    def to_value(self, x):
        """An operand for an op of this builder: a Value, or a Lit for scalars."""
        if type(x) is Tracer:
            if x.builder is self:
                return x.value
            return self._capture(x)
        if type(x) is Lit:
            return x
        return constant_value(self, x)

    def _capture(self, t):
        # (a value of a trace set aside by outside_traces is captured as an outer one:
        # the function traced there is then traced into that trace, see ClosesOverTrace)
        if (not t.builder.alive or t.builder not in _tls.builders) and \
                not _suspended(t.builder):
            raise _leaked(t)
        entry = self.captured.get(id(t.value))
        if entry is None:
            v = Value(t.value.aval)
            self.captured[id(t.value)] = entry = (t, v)
            if self.manual is not None:    # a shard_map body's: it varies as `t` does
                self.manual.vma[id(v)] = self.manual.vma_of(t.value)
            if t.value in t.builder.host:
                self.host.add(v)
        return entry[1]

    def add(self, prim, in_vals, params, out_avals, loc, regions=()):
        outs = [Value(a) for a in out_avals]
        op = Op(prim, in_vals, outs, params, loc, regions)
        self.program.ops.append(op)
        explicit = _types.explicit_axes_of(self)
        if explicit:
            _type_added(self, op, explicit, loc)
        if self.host or prim.memory is not None or regions:
            _memory_added(self.host, op)
        return outs


def _memory_added(host, op):
    """Which of an op's results are in pinned host memory (jax's memory-space types):
    a memory_put's are in its memory; a region op's are where its regions yield them;
    any other op's are on the host when an operand of rank > 0 is (scalars and
    constants take the memory of what they meet; all scalars: the device's)."""
    memory = op.prim.memory
    if memory is not None:
        if memory(op.params) == "pinned_host":
            host.update(op.outputs)
        return
    if op.regions:
        n = len(op.outputs)
        for r in op.regions:
            out = r.meta.get("host_out")
            if out is not None and len(out) == n:
                host.update(v for v, h in zip(op.outputs, out) if h)
        return
    for v in op.inputs:
        if v in host and v.aval.shape:
            host.update(op.outputs)
            return


class _ThreadState(threading.local):
    """The active traces of this thread (another thread's eager ops are not traced)."""

    def __init__(self):
        self.builders: list[Builder] = []
        self.suspended: list[list[Builder]] = []    # set aside by outside_traces


class ClosesOverTrace(Exception):
    """Internal: a computation run at trace time (outside_traces) reached a value of the
    trace it left; the caller traces it into that trace instead. `builder`: the trace of
    the function that did (by `owner`, a jit), its captured values from that trace
    (Builder.captured) and outputs set, to be replayed there (so the user's Python runs
    once), or None."""

    def __init__(self, builder=None, out_tree=None, owner=None):
        super().__init__()
        self.builder, self.out_tree, self.owner = builder, out_tree, owner


def _suspended(b) -> bool:
    """Whether `b` is a live trace set aside by outside_traces."""
    return b.alive and any(b in s for s in _tls.suspended)


def suspended_capture(b) -> bool:
    """Whether trace `b` read values of a trace set aside by outside_traces."""
    return any(_suspended(t.builder) for t, _ in b.captured.values())


def _leaked(t) -> Exception:
    if _suspended(t.builder):       # (an op run now, outside every trace, reached it)
        return ClosesOverTrace()
    return ShardcError(
        f"a traced value {t.value.aval} escaped the function that traced it (a "
        "'leaked tracer'): it was stored in a global or closure during tracing "
        "and used after. Return it from the function instead.")


_tls = _ThreadState()


class trace_context:
    """`with trace_context(builder):` makes `builder` the innermost trace."""

    def __init__(self, builder):
        self.builder = builder

    def __enter__(self):
        _tls.builders.append(self.builder)
        TRACING[0] += 1
        enter = JAX_BRIDGE["enter"]
        self._jax = enter() if enter is not None else None
        if self._jax is not None:
            self._jax.__enter__()
        return self.builder

    def __exit__(self, *exc):
        if self._jax is not None:
            self._jax.__exit__(*exc)
        _tls.builders.pop()
        TRACING[0] -= 1
        self.builder.alive = False
        if not _tls.builders:
            forget_frames()


def current_builder():
    bs = _tls.builders
    return bs[-1] if bs else None


def foreign_tracer_error(x) -> ShardcError:
    """A shardc function reached with a jax transformation's tracer: jax traces around
    shardc, which it cannot look into (shardc's frontend handles the other nesting)."""
    a = x.aval
    what = a.str_short() if hasattr(a, "str_short") else str(a)
    return ShardcError(
        f"a shardc function was called on a jax tracer ({type(x).__name__} {what}): "
        "jax.jit, jax.grad and jax.vmap cannot trace shardc's own functions (shardc.numpy, "
        "shardc.jit, shardc.shard_map). Transform them with shardc.grad / shardc.vmap / "
        "shardc.jit, or write what jax transforms with jax.numpy: shardc imports jax code, "
        "so shardc.jit(jax.grad(f)) works")


def is_tracer(x) -> bool:
    return type(x) is Tracer


def bind(prim: Primitive, args, params):
    bs = _tls.builders
    if bs:
        if prim.vma is Vma.KEEP and folds(args):   # (a collective names the trace's axes)
            with outside_traces():
                return _eager[0](prim, args, params)
        return _bind_traced(bs[-1], prim, args, params)
    for a in args:
        if type(a) is Tracer:
            raise _leaked(a)        # a tracer outside its trace
    return _eager[0](prim, args, params)


set_binder(bind)


def bind_in_trace(prim: Primitive, args, params):
    """`prim` applied in the current trace, never folded to a value now."""
    return _bind_traced(_tls.builders[-1], prim, args, params)


def folds(args) -> bool:
    """Whether a computation on `args` runs now although a trace is open: under
    jax.ensure_compile_time_eval, when none of them is traced (its result is then a
    concrete array Python control flow can read)."""
    folding = JAX_BRIDGE["folding"]
    return folding is not None and folding() and not any(type(a) is Tracer for a in args)


class outside_traces:
    """`with outside_traces():` runs as if no trace were open (shardc's and jax's)."""

    def __enter__(self):
        self.saved = list(_tls.builders)
        _tls.suspended.append(self.saved)
        _tls.builders.clear()
        self.jax = JAX_BRIDGE["leave"]()
        self.jax.__enter__()

    def __exit__(self, *exc):
        self.jax.__exit__(*exc)
        _tls.suspended.pop()
        _tls.builders[:] = self.saved


def _no_eager(prim, args, params):
    raise ShardcError(f"internal: {prim.name} applied outside a trace before shardc's "
                      "runtime was imported (import shardc)")


_eager = [_no_eager, None]   # set by shardc.runtime.eager: apply, apply_region


def set_eager(fn, region_fn):
    """Install how ops run outside any trace (the runtime's eager mode): this stage
    records ops; running them is the runtime's, which installs itself at import.
    region_fn(prim, args, params, regions, out_avals, loc) runs a region op now."""
    _eager[0], _eager[1] = fn, region_fn


def run_region_now(prim, args, params, regions, out_avals, loc):
    """A region op on constants under jax.ensure_compile_time_eval: its results, now."""
    return _eager[1](prim, args, params, regions, out_avals, loc)


def _type_added(b, op, explicit, loc):
    """Explicit mode: the types of an op added whole (constants, region ops)."""
    mesh = b.meshes.info.shape
    if op.regions:
        ts = _types.of_region_op(op, mesh, explicit)
        if ts is None:
            return
        for v, t in zip(op.outputs, ts):
            v.aval = _types.typed(v.aval, t)
        return
    avals = _types.infer(op.prim, op.inputs, [v.aval.bare() for v in op.outputs],
                         op.params, mesh, explicit, loc)
    for v, a in zip(op.outputs, avals):
        v.aval = a


def _bind_traced(b: Builder, prim, args, params):
    loc = user_loc(3)       # above this frame and bind()'s, both internal
    in_vals = [a.value if type(a) is Tracer and a.builder is b else b.to_value(a)
               for a in args]
    explicit = _types.explicit_axes_of(b)
    if explicit:
        out_avals, sig = _shape_sig(prim, [v.aval.bare() for v in in_vals], params, loc)
        outs = _types.infer(prim, in_vals, out_avals if prim.multiple_results
                            else [out_avals], params, b.meshes.info.shape, explicit, loc)
        out_avals = outs if prim.multiple_results else outs[0]
        sig = None      # the op's types now include shardings its signature lacks
    else:
        out_avals, sig = _shape_sig(prim, [v.aval for v in in_vals], params, loc)
        if not prim.multiple_results and out_avals.ts is not None:
            out_avals = out_avals.bare()    # a typed operand outside explicit mode
    if prim.multiple_results:
        outs = b.add(prim, in_vals, params, out_avals, loc)
        b.program.ops[-1].sig = sig
        if b.manual is not None:
            b.manual.record(prim, in_vals, outs, params)
        return [Tracer(b, v) for v in outs]
    out = Value(out_avals)
    op = Op(prim, in_vals, (out,), params, loc)
    op.sig = sig
    b.program.ops.append(op)
    if b.manual is not None:
        b.manual.record(prim, in_vals, [out], params)
    if b.host or prim.memory is not None:
        _memory_added(b.host, op)
    return Tracer(b, out)


# ---------------------------------------------------------------- constants


_PY_AVALS: dict = {}    # (type, x64) -> Aval of a Python scalar of that type
# jax interns its avals (one ShapedArray per shape, dtype, weak type and sharding, hashed
# by identity), so a jax.Array's Aval is one lookup on `x.aval`. Only 32-bit and
# narrower dtypes are kept: a 64-bit one's canonical dtype depends on x64.
_JAX_AVALS: dict = {}
_ARRAY_TYPES: set = set()     # the concrete jax.Array classes seen (jaxlib's ArrayImpl)
_WIDE = frozenset(dtypes._TO_32)     # the dtypes x64 decides (int64, float64, complex128...)


def aval_of(x) -> Aval:
    """The abstract value of a concrete input (Python scalar, NumPy or jax array)."""
    t = type(x)
    if t is Tracer:
        return x.value.aval
    if t in _ARRAY_TYPES:
        a = _JAX_AVALS.get(x.aval)
        if a is not None:
            return a
    if t is Lit:
        return x.aval
    if t is float or t is int or t is bool or t is complex:
        key = (t, _primitive.X64.value)
        a = _PY_AVALS.get(key)
        if a is None:
            # JAX types Python ints and floats weakly, bools strongly
            a = _PY_AVALS[key] = Aval((), dtypes.python_scalar_dtype(x), t is not bool)
        return a
    if isinstance(x, (bool, int, float, complex)) and not isinstance(x, np.generic):
        # JAX types Python ints and floats weakly, bools strongly
        return Aval((), dtypes.python_scalar_dtype(x), not isinstance(x, bool))
    shape = getattr(x, "shape", None)
    dt = getattr(x, "dtype", None)
    if shape is None or dt is None:
        try:
            arr = np.asarray(x)
        except Exception:
            arr = None
        if arr is None or arr.dtype == object:
            raise ShardcError(f"expected an array or a number, got {type(x).__name__}")
        shape, dt = arr.shape, arr.dtype
    weak = bool(getattr(x, "weak_type", False))
    a = Aval(tuple(shape), dtypes.canonicalize(dt), weak)
    if isinstance(x, jax.Array) and dt not in _WIDE and len(_JAX_AVALS) < 100_000:
        _ARRAY_TYPES.add(t)
        _JAX_AVALS[x.aval] = a
    return a


def _scalar(x, dtype):
    """A Python scalar as `dtype`. As in jax, a Python int must fit the default int
    type (int32; int64 with x64), or the wider `dtype`, and then wraps into a narrower
    integer dtype (uint8 + -1 is uint8 + 255)."""
    if type(x) is int and dtypes.is_int(dtype):
        info, wide = dtypes.iinfo(dtype), np.iinfo(dtypes.default_int())
        if not (wide.min <= x <= wide.max or info.min <= x <= info.max):
            raise ShardcError(f"Python int {x} is too large for {dtype} (the range is "
                              f"{info.min}..{info.max}); use a smaller value or a wider "
                              "dtype (64-bit needs jax_enable_x64)")
        return int(np.asarray(x, np.int64).astype(dtype))
    if dtypes.is_complex(dtype):
        return complex(np.asarray(x).astype(dtype))
    if dtypes.is_complex(np.asarray(x).dtype):
        x = np.real(x)      # as a NumPy cast (jax warns and drops the imaginary part)
    v = np.asarray(x).astype(dtype)
    return float(v) if dtypes.is_float(dtype) else v.item() if dtype == dtypes.bool_ \
        else int(v)


def full_trace(fun, in_avals, names=None, name="fun", parent=None, meshes=None, host=(),
               lift=False):
    """Trace `fun` on abstract inputs; returns (builder, raw outputs of `fun`).

    `meshes` is a top-level trace's mesh slot (runtime.meshes.MeshSlot; nested traces
    share their parent's): the caller, which knows the mesh, makes it. The program's
    outputs are left for the caller to set (it owns the pytree). `host`: the indices of
    the inputs in pinned host memory. `lift`: closed-over arrays on a mesh become
    inputs after `in_avals` (lift_array), in `b.lifted`."""
    if meshes is None and parent is None:
        raise ShardcError("internal: a top-level trace needs its mesh slot (meshes=)")
    b = Builder(name, parent, meshes)
    if lift:
        b.lifted = {}
    tracers = [b.new_input(a, n) for a, n in zip(in_avals, names or [None] * len(in_avals))]
    b.host.update(tracers[i].value for i in host)
    with trace_context(b):
        out = fun(*tracers)
    return b, out


# (at the end: constants.py uses this module)
from .constants import constant_value, lift_array, literal_tracer  # noqa: E402,F401
