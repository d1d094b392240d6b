"""Bad input: a clear ShardcError naming the user's file and line, without shardc frames."""
import os
import traceback

import jax
import ml_dtypes
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec as P

import shardc
import shardc.numpy as snp

HERE = os.path.abspath(__file__)
X = np.ones((8, 16), np.float32)


def check(exc_info, *phrases):
    e = exc_info.value
    msg = str(e)
    assert msg.startswith(HERE + ":"), msg
    for p in phrases:
        assert p in msg, msg
    # only the one frame that re-raises at the API boundary may be shardc's: the
    # api_boundary wrapper, or the cache miss a jitted call's C++ dispatch calls
    frames = traceback.extract_tb(e.__traceback__)
    internal = [(f.filename, f.name) for f in frames
                if os.sep + "shardc" + os.sep in f.filename and "tests" not in f.filename]
    assert len(internal) <= 1 and all(
        f.endswith("errors.py") or (f.endswith("jit.py") and n == "_cache_miss")
        for f, n in internal), internal
    return msg


def test_shape_mismatch_in_elementwise():
    f = shardc.jit(lambda a, b: a + b)
    with pytest.raises(shardc.ShardcError) as ei:
        f(X, np.ones((3,), np.float32))
    msg = check(ei, "cannot be broadcast", "(8, 16)", "(3,)")
    line = int(msg.split(":")[1])
    assert "lambda a, b: a + b" in open(HERE).read().splitlines()[line - 1]


def test_matmul_shape_mismatch():
    def f(a, b):
        return a @ b          # the line the error names
    with pytest.raises(shardc.ShardcError) as ei:
        shardc.jit(f)(X, X)
    check(ei, "matmul", "16", "8")
    assert "return a @ b" in open(HERE).read().splitlines()[
        int(str(ei.value).split(":")[1]) - 1]


def test_unknown_mesh_axis(mesh2x4):
    with shardc.set_mesh(mesh2x4):
        f = shardc.jit(lambda a: a * 2, in_shardings=P("z"))
        with pytest.raises(shardc.ShardcError) as ei:
            f(X)
    check(ei, "unknown mesh axis 'z'", "['x', 'y']")


def test_unknown_axis_in_constraint(mesh2x4):
    def f(a):
        return shardc.with_sharding_constraint(a, P("q", None))
    x = jax.device_put(X, NamedSharding(mesh2x4, P("x")))
    with pytest.raises(shardc.ShardcError) as ei:
        shardc.jit(f)(x)
    check(ei, "unknown mesh axis 'q'")


def test_axis_used_twice(mesh2x4):
    def f(a):
        return shardc.with_sharding_constraint(a, P("x", "x"))
    with pytest.raises(shardc.ShardcError) as ei:
        shardc.jit(f)(jax.device_put(X, NamedSharding(mesh2x4, P())))
    check(ei, "'x' is used twice")


def test_spec_longer_than_rank(mesh2x4):
    f = shardc.jit(lambda a: a, in_shardings=NamedSharding(mesh2x4, P("x", "y", None)))
    with pytest.raises(shardc.ShardcError) as ei:
        f(X)
    check(ei, "3 entries", "rank 2")


def test_in_shardings_count_mismatch(mesh2x4):
    s = NamedSharding(mesh2x4, P())
    f = shardc.jit(lambda a, b: a + b, in_shardings=(s, s, s))
    with pytest.raises(shardc.ShardcError) as ei:
        f(X, X)
    check(ei, "in_shardings has 3 entries", "2 positional")


def test_in_shardings_structure_mismatch(mesh2x4):
    s = NamedSharding(mesh2x4, P())
    f = shardc.jit(lambda d: d["a"], in_shardings=({"b": s},))
    with pytest.raises(shardc.ShardcError) as ei:
        f({"a": X})
    check(ei, "in_shardings does not match")


def test_in_shardings_conflict_with_committed_array(mesh2x4):
    x = jax.device_put(X, NamedSharding(mesh2x4, P("x", "y")))
    f = shardc.jit(lambda a: a, in_shardings=NamedSharding(mesh2x4, P("y")))
    with pytest.raises(shardc.ShardcError) as ei:
        f(x)
    check(ei, "already sharded")


def test_indivisible_in_sharding(mesh2x4):
    f = shardc.jit(lambda a: a, in_shardings=NamedSharding(mesh2x4, P("y")))
    with pytest.raises(shardc.ShardcError) as ei:
        f(np.ones((6, 3), np.float32))
    check(ei, "does not divide", "size 6")


def test_python_if_on_traced_value():
    def f(a):
        if a.sum() > 0:
            return a
        return -a
    with pytest.raises(shardc.ShardcError) as ei:
        shardc.jit(f)(X)
    check(ei, "concrete value", "where")


def test_int_of_traced_value():
    with pytest.raises(shardc.ShardcError) as ei:
        shardc.jit(lambda a: snp.zeros(int(a[0, 0])))(X)
    check(ei, "int()", "static_argnums")


def test_unsupported_numpy_function():
    with pytest.raises(shardc.ShardcError) as ei:
        shardc.jit(lambda a: np.fft.fft(a))(X)
    check(ei, "not supported")


def test_unsupported_dtype():
    with pytest.raises(shardc.ShardcError) as ei:
        shardc.jit(lambda a: a * 2)(np.ones(3, ml_dtypes.float6_e2m3fn))
    check(ei, "does not support dtype float6_e2m3fn")


def test_unsupported_op_dtype_combination():
    with pytest.raises(shardc.ShardcError) as ei:
        shardc.jit(lambda a: snp.bitwise_and(a, a))(X)
    check(ei, "bitwise_and needs boolean or integer")


def test_boolean_mask_index():
    with pytest.raises(shardc.ShardcError) as ei:
        shardc.jit(lambda a: a[a > 0])(X)
    check(ei, "data-dependent shape", "where")


def test_leaked_tracer():
    saved = []

    @shardc.jit
    def f(a):
        saved.append(a)
        return a
    f(X)
    with pytest.raises(shardc.ShardcError) as ei:
        shardc.jit(lambda b: b + saved[0])(X)
    assert "escaped" in str(ei.value)


def test_no_mlir_dump_in_messages():
    with pytest.raises(shardc.ShardcError) as ei:
        shardc.jit(lambda a: snp.reshape(a, (7, 3)))(X)
    msg = check(ei, "cannot reshape")
    assert "stablehlo" not in msg and "module" not in msg


def test_python_int_overflow():
    with pytest.raises(shardc.ShardcError) as ei:
        shardc.jit(lambda a: a + 2 ** 32 + 5)(np.ones(3, np.int32))
    check(ei, "too large for int32")


def test_user_code_in_a_directory_named_jax_keeps_its_locations(tmp_path):
    import subprocess
    import sys
    d = tmp_path / "jax"
    d.mkdir()
    (d / "user.py").write_text(
        "import numpy as np, shardc\n"
        "try:\n"
        "    shardc.jit(lambda a, b: a @ b)(np.ones((2, 3)), np.ones((2, 3)))\n"
        "except shardc.ShardcError as e:\n"
        "    print(e)\n")
    root = os.path.dirname(os.path.dirname(HERE))
    r = subprocess.run([sys.executable, str(d / "user.py")], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=root), timeout=120)
    assert r.stdout.startswith(str(d / "user.py") + ":3: matmul"), r.stdout + r.stderr

