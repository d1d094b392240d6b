"""The one module that touches jaxlib's private API: compile, execute, inspect.

Tested with jax/jaxlib 0.10.x (pinned in pyproject.toml). Everything else in shardc
uses only jax's public array, device, mesh and sharding types.
"""
from __future__ import annotations

import functools
import os
import re
import threading
from typing import Any, NamedTuple

import jax
import numpy as np
from jax._src import core as jcore
from jax._src.array import ArrayImpl as ARRAY_TYPE  # noqa: F401 (jax.Array's class)
from jax._src.tree_util import default_registry as _pytrees
from jax._src import xla_bridge
from jax._src.config import enable_x64 as X64  # noqa: F401 (X64.value: x64 on, thread-aware)
from jax._src.config import default_matmul_precision as _PRECISION
from jax._src.config import threefry_partitionable as _PARTITIONABLE
from jax._src.config import numpy_dtype_promotion as _DTYPE_PROMOTION
from jax._src.config import numpy_rank_promotion as _RANK_PROMOTION
from jax._src.lib import _jax
from jax._src.lib import xla_client as xc

from ..errors import ShardcError
from ..ir.primitive import install_x64

install_x64(X64)


def config_key():
    """The jax config values a traced program depends on (x64, the default matmul
    precision, the threefry counter layout, jax.numpy's promotion rules; thread-aware,
    so context managers count): part of every compiled program's key, as of jax.jit's."""
    return (X64.value, _PRECISION.value, _PARTITIONABLE.value, _DTYPE_PROMOTION.value,
            _RANK_PROMOTION.value)


# ---------------------------------------------------------------- CPU collectives

# XLA's CPU client runs each device's share of a program on one thread pool of
# max(cores, devices) threads, and a collective blocks its threads until every device
# arrives. Thousands of collective programs dispatched back to back (a notebook loop,
# jax.jit too) fill that pool with participants of different runs and deadlock it;
# XLA aborts the process after 40 s. With a pool of 4x the devices no run waits for a
# thread (measured: 2x is the least that never stuck in 20,000-call loops). The pool is
# sized when jax creates its CPU client, from PJRT_NPROC: set it before that happens.
# If the client already exists with a smaller pool, collective programs instead run
# one at a time (see _CpuSerialExecutable).


def _cpu_device_count() -> int:
    n = getattr(jax.config, "jax_num_cpu_devices", -1)
    if n and n > 0:
        return n
    found = re.findall(r"--xla_force_host_platform_device_count=(\d+)",
                       os.environ.get("XLA_FLAGS", ""))
    return int(found[-1]) if found else 1


def _size_cpu_pool() -> int:
    """The CPU client's pool size shardc can count on (0: unknown, the client exists)."""
    if xla_bridge.backends_are_initialized():
        return 0
    if "PJRT_NPROC" not in os.environ:
        n = _cpu_device_count()
        if n > 1:
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
                else os.cpu_count() or 1     # (no sched_getaffinity on macOS)
            os.environ["PJRT_NPROC"] = str(max(cores, 4 * n))
    try:
        return max(int(os.environ.get("PJRT_NPROC", "0")), _cpu_device_count())
    except ValueError:
        return 0


CPU_POOL = _size_cpu_pool()

_COLLECTIVE = re.compile(r"\b(all-reduce|all-gather|all-to-all|reduce-scatter|"
                         r"collective-permute|collective-broadcast)(-start)?\(")


def _needs_serial(exe, devices) -> bool:
    """A CPU program with collectives over more local devices than the pool can hold
    two runs of (only when the client was made before shardc could size its pool)."""
    return len(devices) > 1 and CPU_POOL < 2 * len(devices[0].client.local_devices()) \
        and _COLLECTIVE.search(exe.hlo_modules()[0].to_string()) is not None


# ---------------------------------------------------------------- cached calls


class FastpathData(NamedTuple):
    """What jaxlib's C++ dispatch needs to run one cached signature by itself (the
    attributes it reads, as jax's MeshExecutableFastpathData names them)."""
    xla_executable: Any
    out_pytree_def: Any
    in_shardings: list
    out_shardings: list
    out_avals: list
    out_committed: list
    kept_var_bitvec: list
    in_device_local_layouts: list
    const_args: list


flatten = _pytrees.flatten   # jax.tree_util.tree_flatten without its Python wrapper


def dispatcher(name, cache_miss, static_argnums=(), static_argnames=(), place_arg=None,
               fun=None, deopt=None):
    """A callable that dispatches cached calls in C++ (jaxlib's `pjit` dispatch object,
    the one behind jax's own cached calls): it keys each call on the pytree
    structure, static arguments, each leaf's dtype, shape, weak type and sharding, and
    jax's config values that enter jit keys (x64 among them). A new key calls
    `cache_miss(*args, **kwargs)`, which returns `(outputs, FastpathData or None,
    False)`; with FastpathData, later calls with that key never enter Python: leaves
    that are not arrays sharded as the program's inputs go through `place_arg(x,
    sharding, layout, ...)` (default `shard_arg`). Every dispatcher has a cache of its own.
    Under `jax.disable_jit()` it calls `fun` instead (None: an error, as jax's AOT calls);
    `deopt` is what jax_debug_nans re-runs or names (see runtime.special)."""
    d = _jax.pjit(name, fun, cache_miss, list(static_argnums), list(static_argnames),
                  (), _pytrees, place_arg or shard_arg)
    if deopt is not None or fun is not None:
        d._fun = deopt if deopt is not None else fun
    return d


def fastpath(exe: "Executable", in_shardings, outputs, out_tree, kept=None
             ) -> FastpathData | None:
    """FastpathData for a call of `exe` with flat inputs sharded as `in_shardings` that
    returned the flat `outputs`; None if every call must come back to Python: programs
    over several processes on CPU (see below) and programs with donated inputs.
    `kept`: per leaf of a call, whether `exe` takes it (None: all do)."""
    if type(exe) is not Executable or exe.donated or \
            not all(type(o) is ARRAY_TYPE for o in outputs):
        return None
    n = len(in_shardings)
    return FastpathData(exe.exe, out_tree, list(in_shardings), [o.sharding for o in outputs],
                        [o.aval for o in outputs], [o.committed for o in outputs],
                        [True] * n if kept is None else list(kept), [None] * n, [])


def shard_arg(x, sharding, layout=None, *_):
    """A dispatched call's leaf that is not an array sharded as the program's input:
    NumPy, a Python scalar, an uncommitted or differently sharded array."""
    if isinstance(x, jax.Array) and not x.is_deleted() and x.is_fully_addressable \
            and x.sharding.is_equivalent_to(sharding, x.ndim):
        return x
    return place(x, sharding)


def backend(platform=None):
    return xla_bridge.get_backend(platform)


def compile_options(devices) -> xc.CompileOptions:
    """SPMD options: partition i runs on devices[i] (device ids, as jax does: with
    several processes, ids are global and not 0..n-1; in one process a mesh may list
    its devices in any order)."""
    opts = xc.CompileOptions()
    opts.num_replicas = 1
    opts.num_partitions = len(devices)
    build = opts.executable_build_options
    build.use_spmd_partitioning = True
    build.use_shardy_partitioner = True
    opts.device_assignment = xc.DeviceAssignment.create(
        np.array([d.id for d in devices]).reshape(1, len(devices)))
    return opts


def compile(text: str, devices, host_calls=()) -> object:
    """Compile StableHLO text for `devices` (mesh order) into a loaded executable;
    `host_calls`: the host functions its lowering listed (shardc.lower.emit.lower).

    A program over the devices of several processes is first checked to be the same
    on all of them (shardc.distributed.check_same_program)."""
    return _compile(text, devices, host_calls, True)


def _compile(text, devices, host_calls, check):
    from .callback import host_callbacks
    devices = tuple(devices)
    client = devices[0].client
    table, callbacks = host_callbacks(text, host_calls)     # debug.print/callback's
    if check and spans_processes(devices):
        from .distributed import check_same_program
        check_same_program(text, devices)
    try:
        if callbacks:   # jaxlib takes host callbacks only with an MLIR module
            mlir = _mlir()
            with mlir.make_ir_context():
                exe = client.compile_and_load(mlir.ir.Module.parse(text),
                                              xc.DeviceList(devices), compile_options(devices),
                                              host_callbacks=callbacks)
            # (a copy for a run while this one runs others' functions: checked already)
            return WithCallbacks(exe, callbacks, table,
                                 lambda: _compile(text, devices, host_calls, False))
        return client.compile_and_load(text, xc.DeviceList(devices),
                                       compile_options(devices))
    except Exception as e:  # XLA errors carry MLIR dumps; keep the first line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ShardcError(f"XLA could not compile the lowered program: {first}. This is a "
                          "shardc bug; please report it with the IR (`.trace(...).ir`).",
                          loc=_no_loc()) from None


class WithCallbacks:
    """A loaded executable with host callbacks (debug.print/callback), which it keeps
    alive, and the table they call through; runs through _CallbackExecutable.

    The table is the executable's: a run with another trace's functions (a program
    shared by traces of equal text) has it to itself until it ends, while other runs,
    in other threads or started by its callbacks, run a spare copy (compiled by
    `remake` the first time one is needed). Runs with the functions it was compiled
    with share it, as any executable."""
    __slots__ = ("exe", "callbacks", "table", "remake", "users", "swapped", "spares")
    _lock = threading.Lock()

    def __init__(self, exe, callbacks, table, remake=None):
        self.exe, self.callbacks, self.table, self.remake = exe, callbacks, table, remake
        self.users, self.swapped, self.spares = 0, False, []

    def __getattr__(self, name):
        return getattr(self.exe, name)

    def acquire(self, host_calls):
        """(a copy to run with `host_calls`, or its own functions if None, and the
        functions to restore after: None if unchanged). Release it with release()."""
        own = host_calls is None or self.table.owns(host_calls)
        with self._lock:
            for w in (self, *self.spares):
                if not w.swapped and (own or not w.users):
                    break
            else:
                w = None
            if w is not None:
                w.users += 1
                w.swapped = not own
        if w is None:       # every copy busy with other functions (rare): one more
            w = self.remake()
            w.users, w.swapped = 1, not own
            with self._lock:
                self.spares.append(w)
        return w, (None if own else w.table.swap(host_calls))

    def release(self, old):
        with self._lock:
            if old is not None:
                self.table.swap(old)
                self.swapped = False
            self.users -= 1


def _no_loc():
    from ..errors import UNKNOWN
    return UNKNOWN


def result_handler(shape, dtype, weak, sharding, committed=True):
    aval = jcore.ShapedArray(shape, dtype, weak_type=weak)
    return xc.array_result_handler(aval, sharding, committed=committed, _skip_checks=True)


class Executable:
    """A compiled program with its argument placement and result handlers."""
    __slots__ = ("exe", "in_shardings", "handlers", "devices", "out_avals", "donated")

    def __new__(cls, *args, **kwargs):
        devices = args[4] if len(args) > 4 else kwargs.get("devices")
        if cls is Executable and isinstance(args[0] if args else kwargs.get("exe"),
                                            WithCallbacks):
            cls = _CallbackExecutable
        elif cls is Executable and devices and devices[0].platform == "cpu":
            if spans_processes(devices):
                cls = _CpuMultiProcessExecutable   # only multi-process CPU runs pay for it
            elif _needs_serial(args[0] if args else kwargs["exe"], devices):
                cls = _CpuSerialExecutable
        return object.__new__(cls)

    def __init__(self, exe, in_shardings, out_avals, out_shardings, devices, committed=True,
                 donated=()):
        """`committed`: results are tied to their devices (as jax's are when the program
        has a mesh or a committed input); uncommitted ones may move to any mesh later.
        `donated`: positions of inputs whose buffers the program may reuse."""
        self.exe = exe
        self.donated = tuple(donated)
        self.in_shardings = in_shardings
        self.devices = devices
        self.out_avals = out_avals
        self.handlers = [result_handler(a.shape, a.dtype, a.weak, s, committed)
                         for a, s in zip(out_avals, out_shardings)]

    def __call__(self, arrays):
        """Run on jax.Arrays already placed as `in_shardings`."""
        results = self.exe.execute_sharded(arrays)
        for i in self.donated:
            # A donated array reports is_deleted() but keeps its buffer handle, and
            # jaxlib 0.10's C++ dispatch (jax.jit's too) crashes when handed one; an
            # explicit delete drops the handle, so a later call fails with an error.
            arrays[i].delete()
        return results.consume_with_handlers(self.handlers)

    # -- inspection

    def hlo_text(self) -> str:
        return self.exe.hlo_modules()[0].to_string()

    def cost_analysis(self):
        return self.exe.cost_analysis()

    def memory_analysis(self):
        return self.exe.get_compiled_memory_stats()


class _CpuMultiProcessExecutable(Executable):
    """A CPU program over several processes: runs to completion before returning.

    jaxlib 0.10's CPU client can deadlock when executions whose gloo collectives span
    several devices per process overlap (a loop of steps, dispatched ahead; it happens
    with jax.jit as well). Waiting for each one keeps one in flight per process."""
    __slots__ = ()

    def __call__(self, arrays):
        outs = Executable.__call__(self, arrays)
        for o in outs:
            o.block_until_ready()
        return outs


class _CallbackExecutable(Executable):
    """A program with host callbacks: each run completes, its callbacks included,
    before the call returns (so what debug.print writes is written by then, and in the
    order of the calls; jax waits at its effects barrier instead)."""
    __slots__ = ()

    def __call__(self, arrays, host_calls=None):
        """`host_calls`: the functions of the trace running this program, if not the
        one it was compiled from (a program shared by traces of equal text), on a copy
        of the program no other run calls other functions with (WithCallbacks.acquire:
        a run in another thread, or one a callback starts, may call others)."""
        from .callback import raised
        w, old = self.exe.acquire(host_calls)
        try:
            results = w.exe.execute_sharded(arrays, with_tokens=True)
            token = results.consume_token()
            for i in self.donated:
                arrays[i].delete()      # see Executable.__call__
            outs = results.consume_with_handlers(self.handlers)
            token.block_until_ready()
        except Exception as e:      # a callback's own error, at the user's line
            raise raised(e) from None
        finally:
            w.release(old)
        return outs


class _CpuSerialExecutable(Executable):
    """A CPU collective program on a client whose pool is too small for two runs at
    once (see _size_cpu_pool): it waits for the previous such run before it starts, so
    one is in flight at a time and XLA's rendezvous never starves. Never on the C++
    fast path (fastpath() takes only plain Executables)."""
    __slots__ = ()
    last = ()   # the outputs of the last serial run, across all programs

    def __call__(self, arrays):
        for o in _CpuSerialExecutable.last:
            try:
                o.block_until_ready()
            except Exception:   # noqa: BLE001 -- that run's failure is its outputs' to
                pass            # report (to whoever reads them), not this run's
        _CpuSerialExecutable.last = ()
        outs = Executable.__call__(self, arrays)
        _CpuSerialExecutable.last = outs
        return outs


def place(x, sharding):
    """Put `x` (NumPy, scalar or jax.Array) on devices as `sharding`."""
    if isinstance(x, jax.Array) and x.sharding == sharding:
        return x
    if not sharding.is_fully_addressable:
        return place_global(x, sharding)
    return jax.device_put(x, sharding)


# ---------------------------------------------------------------- several processes


def spans_processes(devices) -> bool:
    """True if `devices` belong to more than one process (a multi-process program)."""
    p = devices[0].process_index
    return any(d.process_index != p for d in devices)


def place_global(x, sharding):
    """`x` as a global array over devices of several processes (`sharding`).

    A global jax.Array is passed as it is (it cannot be moved between processes here).
    Anything else -- NumPy, a Python scalar, a process-local jax.Array -- is, as in
    jax.jit, taken to be the same whole value on every process: each process puts its
    own copy on its own devices. That is only allowed for a replicated sharding (as in
    jax); nothing is exchanged to check that the copies agree."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        if x.sharding.is_equivalent_to(sharding, x.ndim):
            return x
        try:
            return jax.device_put(x, sharding)
        except (ValueError, NotImplementedError) as e:
            raise ShardcError(
                f"a global array sharded as {x.sharding} cannot be moved to {sharding}: "
                f"{str(e).splitlines()[0]}") from None
    if not sharding.is_fully_replicated:
        raise ShardcError(
            f"this {type(x).__name__} argument cannot be split over the devices of several "
            f"processes (its in_sharding is {getattr(sharding, 'spec', sharding)}): shardc "
            "cannot tell whether it holds this process's part or the whole array. Pass a "
            "global jax.Array: shardc.make_array_from_process_local_data(sharding, local) "
            "if each process holds its own part, or shardc.make_array_from_callback("
            "shape, sharding, lambda idx: whole[idx]) if every process holds the whole "
            "array")
    from ..trace.core import aval_of
    arr = np.asarray(x, dtype=aval_of(x).dtype)
    bufs = [jax.device_put(arr, d) for d in sharding.addressable_devices]
    return jax.make_array_from_single_device_arrays(arr.shape, sharding, bufs)


def _distributed_client():
    from jax._src import distributed
    client = distributed.global_state.client
    if client is None:
        raise ShardcError("jax.distributed is not initialized; call "
                          "shardc.distributed.initialize() first", loc=_no_loc())
    return client


def distributed_is_initialized() -> bool:
    from jax._src import distributed
    return distributed.global_state.client is not None


def backend_is_initialized() -> bool:
    """True once jax has created its backends (too late for jax.distributed)."""
    return xla_bridge.backends_are_initialized()


def kv_set(key: str, value: bytes) -> None:
    """Store `value` under `key` in the coordinator's key-value store."""
    _distributed_client().key_value_set_bytes(key, value, allow_overwrite=True)


def kv_get(key: str, timeout_s: float) -> bytes:
    """The value under `key`, waiting up to `timeout_s` seconds for it to appear."""
    return _distributed_client().blocking_key_value_get_bytes(key, int(timeout_s * 1000))


def kv_dir(prefix: str) -> list:
    """All (key, value) pairs whose key starts with `prefix/`, values as bytes."""
    return _distributed_client().key_value_dir_get_bytes(prefix)


def kv_delete(key: str) -> None:
    _distributed_client().key_value_delete(key)


def barrier(name: str, timeout_s: float, process_ids=None) -> None:
    """Wait until every process (or `process_ids`) reaches the barrier `name`."""
    _distributed_client().wait_at_barrier(name, int(timeout_s * 1000), process_ids)


@functools.lru_cache(maxsize=1)
def _mlir():
    from jax._src.interpreters import mlir
    return mlir


def pretty(text: str, debug_info=False) -> str:
    """Parse with MLIR (which verifies the module) and print in the pretty form."""
    mlir = _mlir()
    with mlir.make_ir_context() as ctx:
        ctx.allow_unregistered_dialects = False
        module = mlir.ir.Module.parse(text)
        module.operation.verify()
        return module.operation.get_asm(enable_debug_info=debug_info)


def verify(text: str) -> None:
    """Raise if MLIR's verifier rejects the module."""
    pretty(text)
