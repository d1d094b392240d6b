"""shardc.jit: trace -> propagate -> lower -> compile -> run, with a cache per signature.

Stages mirror jax: `f.trace(*a)` -> Traced (.traced_ir, .propagate() -> Propagated: .ir,
.assignment, .lower()), `f.lower(*a)` -> Lowered
(.as_text(), .compile()), `.compile()` -> Compiled (callable, .as_text(), ...).
"""
from __future__ import annotations

import functools
import inspect
import operator

import jax
from jax.sharding import NamedSharding

from ..trace import core, types
from ..ir import dtypes
from ..runtime import backend as runtime
from ..runtime import special
from . import autojit
from .argcheck import check_static
from .jit_args import (ArgSpec, _as_value, _broadcast_prefix, _float0_node, _has_keys,
    _leaf_key, _norm_argnums, _replay, arg_names, donated, keep_used,
    out_requests, UNSET, _Static, _traced, _wrap_keys)
from .stages import _ARRAY, Lowered, Traced, _fun_name, gc_paused
from .stages import Compiled, Propagated  # noqa: F401  (shardc.api.jit.Compiled, as before)
from ..errors import ShardcError, ShardcTypeError, api_boundary, cleaned
from ..runtime.autospec import is_auto
from ..runtime.meshes import (MeshInfo, MeshSlot, boundary_kind, current_mesh, equivalent,
                              mesh_of_args, one_device, target_platform)
from ..ir.sharding import Sharding, from_spec
from ..trace import pytree as _tree


class Jitted:
    """A function compiled by shardc on first call for each argument signature."""

    def __init__(self, fun, in_shardings=None, out_shardings=None, static_argnums=(),
                 static_argnames=(), donate_argnums=(), donate_argnames=(), keep_unused=False,
                 inline=False, memory_budget=None, _internal=None, _retrace=False):
        if not callable(fun):
            raise TypeError(f"shardc.jit needs a function, got {fun!r}")
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.in_shardings = in_shardings
        self.out_shardings = out_shardings
        self.memory_budget = autojit.check_budget(memory_budget, in_shardings, out_shardings)
        self.static_argnums = (static_argnums,) if isinstance(static_argnums, int) \
            else tuple(static_argnums)
        self.static_argnames = (static_argnames,) if isinstance(static_argnames, str) \
            else tuple(static_argnames)
        self.donate_argnums = (donate_argnums,) if isinstance(donate_argnums, int) \
            else tuple(donate_argnums or ())
        self.donate_argnames = (donate_argnames,) if isinstance(donate_argnames, str) \
            else tuple(donate_argnames or ())
        # keep_unused=False (the default) drops the arguments the program does not read
        # (see keep_used); shardc traces a jit inside a trace into it (inline=True's
        # effect), so inline is accepted as jax's
        self.keep_unused, self.inline = bool(keep_unused), bool(inline)
        try:
            self._sig = inspect.signature(fun)
        except (TypeError, ValueError):
            self._sig = None
        # static arguments by position and by name, each completed from the other
        pos = [p.name for p in self._sig.parameters.values()
               if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)] \
            if self._sig is not None else None
        check_static(self._sig, pos, self.static_argnums, self.static_argnames,
                     self.donate_argnums, self.donate_argnames)
        nums = set(_norm_argnums(self.static_argnums, len(pos) if pos is not None else None))
        names = set(self.static_argnames)
        if pos is not None:
            names |= {pos[i] for i in nums if i < len(pos)}
            nums |= {pos.index(n) for n in self.static_argnames if n in pos}
        self._static_nums = tuple(sorted(nums))
        self._static_names = frozenset(names)
        # donated arguments by position and by name, each completed from the other
        dnums = set(_norm_argnums(self.donate_argnums, len(pos) if pos is not None else None))
        dnames = set(self.donate_argnames)
        if pos is not None:
            dnames |= {pos[i] for i in dnums if i < len(pos)}
            dnums |= {pos.index(n) for n in self.donate_argnames if n in pos}
        self._donate_nums, self._donate_names = frozenset(dnums), frozenset(dnames)
        if dnames & names or dnums & nums:
            raise ValueError("static_argnames and donate_argnames cannot intersect. Argument "
                             f"names {set(dnames & names) or dnums & nums} appear in both "
                             "static_argnames and donate_argnames")
        self._internal = _internal is not None     # (shardc's own: see internal_jit)
        self._retrace = _retrace
        self._cache: dict = {}     # full signature -> entry (after mesh resolution)
        self._fast: dict = {}      # call key -> entry (see _fast_key)
        # with jit disabled the dispatcher runs `fun` itself, as jax.jit's does; shardc's
        # own jits (see internal_jit) compile regardless and are named in NaN errors
        run, deopt = (fun, None) if _internal is None else \
            (self._compiled_anyway, special.primitive_fun(_internal))
        self._dispatch = runtime.dispatcher(_fun_name(fun), self._cache_miss,
                                            self._static_nums, sorted(self._static_names),
                                            fun=run, deopt=deopt)

    def _compiled_anyway(self, *args, **kwargs):
        prev = special.disable_jit.swap_local(False)
        try:
            return self._dispatch(*args, **kwargs)
        finally:
            special.disable_jit.set_local(prev)

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        return functools.partial(self, obj)

    # ------------------------------------------------------------ call

    def _fast_key(self, args, kwargs):
        """(key, dynamic leaves) of a call: everything a compiled program depends on."""
        ctx = (runtime.config_key(), current_mesh())
        if not kwargs and not self._static_nums:
            # the common call: placed jax.Arrays, keyed inline (this runs while XLA's
            # threads may still be busy with the last call, so every step counts)
            leaves, treedef = _tree.tree_flatten(args)
            return (treedef, ctx, *[(x.aval, x.sharding) if type(x) is _ARRAY else
                                    _leaf_key(x) for x in leaves]), leaves
        sn = self._static_nums
        static = tuple(_Static(args[i]) for i in sn if i < len(args))
        dyn = tuple(a for i, a in enumerate(args) if i not in sn) if sn else args
        skw, dkw = (), kwargs
        if kwargs:
            names = self._static_names
            skw = tuple((k, _Static(v)) for k, v in sorted(kwargs.items()) if k in names)
            dkw = {k: v for k, v in kwargs.items() if k not in names}
        leaves, treedef = _tree.tree_flatten((dyn, dkw))
        return (treedef, ctx, len(args), static, skw, *map(_leaf_key, leaves)), leaves

    # A call goes straight to jaxlib's C++ dispatch (see runtime.dispatcher): `f(*a)`
    # finds `__call__` on the class, a property whose C-level getter returns the
    # dispatcher, so no Python frame runs before it (as with jax.jit's own functions).
    # Its key includes the `set_mesh` mesh (jax's mesh context, a jit-key config), since bare
    # specs inside one can change what a program means.
    __call__ = property(operator.attrgetter("_dispatch"))

    def _cache_miss(self, *args, **kwargs):
        """A call the C++ dispatch has no entry for: run it here, and hand the dispatch
        what it needs to run the next call with these types by itself. This is the
        API boundary of a call: errors leave with shardc's frames removed."""
        keys = _has_keys((args, kwargs))
        try:
            out, entry, leaves = self._call(args, kwargs)
            if entry is not None:       # run (not traced inline into an outer trace)
                special.check(self._dispatch, args, kwargs, out)
        except Exception as e:
            cleaned(e)
            raise
        fast = None
        # (jax key arguments are unwrapped in Python; a program that takes closed-over
        # arrays too is run with them by _call only)
        if entry is not None and not keys and entry.n == len(leaves) and not self._retrace:
            outs, tree = runtime.flatten(out)
            fast = entry.fastpath(outs, tree)
        return out, fast, False

    def _call(self, args, kwargs):
        """(outputs, cache entry or None if traced inline, flat leaves) of a call."""
        args, kwargs = _wrap_keys((args, kwargs))
        key, leaves = self._fast_key(args, kwargs)
        for i, x in enumerate(leaves):
            if type(x) is jax.ShapeDtypeStruct:
                raise ShardcTypeError(
                    f"argument {i} is a ShapeDtypeStruct {x.dtype}{list(x.shape)}, which has "
                    "no values to run on: pass arrays, or give abstract arguments to "
                    ".trace(...), .lower(...) or shardc.eval_shape")
        if core.current_builder() is not None:
            # inside another trace: as jax, the call is traced into it (its function may
            # close over that trace's values); under ensure_compile_time_eval, with no
            # traced argument, it runs now, unless its function reads a value of that
            # trace: then what it traced is traced into it (its Python runs once)
            staged = None
            if core.folds(leaves):
                try:
                    with core.outside_traces():
                        return self._call(args, kwargs)
                except core.ClosesOverTrace as e:
                    staged = e if e.owner is self else None   # (else: called again)
            return self._inline(args, kwargs, staged), None, leaves
        entry = None if self._retrace else self._fast.get(key)
        if entry is not None:
            return entry.run(leaves), entry, leaves
        leaves, slow_key, ctx = self._prepare(args, kwargs)
        entry = None if self._retrace else self._cache.get(slow_key)
        if entry is None:
            traced = self._stage(ctx)
            lowered = traced.lower()
            lifted = traced.program.meta.get("lifted")
            if lifted or self._retrace:
                # the next call traces again (a retracing jit's function may read changed
                # globals; closed-over arrays, arguments here too, may be others) but
                # reuses the executable of an equal program
                entry = _lifted_entry(lowered)
                return entry.run(leaves + (lifted or []), traced.out_tree,
                                 lowered.host_calls), entry, leaves
            entry = lowered.compile()._entry
            self._cache[slow_key] = entry
        entry.adopt(leaves)
        self._fast[key] = entry
        return entry.run(leaves), entry, leaves

    def _inline(self, args, kwargs, staged=None):
        """Called inside another trace: trace the function in place, its in/out
        shardings becoming sharding constraints. `staged`: a ClosesOverTrace whose
        trace of the function is replayed instead of calling it again."""
        from .lax import with_sharding_constraint as wsc
        dyn, _, _, dkw, nums = self._split_static(args, kwargs)
        # concrete arguments are values of the trace, as jax's: the function sees tracers
        dyn, dkw = _tree.tree_map(_traced, (dyn, dkw))
        it = iter(dyn)
        args = tuple(a if i in nums else next(it) for i, a in enumerate(args))
        kwargs = {**kwargs, **dkw}
        if self.in_shardings is not None:
            flat = self._resolve_in_shardings(dyn, len(_tree.tree_leaves(dyn)))
            leaves, tree = _tree.tree_flatten(dyn)
            dyn = _tree.tree_unflatten(tree, [x if s is None or is_auto(s) else wsc(x, s)
                                              for x, s in zip(leaves, flat)])
            it = iter(dyn)
            args = tuple(a if i in nums else next(it) for i, a in enumerate(args))
        out = self.fun(*args, **kwargs) if staged is None else _replay(staged, dyn, dkw)
        if self.out_shardings is not None:    # (an AUTO output is the outer search's)
            leaves, tree = _tree.tree_flatten(out)
            flat = _broadcast_prefix(self.out_shardings, out, "out_shardings")
            # (as jax: a nested jit's memory kinds do not change its results' types)
            out = _tree.tree_unflatten(tree, [x if s is None or is_auto(s) else wsc(x, s)
                                              for x, s in zip(leaves, flat)])
        return out

    @api_boundary
    def trace(self, *args, **kwargs) -> "Traced":
        args, kwargs = _wrap_keys((args, kwargs))
        _, _, ctx = self._prepare(args, kwargs)
        return self._stage(ctx)

    @api_boundary
    def lower(self, *args, **kwargs) -> "Lowered":
        args, kwargs = _wrap_keys((args, kwargs))
        _, _, ctx = self._prepare(args, kwargs)
        return self._stage(ctx).lower()

    def eval_shape(self, *args, **kwargs):
        t = self.trace(*args, **kwargs)
        return t.out_info

    # ------------------------------------------------------------ argument handling

    def _split_static(self, args, kwargs):
        n = len(args)
        static_nums = [i for i in self._static_nums if i < n]
        dyn = tuple(a for i, a in enumerate(args) if i not in static_nums)
        static = tuple((i, _Static(args[i])) for i in static_nums)
        skw = tuple(sorted((k, _Static(v)) for k, v in kwargs.items()
                           if k in self._static_names))
        dkw = {k: v for k, v in kwargs.items() if k not in self._static_names}
        return dyn, static, skw, dkw, static_nums

    def _prepare(self, args, kwargs):
        dyn, static, skw, dkw, static_nums = self._split_static(args, kwargs)
        leaves, treedef = _tree.tree_flatten((dyn, dkw))
        n_pos = len(_tree.tree_leaves(dyn))
        given = self._resolve_in_shardings(dyn, n_pos)
        for i, x in enumerate(leaves):
            if core.is_tracer(x):
                raise ShardcError("a traced value was passed to a shardc.jit function from "
                                  "inside another trace in a way shardc does not support")
        mesh = mesh_of_args(leaves, given, self.out_shardings)
        # AUTO(axis_names=...) and no mesh named: the search chooses the mesh's shape too
        search = autojit.mesh_search(given, self.out_shardings) if mesh.mesh is None else None
        specs = self._specs(leaves, given, mesh) if search is None else \
            [ArgSpec(core.aval_of(x), None, False) for x in leaves]
        key = (treedef, static, skw, tuple((s.aval, s.sharding, s.memory, s.host, s.error)
                                           for s in specs),
               mesh.mesh, mesh.devices, runtime.config_key(), search)
        auto = [i for i, s in enumerate(given) if is_auto(s)]
        ctx = dict(treedef=treedef, static=static, skw=skw, specs=specs, mesh=mesh, leaves=leaves,
                   static_nums=static_nums, n_args=len(args), dyn=dyn, dkw=dkw, auto=auto,
                   given=given, mesh_search=search)
        return leaves, key, ctx

    def _specs(self, leaves, given, mesh):
        return [self._arg_spec(i, x, given[i] if i < len(given) else None, mesh)
                for i, x in enumerate(leaves)]

    def _resolve_in_shardings(self, dyn, n_leaves):
        if self.in_shardings is None:
            return [None] * n_leaves
        spec = self.in_shardings
        if not isinstance(spec, (tuple, list)):
            spec = (spec,) * len(dyn)
        if isinstance(spec, list):
            spec = tuple(spec)
        if len(spec) != len(dyn):
            raise ShardcError(
                f"in_shardings has {len(spec)} entries but the function was called with "
                f"{len(dyn)} positional arguments; give one sharding (or pytree prefix) "
                "per argument")
        out = []
        for s, a in zip(spec, dyn):
            out += _broadcast_prefix(s, a, "in_shardings")
        return out

    def _arg_spec(self, i, x, given, mesh: MeshInfo):
        aval = core.aval_of(x)
        # an array's memory kind (jax types an array in pinned host memory so)
        has = isinstance(x, (jax.Array, jax.ShapeDtypeStruct)) and \
            getattr(x, "sharding", None) is not None
        memory = boundary_kind(x.sharding.memory_kind) if has else None
        if is_auto(given):      # chosen by the search; the array is placed that way
            autojit.check_mesh(mesh, f"in_shardings for argument {i}")
            return ArgSpec(aval, None, False, memory, memory == "pinned_host")
        committed = isinstance(x, (jax.Array, jax.ShapeDtypeStruct)) and isinstance(
            getattr(x, "sharding", None), NamedSharding)
        if isinstance(x, jax.Array) and isinstance(x.sharding, jax.sharding.SingleDeviceSharding) \
                and x.committed and mesh.size > 1:     # (an error if the program reads it)
            return ArgSpec(aval, Sharding.replicated(aval.ndim), True, error=(
                f"argument {i} is committed to device {next(iter(x.devices()))} but the "
                f"program runs on a mesh of {mesh.size} devices; device_put it with a "
                "NamedSharding (or pass a NumPy array)"))
        host = memory == "pinned_host"
        if given is not None:
            sh = mesh.sharding_from(given, aval, f"in_shardings for argument {i}")
            if getattr(given, "memory_kind", None):
                want = boundary_kind(given.memory_kind)
                if has and want != memory:
                    raise ShardcError(
                        f"in_shardings for argument {i} has memory kind {given.memory_kind} "
                        f"but the array passed is in {x.sharding.memory_kind} memory; "
                        "device_put it there, or drop the memory kind from in_shardings")
                memory = want   # (a NumPy argument placed there is typed as the device's)
            if committed and not equivalent(x.sharding, given, aval.ndim) and \
                    mesh.sharding_from(x.sharding, aval, "argument") != sh:
                raise ShardcError(
                    f"in_shardings for argument {i} is "
                    f"{given.spec if isinstance(given, NamedSharding) else given} "
                    f"but the array passed is already sharded as {x.sharding.spec}; "
                    "device_put it to the sharding you want, or drop in_shardings")
        elif committed:
            sh = mesh.sharding_from(x.sharding, aval, f"argument {i}")
        else:
            sh = Sharding.replicated(aval.ndim)
        mesh.check_divisible(sh, aval, f"argument {i}")
        return ArgSpec(aval, sh, committed, memory, host)

    # ------------------------------------------------------------ staging

    def _stage(self, ctx) -> "Traced":
        with gc_paused():
            if ctx["mesh_search"] is not None:
                return autojit.search_meshes(self, ctx)
            return self._stage_traced(ctx)

    def _stage_traced(self, ctx) -> "Traced":
        specs, mesh = ctx["specs"], ctx["mesh"]
        names = arg_names(self._sig, ctx)
        fun = self.fun
        static, skw, treedef = ctx["static"], ctx["skw"], ctx["treedef"]
        n_args = ctx["n_args"]
        out_tree = {}

        def flat_fun(*flat):
            dyn, dkw = _tree.tree_unflatten(treedef, flat)
            full, it = [], iter(dyn)
            static_map = {i: v.v for i, v in static}
            for i in range(n_args):
                full.append(static_map[i] if i in static_map else next(it))
            out = fun(*full, **dkw, **{k: v.v for k, v in skw})
            leaves, tree = _tree.tree_flatten(_tree.tree_map(_float0_node, out))
            out_tree["tree"] = tree
            out_tree["platform"] = target_platform()   # (in the trace: its mesh's devices)
            return leaves

        avals = [s.aval for s in specs]
        explicit = mesh.shape.explicit
        if explicit:    # explicit mode: the arguments' types carry their shardings
            avals = [types.typed(a, types.restrict(s.sharding, explicit, a.ndim))
                     for a, s in zip(avals, specs)]
        slot = MeshSlot(mesh)
        host = [i for i, s in enumerate(specs) if s.host]
        # shardc's own jits (eager control flow and transforms) take the arrays their
        # functions close over as operands, as jax's primitives do (not as constants)
        b, outs = core.full_trace(flat_fun, avals, names, name=_fun_name(fun), meshes=slot,
                                  host=host, lift=self._internal)
        mesh = slot.info
        program = b.program
        program.mesh = mesh.shape
        lifted = [x for x, _ in (b.lifted or {}).values()]
        if lifted:      # (their Values are the program's last inputs)
            specs = ctx["specs"] = specs + [self._arg_spec(len(specs) + k, x, None, mesh)
                                            for k, x in enumerate(lifted)]
            program.meta["lifted"] = lifted
        for v, s in zip(program.inputs, specs):
            v.sharding = s.sharding     # (None where AUTO: the search chooses)
        program.outputs = [_as_value(b, x) for x in outs]
        if b.captured:
            if core.suspended_capture(b):     # (see _call: replayed in that trace)
                raise core.ClosesOverTrace(b, out_tree["tree"], owner=self)
            raise ShardcError("the function closes over a value traced by an outer "
                              "transformation (grad, vmap, jit...), so it cannot be traced, "
                              "lowered or compiled by itself: call it instead")
        leaves = [*ctx.get("leaves", ()), *lifted]
        if not self.keep_unused:
            given = ctx["given"] + [None] * (len(leaves) - len(ctx["given"]))
            mesh = keep_used(program, leaves, given, mesh, not (
                slot.named or ctx["auto"] or ctx["mesh_search"] or self.out_shardings))
        kept = program.meta.get("kept", range(len(leaves)))
        if mesh.mesh is None:
            one_device(leaves, kept)
        for i in kept:    # (unless keep_used moved the program to its device)
            if specs[i].error and set(leaves[i].devices()) != set(mesh.devices):
                raise ShardcError(specs[i].error)
        program.out_shardings, asked, auto_outs = out_requests(
            self.out_shardings, out_tree["tree"], program, mesh)
        # memory kinds: an argument's, and a result's from out_shardings or its value's
        program.meta["in_memory"] = [s.memory for s in specs]
        program.meta["out_memory"] = [
            a if a is not UNSET else ("pinned_host" if v in b.host else None)
            for a, v in zip(asked, program.outputs)]
        # results out_shardings moves out of the memory they are in (XLA moves them)
        program.meta["out_moved"] = [a is not UNSET and (a == "pinned_host") != (v in b.host)
                                     for a, v in zip(asked, program.outputs)]
        program.meta["platform"] = out_tree["platform"]
        # the outputs out_shardings= pins keep theirs; jax names the others' by XLA's choice
        program.meta["pinned_out"] = [s is not None for s in program.out_shardings]
        program.meta["donate"] = donated(self._donate_nums, self._donate_names, ctx)
        # results are committed if the program has a mesh or a committed input (as jax)
        program.meta["committed"] = mesh.mesh is not None or any(
            isinstance(leaves[i], jax.Array) and leaves[i].committed for i in kept)
        autojit.request(program, ctx["auto"], auto_outs,
                        self.in_shardings, self.out_shardings, self.memory_budget, mesh)
        t = Traced(program, mesh, out_tree["tree"], self)
        t.in_tree = treedef
        return t


def internal_jit(fun, name, retrace=False, **kw):
    """A jit shardc makes itself, to run a transform, sampler or control-flow op outside
    a trace: under jax.disable_jit it compiles all the same (what it runs needs a
    trace), and under jax_debug_nans a NaN it returns is reported as from `name`, as
    one op's (its ops are not run one by one). `retrace`: every call traces the user's
    function again, as jax's eager transforms run it (a global it reads may have
    changed), and reuses the executable of an equal program."""
    return Jitted(fun, _internal=name, _retrace=retrace, **kw)


_LIFTED: dict = {}     # (StableHLO text, devices, committed, donated, kept, inputs, weak) -> entry


def _lifted_entry(lowered):
    """The compiled entry of an internal jit's program whose closed-over arrays are
    arguments (see core.lift_array), shared by programs of the same text."""
    p = lowered.traced.program
    # (weak types are not in the text, but the results carry them; nor are the inputs
    # keep_used dropped, but the entry takes every one)
    key = (lowered.text, tuple(d.id for d in lowered.traced.mesh.devices),
           p.meta.get("committed"), tuple(p.meta.get("donate") or ()), p.meta.get("kept"),
           len(p.inputs), tuple(v.aval.weak for v in p.outputs))
    entry = _LIFTED.get(key)
    if entry is None:
        if len(_LIFTED) >= 256:
            _LIFTED.clear()
        entry = _LIFTED[key] = lowered.compile()._entry
    return entry


@api_boundary
def jit(fun=None, *, in_shardings=None, out_shardings=None, static_argnums=(),
        static_argnames=(), donate_argnums=(), donate_argnames=(), keep_unused=False,
        inline=False, memory_budget=None):
    """Compile `fun` with shardc: usable as @jit or @jit(in_shardings=...).

    A leaf of in_shardings / out_shardings may be `shardc.AUTO`: the sharding search
    chooses it (and every value not pinned), within `memory_budget` bytes per device
    if given; `f.lower(...).compile().input_shardings` shows the choice."""
    kw = dict(in_shardings=in_shardings, out_shardings=out_shardings,
              static_argnums=static_argnums, static_argnames=static_argnames,
              donate_argnums=donate_argnums, donate_argnames=donate_argnames,
              keep_unused=keep_unused, inline=inline, memory_budget=memory_budget)
    if fun is None:
        return api_boundary(lambda f: Jitted(f, **kw))
    return Jitted(fun, **kw)


_ = (dtypes, from_spec)


from ..runtime import distributed as _distributed  # noqa: E402

_distributed.install_jit(jit)   # its gathers are shardc programs
