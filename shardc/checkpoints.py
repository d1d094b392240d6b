"""shardc.checkpoints: save and restore sharded arrays and train states with
orbax-checkpoint (implemented in shardc.runtime.checkpoints). Not to be confused with
shardc.checkpoint, which is rematerialization (jax.checkpoint)."""
from .runtime.checkpoints import *  # noqa: F401,F403
from .runtime.checkpoints import metadata, restore, save  # noqa: F401
