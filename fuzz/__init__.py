"""shardc's differential fuzzer: random programs x meshes x shardings, shardc.jit vs
jax.jit (eager jax breaks ties), failures shrunk to small repros.

    python -m fuzz --n 500 --seed 0 [--out DIR]
"""
