"""shardc.jit's arguments and results: cache keys, static arguments, sharding prefixes,
argument names, float0 results and returned constants; a jit traced inline."""
from __future__ import annotations

import jax
import numpy as np
from jax.sharding import PartitionSpec

from ..errors import ShardcError, ShardcTypeError, user_loc
from ..ir.program import Aval, Lit
from ..ir.sharding import MeshShape, Sharding
from ..propagate.passes import used_inputs
from ..runtime.autospec import is_auto
from ..runtime.meshes import boundary_kind, mesh_of_args
from ..trace import core
from .argcheck import summary
from .stages import _ARRAY
from ..trace import pytree as _tree


class ArgSpec:
    """What a compiled program assumes about one flat argument: `memory`, the memory
    kind it is placed in (None: the device's); `host`, whether it is typed as a value
    in pinned host memory (an array there, as jax types it); `error`, why the program
    cannot take it (raised if it reads it: see keep_used)."""
    __slots__ = ("aval", "sharding", "committed", "memory", "host", "error")

    def __init__(self, aval, sharding, committed, memory=None, host=False, error=None):
        self.aval, self.sharding, self.committed = aval, sharding, committed
        self.memory, self.host, self.error = memory, host, error


def _leaf_key(x):
    if type(x) is _ARRAY:   # the aval (interned by jax) holds shape, dtype, weak type
        return (x.aval, x.sharding)
    if type(x) is core.Tracer:      # a nested jit's traced argument (also a jax tracer)
        return (type(x), x.shape)
    if isinstance(x, jax.core.Tracer):     # not shardc's: jax traces around shardc
        raise core.foreign_tracer_error(x)
    if isinstance(x, jax.Array):
        return (x.shape, x.dtype, x.weak_type, x.sharding)
    if isinstance(x, np.ndarray):
        return (x.shape, x.dtype)
    return (type(x), np.shape(x))


def _norm_argnums(nums, n):
    """Argument positions; negative ones count from the end of the `n` parameters."""
    if nums is None:
        return ()
    if isinstance(nums, int):
        nums = (nums,)
    out = set()
    for i in nums:
        if i < 0:
            if n is None:
                raise ShardcError(f"argnum {i} is negative, but the function's signature is "
                                  "unknown; use non-negative positions")
            i += n
        out.add(i)
    return tuple(sorted(out))


class _Static:
    """A static argument in a cache key: equal only to an equal value of the same type
    (so 2 and 2.0 compile separately, as in jax)."""
    __slots__ = ("v", "h")

    def __init__(self, v):
        self.v = v
        try:
            self.h = hash((type(v), v))
        except TypeError:
            raise ShardcError(f"static argument {v!r} is not hashable; static arguments must "
                              "be hashable (use a tuple, not a list)") from None

    def __hash__(self):
        return self.h

    def __eq__(self, o):
        return type(o) is _Static and type(o.v) is type(self.v) and o.v == self.v


def _wrap_keys(tree):
    """jax's typed PRNG keys as shardc key arrays over their uint32 data."""
    from .random._keys import wrap_jax_keys
    return wrap_jax_keys(tree)


def _has_keys(tree):
    from .random._keys import has_jax_keys
    return has_jax_keys(tree)


def _broadcast_prefix(prefix, tree, what):
    """Expand a pytree prefix of shardings to one entry per leaf of `tree`."""
    is_leaf = lambda x: x is None or is_auto(x) or isinstance(  # noqa
        x, (jax.sharding.Sharding, PartitionSpec, Sharding))
    out = []

    def go(p, t):
        if is_leaf(p):
            out.extend([p] * len(_tree.tree_leaves(t)))
            return
        pl, pt = _tree.tree_flatten(p, is_leaf=is_leaf)
        if len(pl) == 1 and pl[0] is p:     # a leaf that is no sharding (a string, say)
            raise ShardcTypeError(f"{what}: expected NamedShardings, PartitionSpecs or None, "
                                  f"got {p!r}")
        try:
            subtrees = pt.flatten_up_to(t)
        except (ValueError, TypeError):
            raise ShardcError(f"{what} does not match the structure of the arguments/results: "
                              f"{what} is {summary(p)} but they are {summary(t)}; give "
                              "one sharding per leaf, or a pytree prefix of them") from None
        for pp, tt in zip(pl, subtrees):
            go(pp, tt)
    go(prefix, tree)
    return out


def _path_name(path, pos_names):
    parts = []
    for k, entry in enumerate(path):
        if k == 0:
            continue   # (dyn, kwargs) split
        if k == 1 and path[0].idx == 0:
            parts.append(pos_names[entry.idx] if entry.idx < len(pos_names) else f"a{entry.idx}")
            continue
        key = getattr(entry, "key", None)
        if key is None:
            key = getattr(entry, "idx", None)
        if key is None:
            key = getattr(entry, "name", "x")
        parts.append(str(key))
    name = "_".join(parts) or "x"
    return "".join(c if c.isalnum() or c == "_" else "_" for c in name)


class _Float0:
    """A float0 result (a gradient of an integer input): no data, so no output of the
    program; part of the output tree, which rebuilds it as float0 zeros (as jax's)."""

    def __init__(self, shape):
        self.shape = shape


_tree.register_pytree_node(_Float0, lambda z: ((), z.shape),
                           lambda shape, _: np.zeros(shape, jax.dtypes.float0))


def _float0_node(x):
    return _Float0(x.shape) if getattr(x, "dtype", None) == jax.dtypes.float0 else x


def _as_value(b, x):
    if core.is_tracer(x):
        return b.to_value(x)
    v = core.constant_value(b, x)
    if isinstance(v, Lit):   # a returned Python scalar: materialize it as an op
        from ..ops.special import constant_p
        params = {"value": np.asarray(v.value, v.aval.dtype)}
        if v.aval.weak:
            params["weak_type"] = True
        (v2,) = b.add(constant_p, [], params, [Aval((), v.aval.dtype, v.aval.weak)], user_loc())
        return v2
    return v


def _replay(staged, dyn, dkw):
    """The outputs of a function traced on its own (outside the current trace, see
    Jitted._call) that read values of the current trace: its ops traced again here on
    the arguments `dyn`, `dkw` (values of this trace) and the values it read."""
    from ..transforms.partial import eval_list, lookup
    b = staged.builder
    p = b.program
    # the mesh its ops named (constraints, shard_map: MeshSlot.adopt), named here as
    # they would have been traced here: their shardings name that mesh's axes
    here = core.current_builder().meshes
    if b.meshes is not None and b.meshes.named and here is not None:
        here.adopt(b.meshes.info.mesh)
    env = {id(v): x for v, x in zip(p.inputs, _tree.tree_leaves((dyn, dkw)))}
    env.update((id(v), x) for x, v in (b.lifted or {}).values())
    env.update((id(v), t) for t, v in b.captured.values())
    eval_list(p.ops, env)
    outs = [lookup(env, v) for v in p.outputs]
    return _tree.tree_unflatten(staged.out_tree, [core.literal_tracer(v) if type(v) is Lit
                                                  else v for v in outs])


def _traced(x):
    """An array or number argument of a jit traced inline, as a value of the trace."""
    if core.is_tracer(x) or not isinstance(x, (jax.Array, np.ndarray, np.generic, bool, int,
                                               float, complex)):
        return x
    b = core.current_builder()
    v = b.to_value(x)
    return core.literal_tracer(v) if isinstance(v, Lit) else core.Tracer(b, v)


def arg_names(sig, ctx):
    """The flat arguments' names (parameter name and pytree path), made unique."""
    names = []
    params = list(sig.parameters) if sig is not None else []
    static_nums = set(ctx["static_nums"])
    pos_names = [params[i] if i < len(params) else f"arg{i}"
                 for i in range(ctx["n_args"]) if i not in static_nums]
    paths, _ = _tree.tree_flatten_with_path((ctx["dyn"], ctx["dkw"]))
    for path, _ in paths:
        names.append(_path_name(path, pos_names))
    seen, out = set(), []
    for n in names:
        m, k = n, 1
        while m in seen:
            m, k = f"{n}_{k}", k + 1
        seen.add(m)
        out.append(m)
    return out


def donated(nums, names, ctx):
    """Per flat argument, whether it is donated: positional ones by donate_argnums
    (or the name of their parameter), keyword ones by donate_argnames."""
    if not nums and not names:
        return []
    flags = []
    static_nums = set(ctx["static_nums"])
    dyn_index = [i for i in range(ctx["n_args"]) if i not in static_nums]
    for pos, a in zip(dyn_index, ctx["dyn"]):
        flags += [pos in nums] * len(_tree.tree_leaves(a))
    for k in sorted(ctx["dkw"]):     # (a dict's leaves come in sorted key order)
        flags += [k in names] * len(_tree.tree_leaves(ctx["dkw"][k]))
    flags += [False] * (len(ctx["specs"]) - len(flags))
    return flags


UNSET = object()     # (no memory kind asked)


def out_requests(out_shardings, out_tree, program, mesh):
    """What `out_shardings` asks of the program's outputs: per output the Sharding
    (None: propagation decides, or AUTO), the memory kind asked (None: the device's)
    or UNSET, and the indices of the AUTO ones."""
    n = len(program.outputs)
    if out_shardings is None:
        return [None] * n, [UNSET] * n, []
    dummy = _tree.tree_unflatten(out_tree, [0] * n)
    flat = _broadcast_prefix(out_shardings, dummy, "out_shardings")
    shardings, memory = [], []
    for i, (s, v) in enumerate(zip(flat, program.outputs)):
        kind = getattr(s, "memory_kind", None)
        memory.append(boundary_kind(kind) if kind else UNSET)
        if s is None or is_auto(s):
            shardings.append(None)
            continue
        sh = mesh.sharding_from(s, v.aval, f"out_shardings for output {i}")
        mesh.check_divisible(sh, v.aval, f"out_shardings for output {i}")
        shardings.append(sh)
    return shardings, memory, [i for i, s in enumerate(flat) if is_auto(s)]


def keep_used(program, leaves, given, mesh, free):
    """jit's keep_unused=False (jax's default): the inputs the program reads, noted in
    `program.meta["kept"]` when some are not (the caller still passes every argument;
    the executable takes the kept ones), and the mesh it then runs on. As jax places
    a program by the arguments it keeps: if no kept argument (nor set_mesh, nor a kept
    in_sharding) names the mesh the others brought, and the trace put nothing on it
    (`free`: no op named it, no AUTO or out_shardings), it runs on one device, a kept
    committed argument's or the default one. `leaves`, `given`: per input."""
    kept = tuple(used_inputs(program))
    if len(kept) == len(program.inputs):
        return mesh
    program.meta["kept"] = kept
    if not free:
        return mesh
    new = mesh_of_args([leaves[i] for i in kept], [given[i] for i in kept], None)
    if new.mesh is not None or (mesh.mesh is None and new.devices == mesh.devices) or \
            not _off_mesh(program, [program.inputs[i] for i in kept]):
        return mesh
    program.mesh = new.shape
    for i in set(range(len(program.inputs))) - set(kept):    # (dropped: named on no mesh)
        v = program.inputs[i]
        v.aval = Aval(v.aval.shape, v.aval.dtype, v.aval.weak)
        v.sharding = Sharding.replicated(v.aval.ndim)
    return new


def _off_mesh(program, inputs) -> bool:
    """Whether no value's sharding or type (of `inputs` and the ops' results) and no
    op's parameter names a mesh axis."""
    def names(x):
        if isinstance(x, Sharding):
            return bool(x.axes() or x.unreduced or x.reduced)
        if isinstance(x, MeshShape):
            return bool(x.axes)
        if isinstance(x, (tuple, list)):
            return any(map(names, x))
        return False
    values = [*inputs, *(v for op in program.walk() for v in op.outputs)]
    return not any(names(v.sharding) or names(v.aval.ts) for v in values) and \
        not any(names(x) for op in program.walk() for x in op.params.values())
