"""Data-parallel training over several processes, each loading only its own data.

    shardc launch -n 2 --devices-per-process 4 examples/multiprocess_data_parallel.py

starts 2 processes with 4 simulated CPU devices each: one global mesh of 8 devices.
Every process runs this same file. Each reads only the rows of the data set that its
devices hold, and `shardc.jit` compiles one program for the global mesh; the
gradient's sum over the batch becomes an all-reduce across both processes (gloo on
CPU; NCCL on GPUs). Without `shardc launch` it runs as one process on 8 devices.
"""
import os

os.environ.setdefault("SHARDC_CPU_DEVICES", "8")   # one process: 8 simulated devices

import numpy as np  # noqa: E402

import shardc  # noqa: E402
import shardc.numpy as snp  # noqa: E402
from shardc import NamedSharding, P  # noqa: E402

if "SHARDC_PROCESS_ID" in os.environ:   # started by `shardc launch`
    shardc.distributed.initialize()

N, D, STEPS, LR = 4096, 16, 60, 0.1
me, n_proc = shardc.process_index(), shardc.process_count()
mesh = shardc.make_mesh((len(shardc.devices()),), ("data",),
                        axis_types=(shardc.AxisType.Auto,))   # every process's devices
rows = NamedSharding(mesh, P("data"))


def dataset(lo, hi):
    """Rows lo:hi of a synthetic regression data set (as if read from files)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, D), dtype=np.float32)
    w_true = np.linspace(-1, 1, D, dtype=np.float32)
    y = X @ w_true + 0.01 * rng.standard_normal(N, dtype=np.float32)
    return X[lo:hi], y[lo:hi]


# This process's rows: the part of the batch that its devices hold.
lo = min(i[0].start for i in rows.addressable_devices_indices_map((N, D)).values())
hi = max(i[0].stop for i in rows.addressable_devices_indices_map((N, D)).values())
X_local, y_local = dataset(lo, hi)
X = shardc.make_array_from_process_local_data(NamedSharding(mesh, P("data", None)), X_local)
y = shardc.make_array_from_process_local_data(rows, y_local)
print(f"process {me} of {n_proc}: loaded rows {lo}:{hi} onto "
      f"{shardc.local_device_count()} local devices; X is {X.shape} over {X.sharding.spec}")


@shardc.jit
def step(w, X, y):
    """One step of gradient descent on the mean squared error."""
    r = X @ w - y
    loss = snp.mean(r * r)
    grad = (2.0 / X.shape[0]) * (r @ X)      # sums over the batch: an all-reduce
    return w - LR * grad, loss


w = np.zeros(D, np.float32)                   # NumPy: the same on every process
for t in range(STEPS):
    w, loss = step(w, X, y)
    if me == 0 and t % 20 == 0:
        print(f"step {t:3d}  loss {float(loss):.5f}")

# The result is a global array; bring it to every process as NumPy and check it
# against plain NumPy on the whole data set, computed here by every process.
w_all = shardc.process_allgather(w)
Xn, yn = dataset(0, N)
wn = np.zeros(D, np.float32)
for t in range(STEPS):
    wn = wn - LR * (2.0 / N) * ((Xn @ wn - yn) @ Xn)
err = float(np.abs(w_all - wn).max())
print(f"final loss {float(loss):.5f}; max |w - w_numpy| = {err:.1e}; "
      f"matches NumPy: {err < 1e-4}")
