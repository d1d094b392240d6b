"""`python -m fuzz --n N --seed S [--out DIR] [--no-shrink] [--list-bytes]`: run N random
programs and print counts by kind, collective bytes against jax's (--list-bytes: which
programs move more), and a repro per failure. With
FUZZ_CONTROL=1 in the environment the programs are mostly control flow (scan, cond,
loops, checkpoint) and more of them differentiate; with FUZZ_EXPLICIT=1 most run on
meshes of Explicit axes (sharding in types, compared with jax.typeof); with FUZZ_AUTO=1
shardc's side has every in/out sharding shardc.AUTO (the search chooses; values
compared); with FUZZ_FRONTEND=1 shardc's side runs the jax program itself (jax.numpy,
jax.lax, jax.grad) inside shardc.jit, testing the translation of jax code; with
FUZZ_MANUAL=1 many steps are shard_map bodies (collectives, some under jvp, grad or vmap
inside the body)."""
from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8")

import argparse  # noqa: E402
import collections  # noqa: E402
import pathlib  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m fuzz")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="fuzz-failures")
    ap.add_argument("--no-shrink", action="store_true")
    ap.add_argument("--list-bytes", action="store_true",
                    help="list the programs whose collectives move more bytes than jax's")
    a = ap.parse_args(argv)
    from .driver import Workers
    from .gen import Gen
    from .run import BAD, KINDS
    from .shrink import repro, shrink
    workers = Workers()
    counts = collections.Counter()
    more = less = same = 0
    out = pathlib.Path(a.out)
    t0 = time.time()
    for i in range(a.n):
        seed = a.seed * 1_000_003 + i
        prog = Gen(np.random.default_rng(seed)).program()
        res = workers.run(seed)
        counts[res.kind] += 1
        if (i + 1) % 250 == 0:
            print(f"... {i + 1} programs, {time.time() - t0:.0f} s: " +
                  " ".join(f"{k}={v}" for k, v in sorted(counts.items())), flush=True)
        if res.bytes_shardc is not None:
            more += res.bytes_shardc > res.bytes_jax
            less += res.bytes_shardc < res.bytes_jax
            same += res.bytes_shardc == res.bytes_jax
            if a.list_bytes and res.bytes_shardc > res.bytes_jax:
                print(f"[{i}] more bytes: {res.bytes_shardc} vs jax's {res.bytes_jax} "
                      f"(program seed {seed})", flush=True)
        if res.kind in ("shardc_error", "harness", "jax_error", "both_error",
                        "shardc_more_permissive"):   # listed only
            print(f"[{i}] {res.kind}: {res.detail} (program seed {seed})", flush=True)
        if res.kind in BAD or res.kind == "sharding":
            crashed = "aborted" in res.detail   # shrinking it would abort this process
            small = prog if a.no_shrink or crashed else shrink(prog, res.kind, seed)
            out.mkdir(exist_ok=True)
            note = f"{res.kind}: {res.detail} (eager jax agrees with: " \
                   f"{res.eager_agrees_with or '-'}); program seed {seed}"
            (out / f"{res.kind}_{seed}.py").write_text(repro(small, seed, note))
            print(f"[{i}] {note}", flush=True)
    workers.close()
    dt = time.time() - t0
    print(f"\n{a.n} programs in {dt:.0f} s")
    print("  ".join(f"{k}={counts[k]}" for k in KINDS))
    print(f"collective bytes vs jax: more={more} less={less} same={same}")
    return 1 if any(counts[k] for k in BAD) else 0


if __name__ == "__main__":
    sys.exit(main())
