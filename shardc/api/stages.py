"""The stages of a jitted call, as jax's AOT stages: Traced (the program as traced),
Propagated (every value sharded, with the propagation's Assignment), Lowered (StableHLO
with Shardy shardings) and Compiled (an executable for one signature), and the cache
entry a compiled call leaves for the C++ dispatch."""
from __future__ import annotations

import contextlib
import gc
import operator

import jax

from . import autojit
from ..errors import ShardcError, api_boundary, cleaned
from ..ir.program import Program, Snapshot, print_program
from ..lower.emit import lower as lower_program
from ..propagate import passes
from ..runtime import backend as runtime
from ..runtime import special
from ..runtime.meshes import MeshInfo, with_memory
from ..trace import core
from ..trace import pytree as _tree


@contextlib.contextmanager
def gc_paused():
    """No cyclic garbage collection while a program is traced, propagated and lowered:
    the IR is many small objects that live until the stage ends, and each full
    collection would walk all of them again (a cost that grows with the program).
    At the end the objects made meanwhile go straight to the oldest generation
    (freeze, then unfreeze): the IR lives as long as its cache entry, so the young
    collection that would otherwise run at the next allocation and walk every one of
    them (tens of ms at 10k ops) finds nothing to do; cycles among them are still
    collected, by the next full collection. (Not while a user has frozen objects of
    their own: unfreeze would release those too.)"""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if not gc.get_freeze_count():
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def _fun_name(fun):
    return getattr(fun, "__name__", "fun").replace("<", "").replace(">", "") or "fun"


class Traced:
    """A traced program, before propagation: only its sources (arguments, constraints)
    carry shardings. `.propagate()` gives the next stage; `.ir`, `.explain()`,
    `.out_info`, `.lower()` go through it (propagating once, on first use)."""

    def __init__(self, program: Program, mesh: MeshInfo, out_tree, jitted=None):
        self._program = program
        self._traced = Snapshot(program)     # printed on demand: .traced_ir
        self._propagated = None
        self.mesh = mesh
        self.out_tree = out_tree
        self.in_tree = None      # (args, kwargs) of the dynamic arguments, set by jit
        self.jitted = jitted

    @property
    def traced_ir(self) -> str:
        """The IR as traced, before propagation (only the sources have shardings)."""
        return self._traced.text()

    @api_boundary
    def propagate(self) -> "Propagated":
        """Sharding propagation (run once; later calls return the same stage), after the
        sharding search if an in/out sharding is shardc.AUTO."""
        if self._propagated is None:
            with gc_paused():
                autojit.solve(self._program, getattr(self.mesh, "devices", None))
                self._propagated = Propagated(self._program, self.mesh, self.out_tree,
                                              self.jitted)
                self._propagated.in_tree = self.in_tree
                autojit.warn_over_budget(self._program)
        return self._propagated

    # the later stages' views, as before the propagation stage was split off
    @property
    def program(self) -> Program:
        """The propagated program (the traced one is `traced_ir`)."""
        return self.propagate().program

    @property
    def ir(self) -> str:
        return self.propagate().ir

    def explain(self) -> str:
        return self.propagate().explain()

    @property
    def out_info(self):
        return self.propagate().out_info

    def lower(self) -> "Lowered":
        return self.propagate().lower()

    def __repr__(self):
        return self.traced_ir


class Propagated:
    """A program after sharding propagation: `.ir` is its text with every sharding,
    `.assignment` the propagation's result (per value its sharding and why)."""

    def __init__(self, program: Program, mesh: MeshInfo, out_tree, jitted=None):
        passes.prepare(program)
        self.assignment = passes.propagate_assignment(program)
        self.program = program
        self.mesh = mesh
        self.out_tree = out_tree
        self.in_tree = None
        self.jitted = jitted

    @property
    def auto(self):
        """The sharding search's Solution (shardc/auto/solution.py) when an in/out
        sharding was shardc.AUTO, else None."""
        return self.program.meta.get("auto")

    @property
    def ir(self) -> str:
        return print_program(self.program)

    def explain(self) -> str:
        """Why every value has its sharding; with shardc.AUTO, then why the search chose
        each AUTO input's and what it predicts for the step."""
        from ..propagate.explain import explain_program
        text = explain_program(self.program)
        sol = self.auto
        if sol is None:
            return text
        from ..auto.explain import explain_auto
        return text.rstrip("\n") + "\n\n" + explain_auto(self.program, sol)

    @property
    def out_info(self):
        return _tree.tree_unflatten(self.out_tree, [
            jax.ShapeDtypeStruct(v.aval.shape, v.aval.dtype,
                                 sharding=self.mesh.named(s))
            for v, s in zip(self.program.outputs, self.program.out_shardings)])

    def lower(self) -> "Lowered":
        return Lowered(self)

    def __repr__(self):
        return self.ir


class Lowered:
    """StableHLO text with Shardy shardings, ready to compile."""

    def __init__(self, propagated: Propagated):
        self.traced = propagated     # (named as before the propagation stage was split off)
        self.host_calls = []         # the host functions the text names by index
        with gc_paused():
            self.text = lower_program(propagated.program, host_calls=self.host_calls)

    def as_text(self, debug_info=False) -> str:
        return runtime.pretty(self.text, debug_info)

    def compile(self) -> "Compiled":
        return Compiled(self)

    def __repr__(self):
        return self.as_text()


_ARRAY = runtime.ARRAY_TYPE   # jax.Array's concrete class (no device work at import:
#                              shardc.distributed.initialize() must come before any)


class _Entry:
    """What a cached call needs: argument placement, the executable, the output tree.
    `kept`: the positions of the `n` leaves of a call the executable takes (None: all;
    see keep_used), `in_shardings` theirs."""
    __slots__ = ("exe", "in_shardings", "out_tree", "n", "kept")

    def __init__(self, exe, in_shardings, out_tree, n, kept=None):
        self.exe, self.out_tree = exe, out_tree
        self.in_shardings = list(in_shardings)
        self.n, self.kept = n, kept

    def adopt(self, leaves):
        """Expect the callers' own sharding objects where they are equivalent to ours,
        so the cached call's check is a cheap equality."""
        for i, x in enumerate(self._kept(leaves)):
            if isinstance(x, jax.Array):
                s = self.in_shardings[i]
                if x.sharding is not s and x.sharding.is_equivalent_to(s, x.ndim):
                    self.in_shardings[i] = x.sharding

    def run(self, leaves, out_tree=None, host_calls=None):
        """The outputs, in `out_tree` if given (the structure of the trace that called,
        when an executable is shared by traces of one text: their trees may hold
        different static parts), calling `host_calls` if given (that trace's host
        functions: a closure's new values)."""
        if len(leaves) != self.n:
            raise ShardcError(f"expected {self.n} array arguments, got {len(leaves)}")
        arrays = [x if type(x) is _ARRAY and x.sharding == s and not x.is_deleted()
                  else self._arg(i, x)
                  for i, (x, s) in enumerate(zip(self._kept(leaves), self.in_shardings))]
        outs = self.exe(arrays) if not host_calls else self.exe(arrays, host_calls)
        return _tree.tree_unflatten(self.out_tree if out_tree is None else out_tree, outs)

    def _kept(self, leaves):
        return leaves if self.kept is None else [leaves[i] for i in self.kept]

    def fastpath(self, outs, tree):
        """The C++ dispatch's data for later calls like one that returned `outs`."""
        bits = None
        if self.kept is not None:
            bits = [False] * self.n
            for i in self.kept:
                bits[i] = True
        return runtime.fastpath(self.exe, self.in_shardings, outs, tree, bits)

    def _arg(self, i, x):
        """Kept leaf `i` placed for the program: an array whose sharding is equivalent to
        ours (P('x', None) and P('x',), say) is used as it is, and its sharding object
        adopted so the next call's check is a cheap equality again; others are moved."""
        s = self.in_shardings[i]
        if type(x) is _ARRAY and not x.is_deleted() and x.sharding.is_equivalent_to(s, x.ndim):
            self.in_shardings[i] = x.sharding
            return x
        return _place(i if self.kept is None else self.kept[i], x, s)   # (the call's leaf)


def _place(i, x, s):
    if isinstance(x, jax.Array) and x.is_deleted():
        raise ShardcError(f"argument {i} has been deleted (donated to an earlier call, or "
                          "deleted explicitly); pass a live array")
    return runtime.place(x, s)


class Compiled:
    """An executable for one argument signature; call it like the function."""

    def __init__(self, lowered: Lowered):
        t = lowered.traced
        self.lowered = lowered
        p = t.program
        mesh = t.mesh
        in_memory = p.meta.get("in_memory") or [None] * len(p.inputs)
        out_memory = p.meta.get("out_memory") or [None] * len(p.outputs)
        ins = [with_memory(mesh.named(v.sharding), m) for v, m in zip(p.inputs, in_memory)]
        kept = p.meta.get("kept")       # (the inputs the executable takes, see keep_used)
        run_ins = ins if kept is None else [ins[i] for i in kept]
        # as jax's: a dropped input's sharding is None (an AUTO one's is the search's)
        sol = p.meta.get("auto")
        shown = {*(kept or ()), *(sol.input_shardings if sol is not None else ())}
        ins = ins if kept is None else [s if i in shown else None for i, s in enumerate(ins)]
        pinned = p.meta.get("pinned_out") or [False] * len(p.outputs)
        outs = [with_memory(mesh.named(s) if pin else mesh.result(s, v.aval), m)
                for s, v, pin, m in zip(p.out_shardings, p.outputs, pinned, out_memory)]
        # as jax's Compiled: ((args...), {kwargs}) and the outputs' tree, by leaf
        self.input_shardings = ins if t.in_tree is None else \
            _tree.tree_unflatten(t.in_tree, ins[:t.in_tree.num_leaves])   # (not lifted ones)
        self.output_shardings = _tree.tree_unflatten(t.out_tree, outs)
        self._in_avals = [v.aval for v in p.inputs]
        exe = runtime.compile(lowered.text, mesh.devices, lowered.host_calls)
        passes.run_callbacks(p, mesh)     # inspect_array_sharding: once per compile
        donate = p.meta.get("donate") or [False] * len(p.inputs)
        self._exe = runtime.Executable(exe, run_ins, [v.aval for v in p.outputs], outs,
                                       mesh.devices, p.meta.get("committed", True),
                                       [k for k, i in enumerate(kept or range(len(ins)))
                                        if donate[i]])
        self._entry = _Entry(self._exe, run_ins, t.out_tree, len(p.inputs), kept)
        # a NaN under jax_debug_nans is named after the program (nothing to re-run)
        name = _fun_name(t.jitted.fun)
        self._dispatch = runtime.dispatcher(name, self._cache_miss,
                                            deopt=special.primitive_fun(f"compiled {name}"))

    __call__ = property(operator.attrgetter("_dispatch"))   # as Jitted's

    def _cache_miss(self, *args, **kwargs):
        try:
            out = self._call(args, kwargs)
            special.check(self._dispatch, args, kwargs, out)
        except Exception as e:
            cleaned(e)
            raise
        outs, tree = runtime.flatten(out)
        return out, self._entry.fastpath(outs, tree), False

    def _call(self, args, kwargs):
        leaves, tree = _tree.tree_flatten((args, kwargs))
        want_tree = self.lowered.traced.in_tree
        if want_tree is not None and tree != want_tree and len(leaves) == len(self._in_avals):
            # (the same number of leaves in another structure would be taken in order)
            raise TypeError(f"Function compiled with input pytree {want_tree} does not match "
                            f"the input pytree it was called with: {tree}")
        if len(leaves) != len(self._in_avals):
            raise ShardcError(f"this compiled program takes {len(self._in_avals)} array "
                              f"arguments, got {len(leaves)}")
        for i, (x, want) in enumerate(zip(leaves, self._in_avals)):
            if type(x) is _ARRAY and x.shape == want.shape and x.dtype == want.dtype:
                continue
            got = core.aval_of(x)
            if got.shape != want.shape or got.dtype != want.dtype:
                raise ShardcError(f"argument {i} is {got} but the program was compiled for "
                                  f"{want}; call the jitted function instead (it compiles for "
                                  "new types) or lower again")
        return self._entry.run(leaves)

    def as_text(self) -> str:
        return self._exe.hlo_text()

    def cost_analysis(self):
        return self._exe.cost_analysis()

    def memory_analysis(self):
        return self._exe.memory_analysis()
