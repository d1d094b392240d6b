"""`shardc launch`: run one program as N local processes over one global mesh.

    shardc launch -n 2 --devices-per-process 4 train.py --steps 10
    python -m shardc.launch -n 2 train.py          (the same)

Starts N copies of SCRIPT (or `-m MODULE`), process i with SHARDC_PROCESS_ID=i,
SHARDC_NUM_PROCESSES=N and SHARDC_COORDINATOR_ADDRESS=127.0.0.1:PORT, which
`shardc.distributed.initialize()` reads, and K simulated CPU devices each. Every line
a process prints is prefixed with `[i] ` (gloo's "Rank r is connected to k peer
ranks" lines are dropped). Only loopback is used.

Any way a process ends badly ends the whole launch within seconds: an exception or
sys.exit(nonzero) (shardc/tools/_child.py runs SCRIPT and reports these before the
interpreter's shutdown, which could wait minutes in jax.distributed's), a nonzero
exit code, a signal, or an exit with code 0 while the others sit waiting for it
(shardc/tools/launch_watch.py). The others are ended (SIGTERM, then SIGKILL of their
process groups), and the launcher exits with the first failure's exit code after
one line naming that process and its cause.
"""
from __future__ import annotations

import argparse
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time

from .launch_watch import Watch

GRACE_S = 2.0        # from SIGTERM to SIGKILL when ending processes
POLL_S = 0.05
EXIT_GRACE_S = 5.0   # how long others may sit idle after a process ended with code 0
CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_child.py")
REPORT_FD = "SHARDC_LAUNCH_REPORT_FD"   # as in _child.py
# An absl fatal log line ("F1123 13:24:33.123456   42 file.cc:12] message"): what a
# process that aborts says last; the launcher names it, not the stack dump after it.
_FATAL = re.compile(rb"^F\d{4} [\d:.]+\s+\d+ [^\]]+\] (.*)")
# jax's coordination service ends every process when one dies, saying so.
_CONSEQUENCE = re.compile(r"another task|distributed service detected fatal errors")
_FRAME = re.compile(rb"^\s+@\s+0x[0-9a-f]+ ")   # a line of absl's stack dump
HOLD_S = 1.5   # how long a held stack dump waits for the launch's first failure
# gloo prints this for every communicator it sets up (std::cerr, no switch to turn
# it off); it says nothing a user needs, so the launcher drops it.
# Several of gloo's threads may write it at once, so it can share a line with itself.
_GLOO_NOISE = re.compile(rb"\[Gloo\] Rank \d+ is connected to \d+ peer ranks\. "
                         rb"Expected number of connected peer ranks is : \d+")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _parser():
    p = argparse.ArgumentParser(
        prog="shardc launch",
        description="Run SCRIPT as N local processes that form one global device mesh "
                    "(each calls shardc.distributed.initialize()).")
    p.add_argument("-n", "--num-processes", type=int, required=True, metavar="N",
                   help="number of processes")
    p.add_argument("--devices-per-process", type=int, default=1, metavar="K",
                   help="simulated CPU devices per process (default 1)")
    p.add_argument("--port", type=int, default=None, metavar="P",
                   help="coordinator port on 127.0.0.1 (default: a free port)")
    p.add_argument("--timeout", type=float, default=None, metavar="S",
                   help="end every process and fail (exit 124) after S seconds")
    p.add_argument("--exit-grace", type=float, default=EXIT_GRACE_S, metavar="S",
                   help="when a process ends with exit code 0 while others still run, "
                        "fail once those have been idle (waiting for it) for S seconds "
                        f"(default {EXIT_GRACE_S:g})")
    p.add_argument("-m", dest="module", action="store_true",
                   help="SCRIPT is a module name, run as `python -m SCRIPT`")
    p.add_argument("script", metavar="SCRIPT", help="the Python file (or module) to run")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="ARGS",
                   help="arguments passed to SCRIPT")
    return p


def child_env(i: int, n: int, port: int, k: int, base=None) -> dict:
    """The environment of process i."""
    env = dict(os.environ if base is None else base)
    flags = [f for f in env.get("XLA_FLAGS", "").split()
             if not f.startswith("--xla_force_host_platform_device_count")]
    flags.append(f"--xla_force_host_platform_device_count={k}")
    env.update({
        "SHARDC_COORDINATOR_ADDRESS": f"127.0.0.1:{port}",
        "SHARDC_NUM_PROCESSES": str(n),
        "SHARDC_PROCESS_ID": str(i),
        "SHARDC_CPU_DEVICES": str(k),
        "XLA_FLAGS": " ".join(flags),
        "JAX_PLATFORMS": "cpu",
        "PYTHONUNBUFFERED": "1",
    })
    return env


class _Printer:
    """Copies a child's stream to ours, one whole line at a time, with a prefix.

    An absl "Check failure stack trace" is held back until the launch knows its first
    failure: a process that aborts because another failed (jax's coordination
    service ends every process when one dies) keeps its fatal line, not the dump."""

    def __init__(self):
        self.lock = threading.Lock()
        self.fatal: dict = {}   # process -> its last absl fatal message
        self.first = None       # the process whose failure ended the launch
        self.decided = threading.Event()

    def settle(self, first) -> None:
        self.first = first
        self.decided.set()

    def _write(self, dst, prefix, lines):
        with self.lock:
            for line in lines:
                dst.write(prefix + (line if line.endswith(b"\n") else line + b"\n"))
            dst.flush()

    def _release(self, dst, prefix, i, held):
        self.decided.wait(HOLD_S)
        if self.first is not None and self.first != i:
            held = [f"(absl's stack trace left out: this process aborted after process "
                    f"{self.first} failed)".encode()]
        self._write(dst, prefix, held)

    def pump(self, src, dst, i: int):
        prefix = f"[{i}] ".encode()
        held = []
        try:
            for line in iter(src.readline, b""):
                if held and not _FRAME.match(line):
                    self._release(dst, prefix, i, held)
                    held = []
                if held or line.startswith(b"*** Check failure stack trace"):
                    held.append(line)
                    continue
                if line.startswith(b"[Gloo]"):
                    line = _GLOO_NOISE.sub(b"", line)
                    if not line.strip():
                        continue
                m = _FATAL.match(line)
                if m:
                    self.fatal[i] = m.group(1).decode("utf-8", "replace").strip()[:500]
                self._write(dst, prefix, [line])
            if held:
                self._release(dst, prefix, i, held)
        except (OSError, ValueError):
            pass
        finally:
            try:
                src.close()
            except OSError:
                pass


def _die_with_parent():
    """In the child, before exec: get SIGKILL if the launcher dies (Linux), so that
    not even `kill -9` of the launcher leaves processes behind."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _signal_group(p: subprocess.Popen, sig) -> None:
    try:
        os.killpg(p.pid, sig)   # each child leads its own process group
    except (ProcessLookupError, PermissionError):
        pass


def _end(procs, spare=None, failed=True) -> None:
    """SIGTERM every live process (and its group), then SIGKILL after GRACE_S. The
    process `spare` (the failed one, which is leaving by itself) gets no SIGTERM. After
    a failure, also what is left of the groups of the processes that have exited."""
    live = [p for p in procs if p.poll() is None]
    for p in live:
        if p is not spare:
            _signal_group(p, signal.SIGTERM)
    deadline = time.monotonic() + GRACE_S
    while time.monotonic() < deadline and any(p.poll() is None for p in live):
        time.sleep(POLL_S)
    for p in procs if failed else live:
        _signal_group(p, signal.SIGKILL)
    for p in live:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _thread(target, *args):
    t = threading.Thread(target=target, args=args, daemon=True)
    t.start()
    return t


def _wait(p, i, events):
    rc = p.wait()
    events.put(("exit", i, rc, time.monotonic()))


def _read_reports(fd, events):
    """Lines 'process<TAB>kind<TAB>code<TAB>cause' from the processes' wrappers."""
    with os.fdopen(fd, "rb") as f:
        for line in f:
            parts = line.decode("utf-8", "replace").rstrip("\n").split("\t", 3)
            try:
                i, kind, code, cause = int(parts[0]), parts[1], int(parts[2]), parts[3]
            except (ValueError, IndexError):
                continue
            events.put(("report", i, kind, code, cause, time.monotonic()))


def _say(msg: str) -> None:
    sys.stderr.write(f"shardc launch: {msg}\n")
    sys.stderr.flush()


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True if something listens on host:port (a coordinator could not bind it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        # as gRPC does: a port left in TIME_WAIT by an ended launch counts as free
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def run(n, script, args=(), devices_per_process=1, port=None, timeout=None,
        module=False, python=None, exit_grace=EXIT_GRACE_S) -> int:
    """Run the N processes to the end; returns the exit code for the launcher."""
    if n < 1:
        raise SystemExit("shardc launch: -n must be at least 1")
    if devices_per_process < 1:
        raise SystemExit("shardc launch: --devices-per-process must be at least 1")
    if not module and not os.path.exists(script):
        raise SystemExit(f"shardc launch: no such file: {script}")
    if port is not None and not 0 < port < 65536:
        raise SystemExit(f"shardc launch: --port {port} is not a TCP port (1..65535)")
    if port is not None and port_in_use(port):
        raise SystemExit(f"shardc launch: port {port} on 127.0.0.1 is already in use (by "
                         "another program or launch); pass another --port, or leave "
                         "--port out to use a free one")
    port = port or free_port()
    cmd = [python or sys.executable, CHILD] + (["-m", script] if module else [script]) \
        + list(args)
    printer = _Printer()
    out, err = sys.stdout.buffer, sys.stderr.buffer
    events: queue.Queue = queue.Queue()
    procs, threads = [], []
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    stop = {"sig": None}

    def on_signal(sig, _frame):
        stop["sig"] = sig

    for s in old:
        signal.signal(s, on_signal)
    rfd, wfd = os.pipe()
    failed = watch = None
    try:
        linux = sys.platform.startswith("linux")
        for i in range(n):   # all forks before any thread starts (preexec_fn is then safe)
            env = child_env(i, n, port, devices_per_process)
            env[REPORT_FD] = str(wfd)
            procs.append(subprocess.Popen(
                cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, pass_fds=(wfd,), start_new_session=True,
                preexec_fn=_die_with_parent if linux else None))
        os.close(wfd)
        wfd = None
        for i, p in enumerate(procs):
            for src, dst in ((p.stdout, out), (p.stderr, err)):
                threads.append(_thread(printer.pump, src, dst, i))
            _thread(_wait, p, i, events)
        _thread(_read_reports, rfd, events)   # it closes rfd
        rfd = None
        watch = Watch(procs, events, stop, timeout, exit_grace,
                      consequence=lambda i: bool(_CONSEQUENCE.search(printer.fatal.get(i, ""))))
        failed = watch.run()
    finally:
        printer.settle(failed[0] if failed else None)
        for fd in (wfd, rfd):
            if fd is not None:
                os.close(fd)
        alive = [j for j, p in enumerate(procs) if p.poll() is None]
        leaving = watch.leaving if watch is not None else None
        _end(procs, procs[leaving] if leaving is not None else None, failed is not None)
        for t in threads:
            t.join(timeout=2)
        for s, h in old.items():
            signal.signal(s, h)
    if failed is None:
        return 0
    i, code, msg = failed
    if i is not None and "signal" in msg and printer.fatal.get(i):
        msg += f": {printer.fatal[i]}"
    others = len([j for j in alive if j != i])
    _say(msg + (f"; ended the other {others} process(es)" if i is not None and others else ""))
    return code


def main(argv=None) -> int:
    """`shardc launch ...` (argv without the `launch`); returns the exit code."""
    a = _parser().parse_args(argv)
    return run(a.num_processes, a.script, a.args, a.devices_per_process, a.port, a.timeout,
               a.module, exit_grace=a.exit_grace)


if __name__ == "__main__":
    sys.exit(main())
