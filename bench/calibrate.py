"""Measure this host's devices for the cost model's Hardware profile:
`python -m bench.calibrate [--quick]`.

On the (2, 4) ("data", "model") mesh of simulated CPU devices (all 8 busy at once, as
in a sharded program): per-device f32 matmul throughput, elementwise memory bandwidth,
and the alpha-beta model of the collectives, t = latency + (n - 1) * hop + sent / bw
over n devices, sent as shardc/propagate/cost.py counts a ring's bytes per device
(all-reduce 2 (n-1)/n of its buffer, all-gather and reduce-scatter (n-1)/n). A
collective's time is the marginal time of one more in a chain of nine (each reads the
last's result, so none overlap), less an elementwise op's. Prints each measurement and
the fitted `Hardware(...)`, for `shardc.AUTO(mesh, hardware=...)`.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("XLA_FLAGS", "")
if "--xla_force_host_platform_device_count" not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] += " --xla_force_host_platform_device_count=8"

import numpy as np  # noqa: E402

DM = ("data", "model")


def _time(f, x, calls, repeats):
    """Median seconds per call; each call waits for the last (XLA:CPU's collectives
    can deadlock when runs queue up on a small thread pool)."""
    f(x).block_until_ready()
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(calls):
            f(x).block_until_ready()
        ts.append((time.perf_counter() - t) / calls)
    return float(np.median(ts))


def _sharded(mesh, body):
    import jax
    from jax.sharding import PartitionSpec as P
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P(DM), out_specs=P(DM),
                                 check_vma=False))


def _chain(kind, axis, size, n, k):
    """k collectives of `kind` over `axis` (n devices) in a chain, on `n`-element
    per-device blocks of f32."""
    import jax
    import jax.numpy as jnp

    def body(a):
        for _ in range(k):
            if kind == "all-reduce":
                a = jax.lax.psum(a, axis) * 0.5
            elif kind == "all-gather":
                a = jax.lax.all_gather(a, axis, tiled=True)[:size] * 0.5
            elif kind == "reduce-scatter":
                a = jnp.tile(jax.lax.psum_scatter(a, axis, tiled=True), n) * 0.5
            else:
                a = a * 0.5
        return a
    return body


def _sent(kind, nbytes, n):
    """Bytes a device sends (cost.py's Comm.sent) for a per-device operand of nbytes
    over n devices."""
    from shardc.propagate.cost import Comm
    buffer = nbytes * n if kind == "all-gather" else nbytes
    return Comm(kind, (("axis", 1, n),), buffer).sent


def collectives(mesh, sizes, calls, repeats, log):
    """[(kind, n devices, sent bytes, seconds)] per kind, axis and per-device size."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P
    out = []
    for axis in DM:
        n = mesh.shape[axis]
        for nbytes in sizes:
            size = nbytes // 4
            x = jax.device_put(np.ones((8 * size,), np.float32), NamedSharding(mesh, P(DM)))
            base = {k: _time(_sharded(mesh, _chain(None, axis, size, n, k)), x, calls, repeats)
                    for k in (1, 9)}
            for kind in ("all-reduce", "all-gather", "reduce-scatter"):
                t1, t9 = (_time(_sharded(mesh, _chain(kind, axis, size, n, k)), x, calls,
                                repeats) for k in (1, 9))
                t = max(((t9 - base[9]) - (t1 - base[1])) / 8, 0.0)
                out.append((kind, n, _sent(kind, nbytes, n), t))
                log(f"  {kind:14s} over {axis} ({n} devices), {nbytes // 1024:5d} KiB per "
                    f"device: {t * 1e6:8.1f} us")
    return out


def fit(rows):
    """(latency, hop, bandwidth) by least squares of t = L + (n-1) h + sent / bw."""
    a = np.array([[1.0, n - 1, sent] for _, n, sent, _ in rows])
    t = np.array([r[3] for r in rows])
    w = 1.0 / np.maximum(t, 1e-6)          # relative errors: small and large alike
    (lat, hop, inv), *_ = np.linalg.lstsq(a * w[:, None], t * w, rcond=None)
    return max(lat, 0.0), max(hop, 0.0), 1.0 / max(inv, 1e-15)


def compute(mesh, calls, repeats, log):
    """(flops per second, memory bytes per second) of one device, all 8 at work."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P
    m = 512
    a = jax.device_put(np.ones((8 * m, m), np.float32), NamedSharding(mesh, P(DM)))
    t = _time(_sharded(mesh, lambda b: b @ b.T), a, max(calls // 10, 2), repeats)
    flops = 2 * m ** 3 / t
    n = 1 << 18                           # 1 MiB per device: past the caches
    x = jax.device_put(np.ones((8 * n,), np.float32), NamedSharding(mesh, P(DM)))
    t = _time(_sharded(mesh, lambda b: b * 1.5 + 0.5), x, calls, repeats)
    t0 = _time(_sharded(mesh, lambda b: b[:8] * 1.5), x, calls, repeats)
    bw = 2 * 4 * n / max(t - t0, 1e-9)
    log(f"  matmul {m}^3: {flops / 1e9:.1f} GFLOP/s per device; elementwise: "
        f"{bw / 1e9:.1f} GB/s per device")
    return flops, bw


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench.calibrate",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    a = ap.parse_args(argv)
    import shardc
    mesh = shardc.make_mesh((2, 4), DM, axis_types=(shardc.AxisType.Auto,) * len(DM))
    calls, repeats = (10, 3) if a.quick else (30, 5)
    sizes = (4 << 10, 1 << 20) if a.quick else (4 << 10, 64 << 10, 256 << 10, 1 << 20)

    def log(*m):
        print(*m, file=sys.stderr, flush=True)
    log("compute:")
    flops, mem_bw = compute(mesh, calls, repeats, log)
    log("collectives (marginal time of one in a chain):")
    rows = collectives(mesh, sizes, calls, repeats, log)
    lat, hop, bw = fit(rows)
    worst = max(abs(lat + (n - 1) * hop + s / bw - t) / t for _, n, s, t in rows if t)
    print(f'Hardware("cpu (simulated)", {flops:.2g}, {mem_bw:.2g}, {bw:.2g}, {lat:.2g}, '
          f"hop_latency={hop:.2g})")
    print(f"# fit: latency {lat * 1e6:.1f} us + {hop * 1e6:.1f} us per hop + sent / "
          f"{bw / 1e9:.2f} GB/s; worst relative error {worst:.0%} over {len(rows)} "
          "measurements")
    return 0


if __name__ == "__main__":
    sys.exit(main())
