"""Control flow, as jax.lax: cond, switch, while_loop, fori_loop, scan and map.

Each traces its Python functions once into the regions of one op (shardc.ops.control,
shardc.ops.scan); pytrees are flattened here and checked with jax's rules, so a wrong
carry or branch type is reported at the user's line with the leaf's path and both
types. Outside a trace they run under shardc.jit, as jax's do.
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

from ..errors import ArgumentError, ShardcError, ShardcTypeError, api_boundary
from ..ir import dtypes
from ..ops import lax as L
from ..ops.control import bind_cond
from ..ops.while_loop import bind_while
from ..ops.region import same_type
from ..ops.scan import bind_scan
from ..trace import core
from ..trace import pytree as _tree


def _in_jit(name, fn, *args):
    """fn(*args) under shardc.jit when no trace is active (as jax runs control flow)."""
    from .jit import internal_jit
    return internal_jit(fn, name, retrace=True)(*args)


def _paths(tree_like):
    return [_tree.keystr(p) for p, _ in _tree.tree_flatten_with_path(tree_like)[0]]


def _aval_str(a):
    # builtins.map: this module's `map` is lax.map
    return f"{dtypes.short_name(a.dtype)}[{','.join(builtins.map(str, a.shape))}]"


def _check_same(what_a, what_b, tree_a, tree_b, avals_a, avals_b, example, intro):
    """Raise jax's error if two pytrees of types differ (structure, then leaf types)."""
    if tree_a != tree_b:
        raise ShardcTypeError(f"{intro}: {what_a} and {what_b} must have the same pytree "
                              f"structure, got {tree_a} and {tree_b}.")
    bad = [(p, a, b) for p, a, b in zip(_paths(example), avals_a, avals_b)
           if not same_type(a, b) or not _same_sharding(a, b)]
    if bad:
        lines = []
        for p, a, b in bad:
            if same_type(a, b):     # explicit mode: shardings are part of the types
                lines.append(f"  * {what_a}{p} has type {_typed_str(a)} but {what_b}{p} has "
                             f"type {_typed_str(b)}, "
                             "so the shardings do not match; reshard one of them "
                             "(shardc.reshard(x, P(...)))")
                continue
            why = "shapes" if a.shape != b.shape else "dtypes"
            lines.append(f"  * {what_a}{p} has type {_aval_str(a)} but {what_b}{p} has type "
                         f"{_aval_str(b)}, so the {why} do not match")
        raise ShardcTypeError(f"{intro}, but they differ:\n" + "\n".join(lines))


class _Promote(Exception):
    """A loop's carry starts weak-typed (a Python scalar) and the body returns another
    dtype: as jax, the init is promoted to the pair's result type and the body traced
    again. Raised inside the first trace with the body's output types."""

    def __init__(self, out_avals):
        super().__init__("weak-typed carry promotion")
        self.out_avals = out_avals


def _check_weak(tree_a, tree_b, avals, out_avals, promoted):
    """Raise _Promote if a weak carry init's type differs from the body's (once)."""
    if not promoted and tree_a == tree_b and \
            any(a.weak and not same_type(a, o) for a, o in zip(avals, out_avals)):
        raise _Promote(out_avals)


def _promote_init(leaves, avals, out_avals):
    """jax's _promote_weak_typed_input over a carry's leaves."""
    out = []
    for x, a, o in zip(leaves, avals, out_avals):
        if a.weak and not same_type(a, o):
            dt, _ = dtypes.promote((a.dtype, True), (o.dtype, o.weak))
            x = L.convert_element_type(x, dt, False)
        out.append(x)
    return out


def _typed_str(a):
    """A type as jax prints it, its sharding included: float32[8@X,4]."""
    short = dtypes.short_name(a.dtype)
    return str(np.dtype(a.dtype).name) + str(a.strong())[len(short):]


def _same_sharding(a, b):
    """Explicit mode: equal type shardings (an untyped side, e.g. a literal, fits any)."""
    return a.ts is None or b.ts is None or (a.ts.dims == b.ts.dims and
                                             a.ts.unreduced == b.ts.unreduced)


def _avals(leaves):
    return [core.aval_of(x) for x in leaves]


# ---------------------------------------------------------------- cond / switch

@api_boundary
def cond(pred, true_fun, false_fun, *operands, operand=None):
    """true_fun(*operands) if pred else false_fun(*operands), as jax.lax.cond: both
    branches are traced; their outputs must have identical types."""
    if operand is not None:
        if operands:
            raise ShardcTypeError("cond: pass operands positionally or as operand=, "
                                  "not both")
        operands = (operand,)
    if not callable(true_fun) or not callable(false_fun):
        raise ShardcTypeError("cond: true_fun and false_fun arguments should be callable.")
    if core.current_builder() is None:
        return _in_jit("cond", lambda p, ops: cond(p, true_fun, false_fun, *ops), pred, operands)
    a = core.aval_of(pred)
    if a.shape != ():
        raise ShardcTypeError(f"Pred must be a scalar, got {pred_str(pred)} of shape "
                              f"{a.shape}.")
    if a.dtype != dtypes.bool_:
        # jax: integer and float predicates mean pred != 0; complex ones are rejected
        if not (dtypes.is_int(a.dtype) or dtypes.is_float(a.dtype)):
            raise ShardcTypeError(f"Pred type must be either boolean or number, got "
                                  f"{dtypes.short_name(a.dtype)}: use a bool[] predicate "
                                  "(e.g. x > 0)")
        pred = L.ne(pred, L.full((), 0, a.dtype))
    index = L.convert_element_type(pred, dtypes.int32)
    return _switch(index, [false_fun, true_fun], operands, ["false_fun", "true_fun"],
                   "cond", report_last_first=True)


def pred_str(p):
    return str(core.aval_of(p))


@api_boundary
def switch(index, branches, *operands, operand=None):
    """branches[clamp(index, 0, len - 1)](*operands), as jax.lax.switch."""
    if operand is not None:
        operands = (operand,)
    branches = list(branches)
    if not branches:
        raise ShardcError("switch: empty branch sequence")
    for b in branches:
        if not callable(b):
            raise ShardcTypeError("switch: every branch must be callable")
    if core.current_builder() is None:
        return _in_jit("switch", lambda i, ops: switch(i, branches, *ops), index, operands)
    a = core.aval_of(index)
    if a.shape != ():
        raise ShardcTypeError(f"Branch index must be scalar, got {a} of shape {a.shape}.")
    if not dtypes.is_int(a.dtype):
        raise ShardcTypeError(f"Index type must be an integer, got {_aval_str(a)}.")
    if len(branches) == 1:
        return branches[0](*operands)
    index = L.convert_element_type(index, dtypes.int32)
    index = L.min(L.max(index, 0), len(branches) - 1)
    return _switch(index, branches, operands, [f"branch {k}" for k in range(len(branches))],
                   "switch")


def _switch(index, branches, operands, names, what, report_last_first=False):
    """report_last_first: name the later branch first in errors (cond's true_fun, as
    jax, though false_fun is branch 0)."""
    leaves, tree = _tree.tree_flatten(operands)
    first = {}

    def wrap(k, fn):
        def flat(*xs):
            out = fn(*_tree.tree_unflatten(tree, list(xs)))
            outs, otree = _tree.tree_flatten(out)
            avals = _avals(outs)
            if not first:
                first.update(tree=otree, avals=avals, example=out)
            else:
                a = (f"{names[0]} output", first["tree"], first["avals"])
                b = (f"{names[k]} output", otree, avals)
                if report_last_first:
                    a, b = b, a
                _check_same(a[0], b[0], a[1], b[1], a[2], b[2], first["example"],
                            f"{what} branches must have equal output types")
            return outs
        return flat
    outs = bind_cond(index, [wrap(k, f) for k, f in enumerate(branches)], leaves,
                     names=[_name(f, "branch") for f in branches])
    return _tree.tree_unflatten(first["tree"], outs)


def _name(f, default):
    n = getattr(f, "__name__", default)
    return n if n.isidentifier() else default


# ---------------------------------------------------------------- while / fori

@api_boundary
def while_loop(cond_fun, body_fun, init_val):
    """Repeat body_fun on the carry while cond_fun(carry), as jax.lax.while_loop (not
    reverse-differentiable, as jax's)."""
    if core.current_builder() is None:
        return _in_jit("while_loop", lambda v: while_loop(cond_fun, body_fun, v), init_val)
    leaves, tree = _tree.tree_flatten(init_val)
    avals = _avals(leaves)

    def c(*xs):
        p = cond_fun(_tree.tree_unflatten(tree, list(xs)))
        pl = _tree.tree_leaves(p)
        if len(pl) != 1 or core.aval_of(pl[0]).shape != () or \
                core.aval_of(pl[0]).dtype != dtypes.bool_:
            got = [str(core.aval_of(x)) for x in pl]
            raise ShardcTypeError(f"cond_fun must return a boolean scalar, but got output "
                                  f"type(s) {got}.")
        return pl[0]

    promoted = []

    def b(*xs):
        out = body_fun(_tree.tree_unflatten(tree, list(xs)))
        outs, otree = _tree.tree_flatten(out)
        _check_weak(tree, otree, avals, _avals(outs), promoted)
        _check_same("the input carry init_val", "the body_fun output", tree, otree, avals,
                    _avals(outs), init_val,
                    "while_loop body function carry input and carry output must have "
                    "equal types")
        return outs
    try:
        return _tree.tree_unflatten(tree, bind_while(c, b, leaves))
    except _Promote as p:
        leaves = _promote_init(leaves, avals, p.out_avals)
        avals = _avals(leaves)
        promoted.append(True)
        return _tree.tree_unflatten(tree, bind_while(c, b, leaves))


def _concrete_int(x):
    """A concrete bound as jax's int(bound) (a float bound truncates), else None."""
    if isinstance(x, bool) or core.is_tracer(x) or getattr(x, "shape", ()) != ():
        return None
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


@api_boundary
def fori_loop(lower, upper, body_fun, init_val, *, unroll=None):
    """body_fun(i, val) for i in [lower, upper), as jax.lax.fori_loop: a scan when the
    bounds are concrete (so it is reverse-differentiable), else a while loop."""
    lo, hi = _concrete_int(lower), _concrete_int(upper)
    if core.current_builder() is None:
        return _in_jit("fori_loop", lambda v: fori_loop(lower, upper, body_fun, v, unroll=unroll),
                       init_val)
    idt = _index_dtype(lower, upper)
    if lo is not None and hi is not None:
        # as jax: the index starts from the Python int lo (a weak i32, whatever the
        # bounds' dtype)
        def step(carry, _):
            i, x = carry
            return (i + 1, body_fun(i, x)), None
        (_, out), _ = scan(step, (lo, init_val), None, length=max(hi - lo, 0),
                           unroll=1 if unroll is None else unroll)
        return out
    if unroll is not None and unroll is not False and unroll != 1:
        raise ShardcError("fori_loop: unroll needs concrete lower and upper bounds")
    lower, upper = (_bound(b, idt) for b in (lower, upper))

    def c(v):
        return L.lt(v[0], v[1])

    def b(v):
        i, u, x = v
        return L.add(i, L.full((), 1, idt)), u, body_fun(i, x)
    return while_loop(c, b, (lower, upper, init_val))[2]


def _bound(b, idt):
    """A traced bound as jax's: converted (strongly typed) only if its dtype is not the
    index's, so a Python int bound stays weak and so does an index counted from it."""
    a = core.aval_of(b)
    if a.dtype != idt:
        return L.convert_element_type(b, idt, False)
    return b if core.is_tracer(b) else L.full((), b, idt, a.weak)


def _index_dtype(lower, upper):
    """The traced loop index's dtype: the bounds' (they must agree, but a weak bound,
    e.g. a Python int, takes the other's), as jax; traced float bounds count in floats."""
    lo, hi = (core.aval_of(x) for x in (lower, upper))
    if lo.dtype == hi.dtype:
        return lo.dtype
    if lo.weak != hi.weak and dtypes.is_signed(lo.dtype) and dtypes.is_signed(hi.dtype):
        return hi.dtype if lo.weak else lo.dtype
    raise ShardcTypeError(f"lower and upper arguments to fori_loop must have equal types, "
                          f"got {dtypes.short_name(lo.dtype)} and "
                          f"{dtypes.short_name(hi.dtype)}")


# ---------------------------------------------------------------- scan / map

@api_boundary
def scan(f, init, xs=None, length=None, reverse=False, unroll=1, _split_transpose=False):
    """jax.lax.scan: carry, y = f(carry, x) over the leading dim of xs; returns the final
    carry and the stacked ys."""
    if not callable(f):
        raise ShardcTypeError("scan: f argument should be callable.")
    if core.current_builder() is None:
        return _in_jit("scan", lambda c, x: scan(f, c, x, length, reverse, unroll), init, xs)
    x_leaves, x_tree = _tree.tree_flatten(xs)
    lens = [core.aval_of(x).shape[0] if core.aval_of(x).shape else None for x in x_leaves]
    for p, x, n in zip(_paths(xs), x_leaves, lens):
        if n is None:
            raise ShardcTypeError(f"scan got value with no leading axis to scan over: xs{p} "
                                  f"has type {core.aval_of(x)}")
    for p, x in zip(_paths(xs), x_leaves):
        ts = core.aval_of(x).ts
        if ts is not None and ts.dims and ts.dims[0]:
            raise ArgumentError(f"0th dimension of all xs should be replicated. Got xs{p} "
                                f"of type {core.aval_of(x)}: reshard it first "
                                "(shardc.reshard(x, P(None, ...)))")
    if length is not None:
        try:
            length = int(length)    # (as jax: 3.0 is 3)
        except TypeError:
            raise ShardcTypeError("The `length` argument to `scan` expects a concrete "
                                  f"`int` value, got {length!r}.") from None
        if any(n != length for n in lens):
            raise ShardcError(f"scan got `length` argument of {length} which disagrees with "
                              f"leading axis sizes {_sizes(xs, lens)}.")
    elif not lens:
        raise ShardcError("scan got no values to scan over and `length` not provided.")
    elif len(set(lens)) > 1:
        raise ShardcError(f"scan got values with different leading axis sizes: "
                          f"{_sizes(xs, lens)}.")
    else:
        length = lens[0]
    if isinstance(unroll, bool):
        unroll = max(length, 1) if unroll else 1
    if unroll < 0:
        raise ArgumentError("`unroll` must be a `bool` or a non-negative `int`.")
    c_leaves, c_tree = _tree.tree_flatten(init)
    c_avals = _avals(c_leaves)
    got = {}
    promoted = []

    def body(*args):
        carry = _tree.tree_unflatten(c_tree, list(args[:len(c_leaves)]))
        x = _tree.tree_unflatten(x_tree, list(args[len(c_leaves):]))
        out = f(carry, x)
        if not (isinstance(out, (tuple, list)) and len(out) == 2):
            raise ShardcTypeError("scan body output must be a pair, got "
                                  f"{type(out).__name__}.")
        new, y = out
        got["pair"] = list if type(out) is list else tuple
        n_leaves, n_tree = _tree.tree_flatten(new)
        _check_weak(c_tree, n_tree, c_avals, _avals(n_leaves), promoted)
        _check_same("the input carry", "the output carry", c_tree, n_tree, c_avals,
                    _avals(n_leaves), init,
                    "scan body function carry input and carry output must have equal "
                    "types (e.g. shapes and dtypes of arrays)")
        y_leaves, got["y"] = _tree.tree_flatten(y)
        return n_leaves, y_leaves
    try:
        carry, ys = bind_scan(body, c_leaves, x_leaves, length, bool(reverse), int(unroll),
                              _name(f, "body"))
    except _Promote as p:
        c_leaves = _promote_init(c_leaves, c_avals, p.out_avals)
        c_avals = _avals(c_leaves)
        promoted.append(True)
        carry, ys = bind_scan(body, c_leaves, x_leaves, length, bool(reverse), int(unroll),
                              _name(f, "body"))
    # the body's pair type: a list in, a list out (jax unflattens the body's output tree)
    return got["pair"]((_tree.tree_unflatten(c_tree, carry),
                        _tree.tree_unflatten(got["y"], ys)))


def _sizes(xs, lens):
    return ", ".join(f"xs{p} {n}" for p, n in zip(_paths(xs), lens))


@api_boundary
def map(f, xs, *, batch_size=None):
    """[f(x) for x in xs] stacked, as jax.lax.map (a scan without carry). With
    batch_size, a scan over batches of an inner scan (plus one over the remainder)."""
    if batch_size is None:
        _, ys = scan(lambda c, x: (c, f(x)), (), xs)
        return ys
    leaves, tree = _tree.tree_flatten(xs)
    n = core.aval_of(leaves[0]).shape[0] if leaves else 0
    b = operator.index(batch_size)
    if b < 0:
        raise ShardcError(f"map: batch_size must not be negative, got {b}")
    if b == 0 or n == 0:      # jax: batch_size=0 is one full batch (same values)
        return map(f, xs)
    full, rem = divmod(n, b)
    out = []
    if full:
        main = [L.reshape(L.slice(x, (0,) * x.ndim, (full * b, *x.shape[1:])),
                          (full, b, *x.shape[1:])) for x in leaves]
        ys = map(lambda bx: map(f, bx), _tree.tree_unflatten(tree, main))
        out.append(_tree.tree_map(lambda y: L.reshape(y, (full * b, *y.shape[2:])), ys))
    if rem:
        tail = [L.slice(x, (full * b,) + (0,) * (x.ndim - 1), x.shape) for x in leaves]
        out.append(map(f, _tree.tree_unflatten(tree, tail)))
    if len(out) == 1:
        return out[0]
    from ..ops.shape import concatenate_p
    return _tree.tree_map(lambda a, c: concatenate_p.bind(a, c, dimension=0), *out)
