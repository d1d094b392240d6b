"""`shardc launch`: however a process ends, the launch ends within seconds, with the
first failure's exit code and one line naming that process and its cause.

Each launch runs WORKER on 2 processes x 2 CPU devices: process 1 faults (right after
initialize(), or in the middle of a loop of collectives) while process 0 goes on
into collectives that need it. Before shardc/_child.py and shardc/launch_watch.py,
these launches ended after 100-301 s (jax's heartbeat and shutdown timeouts), often
blaming process 0. The bound asserted is loose (a loaded 2-core machine); they end
0.3-1 s after the fault (5.3 s for a clean exit that leaves the others waiting).
"""
from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import textwrap
import time
import types

import pytest

from helpers import sample

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOUND_S = 30

WORKER = textwrap.dedent('''
    import os, signal, sys, time
    import numpy as np
    import shardc
    import shardc.numpy as snp
    from shardc import NamedSharding, P

    fault, when, out = sys.argv[1:4]
    faulty = int(os.environ.get("FAULTY", "1"))   # the process that faults


    def fault_now():
        with open(os.path.join(out, "t_fault"), "w") as f:
            f.write(repr(time.time()))
        print("faulting", flush=True)
        if fault == "raise":
            raise ValueError("boom")
        if fault == "exit":
            sys.exit(int(sys.argv[4]))
        if fault == "_exit":
            os._exit(int(sys.argv[4]))
        if fault == "signal":
            os.kill(os.getpid(), getattr(signal, sys.argv[4]))


    shardc.distributed.initialize()
    me = shardc.process_index()
    if me == faulty and when == "init":
        fault_now()
    mesh = shardc.make_mesh((4,), ("data",))
    x = shardc.make_array_from_callback(
        (8, 2), NamedSharding(mesh, P("data")), lambda i: np.ones((8, 2), np.float32)[i])
    f = shardc.jit(lambda a: snp.sum(a, axis=0))
    for step in range(10 ** 9 if fault != "none" else 5):
        if me == faulty and when == "mid" and step == 3:
            fault_now()
        f(x).block_until_ready()   # an all-reduce over both processes
    if me == 0 and fault == "none":   # more work on process 0 only, after process 1 ended
        t = time.time()
        while time.time() - t < float(sys.argv[4]):
            sum(range(10000))
    print("finished", flush=True)
''')


def launch(tmp_path, *args, launcher=(), env=None):
    """(exit code, stdout, stderr, seconds from the fault to the launcher's end)."""
    script = tmp_path / "s.py"
    script.write_text(WORKER)
    env = {**{k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}, **(env or {})}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "shardc.launch", "-n", "2", "--devices-per-process", "2",
           "--timeout", "90", *launcher, str(script), *args[:2], str(tmp_path), *args[2:]]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"the launch did not end:\n{out.decode()}\n{err.decode()}")
    end = time.time()
    t = tmp_path / "t_fault"
    after = end - float(t.read_text()) if t.exists() else None
    return p.returncode, out.decode(), err.decode(), after


def summary(err):
    """The launcher's own line (its last)."""
    lines = [ln for ln in err.splitlines() if ln.startswith("shardc launch: ")]
    assert len(lines) == 1, err
    assert err.rstrip().endswith(lines[0]), err
    return lines[0]


BOOM = 1 + WORKER.splitlines().index('        raise ValueError("boom")')   # its line

CASES = [
    # (fault, when, arg), exit code, the launcher's line
    (("raise", "init"), 1, f"process 1 failed: ValueError: boom (s.py:{BOOM})"),
    (("raise", "mid"), 1, f"process 1 failed: ValueError: boom (s.py:{BOOM})"),
    (("exit", "init", "3"), 3, "process 1 exited with code 3 (sys.exit(3))"),
    (("_exit", "mid", "5"), 5, "process 1 exited with code 5"),
    (("signal", "mid", "SIGKILL"), 137, "process 1 was killed by signal 9 (SIGKILL)"),
    (("signal", "mid", "SIGTERM"), 143, "process 1 was killed by signal 15 (SIGTERM)"),
    (("exit", "init", "0"), 1, "process 1 left early: it ended (exit code 0)"),
]


@pytest.mark.parametrize("args,code,line", sample(
    [pytest.param(*c, id="-".join(c[0])) for c in CASES], 2))
def test_a_failing_process_ends_the_launch(tmp_path, args, code, line):
    rc, out, err, after = launch(tmp_path, *args)
    assert rc == code, f"{out}\n{err}"
    s = summary(err)
    assert s.startswith("shardc launch: " + line), s
    assert s.endswith("; ended the other 1 process(es)"), s
    assert "Check failure" not in err and "Check failure" not in out, err
    assert "[1] faulting" in out
    assert after is not None and after < BOUND_S, f"ended {after:.1f} s after the fault"
    if args[0] == "raise":   # the traceback, once, without the wrapper's frames
        assert err.count("[1] Traceback (most recent call last):") == 1, err
        assert "[1] ValueError: boom" in err and "_child.py" not in err


def test_the_coordinator_killed(tmp_path):
    """Process 0 runs jax's coordination service: when it dies, process 1 aborts at
    once (absl's fatal error). The launch blames process 0, and the abort of process 1
    shows its fatal line but not its stack dump."""
    rc, out, err, after = launch(tmp_path, "signal", "mid", "SIGKILL", env={"FAULTY": "0"})
    assert rc == 137, f"{out}\n{err}"
    assert summary(err).startswith("shardc launch: process 0 was killed by signal 9 (SIGKILL)")
    assert "Check failure stack trace" not in err and after < BOUND_S


def test_os_exit_0_while_the_others_wait_in_a_collective(tmp_path):
    rc, out, err, after = launch(tmp_path, "_exit", "mid", "0", launcher=["--exit-grace", "1"])
    assert rc == 1, f"{out}\n{err}"
    assert "process 1 left early: it ended (exit code 0) while process 0 still ran, and " \
           "has been idle for 1 s since, waiting for it" in summary(err)
    assert after < BOUND_S


def test_a_process_busy_longer_than_the_exit_grace_is_not_waiting(tmp_path):
    """Process 1 ends first; process 0 computes 3 s more: working, not waiting."""
    rc, out, err, _ = launch(tmp_path, "none", "-", "3", launcher=["--exit-grace", "1"])
    assert rc == 0, f"{out}\n{err}"
    assert "[0] finished" in out and "[1] finished" in out


def _listening():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    return s


def test_a_port_in_use_is_a_clear_error(tmp_path):
    with _listening() as s:
        port = s.getsockname()[1]
        start = time.monotonic()
        rc, out, err, _ = launch(tmp_path, "none", "-", "0", launcher=["--port", str(port)])
        assert rc == 1 and time.monotonic() - start < BOUND_S
        assert f"port {port} on 127.0.0.1 is already in use" in err and not out
        # initialize() itself checks too (another program may take the port later)
        code = f"import shardc; shardc.distributed.initialize('127.0.0.1:{port}', 2, 0)"
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=60, env={**os.environ, "PYTHONPATH": ROOT})
        assert r.returncode == 1
        assert f"port {port} is already in use on this machine" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr.split("ShardcError")[-1]


# ---------------------------------------------------------------- the watcher alone


def _watch(n, events, exit_grace=5.0, ticks=None, dead=()):
    """A Watch over fake processes; `dead`: {process: exit status} already ended."""
    from shardc.tools.launch_watch import Watch
    procs = [types.SimpleNamespace(pid=1000 + i, returncode=dict(dead).get(i))
             for i in range(n)]
    q = queue.Queue()
    for e in events:
        q.put(e)
    read = (lambda pids: {p: ticks(p) for p in pids}) if ticks else (lambda pids: None)
    return Watch(procs, q, {}, timeout=20, exit_grace=exit_grace, read=read,
                 peek=lambda p: p.returncode)


def test_watch_takes_the_report_that_arrives_after_the_exit():
    """A process reports before it exits, but two threads read the two: the exit can
    come first; the cause is still its report's, and a later failure is not blamed."""
    w = _watch(2, [("exit", 1, 3, 1.0), ("exit", 0, -6, 1.1),
                   ("report", 1, "exit", 3, "sys.exit(3)", 0.9)])
    assert w.run() == (1, 3, "process 1 exited with code 3 (sys.exit(3))")
    assert w.leaving == 1


def test_watch_blames_the_death_not_the_abort_it_caused():
    """Process 0 is killed; process 1 aborts because of it (jax's fatal error), but
    its exit reaches the queue first."""
    t = time.monotonic()
    w = _watch(2, [("exit", 1, -6, t), ("exit", 0, -9, t)])
    w.consequence = lambda i: i == 1
    assert w.run() == (0, 137, "process 0 was killed by signal 9 (SIGKILL)")


def test_watch_blames_the_death_a_collective_error_came_from():
    """Process 1 died (os._exit(7)) in a collective, and process 0's collective raised
    because of it; process 0's report can be handled before process 1's exit."""
    t = time.monotonic()
    w = _watch(2, [("report", 0, "raised", 1, "JaxRuntimeError: gloo: connection closed", t),
                   ("exit", 1, 7, t)], dead={1: 7})
    assert w.run() == (1, 7, "process 1 exited with code 7")
    # ... and an abort caused by a failure is not blamed, whichever comes first
    for evs in ([("exit", 1, -6, t), ("report", 0, "raised", 1, "ValueError: x", t)],
                [("report", 0, "raised", 1, "ValueError: x", t), ("exit", 1, -6, t)]):
        w = _watch(2, evs, dead={1: -6})
        w.consequence = lambda i: i == 1
        assert w.run() == (0, 1, "process 0 failed: ValueError: x")


def test_watch_success_and_nonzero_exit_after_finishing():
    t = time.monotonic()
    assert _watch(2, [("report", 0, "done", 0, "", t), ("report", 1, "done", 0, "", t),
                      ("exit", 1, 0, t), ("exit", 0, 0, t)]).run() is None
    w = _watch(2, [("report", 0, "done", 0, "", t), ("exit", 0, -6, t)])
    assert w.run() == (0, 134, "process 0 finished its script but then was killed by "
                               "signal 6 (SIGABRT), while shutting down")


def test_watch_waits_while_the_others_work():
    """After process 1 ended, process 0 uses CPU time for a while (then stops): the
    launch fails only once it has been idle for the exit grace."""
    t0 = time.monotonic()
    busy_until = t0 + 1.5

    def ticks(pid):
        now = time.monotonic()
        return int(1000 * min(now, busy_until))   # 10 cores' worth while busy

    w = _watch(2, [("report", 1, "done", 0, "", t0)], exit_grace=1.0, ticks=ticks)
    i, code, msg = w.run()
    took = time.monotonic() - t0
    assert (i, code) == (1, 1) and "left early" in msg
    assert 2.0 < took < 6, took   # 1.5 s busy, then 1 s idle


def test_an_aborting_process_is_named_by_its_fatal_log_line():
    """absl's fatal line is the cause; the stack dump after it is printed only for the
    process that failed first, not for one that aborted because of it."""
    import io

    from shardc.tools.launch import _Printer
    dump = (b"F1123 13:32:45.104511    6929 client.h:80] Terminating process because the "
            b"JAX distributed service detected fatal errors.\n"
            b"*** Check failure stack trace: ***\n"
            b"    @     0x7f5d59940634  absl::log_internal::LogMessage::SendToLog()\n"
            b"    @     0x7f5d599405b6  absl::log_internal::LogMessage::Flush()\n")
    for first, kept in ((1, True), (0, False)):
        printer, out = _Printer(), io.BytesIO()
        printer.settle(first)
        printer.pump(io.BytesIO(dump + b"after\n"), out, 1)
        assert printer.fatal[1] == ("Terminating process because the JAX distributed "
                                    "service detected fatal errors.")
        text = out.getvalue().decode()
        assert text.startswith("[1] F1123 13:32:45") and text.endswith("[1] after\n")
        assert ("SendToLog" in text) == kept and ("Flush()" in text) == kept
        assert ("left out: this process aborted after process 0 failed" in text) != kept
