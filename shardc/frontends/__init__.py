"""Importing JAX programs: jax code called inside a shardc trace becomes shardc's IR
(bridge: shardc's tracers are jax's; translate: jax primitives and jaxprs to shardc
ops). The one place in shardc that may call jax's tracer."""
from .bridge import install

install()

__all__ = ["install"]
