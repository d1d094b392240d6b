"""Primitives: an operation and every rule about it, and the registry of them all.

The IR names ops by primitive; the parser and verifier look them up here. Binding a
primitive to arguments is the tracer's job (shardc.trace), which installs itself with
`set_binder`, so this module needs nothing above the IR.
"""
from __future__ import annotations

import itertools

import jax

from ..errors import Loc, ShardcError

# ---------------------------------------------------------------- primitives


class Primitive:
    """An operation and every rule about it, registered together in its family file.

    shape_rule(*in_avals, **params) -> Aval | tuple[Aval]   (raise ShardcError if bad)
    sharding_rule(in_avals, out_avals, **params) -> rules.Rule
    lower(ctx, *operand_names, **params) -> result name(s)
    vjp(ctx, cts, *primals, **params): set by the gradient issue's rules
    data_flow(op) -> [rules.Edge | rules.Group] | None: values that share a sharding
    """
    __slots__ = ("name", "multiple_results", "shape_rule", "sharding_rule", "lower",
                 "prop_kind", "operand_uses", "vjp", "has_regions", "data_flow",
                 "__dict__")

    def __init__(self, name, *, shape_rule=None, sharding_rule=None, lower=None,
                 multiple_results=False, has_regions=False, prop_kind=None):
        if name in PRIMITIVES:
            raise ValueError(f"primitive {name} registered twice")
        self.name = name
        self.multiple_results = multiple_results
        self.shape_rule = shape_rule
        self.sharding_rule = sharding_rule
        self.lower = lower
        # how Shardy's op-priority schedule treats the op: "elementwise", "reshape"
        # (reshape, transpose), "broadcast", "dynamic_slice" or None.
        self.prop_kind = prop_kind
        # how many times the lowering uses each operand (Shardy counts uses of the
        # lowered module: square is multiply(x, x)); None: once
        self.operand_uses = None
        self.vjp = None
        self.has_regions = has_regions
        # values that must share a sharding beyond the factor rule (region boundaries,
        # sharding groups): Shardy's ShardableDataFlowOpInterface
        self.data_flow = None
        PRIMITIVES[name] = self

    def bind(self, *args, **params):
        return _binder[0](self, args, params)

    def __repr__(self):
        return self.name


PRIMITIVES: dict[str, Primitive] = {}


_binder = [None]   # set by shardc.trace.core: bind(prim, args, params)


def set_binder(fn):
    _binder[0] = fn


class _X64:
    """Whether x64 is on, which shape rules depend on. shardc.runtime installs jax's own
    thread-aware flag (`install_x64`); until then, jax's global config value."""
    flag = None

    @property
    def value(self):
        f = self.flag
        return f.value if f is not None else jax.config.jax_enable_x64


X64 = _X64()


def install_x64(flag):
    X64.flag = flag


# ---------------------------------------------------------------- shape rules


_SHAPES: dict = {}     # (prim, x64, operand types, params) -> (result type(s), sig)
_SHAPES_MAX = 8192
_sigs = itertools.count()


def abstract_eval(prim, in_avals, params, loc: Loc):
    """The result type(s) of `prim` on operands of types `in_avals`.

    Shape rules are pure functions of the operand types, the params and whether x64 is
    on, so results are memoized: a program repeats few distinct ops (layers, chains),
    and the verifier re-derives every op's types after each pass. Ops with unhashable
    params (arrays) are not memoized; errors never are."""
    return _shape_sig(prim, in_avals, params, loc)[0]


def _shape_sig(prim, in_avals, params, loc: Loc):
    """abstract_eval's result and the int naming its memo key (Op.sig; None if the
    params are unhashable). Ints are never reused, even after the memo is cleared."""
    try:
        if params:
            key = (prim, X64.value, *in_avals, *[(k, type(v), v) for k, v in params.items()])
        else:
            key = (prim, X64.value, *in_avals)
        hit = _SHAPES.get(key)
    except TypeError:
        key = hit = None
    if hit is not None:
        return hit
    try:
        out = prim.shape_rule(*in_avals, **params)
    except ShardcError as e:
        if e.loc != loc:
            raise ShardcError(e.message, loc) from None
        raise
    except TypeError as e:    # missing or unknown params, e.g. in hand-written IR text
        raise ShardcError(f"{prim.name}: bad operands or parameters "
                          f"{sorted(params)}: {e}", loc) from None
    if key is None:
        return out, None
    if len(_SHAPES) >= _SHAPES_MAX:
        _SHAPES.clear()
    hit = _SHAPES[key] = (out, next(_sigs))
    return hit


