"""`shardc.AUTO`: a sharding for jit's in_shardings / out_shardings that the sharding
search (shardc/auto) chooses, as jax's `pjit.AUTO` was. Bare `AUTO` takes the mesh
from the arguments or `set_mesh`; `AUTO(mesh)` names it, and `AUTO(mesh,
hardware=shardc.auto.TPU_ICI)` the hardware whose costs the search weighs."""
from __future__ import annotations

from ..errors import ArgumentError


class Auto:
    """A leaf of in_shardings / out_shardings whose sharding the search chooses."""
    __slots__ = ("mesh", "hardware")

    def __init__(self, mesh=None, *, hardware=None):
        import jax
        if mesh is not None and not isinstance(mesh, jax.sharding.Mesh):
            raise ArgumentError(f"shardc.AUTO(mesh): expected a jax Mesh, got {mesh!r}; "
                                "make one with shardc.make_mesh")
        from ..auto.costmodel import Hardware
        if hardware is not None and not isinstance(hardware, Hardware):
            raise ArgumentError(f"shardc.AUTO(hardware={hardware!r}): expected a "
                                "shardc.auto.Hardware such as shardc.auto.TPU_ICI")
        self.mesh, self.hardware = mesh, hardware

    def __call__(self, mesh=None, *, hardware=None) -> "Auto":
        """AUTO(mesh, hardware=...): the same request on `mesh`, for `hardware`."""
        return Auto(mesh, hardware=hardware)

    def __eq__(self, other):
        return type(other) is Auto and other.mesh is self.mesh and \
            other.hardware == self.hardware

    def __hash__(self):
        return hash((id(self.mesh), self.hardware))

    def __repr__(self):
        if self.mesh is None and self.hardware is None:
            return "AUTO"
        parts = [] if self.mesh is None else [f"mesh={dict(self.mesh.shape)}"]
        if self.hardware is not None:
            parts.append(f"hardware={getattr(self.hardware, 'name', self.hardware)!r}")
        return f"AUTO({', '.join(parts)})"


AUTO = Auto()


def is_auto(x) -> bool:
    return type(x) is Auto
