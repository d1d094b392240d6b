"""Multi-process shardc: 2 processes x 4 CPU devices over one global 8-device mesh.

The scenarios at the bottom run inside `shardc launch` (this file is also the worker
script: `python tests/test_distributed.py <scenario> <outdir>`); each process saves
what it saw, and the tests compare that with the same functions run here, in one
process on 8 devices, and with NumPy. Every launch has a timeout and its processes
are always ended.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import jax
import numpy as np
import pytest

import shardc
import shardc.numpy as snp
from shardc import NamedSharding, P

HERE = os.path.abspath(__file__)
ROOT = os.path.dirname(os.path.dirname(HERE))
LAUNCH_TIMEOUT = 120


# ---------------------------------------------------------------- the programs
# Module level, so that the workers and the single-process reference trace the same
# source lines (locations are part of the lowered text).

def dp_stats(x):
    """Data-parallel reduction over the batch (rows split over both processes)."""
    return snp.sum(x * x, axis=0) / x.shape[0], snp.sum(x)


def tp_mlp(x, w1, w2):
    """Tensor-parallel MLP: w1 split by columns, w2 by rows -> an all-reduce."""
    return snp.tanh(x @ w1) @ w2


def layer(x, w, b):
    return shardc.nn.relu(x @ w + b)


def data():
    rng = np.random.default_rng(0)
    f = lambda *s: rng.standard_normal(s, dtype=np.float32)  # noqa: E731
    return dict(X=f(64, 32), x=f(16, 32), w1=f(32, 64), w2=f(64, 24), w=f(32, 64),
                b=f(64))


def meshes():
    auto = shardc.AxisType.Auto
    return (shardc.make_mesh((2, 4), ("data", "model"), axis_types=(auto,) * 2),
            shardc.make_mesh((8,), ("model",), axis_types=(auto,)))


def global_inputs(d, mesh24, mesh8, local_rows=None):
    """The global arrays of the scenarios. `local_rows`: this process's part of X."""
    xs = NamedSharding(mesh24, P("data", None))
    if local_rows is None:
        gX = shardc.device_put(d["X"], xs)
    else:
        gX = shardc.make_array_from_process_local_data(xs, local_rows)
    cb = lambda a, s: shardc.make_array_from_callback(a.shape, s, lambda i: a[i])  # noqa
    gw1 = cb(d["w1"], NamedSharding(mesh8, P(None, "model")))
    gw2 = cb(d["w2"], NamedSharding(mesh8, P("model", None)))
    gx = cb(d["x"][:16], NamedSharding(mesh24, P("data", None)))
    gw = cb(d["w"], NamedSharding(mesh24, P(None, "model")))
    return gX, gw1, gw2, gx, gw


def lowered_texts(gX, gw1, gw2, gx, gw, d):
    return {"dp": shardc.jit(dp_stats).lower(gX).text,
            "tp": shardc.jit(tp_mlp).lower(d["x"], gw1, gw2).text,
            "layer": shardc.jit(layer).lower(gx, gw, d["b"]).text}


# ---------------------------------------------------------------- launching


def launch(args, timeout=LAUNCH_TIMEOUT, env=None):
    """Run `python -m shardc.launch ARGS`; returns (exit code, stdout, stderr, seconds).

    The launcher runs in its own session; on timeout it gets SIGTERM (it then ends
    its processes) and then SIGKILL (its processes die with it: PDEATHSIG)."""
    e = dict(os.environ)
    e.pop("XLA_FLAGS", None)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    e.update(env or {})
    start = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "shardc.launch", *args], env=e,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
        pytest.fail(f"launch {args} did not finish in {timeout} s:\n{out.decode()}\n"
                    f"{err.decode()}")
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    return p.returncode, out.decode(), err.decode(), time.monotonic() - start


def lines_of(text, i):
    return [ln[len(f"[{i}] "):] for ln in text.splitlines() if ln.startswith(f"[{i}] ")]


# ---------------------------------------------------------------- the main run


@pytest.fixture(scope="module")
def main_run(tmp_path_factory, testrun_uid):
    """One launch of the main scenario, shared by the tests below -- also by several
    pytest-xdist workers (a lock file in their common temporary directory, named by
    the run: an earlier run's results are never taken for this one's)."""
    import fcntl
    shared = tmp_path_factory.getbasetemp().parent
    out = shared / f"dist_main_{testrun_uid}"
    with open(shared / f"dist_main_{testrun_uid}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "done.json").exists():
            out.mkdir(exist_ok=True)
            rc, so, se, secs = launch(["-n", "2", "--devices-per-process", "4",
                                       "--timeout", "100", HERE, "main", str(out)])
            (out / "done.json").write_text(json.dumps([rc, so, se, secs]))
        rc, so, se, secs = json.loads((out / "done.json").read_text())
    assert rc == 0, f"exit {rc}\n{so}\n{se}"
    res = []
    for i in range(2):
        with open(out / f"p{i}.json") as f:
            js = json.load(f)
        arrs = dict(np.load(out / f"p{i}.npz"))
        res.append((js, arrs))
    return dict(res=res, stdout=so, stderr=se, secs=secs)


def test_global_view(main_run):
    for i, (js, _) in enumerate(main_run["res"]):
        assert js["process_index"] == i and js["process_count"] == 2
        assert js["devices"] == 8 and js["local_devices"] == 4
        assert js["local_device_count"] == 4
        # every local device belongs to this process, and the mesh spans both
        assert js["local_processes"] == [i]


def test_data_parallel_reduction_matches_single_process(main_run):
    d = data()
    mesh24, _ = meshes()
    ref_mean, ref_sum = shardc.jit(dp_stats)(shardc.device_put(
        d["X"], NamedSharding(mesh24, P("data", None))))
    for js, a in main_run["res"]:
        np.testing.assert_allclose(a["dp_mean"], np.asarray(ref_mean), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a["dp_sum"], np.asarray(ref_sum), rtol=1e-5, atol=1e-4)
        np.testing.assert_allclose(a["dp_mean"], (d["X"] ** 2).mean(0), rtol=1e-5)
        assert js["dp_specs"] == [str(ref_mean.sharding.spec), str(ref_sum.sharding.spec)]
        assert js["dp_fully_addressable"] is False


def test_tensor_parallel_matmul_matches_single_process(main_run):
    d = data()
    _, mesh8 = meshes()
    gw1 = shardc.device_put(d["w1"], NamedSharding(mesh8, P(None, "model")))
    gw2 = shardc.device_put(d["w2"], NamedSharding(mesh8, P("model", None)))
    ref = shardc.jit(tp_mlp)(d["x"], gw1, gw2)
    mesh24, _ = meshes()
    ref_layer = shardc.jit(layer)(
        shardc.device_put(d["x"], NamedSharding(mesh24, P("data", None))),
        shardc.device_put(d["w"], NamedSharding(mesh24, P(None, "model"))), d["b"])
    for js, a in main_run["res"]:
        np.testing.assert_allclose(a["tp"], np.asarray(ref), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(a["tp"], np.tanh(d["x"] @ d["w1"]) @ d["w2"],
                                   rtol=1e-4, atol=1e-4)
        assert js["tp_spec"] == str(ref.sharding.spec)
        np.testing.assert_allclose(a["layer"], np.asarray(ref_layer), rtol=1e-5, atol=1e-5)
        assert js["layer_spec"] == str(ref_layer.sharding.spec) == "P('data', 'model')"


def test_auto_processes_take_one_choice(main_run):
    d = data()
    mesh24, _ = meshes()
    auto = shardc.AUTO(mesh24)
    c = shardc.jit(tp_mlp, in_shardings=auto, out_shardings=auto).lower(
        *[jax.ShapeDtypeStruct(d[k].shape, d[k].dtype) for k in ("x", "w1", "w2")]).compile()
    (ins, _), out = c.input_shardings, c.output_shardings
    want = [str(s.spec) for s in ins] + [str(out.spec)]
    for js, a in main_run["res"]:
        assert js["auto_specs"] == want        # process 0's choice, the single-process one
        np.testing.assert_allclose(a["auto"], np.tanh(d["x"] @ d["w1"]) @ d["w2"],
                                   rtol=1e-4, atol=1e-4)


def test_stablehlo_is_byte_identical_across_processes(main_run):
    (j0, _), (j1, _) = main_run["res"]
    if "PYTHONHASHSEED" not in os.environ:   # so set and dict orders could differ...
        assert j0["str_hash"] != j1["str_hash"]
    assert j0["hlo_sha"] == j1["hlo_sha"]    # ... and yet the programs are the same
    d = data()
    mesh24, mesh8 = meshes()
    import hashlib
    texts = lowered_texts(*global_inputs(d, mesh24, mesh8), d)
    here = {k: hashlib.sha256(t.encode()).hexdigest() for k, t in texts.items()}
    assert j0["hlo_sha"] == here   # ... and identical to the single-process lowering


def test_process_local_data_loading(main_run):
    d = data()
    for i, (js, a) in enumerate(main_run["res"]):
        lo, hi = js["local_rows"]
        assert (lo, hi) == (32 * i, 32 * (i + 1))
        np.testing.assert_array_equal(a["local_shards"], d["X"][lo:hi])
        # host-local <-> global round trip and gathering
        np.testing.assert_array_equal(a["roundtrip"], d["X"][lo:hi])
        np.testing.assert_array_equal(a["gathered_X"], d["X"])
        np.testing.assert_array_equal(a["stacked"], [[0, 0], [1, 10]])
        np.testing.assert_array_equal(a["tiled"], [0, 0, 1, 10])


def test_numpy_and_eager_inputs(main_run):
    d = data()
    for js, a in main_run["res"]:
        # NumPy arguments are the same whole value on every process (replicated)
        np.testing.assert_allclose(a["numpy_arg"], d["x"] @ d["w"] + d["b"], rtol=1e-4,
                                   atol=1e-4)
        # a program with only NumPy inputs runs on this process's own device
        np.testing.assert_allclose(a["local_only"], d["x"].sum(0), rtol=1e-5, atol=1e-5)
        # eager ops work on global arrays
        np.testing.assert_allclose(a["eager"], 2 * d["X"], rtol=1e-6)
        assert "cannot be split over the devices of several processes" in js["numpy_split_err"]
        assert "make_array_from_process_local_data" in js["numpy_split_err"]


def test_diverging_processes_fail_with_a_clear_error(main_run):
    for i, (js, _) in enumerate(main_run["res"]):
        msg = js["diverge_err"]
        assert "processes diverged" in msg, msg
        assert "First difference" in msg and f"process {i}:" in msg
        assert "dense<" in msg   # the differing constant
    # a process that never reaches the compilation: a timeout error, not a hang
    msg = main_run["res"][0][0]["missing_err"]
    assert "did not all reach the compilation" in msg, msg
    assert main_run["res"][1][0]["missing_err"] is None


def test_example_multiprocess_data_parallel():
    """The example trains for 60 steps without waiting between them (this once
    deadlocked jaxlib's CPU client) and checks itself against NumPy."""
    ex = os.path.join(ROOT, "examples", "multiprocess_data_parallel.py")
    rc, so, se, _ = launch(["-n", "2", "--devices-per-process", "4", "--timeout", "100", ex])
    assert rc == 0, f"{so}\n{se}"
    assert "[0] process 0 of 2: loaded rows 0:2048 onto 4 local devices" in so
    assert "[1] process 1 of 2: loaded rows 2048:4096 onto 4 local devices" in so
    assert "[0] step   0  loss 5.96837" in so and "[1] step" not in so
    for i in range(2):
        assert f"[{i}] final loss 0.00010; max |w - w_numpy| =" in so
        assert lines_of(so, i)[-1].endswith("matches NumPy: True")


def _losses(line):
    return [float(v) for v in line.split("losses ")[1].split()]


def test_example_multiprocess_optax_train_matches_jax_jit():
    """JAX's multi-process training program (flax MLP, optax adam, data parallel) with
    only jit -> shardc.jit: both processes print the same losses, equal to jax.jit's
    in one process on 8 devices (the same program with shardc.jit set back to
    jax.jit)."""
    ex = os.path.join(ROOT, "examples", "multiprocess_optax_train.py")
    rc, so, se, _ = launch(["-n", "2", "--devices-per-process", "4", "--timeout", "100", ex])
    assert rc == 0, f"{so}\n{se}"
    [l0] = [ln for ln in lines_of(so, 0) if ln.startswith("process 0 of 2: losses ")]
    [l1] = [ln for ln in lines_of(so, 1) if ln.startswith("process 1 of 2: losses ")]
    got = _losses(l0)
    assert got == _losses(l1) and len(got) == 5 and np.all(np.isfinite(got))
    assert got[-1] < got[0]
    ref = subprocess.run(
        [sys.executable, "-c", "import shardc, jax, runpy; shardc.jit = jax.jit; "
         "assert jax.device_count() == 8; "
         f"runpy.run_path({ex!r}, run_name='__main__')"],
        capture_output=True, text=True, timeout=LAUNCH_TIMEOUT, cwd=ROOT,
        env={**{k: v for k, v in os.environ.items() if k != "XLA_FLAGS"},
             "PYTHONPATH": ROOT, "SHARDC_CPU_DEVICES": "8"})
    assert ref.returncode == 0, ref.stderr[-3000:]
    [lr] = [ln for ln in ref.stdout.splitlines() if ln.startswith("process 0 of 1: losses ")]
    np.testing.assert_allclose(got, _losses(lr), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------- failures


def test_a_dying_process_fails_the_launch_fast(tmp_path):
    rc, so, se, secs = launch(["-n", "2", "--devices-per-process", "4", "--timeout", "100",
                               HERE, "die", str(tmp_path)])
    assert rc == 7, f"{so}\n{se}"
    assert "process 1 exited with code 7" in se
    assert "[0] blocked in a collective" in so
    # process 0 was stuck waiting for process 1 inside an all-reduce: the launch
    # ended it within seconds of process 1's exit
    after = time.time() - float((tmp_path / "died_at").read_text())
    assert after < 10, f"the launch ended {after:.1f} s after process 1 died"
    assert secs < 60


def _script(tmp_path, body):
    p = tmp_path / "s.py"
    p.write_text(textwrap.dedent(body))
    return str(p)


def test_launch_prefixes_lines_and_sets_the_environment(tmp_path):
    s = _script(tmp_path, """
        import os, sys
        e = os.environ
        print("hello", e["SHARDC_PROCESS_ID"], e["SHARDC_NUM_PROCESSES"],
              e["SHARDC_COORDINATOR_ADDRESS"], e["XLA_FLAGS"], e["JAX_PLATFORMS"], sys.argv[1:])
        print("partial line", end="")
        gloo = ("[Gloo] Rank 0 is connected to 1 peer ranks. "
                "Expected number of connected peer ranks is : 1")
        print(gloo, file=sys.stderr)
        print(gloo + gloo, file=sys.stderr)   # two of gloo's threads at once
        print("", file=sys.stderr)
        print("to stderr", file=sys.stderr)
    """)
    rc, so, se, _ = launch(["-n", "3", "--devices-per-process", "2", "--port", "12345", s,
                            "a", "--b"])
    assert rc == 0, se
    for i in range(3):
        out = lines_of(so, i)
        assert out[0].split()[:5] == ["hello", str(i), "3", "127.0.0.1:12345",
                                      "--xla_force_host_platform_device_count=2"]
        assert out[0].endswith("cpu ['a', '--b']")
        assert out[1] == "partial line"
        assert lines_of(se, i) == ["", "to stderr"]   # gloo's connection chatter is dropped


def test_launch_passes_through_the_first_failure_fast(tmp_path):
    s = _script(tmp_path, """
        import os, sys, time
        if os.environ["SHARDC_PROCESS_ID"] == "1":
            print("failing"); sys.exit(3)
        time.sleep(100)
    """)
    rc, so, se, secs = launch(["-n", "3", s])
    assert rc == 3
    assert "[1] failing" in so and "process 1 exited with code 3" in se
    assert secs < 10   # the sleeping processes were ended, not waited for


def test_launch_reports_a_killed_process(tmp_path):
    s = _script(tmp_path, """
        import os, signal, time
        if os.environ["SHARDC_PROCESS_ID"] == "0":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(100)
    """)
    rc, _, se, secs = launch(["-n", "2", s])
    assert rc == 128 + 9 and "killed by signal 9" in se and secs < 10


def test_launch_timeout_ends_everything(tmp_path):
    s = _script(tmp_path, """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)   # even a stubborn process
        time.sleep(100)
    """)
    rc, _, se, secs = launch(["-n", "2", "--timeout", "1", s])
    assert rc == 124 and "timed out" in se and secs < 15


def test_launch_bad_arguments(tmp_path):
    rc, _, se, _ = launch(["-n", "2", str(tmp_path / "missing.py")])
    assert rc != 0 and "no such file" in se
    rc, _, se, _ = launch(["-n", "0", str(tmp_path / "missing.py")])
    assert rc != 0 and "at least 1" in se


# ---------------------------------------------------------------- in this process


def test_single_process_api():
    assert shardc.process_index() == 0 and shardc.process_count() == 1
    assert len(shardc.devices()) == 8 and shardc.local_device_count() == 8
    assert shardc.local_devices() == shardc.devices()
    mesh, _ = meshes()
    x = shardc.device_put(np.arange(16.0, dtype=np.float32).reshape(8, 2),
                          NamedSharding(mesh, P("data", None)))
    np.testing.assert_array_equal(shardc.process_allgather(x), np.asarray(x))
    np.testing.assert_array_equal(shardc.process_allgather(np.ones(2)), np.ones((1, 2)))
    np.testing.assert_array_equal(shardc.process_allgather(np.ones(2), tiled=True),
                                  np.ones(2))


def test_mesh_in_any_device_order():
    """Partition i runs on the mesh's i-th device (the device assignment holds device
    ids, as it must across processes; it used to be 0..n-1, which crashed here)."""
    import jax
    mesh = shardc.make_mesh((8,), ("x",), devices=jax.devices()[::-1],
                            axis_types=(shardc.AxisType.Auto,))
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    gx = shardc.device_put(x, NamedSharding(mesh, P("x")))
    y = shardc.jit(lambda a: a * 2 + snp.arange(8, dtype=np.float32)[:, None])(gx)
    np.testing.assert_array_equal(np.asarray(y), x * 2 + np.arange(8)[:, None])
    for s in y.addressable_shards:
        assert s.device == mesh.devices[s.index[0].start]
        np.testing.assert_array_equal(np.asarray(s.data), np.asarray(y)[s.index])


def test_initialize_after_jax_started_is_a_clear_error():
    with pytest.raises(shardc.ShardcError, match="must run before jax creates its devices"):
        shardc.distributed.initialize("127.0.0.1:1", 2, 0)


def test_importing_shardc_leaves_jax_devices_alone():
    """shardc.distributed.initialize() must come before jax creates its backends, so
    no shardc module may touch devices when imported."""
    code = ("import shardc, shardc.numpy, shardc.nn, shardc.lax, shardc.debug, "
            "shardc.launch, shardc.report, shardc.tools.cli\n"
            "from jax._src import xla_bridge\n"
            "assert not xla_bridge.backends_are_initialized(), 'backends created'\n")
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": ROOT},
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]


def test_initialize_without_a_cluster_is_a_clear_error():
    e = {k: v for k, v in os.environ.items() if not k.startswith("SHARDC_")}
    e["PYTHONPATH"] = ROOT
    r = subprocess.run([sys.executable, "-c",
                        "import shardc; shardc.distributed.initialize()"],
                       env=e, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "found no cluster to join" in r.stderr


def test_first_difference_and_location_stripping():
    from shardc.runtime.distributed import _first_difference, _strip_locs
    a = '%0 = "stablehlo.add"(%a, %b) : t loc("add"("/x/f.py":3:0))\n"func.return"(%0)\n'
    b = '%0 = "stablehlo.add"(%a, %b) : t loc("add"("/y/f.py":3:0))\n"func.return"(%0)\n'
    assert _strip_locs(a) == _strip_locs(b)
    d = _first_difference("x\ny\n", "x\nz\n", 0, 1)
    assert "line 2" in d and "process 0:    y" in d and "process 1:    z" in d


# ---------------------------------------------------------------- the workers


def _save(outdir, pid, js, arrays):
    with open(os.path.join(outdir, f"p{pid}.json"), "w") as f:
        json.dump(js, f)
    np.savez(os.path.join(outdir, f"p{pid}.npz"), **arrays)


def worker_main(outdir):
    import hashlib
    shardc.distributed.initialize()
    pid = shardc.process_index()
    js, arrs = {}, {}
    js.update(process_index=pid, process_count=shardc.process_count(),
              devices=len(shardc.devices()), local_devices=len(shardc.local_devices()),
              local_device_count=shardc.local_device_count(),
              local_processes=sorted({dv.process_index for dv in shardc.local_devices()}))
    d = data()
    mesh24, mesh8 = meshes()
    # Process-local loading: this process reads only the rows its devices hold.
    xs = NamedSharding(mesh24, P("data", None))
    idx = xs.addressable_devices_indices_map(d["X"].shape).values()
    lo, hi = min(i[0].start for i in idx), max(i[0].stop for i in idx)
    js["local_rows"] = [lo, hi]
    local = d["X"][lo:hi].copy()
    gX, gw1, gw2, gx, gw = global_inputs(d, mesh24, mesh8, local_rows=local)
    blocks = {(s.index[0].start, s.index[0].stop): np.asarray(s.data)
              for s in gX.addressable_shards}   # 4 devices, one block of rows
    assert list(blocks) == [(lo, hi)], blocks.keys()
    arrs["local_shards"] = blocks[(lo, hi)]
    gather = shardc.process_allgather

    mean, total = shardc.jit(dp_stats)(gX)
    arrs["dp_mean"], arrs["dp_sum"] = gather(mean), gather(total)
    js["dp_specs"] = [str(mean.sharding.spec), str(total.sharding.spec)]
    js["dp_fully_addressable"] = mean.is_fully_addressable

    y = shardc.jit(tp_mlp)(d["x"], gw1, gw2)
    arrs["tp"], js["tp_spec"] = gather(y), str(y.sharding.spec)
    z = shardc.jit(layer)(gx, gw, d["b"])
    arrs["layer"], js["layer_spec"] = gather(z), str(z.sharding.spec)

    texts = lowered_texts(gX, gw1, gw2, gx, gw, d)
    js["hlo_sha"] = {k: hashlib.sha256(t.encode()).hexdigest() for k, t in texts.items()}
    js["str_hash"] = hash("shardc determinism")   # differs per process: PYTHONHASHSEED

    # host-local <-> global
    g2 = shardc.host_local_array_to_global_array(local, mesh24, P("data"))
    back = shardc.global_array_to_host_local_array(g2, mesh24, P("data"))
    arrs["roundtrip"] = np.asarray(back)
    arrs["gathered_X"] = gather(g2)
    arrs["stacked"] = gather(np.array([pid, 10 * pid]))
    arrs["tiled"] = gather(np.array([pid, 10 * pid]), tiled=True)

    # NumPy inputs, programs on local devices only, eager ops on global arrays
    arrs["numpy_arg"] = gather(shardc.jit(lambda a, w, b: a @ w + b)(d["x"], gw, d["b"]))
    arrs["local_only"] = np.asarray(shardc.jit(lambda a: a.sum(0))(d["x"]))
    arrs["eager"] = gather(gX * 2.0)
    try:
        shardc.jit(lambda a: a + 1, in_shardings=xs)(d["X"])
        js["numpy_split_err"] = None
    except shardc.ShardcError as e:
        js["numpy_split_err"] = str(e)

    # AUTO: every process takes process 0's choice. Process 1's solver is made to pick
    # otherwise (as a time limit hit on one process only would): without the agreement
    # the processes would compile different programs (the divergence error below).
    from shardc.auto import ilp as auto_ilp
    solve_ilp = auto_ilp.Ilp.solve
    if pid == 1:
        def other(self, *a, **k):
            solve_ilp(self, *a, **k)
            return [0] * len(self.cost)       # every class's first choice
        auto_ilp.Ilp.solve = other
    auto = shardc.AUTO(mesh24)
    fa = shardc.jit(tp_mlp, in_shardings=auto, out_shardings=auto)
    sds = [jax.ShapeDtypeStruct(d[k].shape, d[k].dtype) for k in ("x", "w1", "w2")]
    ca = fa.lower(*sds).compile()
    auto_ilp.Ilp.solve = solve_ilp
    (ins, _), out_sh = ca.input_shardings, ca.output_shardings
    js["auto_specs"] = [str(s.spec) for s in ins] + [str(out_sh.spec)]
    ya = ca(*[shardc.make_array_from_callback(d[k].shape, s, lambda i, k=k: d[k][i])
              for k, s in zip(("x", "w1", "w2"), ins)])
    arrs["auto"] = gather(ya)

    # Divergence: each process would compile a different constant.
    try:
        shardc.jit(lambda a: a * float(pid + 1))(gX)
        js["diverge_err"] = None
    except shardc.ShardcError as e:
        js["diverge_err"] = str(e)
    # A process that never reaches the compilation: the others time out.
    shardc.distributed.set_program_check(timeout=2)
    js["missing_err"] = None
    if pid == 0:
        try:
            shardc.jit(lambda a: a - 1)(gX)
        except shardc.ShardcError as e:
            js["missing_err"] = str(e)
    _save(outdir, pid, js, arrs)
    print("worker done", flush=True)


def worker_die(outdir):
    shardc.distributed.initialize()
    pid = shardc.process_index()
    mesh24, _ = meshes()
    X = data()["X"]
    gX = shardc.make_array_from_callback(X.shape, NamedSharding(mesh24, P("data", None)),
                                         lambda i: X[i])
    f = shardc.jit(lambda a: snp.sum(a, axis=0))
    f(gX).block_until_ready()           # compiled and run once on both processes
    if pid == 1:
        with open(os.path.join(outdir, "died_at"), "w") as fh:
            fh.write(repr(time.time()))
        os._exit(7)
    print("blocked in a collective", flush=True)
    while True:                         # waits for process 1 in the all-reduce
        f(gX).block_until_ready()


if __name__ == "__main__":
    {"main": worker_main, "die": worker_die}[sys.argv[1]](sys.argv[2])
