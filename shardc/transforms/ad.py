"""Reverse-mode differentiation as an IR transform: the backward pass, custom_vjp.

`f` is traced into the current program as usual; its ops are then walked backwards
and each primitive's `vjp` rule (registered beside the op) binds the ops of the
backward pass into the same program. The backward ops are ordinary IR, so they are
propagated, lowered and differentiated again (grad of grad) like any other. The
user-facing grad, value_and_grad, vjp and jvp are in shardc.api.grad.
"""
from __future__ import annotations

import functools

import numpy as np

from ..trace import core, types
from ..trace.ur_rules import mark_cotangent_ops
from .ct_type import retype
from ..ir import dtypes
from ..ir.primitive import Trait, nondiff  # noqa: F401  (nondiff re-exported)
from ..trace.core import Primitive, Tracer
from ..errors import ShardcError, ShardcTypeError, current_scope, in_scope
from ..ir.program import Lit
from ..ir.sharding import Sharding
from ..ops import lax as L
from .custom_jvp import forward_attr, nondiff_nums, resolve_kwargs
from ..trace import pytree as _tree


class VjpCtx:
    """What a VJP rule sees besides the cotangents and primal inputs."""
    __slots__ = ("op", "outs", "builder", "level", "active")

    def __init__(self, op, outs, builder, level=None, active=None):
        self.op, self.outs, self.builder, self.level = op, outs, builder, level
        # per operand: does it depend on what is differentiated (None: all may)
        self.active = active

    @property
    def in_avals(self):
        return [v.aval for v in self.op.inputs]

    @property
    def out(self):
        return self.outs[0]

    # what rules of ops with regions (shard_map) need of the transform itself
    def trace_vjp(self, f, primals, has_aux=False):
        """A differentiation inside this one's rule (of a region's body): the same level,
        so a custom rule it applies is claimed by this differentiation."""
        return _traced_vjp(f, primals, has_aux, level=self.level)

    def eval_ops(self, program, args):
        return eval_ops(program, args)

    def split_region(self, region, ct_mask, policy=None, active=None):
        from .partial import split_region
        return split_region(region, ct_mask, policy, active, self.level)

    def eval_list(self, ops, env):
        from .partial import eval_list
        return eval_list(ops, env)


def _is_float(aval):
    return dtypes.is_inexact(aval.dtype)


def _as_tracer(b, v):
    return v if isinstance(v, Lit) else Tracer(b, v)


def zeros_like_aval(aval):
    return L.zeros(aval.shape, aval.dtype)


def eval_ops(program, args):
    """Re-trace `program`'s ops on `args` in the current builder; returns its outputs."""
    from .partial import eval_list, lookup
    env = {id(v): a for v, a in zip(program.inputs, args)}
    eval_list(program.ops, env)
    return [lookup(env, v) for v in program.outputs]


def rebind_op(op, ins):
    """An op with regions again on `ins` (its regions re-traced)."""
    return (op.prim.rebind or _rebind)(op, ins, eval_ops)


def _rebind(op, ins, evaluate):
    """An op with one region, again on `ins`: its region re-traced (regions are closed:
    what the body uses from outside is an operand), params as they were. Ops whose
    region needs more context (shard_map's manual axes) say how in `prim.rebind`."""
    from ..ops.region import bind_region
    if len(op.regions) != 1:
        raise ShardcError(f"internal: re-tracing {op.prim.name} with {len(op.regions)} "
                          "regions", op.loc)
    (r,) = op.regions
    outs, _ = bind_region(op.prim, lambda *xs: (evaluate(r, xs), None), ins, op.params,
                          op.loc, r.name)
    return outs


def backward(ops, builder, out_vals, out_cts, wrt_vals, level=None, active=None,
             ints=False, emitted=None):
    """Cotangents of `wrt_vals` given cotangents of `out_vals`, by walking `ops` backwards.

    Values are IR Values of `builder`; cotangents are tracers (or None for zero).
    `level` names the differentiation (see _claim). `active`: the wrt_vals that depend
    on what is differentiated outside (default: all); only ops reading them count.
    `ints`: integer values carry cotangents too (linear_transpose of an integer
    function). `emitted`, a list, gets (op, first, end) for the program ops each rule
    bound (what linear_transpose's check reads)."""
    ct: dict = {}
    mc = builder.manual
    explicit = types.explicit_axes_of(builder)
    carries = _carries_ct(ints)
    partial, reduced = {}, set()    # explicit mode: the rules' partial sums (ur_rules)

    def add(v, c, op=None):
        if c is None or isinstance(v, Lit) or not carries(v.aval):
            return
        c = _fit(c, v.aval)
        ts = v.aval.ts
        if ts is None and not v.aval.shape:
            # a plain scalar (untyped: rank-0 values carry no type sharding): one added
            # to a reduced scalar gets the partial-sums cotangent, summed here (as jax's)
            ts = Sharding(())
        if explicit and ts is not None and type(c) is Tracer and c.value.aval.ts != v.aval.ts:
            # (jax's dot transpose is given the partial-sums type as its out_sharding)
            dot = op is not None and bool(op.prim.traits & Trait.CONTRACTION)
            c = retype(c, ts, builder, partial, reduced, dot)
        if mc is not None and mc.check_vma and type(c) is Tracer:
            c = _unvary(mc, v, c)
        prev = ct.get(id(v))
        if prev is not None:
            first, untyped = len(builder.program.ops), _untyped(prev) and _untyped(c)
            c = L.add(prev, c)
            if explicit and untyped:    # (untyped partial sums: a grad of grad's)
                mark_cotangent_ops(builder.program.ops[first:], partial, reduced)
        ct[id(v)] = c

    for v, c in zip(out_vals, out_cts):
        add(v, c)
    # only ops reading what depends on wrt_vals pass cotangents on (as jax's linearize:
    # a while_loop on constants is not differentiated, so it does not raise)
    active = {id(w) for w in (wrt_vals if active is None else active)}
    for op in ops:
        if op.prim.vjp is not nondiff and \
                any(type(v) is not Lit and id(v) in active for v in op.inputs):
            active.update(id(v) for v in op.outputs)
    for op in reversed(ops):
        cts = [ct.pop(id(v), None) for v in op.outputs]
        if all(c is None for c in cts) or not any(id(v) in active for v in op.outputs):
            continue
        rule = op.prim.vjp
        if rule is None:
            raise ShardcError(f"shardc has no gradient rule for {op.prim.name}", op.loc)
        if rule is nondiff:
            continue
        if not getattr(rule, "keeps_none", False):   # (a rule that tells None from zero)
            cts = _zeros_for_none(cts, op.outputs, carries)
        ctx = VjpCtx(op, [_as_tracer(builder, v) for v in op.outputs], builder, level,
                     [type(v) is not Lit and id(v) in active for v in op.inputs])
        ins = [_as_tracer(builder, v) for v in op.inputs]
        first = len(builder.program.ops)
        with in_scope(_transposed(op.loc)):
            if explicit:    # cotangents get their primals' types (as jax's out_sharding=)
                with types.lenient():
                    in_cts = rule(ctx, cts, *ins, **op.params)
                mark_cotangent_ops(builder.program.ops[first:], partial, reduced)
            else:
                in_cts = rule(ctx, cts, *ins, **op.params)
        if emitted is not None:
            emitted.append((op, first, len(builder.program.ops)))
        for v, c in zip(op.inputs, in_cts):
            add(v, c, op)
    return [ct.get(id(w)) for w in wrt_vals]


def _untyped(c):
    return type(c) is Tracer and c.value.aval.ts is None


def _transposed(loc):
    """The named scope of an op's backward ops: transpose(its scope), as jax names them
    (the part of its scope open around the differentiation too stays outside)."""
    scope = loc.scope if loc is not None else None
    if not scope:
        return None
    here = current_scope()
    if here and scope.startswith(here + "/"):
        scope = scope[len(here) + 1:]
    elif scope == here:
        return None
    return f"transpose({scope})"


def _unvary(mc, v, c):
    """Inside a shard_map body, a cotangent of its primal's variance: one varying over
    manual axes its primal does not vary over is summed over them (where an invariant
    value met a varying one, jax inserts a pvary, whose transpose is a psum); one varying
    over fewer (a grad's seed 1.0, jacrev's basis, a constant's cotangent) is marked
    varying as its primal, which keeps its values (as jax's pullback pvarys it)."""
    cv, pv = mc.vma_of(c.value), mc.vma_of(v)
    extra = cv - pv
    if extra:
        from ..ops.collectives import psum_p
        axes = tuple(a for a in mc.mesh.names if a in extra)
        c = psum_p.bind(c, axes=axes, sizes=tuple(mc.mesh.sizes[a] for a in axes))
        cv = cv - extra
    missing = pv - cv
    if not missing:
        return c
    from ..ops.pvary import pvary_over
    return pvary_over(c, missing, mc.mesh)


def _carries_ct(ints):
    """Which values have cotangents: floats, and integers when `ints`."""
    if not ints:
        return _is_float
    return lambda a: _is_float(a) or dtypes.is_int(a.dtype)


def _zeros_for_none(cts, vals, carries=_is_float):
    """Cotangents with a zero array for each float value nothing differentiates."""
    return [c if c is not None or not carries(v.aval) else zeros_like_aval(v.aval)
            for c, v in zip(cts, vals)]


def _fit(c, aval):
    """A cotangent with the primal's dtype (rules may produce a promoted one)."""
    if L.aval(c).dtype != aval.dtype:
        c = L.convert_element_type(c, aval.dtype)
    if L.aval(c).shape != aval.shape:
        raise ShardcError(f"internal: cotangent of shape {L.aval(c).shape} for a value of "
                          f"shape {aval.shape}")
    return c


# ---------------------------------------------------------------- vjp / grad

def _check_diff_input(x, what):
    a = core.aval_of(x)
    if not _is_float(a):
        raise ShardcTypeError(f"{what} requires floating-point inputs, but got an input of dtype "
                          f"{a.dtype}; differentiate with respect to float arguments only")


def _constant(x):
    """A concrete primal as a constant of the trace (as shardc.numpy.asarray); a Python
    scalar's is weakly typed, as jax's, so its gradient promotes as the scalar would."""
    from ..ops.special import constant_p
    arr = np.asarray(x)
    params = {"value": arr.astype(dtypes.canonicalize(arr.dtype), copy=False)}
    if core.aval_of(x).weak:
        params["weak_type"] = True
    # an op of the trace even under jax.ensure_compile_time_eval (which would fold it to
    # an array, or a scalar to a literal: no value for AD to differentiate)
    return core.bind_in_trace(constant_p, [], params)


def _traced_vjp(f, primals, has_aux=False, linear=None, level=None):
    """In the current trace: (out, aux, vjp_fn) for f at `primals` (a tuple).
    `linear` (linear_transpose's name for f): vjp_fn checks that f is linear, and
    transposes integer functions too."""
    b = core.current_builder()
    leaves, tree = _tree.tree_flatten(primals)
    xs, origs = [], []
    for x in leaves:
        if linear is None:
            _check_diff_input(x, "differentiation")
        # A fresh value per primal (as jax gives the primal a new variable): f sees
        # only the copy, so a value f closes over -- even the primal's own -- is a
        # constant of the differentiation, not a second use of the primal.
        if core.is_tracer(x):
            x = x if x.builder is b else Tracer(b, b.to_value(x))
            t = copy_p.bind(x)
        else:
            x = t = _constant(x)
        xs.append(t)
        origs.append(x.value)
    start = len(b.program.ops)
    out = f(*_tree.tree_unflatten(tree, xs))
    aux = None
    if has_aux:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ShardcError("has_aux=True needs the function to return (output, aux)")
        out, aux = out
    ops = b.program.ops[start:]
    level = _claim(ops, xs, level)
    out_leaves, out_tree = _tree.tree_flatten(out)
    out_vals = [b.to_value(o) for o in out_leaves]
    wrt = [t.value for t in xs]

    def vjp_fn(ct):
        ct_leaves, ct_tree = _tree.tree_flatten(ct)
        if ct_tree != out_tree:
            raise ShardcError(f"vjp: the cotangent's structure {ct_tree} does not match the "
                              f"output's {out_tree}")
        if linear is None:
            res = backward(ops, b, out_vals, ct_leaves, wrt, level)
        else:
            from .linear import transpose
            res = transpose(ops, b, out_vals, ct_leaves, wrt, level, linear)
        res = [r if r is not None else zeros_like_aval(w.aval) for r, w in zip(res, wrt)]
        seen = set()
        for i, (w, r) in enumerate(zip(origs, res)):   # gradients are sharded like the
            if core.is_tracer(r):                        # primals passed in
                if id(r.value) in seen or r.value is w:
                    res[i] = r = copy_p.bind(r)
                seen.add(id(r.value))
            shard_alike(Tracer(b, w), r)
        return _tree.tree_unflatten(tree, res)
    return out, aux, vjp_fn


def _claim(ops, xs, level=None):
    """A new differentiation level, which claims the ops of `ops` that depend on the
    primals `xs` and have a rule for one level only (custom_vjp_call: `prim.claim`).
    As in jax, a custom rule is the innermost differentiation's: an outer one (grad of
    grad) differentiates the call's fwd as ordinary ops."""
    level = object() if level is None else level
    _claim_in(ops, {id(t.value) for t in xs}, level)
    return level


def _claim_in(ops, reached, level):
    """Claim in `ops` given the values `reached`, and inside the bodies of the region
    ops they reach (a loop's, a branch's, a checkpoint's: their custom calls are this
    differentiation's too), not inside a custom call's own region (one called in a
    fwd is the next differentiation's)."""
    for op in ops:
        if not any(id(v) in reached for v in op.inputs):
            continue
        claim = op.prim.claim
        if claim is not None:
            claim(op, level)
        elif op.regions and op.prim.data_flow is not None:
            _claim_regions(op, reached, level)
        reached.update(id(v) for v in op.outputs)


def _claim_regions(op, reached, level):
    """Through the op's data flow (operand -> block argument, region result -> result,
    and a loop's result -> block argument: its carries), to a fixed point."""
    edges = [e for e in op.prim.data_flow(op) if hasattr(e, "inner")]
    outs = {id(v) for r in op.regions for v in r.outputs}
    while True:
        n = len(reached)
        for e in edges:
            if id(e.outer) in reached:
                reached.add(id(e.inner))
            elif id(e.inner) in reached and id(e.inner) in outs:
                reached.add(id(e.outer))
        for r in op.regions:
            _claim_in(r.ops, reached, level)
        if len(reached) == n:
            return


# ---------------------------------------------------------------- stop_gradient

def _sg_lower(ctx, x):
    if ctx.in_shardings[0] == ctx.out_shardings[0]:
        return x
    from ..lower.emit import sharding_attr, tensor_type
    t = tensor_type(ctx.out_avals[0])
    return ctx.op("sdy.sharding_constraint", [x], [t], [t],
                  {"sharding": sharding_attr(ctx.out_shardings[0])}, sharding=False)


def _pointwise(*a, **k):
    from ..ir.rules import pointwise
    return pointwise(*a, **k)


stop_gradient_p = Primitive("stop_gradient", shape_rule=lambda x: x, sharding_rule=_pointwise,
                            lower=_sg_lower, prop_kind="elementwise")
stop_gradient_p.vjp = nondiff

# an identity op (once the results of a custom_vjp call; kept for programs naming it)
custom_vjp_out_p = Primitive("custom_vjp_out", shape_rule=lambda x: x,
                             sharding_rule=_pointwise, lower=_sg_lower, prop_kind="elementwise")
custom_vjp_out_p.vjp = lambda ctx, cts, x: [cts[0]]

# an identity op: a gradient shared by several primals gets its own value for each
copy_p = Primitive("copy", shape_rule=lambda x: x, sharding_rule=_pointwise, lower=_sg_lower,
                   prop_kind="elementwise", traits=Trait.ALIAS)
copy_p.vjp = lambda ctx, cts, x: [cts[0]]
for _p in (stop_gradient_p, custom_vjp_out_p, copy_p):
    _p.type_partial = ("layout", (0,))     # explicit mode: identities keep partial sums
    _p.batch = (lambda p: lambda ctx, args, batched: (p.bind(args[0]), True))(_p)


def stop_gradient(x):
    """x, but no gradient flows through it."""
    def one(v):
        if not core.is_tracer(v):
            return v
        return stop_gradient_p.bind(v)
    return _tree.tree_map(one, x)


# ---------------------------------------------------------------- shard_alike

_group_ids = iter(range(1, 1 << 62))


def shard_alike(x, y):
    """Give x and y one sharding, whichever of them has one (jax's shard_alike)."""
    from ..ops.special import sharding_group_p
    if core.current_builder() is None or not (core.is_tracer(x) and core.is_tracer(y)):
        return x, y
    if x.value.aval.shape != y.value.aval.shape:
        raise ShardcError(f"shard_alike needs arrays of one shape, got {x.value.aval} and "
                          f"{y.value.aval}")
    gid = next(_group_ids)
    sharding_group_p.bind(x, group_id=gid)
    sharding_group_p.bind(y, group_id=gid)
    return x, y


# ---------------------------------------------------------------- custom_vjp

class custom_vjp:
    """A function with a user-defined VJP: `f.defvjp(fwd, bwd)`, as jax.custom_vjp.

    fwd(*args) -> (out, residuals); bwd(*nondiff_args, residuals, ct) -> cotangents.
    Under a trace the call is one `custom_vjp_call` op (shardc.ops.custom) whose region
    is fwd: it yields the outputs, then the traced residuals, for the op's gradient
    rule to pass to bwd (unused ones are dead code once the region is inlined)."""

    def __init__(self, fun, nondiff_argnums=(), nondiff_argnames=()):
        functools.update_wrapper(self, fun)
        self.fun = fun
        self.nondiff_argnums = nondiff_nums(fun, nondiff_argnums, nondiff_argnames)
        self.fwd = self.bwd = None
        self._in_fwd = 0

    def __getattr__(self, name):
        return forward_attr(self, name)

    def defvjp(self, fwd, bwd):
        self.fwd, self.bwd = fwd, bwd
        return self

    def __call__(self, *args, **kwargs):
        from ..ops.custom import _TRACED, CustomVjpRule, custom_vjp_call_p
        from ..ops.region import bind_region
        if self.fwd is None:
            raise ShardcError("custom_vjp function called before defvjp(fwd, bwd)")
        args = resolve_kwargs(self.fun, args, kwargs, "custom_vjp")
        b = core.current_builder()
        if b is None or self._in_fwd:
            return self.fun(*args)      # eager, or fwd calling the function itself
        leaves, arg_tree = _tree.tree_flatten(list(args))
        traced = tuple(i for i, x in enumerate(leaves) if core.is_tracer(x))
        static = tuple(None if core.is_tracer(x) else x for x in leaves)

        def region(*ts):
            full = list(static)
            for i, t in zip(traced, ts):
                full[i] = t
            self._in_fwd += 1
            try:
                got = self.fwd(*_tree.tree_unflatten(arg_tree, full))
            finally:
                self._in_fwd -= 1
            if not (isinstance(got, tuple) and len(got) == 2):
                raise ShardcError("custom_vjp fwd must return (output, residuals)")
            out, res = got
            out_leaves, out_tree = _tree.tree_flatten(out)
            res_leaves, res_tree = _tree.tree_flatten(res)
            res_static = tuple(_TRACED if core.is_tracer(r) else r for r in res_leaves)
            flat = out_leaves + [r for r in res_leaves if core.is_tracer(r)]
            return flat, (out_tree, res_tree, res_static, len(out_leaves))

        def params(extra, n):
            out_tree, res_tree, res_static, num_out = extra
            rule = CustomVjpRule(self, arg_tree, static, traced, out_tree, res_tree,
                                 res_static)
            return {"bwd": rule, "num_out": num_out}
        outs, (out_tree, _, _, num_out) = bind_region(
            custom_vjp_call_p, region, [leaves[i] for i in traced], params,
            name=getattr(self.fun, "__name__", "fwd"))
        return _tree.tree_unflatten(out_tree, outs[:num_out])
