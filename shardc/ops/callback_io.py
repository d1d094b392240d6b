"""pure_callback and io_callback: a host Python function whose results the program uses.

Both lower as debug_callback does (shardc.ops.callback: jaxlib's CPU callback custom
call, once on one logical device outside shard_map — `device`, 0 unless the user's
`sharding=` names another — and on every device, with its block, inside one) and
return values of the types in `results`, which the runtime checks the function's
return against (jax's errors). pure_callback has no effect: unused, it is dropped (as
jax's). io_callback is EFFECTFUL; ordered ones thread a token, first among the results,
as ordered debug callbacks do. Neither has a gradient (jax's errors); vmap follows
`vmap_method` for pure_callback and loops over the examples for io_callback.
"""
from __future__ import annotations

from ..errors import ArgumentError, ShardcError
from ..ir.primitive import NO_FACTOR_RULE, PropKind, Trait
from ..ir.program import Aval
from ..trace import core
from ..trace.core import Primitive
from .callback import TOKEN_AVAL, HostCallback, _manual_ctx, _ordering_deps, lower_call

VMAP_METHODS = ("sequential", "sequential_unrolled", "expand_dims", "broadcast_all",
                "legacy_vectorized", None)


def _avals(results):
    return [Aval(tuple(shape), dtype) for shape, dtype in results]


def _pure_shape(*avals, callback, results, device, manual, vmap_method):
    return _avals(results)


def _io_shape(*avals, callback, results, device, manual, ordered):
    return ([TOKEN_AVAL] if ordered else []) + _avals(results)


def _pure_lower(ctx, *xs, callback, results, device, manual, vmap_method):
    return lower_call(ctx, xs, callback, False, False, manual, device, side_effect=False)


def _io_lower(ctx, *xs, callback, results, device, manual, ordered):
    return lower_call(ctx, xs, callback, ordered, False, manual, device)


pure_callback_p = Primitive("pure_callback", shape_rule=_pure_shape,
                            sharding_rule=NO_FACTOR_RULE, lower=_pure_lower,
                            prop_kind=PropKind.NONE, multiple_results=True)
io_callback_p = Primitive("io_callback", shape_rule=_io_shape, sharding_rule=NO_FACTOR_RULE,
                          lower=_io_lower, prop_kind=PropKind.NONE, multiple_results=True,
                          traits=Trait.EFFECTFUL)
pure_callback_p.host_call = False
io_callback_p.host_call = True       # ordered ones take part in the token chain


def _no_grad(kind, instead):
    def vjp(ctx, cts, *primals, **params):
        raise ArgumentError(f"{kind} callbacks do not support JVP. Please use "
                            f"`jax.{instead}` to use callbacks while taking gradients.",
                            ctx.op.loc)
    return vjp


pure_callback_p.vjp = _no_grad("Pure", "custom_jvp")
io_callback_p.vjp = _no_grad("IO", "custom_jvp")


# ---------------------------------------------------------------- binding

def bind_call(flat, vals, results, *, io=False, ordered=False, device=None,
              vmap_method=None, name="pure_callback"):
    """The traced values of `flat(*vals)` (a list of arrays of types `results`, a list
    of (shape, dtype)), computed on the host when the program runs."""
    b = core.current_builder()
    manual = _manual_ctx(b)
    if manual is not None:
        if set(manual.axes) != {n for n, _ in manual.mesh.axes}:
            raise ShardcError(f"{name} inside a shard_map over only some mesh axes "
                              f"({', '.join(manual.axes)}) is not supported, as in jax; "
                              "make the shard_map manual over every axis")
        if device is not None:
            raise ShardcError(f"{name}: sharding= is not supported inside shard_map (the "
                              "callback runs on every device there), as in jax")
    results = tuple((tuple(s), d) for s, d in results)
    deps = _ordering_deps(b) if ordered else []
    cb = HostCallback(flat, name, len(vals), bool(ordered), tuple(_avals(results)))
    common = dict(callback=cb, results=results, device=device or 0,
                  manual=manual is not None)
    if io:
        outs = io_callback_p.bind(*vals, *deps, ordered=bool(ordered), **common)
        return list(outs[1:] if ordered else outs)
    return list(pure_callback_p.bind(*vals, vmap_method=vmap_method, **common))


# ---------------------------------------------------------------- vmap

def _sequential(prim, ctx, args, batched, params, unroll):
    """One call per example, in order, in a scan over the batched operands (jax's
    sequential vmap_method); `unroll` unrolls it."""
    from .scan import bind_scan
    fixed = [a for a, b in zip(args, batched) if not b]
    moving = [a for a, b in zip(args, batched) if b]
    cb = params["callback"]

    def body(*xs):
        it_f, it_m = iter(fixed), iter(xs)
        merged = [next(it_m) if b else next(it_f) for b in batched]
        return [], list(prim.bind(*merged, **dict(params, callback=cb)))
    _, ys = bind_scan(body, [], moving, ctx.size, unroll=ctx.size if unroll else 1,
                      name=prim.name)
    return ys, [True] * len(ys)


def _batched_results(results, size):
    return tuple(((size, *s), d) for s, d in results)


def _pure_batch(ctx, args, batched, *, vmap_method, **params):
    from . import lax as L
    if vmap_method in ("sequential", "sequential_unrolled"):
        return _sequential(pure_callback_p, ctx, args, batched,
                           dict(params, vmap_method=vmap_method),
                           vmap_method == "sequential_unrolled")
    results = _batched_results(params.pop("results"), ctx.size)
    cb = params.pop("callback")
    cb, old = HostCallback(cb.fn, cb.name, cb.nargs, cb.ordered, tuple(_avals(results))), cb
    cb.loc = old.loc
    if vmap_method == "legacy_vectorized":
        xs = list(args)
    elif vmap_method in ("expand_dims", "broadcast_all"):
        n = ctx.size if vmap_method == "broadcast_all" else 1
        xs = [x if b else L.broadcast_in_dim(x, (n, *L.aval(x).shape),
                                             tuple(range(1, L.aval(x).ndim + 1)))
              for x, b in zip(args, batched)]
    else:
        raise ShardcError(
            "vmap is only supported for the pure_callback primitive when vmap_method is one "
            "of 'sequential', 'sequential_unrolled', 'expand_dims', 'broadcast_all', or "
            f"'legacy_vectorized'. Got vmap_method={vmap_method!r}.")
    outs = pure_callback_p.bind(*xs, callback=cb, results=results, vmap_method=vmap_method,
                                **params)
    return list(outs), [True] * len(outs)


def _io_batch(ctx, args, batched, *, ordered, **params):
    if ordered:
        raise ShardcError("Cannot `vmap` ordered IO callback.")
    return _sequential(io_callback_p, ctx, args, batched, dict(params, ordered=False), False)


pure_callback_p.batch = _pure_batch
io_callback_p.batch = _io_batch
