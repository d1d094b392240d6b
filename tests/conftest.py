"""Every test runs on 8 simulated CPU devices (set before jax is imported).

XLA:CPU compiles the tests' programs with its classic (elemental IR) fusion emitters
and LLVM at -O1, rather than its newer MLIR fusion emitters at -O2: half the compile
time, which is most of the suite's. Each module is also generated in one piece, not
split across threads: three workers already share two cores, and the split costs
about a tenth of the CPU. Only the CPU code generator changes; XLA's HLO
passes (Shardy, SPMD partitioning, fusion decisions) are the same, so shardings,
collectives and values are what a user gets. The bench (`make bench`) keeps XLA's
defaults."""
import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8"
                           " --xla_cpu_use_fusion_emitters=false"
                           " --xla_backend_optimization_level=1"
                           " --xla_cpu_parallel_codegen_split_count=1")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import pytest  # noqa: E402

import shardc  # noqa: E402

assert len(jax.devices()) == 8, "tests need 8 CPU devices (XLA_FLAGS was set too late)"


@pytest.fixture(scope="session")
def mesh2x4():
    return shardc.make_mesh((2, 4), ("x", "y"), axis_types=(shardc.AxisType.Auto,) * 2)


@pytest.fixture(scope="session")
def mesh4x2():
    return shardc.make_mesh((4, 2), ("x", "y"), axis_types=(shardc.AxisType.Auto,) * 2)


@pytest.fixture(scope="session")
def mesh8():
    return shardc.make_mesh((8,), ("x",), axis_types=(shardc.AxisType.Auto,))
