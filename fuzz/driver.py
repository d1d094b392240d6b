"""Run many programs through worker processes; a process abort becomes an outcome."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

from .run import Outcome

TIMEOUT_S = 300     # one program: two compiles on a loaded 2-core machine


class Workers:
    """One worker process at a time, restarted after an abort."""

    def __init__(self, collectives=True, env=None):
        self.args = [sys.executable, "-m", "fuzz.worker"] + ([] if collectives else
                                                             ["--no-bytes"])
        self.proc = None
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.env = dict(os.environ, PYTHONPATH=root + os.pathsep +
                        os.environ.get("PYTHONPATH", ""), **(env or {}))

    def _start(self):
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=self.env)
        self.err = []
        threading.Thread(target=lambda p=self.proc, e=self.err: e.extend(p.stderr),
                         daemon=True).start()

    def run(self, seed: int) -> Outcome:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(f"{seed}\n")
        self.proc.stdin.flush()
        stage = None
        timer = threading.Timer(TIMEOUT_S, self.proc.kill)
        timer.start()
        try:
            for line in self.proc.stdout:
                if line.startswith("@"):
                    stage = line[1:].strip()
                    continue
                d = json.loads(line)
                d.pop("seed")
                return Outcome(**d)
        finally:
            timer.cancel()
        # the worker died: XLA aborted (or the program hung past TIMEOUT_S)
        self.proc.wait()
        why = next((ln.strip() for ln in self.err if ln.startswith("F")), "") or \
            f"exit {self.proc.returncode}"
        self.proc = None
        if stage is None:          # jax's side died: jax cannot run it either
            return Outcome("jax_error", f"jax.jit aborted the process: {why[:300]}")
        return Outcome("internal", f"the process aborted in shardc: {why[:300]}")

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait()
