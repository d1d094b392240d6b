"""jax.checkpoint (remat), its policies and checkpoint_name.

`checkpoint(f)` traces f into one `checkpoint` op (shardc.ops.remat) whose gradient
saves only what the policy allows and recomputes the rest in the backward pass.
Policies have jax's signature: policy(prim, *avals, **params) -> bool, with shardc's
primitives (dot_general_p, name_p) and abstract values.
"""
from __future__ import annotations

import functools
import types
from typing import NamedTuple

import jax

from ..errors import ArgumentError, ShardcError, api_boundary
from ..ir.program import NAMED_CALLBACKS, named_callback
from ..ops.linalg import dot_general_p
from ..ops.region import bind_region
from ..ops.remat import checkpoint_p, name_p
from ..trace import core
from ..trace import pytree as _tree


def _with_static(args, static, dyn):
    """The positional arguments: `args`' static ones at their places, `dyn` between."""
    it = iter(dyn)
    return [a if i in static else next(it) for i, a in enumerate(args)]


def checkpoint(fun=None, *, prevent_cse=True, policy=None, static_argnums=(),
               static_argnames=()):
    """A function computing fun whose gradient recomputes fun's intermediate values
    instead of saving them (those `policy` says are saveable are saved), as
    jax.checkpoint. Usable as a decorator, with or without arguments. Keyword arguments
    named in `static_argnames` are static, as jax's (jax_remat3) are."""
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy,
                                 static_argnums=static_argnums,
                                 static_argnames=static_argnames)
    policy = _from_jax(policy)
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    static_argnums = tuple(static_argnums)
    if isinstance(static_argnames, str):
        static_argnames = (static_argnames,)
    static_argnames = frozenset(static_argnames)

    eager = {}      # the static keyword arguments passed -> the jit running wrapped

    @functools.wraps(fun)
    @api_boundary
    def wrapped(*args, **kwargs):
        if core.current_builder() is None:
            # as jax's, traced (and compiled) even outside jit: jax types, not NumPy's
            from .jit import internal_jit
            static = {i % len(args) for i in static_argnums if -len(args) <= i < len(args)}
            skw = {k: v for k, v in kwargs.items() if k in static_argnames}
            try:
                hash((tuple(args[i] for i in static), tuple(skw.values())))
            except TypeError:       # (jax takes unhashable static arguments here)
                return internal_jit(lambda *dyn, **kw: wrapped(*_with_static(
                    args, static, dyn), **kw, **skw), "checkpoint")(
                    *[a for i, a in enumerate(args) if i not in static],
                    **{k: v for k, v in kwargs.items() if k not in skw})
            names = tuple(sorted(skw))
            if names not in eager:
                eager[names] = internal_jit(wrapped, "checkpoint",
                                            static_argnums=static_argnums,
                                            static_argnames=names)
            return eager[names](*args, **kwargs)
        for i in static_argnums:
            if i >= len(args) or i < -len(args):
                raise ShardcError(f"checkpoint: static_argnums {i} is out of range for "
                                  f"{len(args)} positional arguments")
        static = {i % len(args) for i in static_argnums}
        dyn = [a for i, a in enumerate(args) if i not in static]
        skw = {k: v for k, v in kwargs.items() if k in static_argnames}
        leaves, tree = _tree.tree_flatten(
            (dyn, {k: v for k, v in kwargs.items() if k not in skw}))
        traced = [i for i, x in enumerate(leaves) if core.is_tracer(x)]
        out_tree = []

        def body(*ts):
            full = list(leaves)
            for i, t in zip(traced, ts):
                full[i] = t
            d, kw = _tree.tree_unflatten(tree, full)
            it = iter(d)
            call = [a if i in static else next(it) for i, a in enumerate(args)]
            outs, t = _tree.tree_flatten(fun(*call, **kw, **skw))
            out_tree.append(t)
            return outs, len(outs)

        def params(n, _):
            return {"prevent_cse": bool(prevent_cse), "policy": policy, "num_out": n}
        outs, _ = bind_region(checkpoint_p, body, [leaves[i] for i in traced], params,
                              name=getattr(fun, "__name__", "checkpoint"))
        return _tree.tree_unflatten(out_tree[0], outs)
    return wrapped


remat = checkpoint


def _from_jax(policy, jax_code=False):
    """jax's own standard policies, passed in as they are, test jax's primitives: the
    shardc policy of the same name instead (else they would never match a dot); any
    other policy written for jax (jax's closures, the user's) sees jax's view of each
    op (_JaxPolicy). `jax_code`: the policy came with jax code (jax.checkpoint)."""
    if policy is None or getattr(policy, "ir_name", None) is not None:
        return policy
    jp = jax.checkpoint_policies
    for name in ("everything_saveable", "nothing_saveable", "dots_saveable",
                 "checkpoint_dots", "dots_with_no_batch_dims_saveable",
                 "checkpoint_dots_with_no_batch_dims"):
        if policy is getattr(jp, name, None):
            return getattr(checkpoint_policies, name)
    kind = type(policy).__name__    # jax's name policies are dataclasses: shardc's own
    if kind == "SaveOnlyTheseNames":
        return save_only_these_names(*policy.saveable_names)
    if kind == "SaveAnyNamesButThese":
        return save_any_names_but_these(*policy.names)
    if jax_code or _is_jax_code(policy):
        return _JaxPolicy(policy)
    return policy


def _is_jax_code(fn) -> bool:
    mod = getattr(fn, "__module__", "") or ""
    return mod == "jax" or mod.startswith("jax.")


class _JaxPolicy:
    """A policy of jax's (save_and_offload_only_these_names, offload_dot_with_no_batch_
    dims, ...) asked about shardc's ops as jax's primitives with jax's parameters and
    ShapedArrays; its answer (a bool, or jax's Saveable, Recompute, Offloadable) as
    shardc's."""

    def __init__(self, policy):
        self.policy = policy
        self.ir_name = f"jax:{getattr(policy, '__qualname__', type(policy).__name__)}"

    def __call__(self, prim, *avals, **params):
        from jax.extend.core import primitives as jprims
        if prim is name_p:
            prim, params = jprims.name_p, {"name": params["name"]}
        elif prim is dot_general_p:
            prim, params = jprims.dot_general_p, {
                "dimension_numbers": (params["contracting"], params.get("batch", ((), ()))),
                "precision": params.get("precision"), "out_sharding": None,
                "preferred_element_type": params.get("preferred_element_type")}
        else:       # jax's primitive of the same name, for a policy's `prim is ...`
            prim = getattr(jprims, f"{prim.name}_p", prim)
        got = self.policy(prim, *[jax.core.ShapedArray(a.shape, a.dtype, weak_type=a.weak)
                                  for a in avals], **params)
        kind = type(got).__name__
        if kind == "Offloadable":
            return Offloadable(got.src, got.dst)
        return kind == "SaveableType" or (kind == "bool" and got)


def checkpoint_name(x, name):
    """x, tagged with `name` for the save_*_names policies (identity otherwise)."""
    def one(v):
        return name_p.bind(v, name=name) if core.is_tracer(v) else v
    return _tree.tree_map(one, x)


# ---------------------------------------------------------------- policies

def everything_saveable(*_, **__):
    return True


def nothing_saveable(*_, **__):
    return False


def dots_saveable(prim, *_, **__):
    return prim is dot_general_p


checkpoint_dots = dots_saveable


def dots_with_no_batch_dims_saveable(prim, *_, **params):
    if prim is not dot_general_p:
        return False
    batch = params.get("batch") or ((), ())
    return not any(batch)


checkpoint_dots_with_no_batch_dims = dots_with_no_batch_dims_saveable


def save_only_these_names(*names):
    names = set(names)

    def policy(prim, *_, **params):
        return prim is name_p and params["name"] in names
    return named_callback("save_only_these_names", policy, sorted(names))


def save_any_names_but_these(*names):
    names = set(names)

    def policy(prim, *_, **params):
        return prim is name_p and params["name"] not in names
    return named_callback("save_any_names_but_these", policy, sorted(names))


def save_anything_except_these_names(*names):
    """As jax 0.10.2's: every value is saveable (a named value excluded would still be
    recomputed from its saved producer, so jax's saves everything)."""
    def policy(*_, **__):
        return True
    return named_callback("save_anything_except_these_names", policy, sorted(set(names)))


class Offloadable(NamedTuple):
    """A policy's answer for a value saved in another memory (jax's pe.Offloadable):
    moved from `src` to `dst` after the forward pass, back before the backward pass
    reads it (jax's memory kinds: "device", "pinned_host")."""
    src: str
    dst: str


def save_and_offload_only_these_names(*, names_which_can_be_saved,
                                      names_which_can_be_offloaded, offload_src,
                                      offload_dst):
    """save_only_these_names, and the values named in `names_which_can_be_offloaded`
    saved in `offload_dst` memory instead of recomputed."""
    saved, offloaded = set(names_which_can_be_saved), set(names_which_can_be_offloaded)
    both = saved & offloaded
    if both:
        raise ArgumentError(
            "The names should be exclusive and should not intersect in "
            "`names_which_can_be_saved` and `names_which_can_be_offloaded`. Got "
            f"names_which_can_be_saved={saved}, names_which_can_be_offloaded={offloaded} "
            f"and the intersection={both}")
    where = Offloadable(offload_src, offload_dst)

    def policy(prim, *_, **params):
        if prim is name_p and params["name"] in saved:
            return True
        if prim is name_p and params["name"] in offloaded:
            return where
        return False
    return named_callback("save_and_offload_only_these_names", policy,
                          [sorted(saved), sorted(offloaded), offload_src, offload_dst])


def offload_dot_with_no_batch_dims(offload_src, offload_dst):
    """dots_with_no_batch_dims_saveable, saving those dots' results in `offload_dst`
    memory (a useful heuristic for transformers)."""
    where = Offloadable(offload_src, offload_dst)

    def policy(prim, *avals, **params):
        return where if dots_with_no_batch_dims_saveable(prim, *avals, **params) else False
    return named_callback("offload_dot_with_no_batch_dims", policy, [offload_src, offload_dst])


def save_from_both_policies(policy_1, policy_2):
    def policy(prim, *avals, **params):
        return policy_1(prim, *avals, **params) or policy_2(prim, *avals, **params)
    if all(isinstance(getattr(q, "ir_name", None), str) for q in (policy_1, policy_2)):
        return named_callback("save_from_both_policies", policy, (policy_1, policy_2))
    return policy


# the policies the IR text names (printed `policy=<callback dots_saveable>`), so that
# a printed checkpoint parses back with its policy
for _f in (everything_saveable, nothing_saveable, dots_saveable,
           dots_with_no_batch_dims_saveable):
    NAMED_CALLBACKS[_f.__name__] = named_callback(_f.__name__, _f)
for _f in (save_only_these_names, save_any_names_but_these, save_anything_except_these_names,
           save_from_both_policies, offload_dot_with_no_batch_dims):
    NAMED_CALLBACKS[_f.__name__] = _f
NAMED_CALLBACKS["save_and_offload_only_these_names"] = lambda s, o, src, dst: \
    save_and_offload_only_these_names(names_which_can_be_saved=s,
                                      names_which_can_be_offloaded=o, offload_src=src,
                                      offload_dst=dst)


checkpoint_policies = types.SimpleNamespace(
    everything_saveable=everything_saveable, nothing_saveable=nothing_saveable,
    dots_saveable=dots_saveable, checkpoint_dots=checkpoint_dots,
    dots_with_no_batch_dims_saveable=dots_with_no_batch_dims_saveable,
    checkpoint_dots_with_no_batch_dims=checkpoint_dots_with_no_batch_dims,
    save_only_these_names=save_only_these_names,
    save_any_names_but_these=save_any_names_but_these,
    save_anything_except_these_names=save_anything_except_these_names,
    save_from_both_policies=save_from_both_policies,
    save_and_offload_only_these_names=save_and_offload_only_these_names,
    offload_dot_with_no_batch_dims=offload_dot_with_no_batch_dims)
