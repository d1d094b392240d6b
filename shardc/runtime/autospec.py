"""`shardc.AUTO`: a sharding for jit's in_shardings / out_shardings that the sharding
search (shardc/auto) chooses, as jax's `pjit.AUTO` was. Bare `AUTO` takes the mesh
from the arguments or `set_mesh`; `AUTO(mesh)` names it, and `AUTO(mesh,
hardware=shardc.auto.TPU_ICI)` the hardware whose costs the search weighs;
`AUTO(axis_names=("data", "model"))`, with no mesh named anywhere, has the search
choose the mesh's shape too: every factorization of the devices (`devices=`, default
all of them) into those axes is solved and the cheapest taken."""
from __future__ import annotations

from ..errors import ArgumentError


class Auto:
    """A leaf of in_shardings / out_shardings whose sharding the search chooses."""
    __slots__ = ("mesh", "hardware", "axis_names", "devices")

    def __init__(self, mesh=None, *, hardware=None, axis_names=None, devices=None):
        import jax
        if mesh is not None and not isinstance(mesh, jax.sharding.Mesh):
            raise ArgumentError(f"shardc.AUTO(mesh): expected a jax Mesh, got {mesh!r}; "
                                "make one with shardc.make_mesh")
        if isinstance(axis_names, str):
            axis_names = (axis_names,)
        if axis_names is not None:
            axis_names = tuple(axis_names)
            if mesh is not None:
                raise ArgumentError("shardc.AUTO: give a mesh or the axis_names of one whose "
                                    "shape the search chooses, not both")
            if not axis_names or len(set(axis_names)) != len(axis_names) or \
                    not all(isinstance(n, str) for n in axis_names):
                raise ArgumentError(f"shardc.AUTO(axis_names={axis_names!r}): expected "
                                    "distinct axis names (strings)")
        elif devices is not None:
            raise ArgumentError("shardc.AUTO(devices=...) goes with axis_names=: the "
                                "devices of the mesh whose shape the search chooses")
        self.axis_names = axis_names
        self.devices = None if devices is None else tuple(devices)
        from ..auto.costmodel import Hardware
        if hardware is not None and not isinstance(hardware, Hardware):
            raise ArgumentError(f"shardc.AUTO(hardware={hardware!r}): expected a "
                                "shardc.auto.Hardware such as shardc.auto.TPU_ICI")
        self.mesh, self.hardware = mesh, hardware

    def __call__(self, mesh=None, *, hardware=None, axis_names=None, devices=None) -> "Auto":
        """AUTO(mesh, hardware=...): the same request on `mesh`, for `hardware`."""
        return Auto(mesh, hardware=hardware, axis_names=axis_names, devices=devices)

    def _key(self):
        return (id(self.mesh), self.hardware, self.axis_names, self.devices)

    def __eq__(self, other):
        return type(other) is Auto and other._key() == self._key()

    def __hash__(self):
        return hash(self._key())

    def __repr__(self):
        if self.mesh is None and self.hardware is None and self.axis_names is None:
            return "AUTO"
        parts = [] if self.mesh is None else [f"mesh={dict(self.mesh.shape)}"]
        if self.axis_names is not None:
            parts.append(f"axis_names={self.axis_names}")
        if self.hardware is not None:
            parts.append(f"hardware={getattr(self.hardware, 'name', self.hardware)!r}")
        return f"AUTO({', '.join(parts)})"


AUTO = Auto()


def is_auto(x) -> bool:
    return type(x) is Auto
