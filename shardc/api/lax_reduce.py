"""jax.lax's reductions over shardc's primitives: reduce_* by axes, argmax / argmin,
reduce with a monoid (or any computation, folded) and reduce_xor."""
from __future__ import annotations

import builtins
import operator

import numpy as np

from ..errors import ShardcTypeError, wrap_public
from ..ir import dtypes
from ..ir.program import Lit
from ..ops import elementwise as ew
from ..ops import reduce as red
from ..trace import core
from . import lax_ops as _ops
from .explicit import takes_out_sharding
from .lax_ops import _arr
from .numpy._util import aval, canonical_dtype, convert
from ..trace import pytree as _tree


# ---------------------------------------------------------------- reductions

def _reducer(prim, name):
    def f(operand, axes):
        axes = tuple(operator.index(a) for a in axes)
        return prim.bind(_arr(operand), axes=axes)
    f.__name__ = f.__qualname__ = name
    return f


reduce_sum = takes_out_sharding(_reducer(red.reduce_sum_p, "reduce_sum"))
reduce_max = _reducer(red.reduce_max_p, "reduce_max")
reduce_min = _reducer(red.reduce_min_p, "reduce_min")
reduce_prod = _reducer(red.reduce_prod_p, "reduce_prod")
reduce_and = _reducer(red.reduce_and_p, "reduce_and")
reduce_or = _reducer(red.reduce_or_p, "reduce_or")


def argmax(operand, axis, index_dtype):
    return red.argmax_p.bind(_arr(operand), axis=operator.index(axis),
                             index_dtype=canonical_dtype(index_dtype))


def argmin(operand, axis, index_dtype):
    return red.argmin_p.bind(_arr(operand), axis=operator.index(axis),
                             index_dtype=canonical_dtype(index_dtype))


# jax.lax's monoid functions, recognized by module and name (never imported or called)
_JAX_MONOIDS = {"add": "add", "mul": "mul", "max": "max", "min": "min", "bitwise_and": "and",
                "bitwise_or": "or"}


def _monoid(computation):
    """Which monoid a reduce's computation is: shardc's, jax.lax's or operator's
    add/mul/max/min/and/or."""
    f = getattr(computation, "__wrapped__", computation)
    if (getattr(f, "__module__", None) or "").startswith(("jax.lax", "jax._src.lax")):
        return _JAX_MONOIDS.get(getattr(f, "__name__", None))
    table = {}
    for n, kind in _JAX_MONOIDS.items():
        table[id(getattr(_ops, n))] = kind
    for g, kind in ((operator.add, "add"), (operator.mul, "mul"), (operator.and_, "and"),
                    (operator.or_, "or"), (builtins.max, "max"), (builtins.min, "min")):
        table[id(g)] = kind
    from . import lax as _lax
    for n, kind in (("add", "add"), ("mul", "mul"), ("max", "max"), ("min", "min")):
        table[id(getattr(_lax, n))] = kind
    return table.get(id(f)) or table.get(id(computation))


def _identity(kind, dt):
    if kind == "add":
        return 0
    if kind == "mul":
        return 1
    if dt == dtypes.bool_:
        return {"max": False, "min": True, "and": True, "or": False}[kind]
    if kind in ("and", "or"):
        return {"and": -1 if dtypes.is_signed(dt) else np.iinfo(dt).max, "or": 0}[kind]
    if dtypes.is_complex(dt):      # (the least / greatest in the lexicographic order)
        return red.identity_of(kind, dt)
    if dtypes.is_float(dt):
        return -np.inf if kind == "max" else np.inf
    info = np.iinfo(dt)
    return info.min if kind == "max" else info.max


_PRIMS = {"add": red.reduce_sum_p, "mul": red.reduce_prod_p, "max": red.reduce_max_p,
          "min": red.reduce_min_p, "and": red.reduce_and_p, "or": red.reduce_or_p}


def reduce(operands, init_values, computation, dimensions, out_sharding=None):
    """jax.lax.reduce: a monoid (add, mul, max, min, and, or: shardc's, jax.lax's or
    operator's, with its identity as the init value) is that reduce_* op; any other
    computation folds halves of the operands (lax_special.reduce_tree)."""
    from .explicit import apply_out_sharding
    from .lax_special import reduce_tree
    leaves, tree = _tree.tree_flatten(operands)
    inits, init_tree = _tree.tree_flatten(init_values)
    if tree != init_tree:
        raise ShardcTypeError(f"lax.reduce: operands {tree} and init_values {init_tree} "
                              "must have the same structure")
    leaves = [_arr(x) for x in leaves]
    dims = tuple(operator.index(d) for d in dimensions)
    kind = _monoid(computation) if len(leaves) == 1 else None
    if kind in ("max", "min") and aval(leaves[0]).dtype == dtypes.bool_:
        kind = "or" if kind == "max" else "and"
    init = inits[0]
    if kind is not None and not core.is_tracer(init) and \
            np.asarray(init).item() == _identity(kind, aval(leaves[0]).dtype):
        outs = [_PRIMS[kind].bind(leaves[0], axes=dims)]
    else:
        def fn(a, b):
            return _tree.tree_leaves(computation(
                _tree.tree_unflatten(tree, a), _tree.tree_unflatten(tree, b)))
        outs = reduce_tree(leaves, [_arr(v) for v in inits], fn, dims)
    outs = [apply_out_sharding(o, out_sharding) for o in outs]
    return _tree.tree_unflatten(tree, outs)


def reduce_xor(operand, axes):
    """The xor of the elements over `axes`: per bit, the parity of the count of ones (a
    sum, which shardc has; XLA's xor reduction is the same value)."""
    x = _arr(operand)
    a = aval(x)
    axes = tuple(operator.index(d) for d in axes)
    if a.dtype == dtypes.bool_:
        n = red.reduce_sum_p.bind(convert(x, dtypes.default_int()), axes=axes)
        one = Lit(core._scalar(1, aval(n).dtype), aval(n).update(shape=(), weak=False))
        return ew.ne_p.bind(ew.and_p.bind(n, one), Lit(core._scalar(0, aval(n).dtype),
                                                       aval(n).update(shape=(), weak=False)))
    if not dtypes.is_int(a.dtype):
        raise ShardcTypeError(f"reduce_xor does not accept dtype {a.dtype}. Accepted dtypes "
                              "are subtypes of integer, bool.")
    bits = a.dtype.itemsize * 8
    ut = np.dtype(f"uint{bits}")
    u = ew.convert_element_type_p.bind(x, new_dtype=ut, weak_type=False) \
        if a.dtype != ut else x

    def c(v, dt):
        return Lit(core._scalar(v, dt), a.update(dtype=dt, shape=(), weak=False))
    out = None
    ct = np.dtype(np.int32)
    for b in range(bits):
        bit = ew.and_p.bind(ew.shift_right_logical_p.bind(u, c(b, ut)), c(1, ut))
        n = red.reduce_sum_p.bind(ew.convert_element_type_p.bind(
            bit, new_dtype=ct, weak_type=False), axes=axes)
        par = ew.convert_element_type_p.bind(ew.and_p.bind(n, c(1, ct)), new_dtype=ut,
                                             weak_type=False)
        term = ew.shift_left_p.bind(par, c(b, ut))
        out = term if out is None else ew.or_p.bind(out, term)
    if a.dtype != ut:
        out = ew.convert_element_type_p.bind(out, new_dtype=a.dtype, weak_type=False)
    return out


wrap_public(globals())

__all__ = [n for n, v in list(globals().items()) if not n.startswith("_") and
           getattr(v, "__module__", None) == __name__]
