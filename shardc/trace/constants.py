"""Concrete values met while tracing: a closed-over array or a Python number becomes a
literal, a constant op, or (a sharded jax.Array at top level) an extra input."""
from __future__ import annotations

import jax
import numpy as np

from ..errors import ShardcError, user_loc
from ..ir.primitive import PRIMITIVES
from ..ir.program import Lit, Value
from . import types as _types
from .core import (_ARRAY_TYPES, Builder, Tracer, _scalar, aval_of, current_builder,
                   foreign_tracer_error)


def constant_value(b: Builder, x):
    """A concrete value used inside a trace: a literal if scalar, else a constant op."""
    if isinstance(x, jax.core.Tracer):     # a jax transformation's, around shardc code
        raise foreign_tracer_error(x)
    if type(x) is Lit:      # (a translated jaxpr's literal; NumPy would read it as truthy)
        return x
    if type(x) in _ARRAY_TYPES or isinstance(x, jax.Array):
        root = b
        while root.parent is not None:
            root = root.parent
        if root.lifted is not None:
            v = lift_array(root, x)
            if v is not None:
                return v if root is b else b.to_value(Tracer(root, v))
    aval = aval_of(x)
    if aval.shape == ():
        return Lit(_scalar(x, aval.dtype), aval)
    arr = np.asarray(x).astype(aval.dtype, copy=False)
    params = {"value": arr, "weak_type": True} if aval.weak else {"value": arr}
    (v,) = b.add(PRIMITIVES["constant"], [], params, [aval], user_loc())
    sh = _typed_sharding(b, x)
    if sh is not None:
        (v,) = b.add(PRIMITIVES["sharding_constraint"], [v],
                     {"sharding": sh, "reshard": True}, [aval], user_loc())
        v.sharding = sh
    return v


def lift_array(root, x):
    """A closed-over jax.Array sharded over a mesh, as an input of the top-level trace
    `root` rather than a constant (as jax's eager control flow and transforms pass their
    functions' constants as operands: kept where it is, its sharding kept, not copied
    into the program). None where it stays a constant: a scalar, an array not on a mesh
    (or on another mesh than the program's), explicit mode or host memory."""
    hit = root.lifted.get(id(x))
    if hit is not None:
        return hit[1]
    s = getattr(x, "sharding", None)
    if not np.ndim(x) or not isinstance(s, jax.sharding.NamedSharding) or \
            s.memory_kind not in (None, "device") or _types.explicit_axes_of(root) or \
            any(t == jax.sharding.AxisType.Explicit for t in s.mesh.axis_types):
        return None
    try:
        root.meshes.adopt(s.mesh)
    except ShardcError:     # (another mesh than the program's)
        return None
    v = Value(aval_of(x))
    root.program.inputs.append(v)
    root.lifted[id(x)] = (x, v)
    return v


def _typed_sharding(b, x):
    """Explicit mode: the sharding a closed-over jax.Array's type has (jax types such a
    constant as the array: f32[8@X]), on the program's mesh; None otherwise."""
    s = getattr(x, "sharding", None)
    if not isinstance(s, jax.sharding.NamedSharding) or not np.ndim(x):
        return None
    explicit = _types.explicit_axes_of(b)
    info = b.meshes.info if b.meshes is not None else None
    if not explicit or info is None or info.mesh is None or \
            tuple(s.mesh.axis_names) != tuple(info.mesh.axis_names) or \
            not np.array_equal(s.mesh.device_ids, info.mesh.device_ids):
        return None
    sh = _types.restrict(info.sharding_from(s, aval_of(x), "a closed-over array"), explicit,
                         np.ndim(x))
    return None if sh is None or not sh.axes() else sh


def literal_tracer(lit: Lit) -> Tracer:
    """A literal as a traced value of the current trace, for jax (which takes tracers
    and arrays from a trace, not shardc's literals)."""
    b = current_builder()
    params = {"value": np.asarray(lit.value, lit.aval.dtype)}
    if lit.aval.weak:
        params["weak_type"] = True
    (v,) = b.add(PRIMITIVES["constant"], [], params, [lit.aval], user_loc())
    return Tracer(b, v)
