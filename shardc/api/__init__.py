"""The user-facing layer: jit and its stages, shard_map, pmap, grad, the numpy/lax/nn frontends."""
