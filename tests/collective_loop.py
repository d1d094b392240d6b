"""Back-to-back collective programs must not abort XLA's CPU rendezvous."""
import os
import sys
import time
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
if sys.argv[1] == "jax-first":          # jax makes its CPU client before shardc is imported
    import jax
    jax.devices()
import numpy as np  # noqa: E402
import shardc  # noqa: E402
import shardc.numpy as snp  # noqa: E402
from shardc import NamedSharding, PartitionSpec as P  # noqa: E402

n = int(sys.argv[2])
mesh = shardc.make_mesh((2, 4), ("x", "y"), axis_types=(shardc.AxisType.Auto,) * 2)
x = shardc.device_put(np.ones((64, 128), np.float32), NamedSharding(mesh, P("x", "y")))
w = shardc.device_put(np.ones((128, 64), np.float32), NamedSharding(mesh, P("y", "x")))
f = shardc.jit(lambda x, w: (snp.tanh(x @ w).T @ x).sum(0) + x.sum(),
               out_shardings=NamedSharding(mesh, P("y")))
t = time.time()
for _ in range(n):
    y = f(x, w)
for _ in range(n // 4):
    z = snp.sum(x)                     # eager ops with an all-reduce
y.block_until_ready()
assert float(z) == 64 * 128, z
if sys.argv[1] == "jax-first":
    # a run that failed (XLA's error in its outputs) must not fail the next run, which
    # waits for it: its error is for whoever reads its outputs
    class Failed:
        def block_until_ready(self):
            raise RuntimeError("an earlier run's failure")
    serial = shardc.runtime.backend._CpuSerialExecutable
    serial.last = (Failed(),)
    f(x, w).block_until_ready()
    assert serial.last and not isinstance(serial.last[0], Failed)
print("ok", n, round(time.time() - t, 2), shardc.runtime.backend.CPU_POOL)
