"""Automatic sharding (issue 19): the cost model the search uses, from the IR and the
factor rules alone (costmodel: compute and communication; memory: peak per device),
and the search (strategies: per-op choices from the factor rules; graph: ops grouped
with their followers, layers clustered; solve: the ILP; solution: the choice, written
into the program as shardings and constraints)."""

from .costmodel import CPU, GPU_IB, GPU_NVLINK, TPU_DCN, TPU_ICI, Hardware  # noqa: E402,F401
