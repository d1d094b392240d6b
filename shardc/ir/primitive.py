"""Primitives: an operation and every rule about it, and the registry of them all.

The IR names ops by primitive; the parser and verifier look them up here. Binding a
primitive to arguments is the tracer's job (shardc.trace), which installs itself with
`set_binder`, so this module needs nothing above the IR.

Every trait a pass reads is declared here, typed, and stated by each primitive where it
is registered: passes ask traits, never op names (tests/ir/test_rule_completeness.py).
"""
from __future__ import annotations

import enum
import itertools
from typing import NamedTuple

import jax

from ..errors import Loc, ShardcError
from .rules import no_rule

# ---------------------------------------------------------------- traits


class PropKind(str, enum.Enum):
    """How Shardy's op-priority schedule treats the op in its first rounds (the later
    rounds propagate through every op by its factor rule). A str, so rules may compare
    with the plain names."""
    NONE = "none"                    # only in the later rounds
    ELEMENTWISE = "elementwise"
    RESHAPE = "reshape"              # reshape, transpose
    BROADCAST = "broadcast"
    DYNAMIC_SLICE = "dynamic_slice"

    def __str__(self):
        return self.value


class Vma(str, enum.Enum):
    """Over which manual axes an op's results vary, inside a shard_map body (jax's
    varying-manual-axes types), given its operands' and its `axes` param."""
    KEEP = "keep"          # as the operands (every op that is not a collective)
    REMOVE = "remove"      # the operands' but `axes` (all-reduces: psum, pmax, pmin)
    AXES = "axes"          # the operands' and `axes` (jax's collectives pvary first)

    def __str__(self):
        return self.value


class Trait(enum.Flag):
    """Facts about an op that passes act on (a primitive may have several)."""
    NONE = 0
    CONSTANT = enum.auto()        # makes a constant from no operands (split per use)
    KEEPS_CONSTANT = enum.auto()  # constant operands give a constant result (Shardy's
    #                               constant splitting follows chains of these); implied
    #                               by PropKind.ELEMENTWISE unless EFFECTFUL, as in Shardy
    EFFECTFUL = enum.auto()       # kept by dead-code elimination though nothing uses it
    SHARDING_GROUP = enum.auto()  # ties its operand's sharding to all others of its group_id
    SHARDED_RESULTS = enum.auto()  # its results must carry a sharding in the IR (constraints:
    #                                propagation takes it as a source)
    BRANCHES = enum.auto()        # its regions are alternatives: one runs per call (cond)
    LOOP = enum.auto()            # its body runs many times over a loop state (scan, while)
    CONTRACTION = enum.auto()     # a library kernel (dot, convolution): XLA:CPU fuses the
    #                               reductions and elementwise ops reading its result into it
    RECIPROCAL = enum.auto()      # divides by its second operand, which XLA turns into a
    #                               multiplication by a reciprocal made in a kernel of its own
    FUSED = enum.auto()           # XLA fuses it into the kernels reading its result, which is
    #                               never a buffer (a broadcast, reshape, transpose, convert)
    EXPENSIVE = enum.auto()       # elementwise, but XLA's fusion does not duplicate it into
    #                               several readers (its IsExpensive: exp, div, tanh...)
    ALIAS = enum.auto()           # its result is its operand's buffer when sharded alike
    #                               (a copy, a reshape, an annotation)
    ANNOTATION = enum.auto()      # only annotates its operand: XLA emits no kernel for it
    REDUCE = enum.auto()          # reduces its operand over `axes` (reduce_sum, reduce_max)


# The explicit sharding rule of ops that pass no sharding between operands and
# results (constants, iota, sharding groups, region ops whose body carries it).
NO_FACTOR_RULE = no_rule


class RegionType(NamedTuple):
    """The types of one region of an op: its block arguments and what it yields."""
    args: tuple
    results: tuple


def once(**params):
    """The default operand_uses: the lowering uses each operand once."""
    return 1


# ---------------------------------------------------------------- primitives


class Primitive:
    """An operation and every rule about it, registered together in its family file.

    shape_rule(*in_avals, **params) -> Aval | tuple[Aval]   (raise ShardcError if bad);
        an op with regions also gets `regions=` the RegionTypes of its regions and must
        check them against the operands (the verifier re-derives every type this way)
    sharding_rule(in_avals, out_avals, **params) -> rules.Rule, or NO_FACTOR_RULE
    lower(ctx, *operand_names, **params) -> result name(s)
    prop_kind: a PropKind, PropKind.NONE included: always stated
    traits: a Trait flag set (Trait.NONE: none)
    num_regions: how many regions each op owns (0: a plain op; -1: one or more)
    operand_uses(**params) -> int: how many times the lowering uses each operand
        (Shardy counts uses of the lowered module: square is multiply(x, x))
    vjp(ctx, cts, *primals, **params): the gradient rule, or the not-differentiable
        marker; None only until the family's gradient rules are registered
    source_of(op) -> Source: for ops whose results are sharding sources, their origin
    operand_constraints(op) -> [(operand, sharding, Source | None)]: shardings the op
        requires of its operands (constraints, shard_map in_specs)
    after_propagation(op, mesh): run once the shardings are decided (inspection)
    nargs: the operand count, for shape rules that take *avals
    vma: a Vma: how results vary over a shard_map's manual axes
    data_flow(op) -> [rules.Edge | rules.Group] | None: values that share a sharding
        beyond the factor rule (region boundaries, sharding groups): Shardy's
        ShardableDataFlowOpInterface
    flows(op) -> [rules.Flow] | None: the same boundaries grouped as Shardy's edge ops
        (one per carry or result, all its sources at once); propagation takes these in
        place of the op's Edges that are neither stacked nor manual
    rebind(op, operands, evaluate) -> result tracers: for an op with regions, the op
        again on new operands when a program is re-traced (evaluate(region, args)
        re-traces a region); None: its one region re-traced as is (transforms.ad)
    drop_results(op, live): for an op with regions, drop results not in `live` that it
        can do without, region results too (dead-code elimination)
    claim(op, level): for ops whose gradient rule is one differentiation level's only
        (custom_vjp_call), called by each differentiation that traces the op
    reversible: False for ops with no reverse mode at all (while): forward mode then
        walks the program forwards (transforms.forward)
    jvp(ctx, primals, tangents, **params) -> (outs, tangents): the forward-mode rule of
        ops with regions that may hold an op that is not reversible
    batch(ctx, args, batched, **params) -> (outs, out_batched): the batching rule
        (shardc.vmap; the vocabulary is shardc.ops.batching)
    fold(op, consts, defs) -> [Lit | Value] | Op | None: the op with operands known
        before propagation (`consts`: each operand's scalar value, or None; `defs`:
        id(value) -> the op that made it): per result a literal or a value it equals
        (its uses then take that value), a simpler op with its results, or None
        (prepare folds as XLA's canonicalizer does before Shardy propagates)
    """
    __slots__ = ("name", "multiple_results", "shape_rule", "sharding_rule", "lower",
                 "prop_kind", "traits", "num_regions", "operand_uses", "vjp", "source_of",
                 "operand_constraints", "after_propagation", "nargs", "vma", "data_flow", "flows",
                 "rebind", "drop_results", "claim", "reversible", "jvp", "batch", "fold",
                 "constant", "keeps_constant", "effectful", "sharding_group", "sharded_results",
                 "__dict__")

    def __init__(self, name, *, shape_rule, sharding_rule, lower, prop_kind,
                 multiple_results=False, traits=Trait.NONE, num_regions=0, operand_uses=once,
                 nargs=None, vma=Vma.KEEP):
        if name in PRIMITIVES:
            raise ValueError(f"primitive {name} registered twice")
        for what, rule in (("shape_rule", shape_rule), ("sharding_rule", sharding_rule),
                           ("lower", lower)):
            if not callable(rule):
                raise TypeError(f"primitive {name}: {what} must be a function "
                                "(NO_FACTOR_RULE for ops without a factor rule)")
        self.name = name
        self.multiple_results = multiple_results
        self.shape_rule = shape_rule
        self.sharding_rule = sharding_rule
        self.lower = lower
        self.prop_kind = PropKind(prop_kind)
        self.traits = Trait(traits)
        if self.prop_kind is PropKind.ELEMENTWISE and not self.traits & Trait.EFFECTFUL:
            self.traits |= Trait.KEEPS_CONSTANT
        # each trait also as a plain bool: passes test them per op, and a Flag's `&`
        # costs a Python call (a quarter of prepare's time on a 4k-op program)
        t = self.traits
        self.constant = bool(t & Trait.CONSTANT)
        self.keeps_constant = bool(t & Trait.KEEPS_CONSTANT)
        self.effectful = bool(t & Trait.EFFECTFUL)
        self.sharding_group = bool(t & Trait.SHARDING_GROUP)
        self.sharded_results = bool(t & Trait.SHARDED_RESULTS)
        self.num_regions = num_regions
        self.operand_uses = operand_uses
        self.nargs = nargs
        self.vma = Vma(vma)
        self.vjp = None
        self.source_of = None
        self.operand_constraints = None
        self.after_propagation = None
        self.data_flow = None
        self.flows = None
        self.rebind = None
        self.drop_results = None
        self.claim = None
        self.memory = None      # params -> the memory kind of its result (ops.memory)
        self.reversible = True
        self.jvp = None
        self.batch = None
        self.fold = None
        PRIMITIVES[name] = self

    @property
    def has_regions(self) -> bool:
        return self.num_regions != 0

    def bind(self, *args, **params):
        return _binder[0](self, args, params)

    def __repr__(self):
        return self.name


PRIMITIVES: dict[str, Primitive] = {}


def nondiff(ctx, cts, *primals, **params):
    """The vjp of ops whose outputs carry no gradient (comparisons, integer ops, ...):
    the backward pass recognizes it and skips the op."""
    return [None] * len(primals)


_binder = [None]   # set by shardc.trace.core: bind(prim, args, params)


def set_binder(fn):
    _binder[0] = fn


class _X64:
    """Whether x64 is on, which shape rules depend on: jax's global config value until
    shardc.runtime installs jax's own thread-aware flag (`install_x64`), which then is
    `X64` itself (read it as `primitive.X64.value`, not a copy taken at import)."""
    @property
    def value(self):
        return jax.config.jax_enable_x64


X64 = _X64()


def install_x64(flag):
    global X64
    X64 = flag


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


