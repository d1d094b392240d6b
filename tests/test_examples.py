"""Every example runs and prints what it promises."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(name):
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("XLA_FLAGS", None)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", name)],
                       capture_output=True, text=True, env=env, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_quickstart():
    out = run("quickstart.py")
    assert out.count("matches NumPy: True") == 2
    assert "result sharding: P('data', 'model')" in out
    assert "result sharding: P('model',)" in out
    assert "from with_sharding_constraint at quickstart.py" in out
    assert "sharding: P('data', 'model')" in out and "sdy.mesh @mesh" in out


def test_mlp_tensor_parallel():
    out = run("mlp_tensor_parallel.py")
    assert "matches NumPy: True" in out
    assert "output sharding: P('data',)" in out
    lines = [ln for ln in out.splitlines() if ln.startswith("collective:")]
    assert len(lines) == 1 and "all-reduce" in lines[0] and "{model}" in lines[0]
    assert "mlp_tensor_parallel.py:36" in lines[0]    # the second matmul's line


def test_shard_map_collectives():
    out = run("shard_map_collectives.py")
    assert out.count("matches NumPy: True") == 3
    assert "all three agree: True" in out
    assert "= shard_map(" in out and "psum(" in out


def test_train_mlp():
    out = run("train_mlp.py")
    assert "loss fell: True" in out
    assert "gradients sharded like parameters: True" in out
    assert "w1: param P(None, 'model'), grad P(None, 'model')" in out
    assert "of them the backward pass" in out and "dot_general" in out


def test_flax_optax_train():
    out = run("flax_optax_train.py")
    assert "losses match jax.jit: True" in out
    assert "parameters match jax.jit: True" in out
    assert "output shardings equal jax.jit's: True" in out
    assert "loss fell: True" in out
    assert "up kernel: P(None, 'model'), down kernel: P('model',)" in out
    # the row-parallel Dense's partial sums: an all-reduce over model at the model's line
    colls = [ln for ln in out.splitlines() if ln.startswith("collective:")]
    assert any("all-reduce" in ln and "{model}" in ln and "flax_optax_train.py:45" in ln
               for ln in colls), colls


def test_auto_sharding():
    out = run("auto_sharding.py")
    assert "matches jax.jit: True" in out
    chosen = [ln for ln in out.splitlines() if " chosen: P(" in ln]
    # 8 MiB of parameters under a 4 MiB budget: neither may stay replicated
    assert len(chosen) == 2 and not any(ln.endswith("P()") for ln in chosen)
    assert "// automatic sharding: 2 inputs chosen by the sharding search" in out
    assert "next best" in out and "memory_budget 4.0 MiB per device" in out
    assert "automatic sharding (shardc.AUTO): p_w1" in out
    assert "collective bytes per call" in out and "peak memory" in out
