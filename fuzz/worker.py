"""A worker process: reads program seeds from stdin, writes one JSON outcome per seed.

XLA aborts the whole process on some programs (jax.jit's too), so the driver runs
programs here and reads the stage markers to tell which side died."""
from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8")

import dataclasses  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402


def main():
    warnings.simplefilter("ignore")
    from .gen import Gen
    from .run import Outcome, run
    collectives = "--no-bytes" not in sys.argv
    for line in sys.stdin:
        seed = int(line)
        prog = Gen(np.random.default_rng(seed)).program()

        def mark(stage):
            print(f"@{stage}", flush=True)
        try:
            res = run(prog, seed, collectives=collectives, mark=mark)
        except Exception as e:  # noqa: BLE001 -- the fuzzer's own failure, not shardc's
            res = Outcome("harness", f"{type(e).__name__}: {str(e)[:300]}")
        print(json.dumps({"seed": seed, **dataclasses.asdict(res)}), flush=True)


if __name__ == "__main__":
    main()
