"""Several processes, one global mesh: shardc over jax.distributed.

Every process runs the same Python program. `initialize()` connects the processes
through jax's coordination service (the coordinator is process 0); afterwards
`jax.devices()` lists every process's devices, a mesh over them is global, and
`shardc.jit` traces, propagates, lowers and compiles the same program on every
process and runs it on global arrays, whose shards live on the processes that own
their devices. XLA's collectives move the data (gloo on CPU, NCCL on GPU, ICI on TPU).

Before a program that spans processes is compiled, each process publishes a hash of
its StableHLO in the coordinator's key-value store, and all of them compare: if they
differ (process-dependent shapes, constants or control flow), every process fails
with the first line that differs instead of hanging in a collective.
"""
from __future__ import annotations

import errno
import hashlib
import itertools
import os
import re
import zlib

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from . import backend as runtime
from ..errors import ShardcError, api_boundary

# What `shardc launch` sets in each process's environment.
ENV_COORDINATOR = "SHARDC_COORDINATOR_ADDRESS"
ENV_NUM_PROCESSES = "SHARDC_NUM_PROCESSES"
ENV_PROCESS_ID = "SHARDC_PROCESS_ID"

_check = {"enabled": os.environ.get("SHARDC_PROGRAM_CHECK", "1") != "0",
          "timeout": float(os.environ.get("SHARDC_PROGRAM_CHECK_TIMEOUT", "300"))}
_seqs: dict = {}   # per set of processes: how many programs over them were checked
_agreed: dict = {}  # per set of processes: how many decisions they agreed on (agree)


# ---------------------------------------------------------------- set-up


@api_boundary
def initialize(coordinator_address=None, num_processes=None, process_id=None,
               local_device_ids=None, initialization_timeout=300):
    """Connect this process to the others (jax.distributed.initialize).

    With no arguments, uses what `shardc launch` set; outside `shardc launch`, jax
    detects Slurm, Open MPI and Cloud TPU environments. Call it first, before any
    other jax or shardc work. On CPU, turns on gloo collectives."""
    launched = (coordinator_address is None and num_processes is None and
                process_id is None and ENV_COORDINATOR in os.environ)
    kwargs = {}
    if launched:
        coordinator_address = os.environ[ENV_COORDINATOR]
        num_processes = int(os.environ[ENV_NUM_PROCESSES])
        process_id = int(os.environ[ENV_PROCESS_ID])
    if coordinator_address is not None:
        host, _, port = coordinator_address.rpartition(":")
        if host == "127.0.0.1" and port.isdigit():
            # The coordinator is on this machine: listen on loopback only, not on
            # every interface (jax's default).
            kwargs["coordinator_bind_address"] = f"127.0.0.1:{port}"
    if runtime.distributed_is_initialized():
        raise ShardcError("shardc.distributed.initialize() was already called in this "
                          "process")
    if runtime.backend_is_initialized():
        raise ShardcError(
            "shardc.distributed.initialize() must run before jax creates its devices: "
            "call it at the top of the program, before jax.devices(), make_mesh, "
            "device_put or any computation")
    if num_processes is not None and process_id is not None and \
            not 0 <= process_id < num_processes:
        raise ShardcError(f"process_id {process_id} is not in 0..{num_processes - 1}")
    if process_id == 0 and coordinator_address is not None:
        _check_port_free(kwargs.get("coordinator_bind_address") or
                         os.environ.get("JAX_COORDINATOR_BIND_ADDRESS") or
                         "[::]:" + coordinator_address.rpartition(":")[2])
    # Read only by the CPU backend; GPUs and TPUs use their own collectives.
    if jax.config.jax_cpu_collectives_implementation in (None, "none"):
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    if launched:
        # jax's preemption notifier catches SIGTERM (to checkpoint before a cloud
        # preemption) and keeps running; `shardc launch` ends processes with SIGTERM.
        jax.config.update("jax_enable_preemption_service", False)
    try:
        jax.distributed.initialize(coordinator_address, num_processes, process_id,
                                   local_device_ids=local_device_ids,
                                   initialization_timeout=initialization_timeout,
                                   **kwargs)
    except ValueError as e:
        if coordinator_address is None:
            raise ShardcError(
                "shardc.distributed.initialize(): found no cluster to join -- this "
                "process was not started by `shardc launch`, and jax detected no Slurm, "
                "Open MPI or Cloud TPU environment. Pass coordinator_address='host:port', "
                f"num_processes and process_id (jax: {e})") from None
        raise ShardcError(f"shardc.distributed.initialize(): {e}") from None
    except Exception as e:  # noqa: BLE001 -- jaxlib raises its own runtime errors
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ShardcError(
            f"shardc.distributed.initialize(): could not join the coordinator at "
            f"{coordinator_address or '(auto-detected)'} as process {process_id} of "
            f"{num_processes} within {initialization_timeout} s: {msg}") from None


def _check_port_free(address: str) -> None:
    """Process 0 starts the coordinator, bound to `address`: fail clearly if its port
    is taken (jaxlib then says "Failed to start RPC server", or crashes)."""
    import socket
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    if host == "::" and not socket.has_ipv6:
        host = "0.0.0.0"
    try:
        family, _, _, _, addr = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)[0]
    except (OSError, ValueError):
        return   # let jax report it
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)   # as gRPC does
        try:
            s.bind(addr)
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                return
            raise ShardcError(
                f"shardc.distributed.initialize(): port {port} is already in use on this "
                f"machine, so process 0 cannot start the coordinator there: pick a free "
                "port (with `shardc launch`, leave --port out to get one)") from None


def shutdown():
    """Disconnect from the other processes (jax.distributed.shutdown)."""
    jax.distributed.shutdown()


def is_initialized() -> bool:
    return runtime.distributed_is_initialized()


def process_index() -> int:
    """This process's index, 0..process_count()-1."""
    return jax.process_index()


def process_count() -> int:
    return jax.process_count()


def devices(backend=None):
    """Every process's devices (a global mesh is made from these)."""
    return jax.devices(backend)


def local_devices(backend=None):
    """This process's devices."""
    return jax.local_devices(backend=backend)


def local_device_count(backend=None) -> int:
    return jax.local_device_count(backend)


# ---------------------------------------------------------------- global arrays


def make_array_from_process_local_data(sharding, local_data, global_shape=None):
    """A global array from this process's part of it (jax's function of this name)."""
    return jax.make_array_from_process_local_data(sharding, local_data, global_shape)


def make_array_from_single_device_arrays(shape, sharding, arrays):
    """A global array from one array per local device (jax's function of this name)."""
    return jax.make_array_from_single_device_arrays(shape, sharding, arrays)


def make_array_from_callback(shape, sharding, data_callback):
    """A global array whose shards are `data_callback(index)` for this process's devices."""
    return jax.make_array_from_callback(shape, sharding, data_callback)


def host_local_array_to_global_array(local_inputs, global_mesh, pspecs):
    """Pytree of per-process arrays -> global arrays (jax.experimental.multihost_utils)."""
    from jax.experimental import multihost_utils
    return multihost_utils.host_local_array_to_global_array(local_inputs, global_mesh,
                                                            pspecs)


def global_array_to_host_local_array(global_inputs, global_mesh, pspecs):
    """Pytree of global arrays -> this process's part (jax.experimental.multihost_utils)."""
    from jax.experimental import multihost_utils
    return multihost_utils.global_array_to_host_local_array(global_inputs, global_mesh,
                                                            pspecs)


_gather_fns: dict = {}
_jit = [None]   # shardc.jit, installed by shardc.api.jit at import (it is above runtime)


def install_jit(jit):
    _jit[0] = jit


def _replicate(x):
    """`x` (a global array) replicated on every device of its mesh, by a shardc program."""
    mesh = x.sharding.mesh
    f = _gather_fns.get(mesh)
    if f is None:
        f = _gather_fns[mesh] = _jit[0](lambda a: a, out_shardings=NamedSharding(
            mesh, PartitionSpec()))
    return f(x)


def _process_mesh():
    """A (processes, local_devices) mesh over every device."""
    by_proc: dict = {}
    for d in jax.devices():
        by_proc.setdefault(d.process_index, []).append(d)
    rows = [sorted(by_proc[p], key=lambda d: d.id) for p in sorted(by_proc)]
    if len({len(r) for r in rows}) != 1:
        raise ShardcError("process_allgather needs the same number of devices on every "
                          "process")
    return Mesh(np.array(rows), ("processes", "local_devices"),
                axis_types=(jax.sharding.AxisType.Auto,) * 2)


@api_boundary
def process_allgather(tree, tiled=False):
    """Bring values to every process as NumPy (jax.experimental.multihost_utils's name).

    A global jax.Array (one that is not fully addressable; with a single process, any
    jax.Array) comes back whole, on every process. A process-local value (NumPy, a
    scalar, or a jax.Array on this process's devices only; same shape on every
    process) comes back as every process's value stacked on a new axis 0 -- or
    concatenated along axis 0 with `tiled=True`. The gathering is a shardc program."""
    def one(x):
        if isinstance(x, jax.Array) and jax.process_count() == 1:
            return np.asarray(x)
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            if not isinstance(x.sharding, NamedSharding):
                raise ShardcError("process_allgather: a global array needs a "
                                  f"NamedSharding, got {type(x.sharding).__name__}")
            if not x.sharding.is_fully_replicated:
                x = _replicate(x)
            return np.asarray(x.addressable_data(0))
        local = np.asarray(x)
        if jax.process_count() == 1:
            return local if tiled else local[None]
        if local.ndim == 0 or not tiled:
            local = local[None]
        mesh = _process_mesh()
        shape = (local.shape[0] * mesh.shape["processes"],) + local.shape[1:]
        sharding = NamedSharding(mesh, PartitionSpec("processes"))
        bufs = [jax.device_put(local, d) for d in mesh.local_devices]
        g = jax.make_array_from_single_device_arrays(shape, sharding, bufs)
        return np.asarray(_replicate(g).addressable_data(0))
    return jax.tree_util.tree_map(one, tree)


# ---------------------------------------------------------------- same program everywhere


def set_program_check(enabled=True, timeout=None):
    """Turn the cross-process program check on/off; `timeout` (s) to wait for peers."""
    _check["enabled"] = bool(enabled)
    if timeout is not None:
        _check["timeout"] = float(timeout)


_LOC = re.compile(r' loc\(.*\)$', re.MULTILINE)


def _strip_locs(text: str) -> str:
    """The program without source locations (paths may differ between hosts)."""
    return _LOC.sub("", text)


def _module_name(text: str) -> str:
    m = re.search(r"module @(\S+)", text)
    return m.group(1) if m else "module"


def check_same_program(text: str, devices) -> None:
    """Fail on every process if the processes are about to compile different programs.

    The n-th multi-process compilation of each process is matched with the n-th of
    the others. Each publishes sha256(program without locations) under
    shardc/program/<n>/<process>, waits at a barrier for the processes of the mesh
    (up to the check timeout, so a missing process is an error, not a hang), and
    compares. On a mismatch, every process also publishes its text so that each error
    names the first line that differs."""
    if not _check["enabled"]:
        return
    me = jax.process_index()
    procs = tuple(sorted({d.process_index for d in devices}))
    n = _seqs[procs] = _seqs.get(procs, -1) + 1
    body = _strip_locs(text)
    digest = hashlib.sha256(body.encode()).hexdigest()[:24]
    name = _module_name(text)
    group = _group(procs)
    key = f"shardc/program/{group}/{n}"
    timeout = _check["timeout"]
    runtime.kv_set(f"{key}/hash/{me}", f"{digest} {name}".encode())
    try:
        runtime.barrier(key, timeout, list(procs))
    except Exception as e:  # noqa: BLE001
        raise _missing(e, f"the processes {list(procs)} did not all reach the compilation "
                       f"of program #{n} ({name})") from None
    if n:   # everyone has passed check n-1: its keys can go
        runtime.kv_delete(f"shardc/program/{group}/{n - 1}/hash/{me}")
    hashes = {}
    for k, v in runtime.kv_dir(f"{key}/hash"):
        hashes[int(k.rsplit("/", 1)[1])] = v.decode().split(" ", 1)
    if len({h for h, _ in hashes.values()}) <= 1:
        return
    # Diverged: show the first differing line against the lowest other process.
    runtime.kv_set(f"{key}/text/{me}", zlib.compress(body.encode()))
    other = min(p for p in hashes if hashes[p][0] != digest)
    try:
        theirs = zlib.decompress(runtime.kv_get(f"{key}/text/{other}", 30)).decode()
        diff = _first_difference(body, theirs, me, other)
    except Exception:  # noqa: BLE001
        diff = ""
    groups = {}
    for p, (h, nm) in sorted(hashes.items()):
        groups.setdefault((h, nm), []).append(p)
    listing = "; ".join(f"processes {ps} lowered {nm} (sha256 {h})"
                        for (h, nm), ps in groups.items())
    raise ShardcError(
        f"the processes diverged: they lowered different programs for the same step "
        f"(#{n}), so running it would deadlock or compute garbage: {listing}.{diff} "
        "Every process must trace the same program: same shapes, dtypes, shardings, "
        "static arguments and constants (look for values that depend on "
        "process_index(), random seeds, or per-process data sizes).")


def _group(procs) -> str:
    return "-".join(map(str, procs)) if len(procs) <= 8 else \
        hashlib.sha256(repr(procs).encode()).hexdigest()[:16]


def agree(payload: bytes, devices, what="a decision") -> bytes:
    """The lowest process of `devices` decides for all: it publishes `payload` and
    every other process returns that one instead of its own. For a choice each process
    makes alike but might not make identically (the sharding search hitting its time
    limit on one process and not another), so the processes compile one program. The
    n-th call of each process is matched with the n-th of the others."""
    me = jax.process_index()
    procs = tuple(sorted({d.process_index for d in devices}))
    n = _agreed[procs] = _agreed.get(procs, -1) + 1
    key = f"shardc/agree/{_group(procs)}/{n}"
    if me == procs[0]:
        runtime.kv_set(key, payload)
        return payload
    try:
        return runtime.kv_get(key, _check["timeout"])
    except Exception as e:  # noqa: BLE001
        raise _missing(e, f"process {procs[0]} did not publish {what} (#{n})") from None


def _missing(e, what) -> ShardcError:
    """A peer that did not arrive within the check's timeout: `what` happened (jax's
    error `e` says how the wait ended)."""
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return ShardcError(
        f"process {jax.process_index()}: {what} within {_check['timeout']:g} s. Every "
        "process must call the same shardc programs in the same order (a process may "
        "have failed, or be running different code). jax: " + first)


def _first_difference(mine: str, theirs: str, me: int, other: int) -> str:
    a, b = mine.splitlines(), theirs.splitlines()
    for i, (x, y) in enumerate(itertools.zip_longest(a, b, fillvalue="<end of module>")):
        if x != y:
            return (f"\nFirst difference, line {i + 1}:\n  process {me}:    {x.strip()}\n"
                    f"  process {other}:    {y.strip()}\n")
    return ""
