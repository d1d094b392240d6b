"""jax's debug print and callback, device_put and shard_alike inside a shardc trace:
the host callback op, reshard and sharding group shardc's own functions make."""
from __future__ import annotations

from functools import partial

import jax
from jax._src import debugging

from ..ops.callback import emit_flat
from .translate import rule


@rule("debug_print")
def _debug_print(*args, fmt, ordered, partitioned, in_tree, static_args, np_printoptions,
                 has_placeholders, logging_record=None):
    show = partial(debugging._format_print_callback, fmt, dict(np_printoptions),
                   has_placeholders, logging_record)
    emit_flat(debugging._make_flat_callback(in_tree, show, static_args), list(args),
              ordered, partitioned, "debug.print")
    return []


@rule("debug_callback")
def _debug_callback(*args, callback, effect, partitioned):
    ordered = effect is debugging.ordered_debug_effect
    name = f"debug.callback({getattr(callback, '__name__', type(callback).__name__)})"
    emit_flat(callback, list(args), ordered, partitioned, name)
    return []


@rule("device_put")
def _device_put(*xs, devices, srcs, copy_semantics):
    """Inside jit jax's device_put to a NamedSharding changes the type: on a mesh with
    Explicit axes, a reshard of them to the target's (P() too: replicated over them);
    on Auto ones jax's CPU lowering drops it (it constrains only to place the value in
    another memory kind, which CPU does not have), and so does this. A memory kind
    (the sharding's, or a jax.memory.Space) moves the value there."""
    from jax.sharding import AxisType, NamedSharding

    from ..api.explicit import apply_out_sharding
    from ..ops.memory import kind_of, memory_put_p
    from .translate import _explicit_spec
    out = []
    for x, d in zip(xs, devices):
        spec, mesh = getattr(d, "spec", None), getattr(d, "mesh", None)
        if spec is not None and mesh is not None and \
                AxisType.Explicit in tuple(getattr(mesh, "axis_types", ())):
            x = apply_out_sharding(x, NamedSharding(mesh, _explicit_spec(d)), "device_put",
                                   check=False)
        memory = d.memory_kind if isinstance(d, jax.sharding.Sharding) else \
            d if isinstance(d, jax.memory.Space) else None
        if memory is not None:
            x = memory_put_p.bind(x, kind=kind_of(memory))   # (as jax: always moved)
        out.append(x)
    return out


@rule("shard_alike")
def _shard_alike(x, y):
    from ..transforms.ad import shard_alike
    return list(shard_alike(x, y))


def _callback_device(kind, sharding):
    from ..api.callbacks import _device_index
    from ..trace import core
    return None if sharding is None else _device_index(kind, sharding, core.current_builder())


@rule("pure_callback")
def _pure_callback(*args, callback, result_avals, sharding, vmap_method):
    from ..ops.callback_io import bind_call
    return bind_call(callback, list(args), [(a.shape, a.dtype) for a in result_avals],
                     device=_callback_device("pure_callback", sharding),
                     vmap_method=vmap_method, name=_name("pure_callback", callback))


@rule("io_callback")
def _io_callback(*args, callback, result_avals, sharding, ordered):
    from ..ops.callback_io import bind_call
    return bind_call(callback, list(args), [(a.shape, a.dtype) for a in result_avals],
                     io=True, ordered=ordered, device=_callback_device("io_callback", sharding),
                     name=_name("io_callback", callback))


def _name(kind, callback):
    fn = getattr(callback, "callback_func", callback)      # jax's _FlatCallback
    return f"{kind}({getattr(fn, '__name__', type(fn).__name__)})"
