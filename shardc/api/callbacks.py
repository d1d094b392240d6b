"""jax.pure_callback and jax.experimental.io_callback: call a Python function on the
host with runtime values and use what it returns.

Outside a trace the function runs now; traced, it becomes a pure_callback/io_callback
op (shardc.ops.callback_io says where it runs, what vmap and grad do with it). As
jax's, the function gets jax arrays on the host CPU and returns arrays of the shapes
and dtypes `result_shape_dtypes` declares (a pytree of objects with .shape and .dtype,
such as jax.ShapeDtypeStruct), checked when it returns.
"""
from __future__ import annotations

import jax
import numpy as np

from ..errors import ArgumentError, ShardcError
from ..ir import dtypes
from ..ops.callback_io import VMAP_METHODS, bind_call
from ..runtime.callback import check_results
from ..ir.program import Aval
from ..trace import core
from ..trace import pytree as _tree


def pure_callback(callback, result_shape_dtypes, *args, sharding=None, vmap_method=None,
                  **kwargs):
    """jax.pure_callback: `callback(*args, **kwargs)` on the host, a function without
    side effects (the program may drop an unused call, or make it more than once).

    `vmap_method` says what vmap does: "sequential" (a loop over the examples),
    "sequential_unrolled", "expand_dims" (one call; unbatched arguments get a leading
    axis of 1), "broadcast_all" (... broadcast to the batch size), "legacy_vectorized"
    (one call, unbatched arguments as they are); None: vmap raises. `sharding`: a
    SingleDeviceSharding naming the device the call runs on (device 0 of the mesh if
    not given)."""
    if vmap_method not in VMAP_METHODS:
        raise ArgumentError(f"vmap_method must be on of the allowed methods "
                            f"{list(VMAP_METHODS)}, but got: {vmap_method}")
    return _call("pure_callback", callback, result_shape_dtypes, args, kwargs, sharding,
                 vmap_method=vmap_method)


def io_callback(callback, result_shape_dtypes, *args, sharding=None, ordered=False,
                **kwargs):
    """jax.experimental.io_callback: `callback(*args, **kwargs)` on the host, a function
    with side effects: every call runs once, even if its results are unused, and with
    `ordered=True` in program order with the other ordered callbacks (vmap of an
    ordered one raises, as jax's)."""
    return _call("io_callback", callback, result_shape_dtypes, args, kwargs, sharding,
                 io=True, ordered=ordered)


def _call(kind, callback, result_shape_dtypes, args, kwargs, sharding, **how):
    if not callable(callback):
        raise ArgumentError(f"{kind}: the callback must be callable, but got an object of "
                            f"type {type(callback).__name__}")
    leaves, in_tree = _tree.tree_flatten((args, kwargs))
    vals = [x if core.is_tracer(x) else _as_array(kind, x) for x in leaves]
    shapes, out_tree = _tree.tree_flatten(result_shape_dtypes)
    results = [_result_type(kind, s) for s in shapes]

    def flat(*xs):
        a, k = _tree.tree_unflatten(in_tree, list(xs))
        return _tree.tree_leaves(callback(*a, **k))

    name = f"{kind}({getattr(callback, '__name__', type(callback).__name__)})"
    b = core.current_builder()
    if b is None and not any(core.is_tracer(v) for v in vals):
        cpu = jax.local_devices(backend="cpu")[0]      # now, as jax's impl
        outs = check_results([Aval(s, d) for s, d in results],
                             flat(*jax.device_put(vals, cpu)))
        return _tree.tree_unflatten(out_tree, [jax.device_put(o) for o in outs])
    device = None if sharding is None else _device_index(kind, sharding, b)
    outs = bind_call(flat, vals, results, device=device, name=name, **how)
    return _tree.tree_unflatten(out_tree, outs)


def _as_array(kind, x):
    try:
        return np.asarray(x, dtype=dtypes.canonicalize(np.asarray(x).dtype))
    except (TypeError, ValueError):
        raise ArgumentError(f"{kind}: the arguments' leaves must be arrays or scalars, but "
                            f"one is {type(x).__name__}") from None


def _result_type(kind, s):
    if not hasattr(s, "shape") or not hasattr(s, "dtype"):
        raise ArgumentError(f"{kind}: result_shape_dtypes' leaves must have .shape and "
                            f".dtype (such as jax.ShapeDtypeStruct), but one is {s!r}")
    dt = np.dtype(s.dtype)
    if dtypes.canonicalize(dt) != dt:
        raise ArgumentError("result_shape_dtypes cannot specify 64-bit types when "
                            "`jax_enable_x64` is disabled")
    return tuple(s.shape), dt


def _device_index(kind, sharding, b):
    """The logical device (position in the program's mesh) `sharding` names."""
    from jax.sharding import NamedSharding, SingleDeviceSharding
    if isinstance(sharding, NamedSharding) and sharding.mesh.size == 1:
        device = next(iter(sharding.device_set))
    elif isinstance(sharding, SingleDeviceSharding):
        device = next(iter(sharding.device_set))
    else:
        raise ShardcError(f"{kind} only supports SingleDeviceSharding, but got "
                          f"{type(sharding).__name__}")
    devices = b.meshes.info.devices if b is not None and b.meshes is not None else ()
    if device not in devices:
        raise ArgumentError(f"Sharding provided to {kind} specifies a device {device} that "
                            f"is not in the device assignment ({list(devices)})")
    return devices.index(device)
