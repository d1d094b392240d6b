"""How `shardc launch` decides that a launch is over, and whose fault it is.

Each process's wrapper (shardc/_child.py) reports on a pipe how its script ended,
before the interpreter shuts down (that can block in jax.distributed's shutdown
barrier); one thread per process reports its exit. Both arrive on one queue, about
in the order they happened (two threads: see _cause and _died_before), so the first
failure is the one named, not the processes that failed because of it (a collective
whose peer is gone, jax's abort of every process when one dies). The launch fails at
once when a process

- raises or calls sys.exit with a nonzero code (reported before it leaves),
- exits with a nonzero code or is killed by a signal, or
- ends cleanly (exit code 0) while others still run, and those then sit idle (no CPU
  time) for `exit_grace` seconds: they are waiting for it, in a collective, a barrier
  or to connect, and would wait until jax's timeouts (100-300 s). Processes that are
  still computing are left to finish: only an idle wait counts.

It succeeds when every process ended with exit code 0.
"""
from __future__ import annotations

import os
import queue
import signal
import time

POLL_S = 0.05
SAMPLE_S = 0.5          # how often the CPU time of waiting processes is read
BUSY_FRACTION = 0.05    # of one core: more than this over a sample is "working"
EXIT_AFTER_DONE_S = 60  # all finished: time for jax's shutdown barrier to let them go
LATE_S = 0.5            # how long an exit waits for its process's report (another thread)


def exit_code(rc: int) -> int:
    return 128 - rc if rc < 0 else rc   # killed by signal s -> 128 + s, as shells do


def _signal_name(s: int) -> str:
    try:
        return signal.Signals(s).name
    except ValueError:
        return f"signal {s}"


def peek_exit(p):
    """The exit status of Popen p if it has ended (Popen.returncode's convention),
    without reaping it (its waiter thread does); None while it runs."""
    if getattr(p, "returncode", None) is not None:
        return p.returncode
    try:
        r = os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:   # just reaped by its waiter: returncode comes next
        end = time.monotonic() + 0.2
        while getattr(p, "returncode", None) is None and time.monotonic() < end:
            time.sleep(0.005)
        return getattr(p, "returncode", None)
    except (AttributeError, OSError):   # no waitid (not POSIX)
        return None
    if r is None:
        return None
    return -r.si_status if r.si_code in (os.CLD_KILLED, os.CLD_DUMPED) else r.si_status


def cpu_ticks(pgids) -> dict | None:
    """Clock ticks of CPU time used so far by the processes of each process group
    (Linux /proc); None where that cannot be read."""
    try:
        pids = [d for d in os.listdir("/proc") if d.isdigit()]
    except OSError:
        return None
    ticks = dict.fromkeys(pgids, 0)
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        g = int(fields[2])
        if g in ticks:
            ticks[g] += int(fields[11]) + int(fields[12])   # utime + stime
    return ticks


class _Idle:
    """When each process last used CPU time, sampled every SAMPLE_S."""

    def __init__(self, procs, read=cpu_ticks):
        self.procs, self.read = procs, read
        self.hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        self.prev: dict = {}      # i -> (time, ticks)
        self.busy: dict = {}      # i -> last time it was seen working
        self.t = float("-inf")

    def update(self, which, now):
        if now - self.t < SAMPLE_S:
            return
        self.t = now
        ticks = self.read([self.procs[i].pid for i in which])
        if ticks is None:
            return
        for i in which:
            tk = ticks.get(self.procs[i].pid, 0)
            if i in self.prev:
                t0, tk0 = self.prev[i]
                if (tk - tk0) / self.hz > BUSY_FRACTION * (now - t0):
                    self.busy[i] = now
            self.prev[i] = (now, tk)

    def idle_for(self, which, since, now) -> float:
        """How long every one of `which` has been idle, counting from `since`."""
        return min(now - max(since, self.busy.get(i, since)) for i in which)


class Watch:
    """Follows the processes' events to the end of the launch."""

    def __init__(self, procs, events, stop, timeout=None, exit_grace=5.0, read=cpu_ticks,
                 consequence=lambda i: False, peek=None):
        self.procs, self.events, self.stop = procs, events, stop
        self.peek = peek or peek_exit
        self.consequence = consequence   # i -> did it abort because another process died?
        self.timeout, self.grace = timeout, exit_grace
        self.n = len(procs)
        self.done: dict = {}      # i -> when it ended cleanly (reported or exit code 0)
        self.exited: dict = {}    # i -> exit status (Popen.returncode)
        self.idle = _Idle(procs, read)
        self.stash: list = []     # events read early, handled next
        self.leaving = None       # the failed process, if it is leaving by itself

    def run(self):
        """None if every process ended with code 0, else (process or None, exit code,
        one line saying what happened)."""
        start = time.monotonic()
        while True:
            if self.stop.get("sig") is not None:
                s = self.stop["sig"]
                return None, 128 + s, f"got {_signal_name(s)}; ended every process"
            now = time.monotonic()
            if self.timeout is not None and now - start > self.timeout:
                return None, 124, f"timed out after {self.timeout:g} s; ended every process"
            failed = self._next_events()
            if failed:
                return failed
            if len(self.exited) == self.n:
                return None
            failed = self._waiting(time.monotonic())
            if failed:
                return failed

    def _next_events(self):
        """Handles every event that has come (waiting up to POLL_S for one)."""
        wait = POLL_S
        while True:
            try:
                ev = self.stash.pop(0) if self.stash else self.events.get(timeout=wait)
            except queue.Empty:
                return None
            failed = self._event(*ev)
            if failed:
                return failed
            wait = 0

    def _event(self, what, i, *rest):
        if what == "report":
            kind, code, cause, t = rest
            if kind == "done":
                self.done.setdefault(i, t)
                return None
            self.leaving = i   # it reported, and now exits at once (shardc/_child.py)
            k = self._died_before(i)
            if k is not None:   # i failed because k died (e.g. in a collective)
                return self._event("exit", k, self.peek(self.procs[k]), t)
            if kind == "exit":
                return i, code, f"process {i} exited with code {code} ({cause})"
            return i, code, f"process {i} failed: {cause}"
        rc, t = rest
        self.exited[i] = rc
        if rc == 0:
            self.done.setdefault(i, t)
            return None
        if i not in self.done:
            late = self._late_report(i)
            failed = self._event(*late) if late is not None else None
            if failed:
                return failed
            cause = self._cause(i)
            if cause is not None:
                return self._event(*cause)
        how = (f"was killed by signal {-rc} ({_signal_name(-rc)})" if rc < 0
               else f"exited with code {rc}")
        if i in self.done:
            how = f"finished its script but then {how}, while shutting down"
        return i, exit_code(rc), f"process {i} {how}"

    def _late_report(self, i):
        """The report of process i, if it is on its way: it is written before the
        process exits, but read by another thread than the one that sees the exit."""
        for ev in self.stash:
            if ev[0] == "report" and ev[1] == i:
                self.stash.remove(ev)
                return ev
        end = time.monotonic() + LATE_S
        while (left := end - time.monotonic()) > 0:
            try:
                ev = self.events.get(timeout=left)
            except queue.Empty:
                return None
            if ev[0] == "report" and ev[1] == i:
                return ev
            self.stash.append(ev)
        return None

    def _cause(self, i):
        """If process i aborted because another process died or failed (jax's
        coordination service ends them all), that other's event, if it is set aside:
        two threads see exits and reports, and their order in the queue may not be the
        order in which things happened."""
        if not self.consequence(i):
            return None
        for ev in self.stash:
            if ev[0] == "exit" and ev[2] != 0 and not self.consequence(ev[1]) or \
                    ev[0] == "report" and ev[2] != "done":
                self.stash.remove(ev)
                return ev
        return None

    def _died_before(self, i):
        """A process that has already died (no report, nonzero exit) when process i
        reports its failure: i's report was written after that death, and i's
        exception is most likely its consequence (a collective whose peer is gone).
        The kernel closes a dying process's sockets before its exit can be seen, so a
        peer may report first: look again for LATE_S before blaming i."""
        end = time.monotonic() + LATE_S
        while True:
            k = self._dead_other(i)
            if k is not None or time.monotonic() >= end:
                return k
            time.sleep(POLL_S)

    def _dead_other(self, i):
        for k in range(self.n):
            if k == i or k in self.exited or k in self.done:
                continue
            rc = self.peek(self.procs[k])
            if rc is None or rc == 0:
                continue
            if rc == -signal.SIGABRT:   # jax's abort when a process died? wait for its line
                end = time.monotonic() + LATE_S
                while not self.consequence(k) and time.monotonic() < end:
                    time.sleep(POLL_S)
                if self.consequence(k):
                    continue
            return k
        return None

    def _waiting(self, now):
        """A failure if processes wait, idle, for one that has ended."""
        if not self.done:
            return None
        running = [i for i in range(self.n) if i not in self.done and i not in self.exited]
        if not running:   # all finished: they leave together through jax's shutdown
            if now - max(self.done.values()) > EXIT_AFTER_DONE_S:
                left = [i for i in range(self.n) if i not in self.exited]
                return left[0], 1, (f"process(es) {_list(left)} finished but did not exit "
                                    f"within {EXIT_AFTER_DONE_S} s (stuck shutting down)")
            return None
        first = min(self.done, key=self.done.get)
        self.idle.update(running, now)
        if self.idle.idle_for(running, self.done[first], now) < self.grace:
            return None
        who = (f"process {running[0]} still ran, and has" if len(running) == 1 else
               f"processes {_list(running)} still ran, and have")
        return first, 1, (
            f"process {first} left early: it ended (exit code 0) while {who} been idle "
            f"for {self.grace:g} s since, waiting for it (in a collective, a barrier, or "
            "to connect); if that was only slow, pass --exit-grace SECONDS")


def _list(ids) -> str:
    return ", ".join(map(str, ids))
