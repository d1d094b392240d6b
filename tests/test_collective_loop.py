"""Thousands of collective programs dispatched back to back on 8 CPU devices (2 cores):
XLA's CPU rendezvous used to starve and abort the process after 40 s, for jax.jit
too. Each mode runs in a fresh process, as the pool is fixed when jax makes its client."""
import os
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).with_name("collective_loop.py")


@pytest.mark.parametrize("mode", ["fresh", "jax-first"])
def test_back_to_back_collective_calls_never_abort(mode):
    # fresh: shardc sizes the CPU client's pool; jax-first: jax made the client before
    # shardc was imported, so collective programs run one at a time instead (and a
    # failed run does not fail the next)
    env = {k: v for k, v in os.environ.items() if k not in ("PJRT_NPROC", "XLA_FLAGS")}
    r = subprocess.run([sys.executable, str(SCRIPT), mode, "6000"], env=env,
                       capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-2000:]
    ok, n, _, pool = r.stdout.split()
    assert ok == "ok" and n == "6000"
    assert (int(pool) >= 16) if mode == "fresh" else int(pool) == 0
