"""jax primitives to shardc ops, and jaxprs equation by equation.

`apply(prim, args, params)` translates one jax primitive application: most primitives
exist in shardc under jax's name with jax's params (the generic rule binds them after
checking every param is understood); the others have a rule in `RULES` (renames such as
add_any and select_n, params spelled differently, ops with jaxprs in their params).
`eval_jaxpr` translates a jaxpr's equations one by one; each equation's source line
(`source_info`) becomes its ops' location, so explain and report name the user's or the
library's line. A primitive with no translation is a clear error naming it.
"""
from __future__ import annotations

import inspect

from jax._src import core as jcore
from jax._src import dtypes as jdtypes
from jax._src import source_info_util
from jax.sharding import AxisType, PartitionSpec

from .. import errors
from ..errors import Loc, ShardcError
from ..ir import dtypes
from ..ir.primitive import PRIMITIVES
from ..ir.program import Aval, Lit
from ..ops.fft import fft as fft_op
from ..trace import core

RULES: dict = {}


def rule(*names):
    def deco(fn):
        for n in names:
            RULES[n] = fn
        return fn
    return deco


def unsupported(name, hint=""):
    return ShardcError(f"shardc cannot translate jax's primitive `{name}` yet"
                       + (f" ({hint})" if hint else "")
                       + ": rewrite this part with shardc.numpy / shardc.lax, or keep it "
                       "outside shardc.jit")


def apply(prim, args, params):
    """One jax primitive on shardc values (tracers, keys, constants): its outputs (a
    list for multiple-result primitives)."""
    fn = RULES.get(prim.name)
    if fn is None:
        fn = _generic(prim.name)
        if not getattr(fn, "untranslatable", False):   # RULES holds translations only
            RULES[prim.name] = fn
    return fn(*[lifted(a) for a in args], **params)


def lifted(x):
    """A concrete jax key array (a jit's argument, a closed-over key) as shardc's keys,
    which loops, branches and the random rules take; any other value as it is."""
    if type(x) is not core.Tracer and isinstance(getattr(x, "dtype", None),
                                                jdtypes.ExtendedDType):
        return rules_random.keys_of(x)
    return x


# ---------------------------------------------------------------- jaxprs


_FRAMES: dict = {}


def _loc(source_info) -> Loc | None:
    """An equation's location: the user's line and the innermost library line (flax,
    optax), found in its traceback as errors.user_loc finds them on the stack."""
    tb = source_info.traceback if source_info is not None else None
    if tb is None:
        return None
    frames = _FRAMES.get(tb)
    if frames is None:
        code, lasti = tb.raw_frames()
        if len(_FRAMES) > 20_000:
            _FRAMES.clear()
        frames = _FRAMES[tb] = [(c.co_filename, source_info_util.raw_frame_to_frame(
            c, i).start_line) for c, i in zip(code, lasti)]
    return errors.loc_of_frames(frames)


def literal(v):
    """A jaxpr literal as a shardc scalar literal of the literal's jax type."""
    a = v.aval
    if not isinstance(a, jcore.ShapedArray) or a.shape != ():
        return v.val
    dt = dtypes.canonicalize(a.dtype)
    return Lit(core._scalar(v.val, dt), Aval((), dt, bool(a.weak_type)))


def eval_jaxpr(jaxpr, consts, args):
    """Translate `jaxpr` applied to `args` (its constvars bound to `consts`)."""
    env = {}
    for v, x in zip(jaxpr.constvars, consts):
        env[v] = x
    for v, x in zip(jaxpr.invars, args):
        env[v] = x

    def read(v):
        return literal(v) if type(v) is jcore.Literal else env[v]
    for eqn in jaxpr.eqns:
        loc = _loc(eqn.source_info)
        # the equation's name stack (jax.named_scope, a flax module's path, jvp(...)),
        # relative to the enclosing equation's, as jax's lowering extends it
        scope = str(eqn.source_info.name_stack) if eqn.source_info is not None else ""
        with errors.at_loc(loc), errors.in_scope(scope):
            outs = apply(eqn.primitive, [read(v) for v in eqn.invars], eqn.params)
        if not eqn.primitive.multiple_results:
            outs = [outs]
        for v, o in zip(eqn.outvars, outs):
            if type(v) is not jcore.DropVar:
                env[v] = o
    return [read(v) for v in jaxpr.outvars]


def eval_closed(closed, args):
    return eval_jaxpr(closed.jaxpr, closed.consts, args)


# ---------------------------------------------------------------- the generic rule

# params shardc's ops do without, when they hold these values
_DEFAULTS = {"accuracy": None, "out_dtype": None, "sharding": None, "out_sharding": None,
             "pivoting": False, "use_magma": None}
_SHARDING_PARAMS = ("sharding", "out_sharding")


def _params_of(sp):
    try:
        sig = inspect.signature(sp.shape_rule)
    except (TypeError, ValueError):
        return None
    return {n for n, p in sig.parameters.items()
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}


def _generic(name):
    sp = PRIMITIVES.get(name)
    if sp is None or sp.has_regions:
        def missing(*args, **params):
            raise unsupported(name)
        missing.untranslatable = True
        return missing
    accepted = _params_of(sp) or set()
    elementwise = sp.prop_kind.name == "ELEMENTWISE"

    def run(*args, **params):
        if elementwise and len(args) > 1:
            args = _broadcast_ones(args)
        kept, sharding = {}, None
        for k, v in params.items():
            if k in accepted:
                kept[k] = v
            elif k in _SHARDING_PARAMS:
                sharding = v
            elif k == "accuracy":
                continue    # a hint for approximations; XLA's default is kept
            elif k in _DEFAULTS and v is _DEFAULTS[k]:
                continue
            else:
                raise unsupported(name, f"its parameter {k}={v!r}")
        return with_sharding(sharding, sp.bind, *args, **kept)
    return run


def _broadcast_ones(args):
    """jax's elementwise ops broadcast size-1 dims of equal-rank operands; shardc's
    take one shape: broadcast those operands first."""
    shapes = [core.aval_of(a).shape for a in args]
    nd = max(len(s) for s in shapes)
    full = [s for s in shapes if len(s) == nd]
    if all(s == full[0] for s in full):
        return args
    # a size-1 dim takes the other operands' size, which may be 0
    target = tuple(next((d for d in ds if d != 1), 1) for ds in zip(*full))
    return [_bind("broadcast_in_dim", a, shape=target, broadcast_dimensions=tuple(range(nd)))
            if len(s) == nd and s != target else a for a, s in zip(args, shapes)]


def with_sharding(sharding, fn, *args, **kwargs):
    """`fn(*args, **kwargs)`, a jax op carrying its `sharding=`/`out_sharding=` (explicit
    mode's result type): it binds leniently, so an operand sharding that alone would be
    ambiguous (a sharded contraction) is no error, and is resharded to it, as jax's op
    takes the type from out_sharding. A replicated spec on a mesh with no Explicit axis
    is applied only when binding without it fails: jax types every value of an Auto mesh
    replicated, which must not pin Auto axes so; over Explicit axes it is the type (a
    bias's gradient summed over a sharded batch is replicated)."""
    spec = _explicit_spec(sharding)
    if spec is None or core.current_builder() is None:
        return fn(*args, **kwargs)
    if all(p is None for p in spec.partitions) and not getattr(spec, "unreduced", ()) and \
            not _names_explicit_axes(sharding):
        try:
            return fn(*args, **kwargs)
        except errors.ShardingTypeError:
            pass
    from ..api.explicit import reshard
    from ..trace import types
    with types.lenient():
        out = fn(*args, **kwargs)
    return reshard(out, spec)


def _names_explicit_axes(sharding):
    """Whether a jax op's sharding param lives on a mesh with an Explicit axis."""
    mesh = getattr(sharding, "mesh", None)
    return any(k == AxisType.Explicit for k in getattr(mesh, "axis_types", ()))


def _explicit_spec(sharding):
    """The part of a jax op's sharding param that is a type: its Explicit axes. jax's
    types leave out Auto axes (a concrete sharding of convert_element_type, from
    astype(device=), names them; jax constrains to it with a with_sharding_constraint
    of its own, which translates on its own)."""
    spec = getattr(sharding, "spec", None)
    mesh = getattr(sharding, "mesh", None)
    if spec is None or mesh is None or not hasattr(mesh, "axis_types"):
        return spec
    kinds = dict(zip(mesh.axis_names, mesh.axis_types))
    if all(k == AxisType.Explicit for k in kinds.values()):
        return spec

    def keep(p):
        axes = tuple(a for a in (p if isinstance(p, tuple) else (p,))
                     if a is not None and kinds.get(a, AxisType.Explicit) == AxisType.Explicit)
        return None if not axes else axes[0] if len(axes) == 1 else axes
    return PartitionSpec(*(keep(p) for p in spec.partitions), unreduced=spec.unreduced,
                         reduced=spec.reduced)


def _bind(name, *args, **params):
    return PRIMITIVES[name].bind(*args, **params)


# ---------------------------------------------------------------- renames and re-spellings

@rule("add_any")
def _add_any(x, y):
    return _bind("add", x, y)


@rule("select_n")
def _select_n(which, *cases):
    from ..api.lax_ops import select_n
    return select_n(which, *cases)


@rule("clamp")
def _clamp(lo, x, hi):
    from ..api.lax_ops import clamp
    return clamp(lo, x, hi)


@rule("exp2")
def _exp2(x, accuracy=None):
    from ..api.lax_extra import exp2
    return exp2(x)


@rule("squeeze")
def _squeeze(x, *, dimensions):
    shape = [d for i, d in enumerate(core.aval_of(x).shape) if i not in dimensions]
    return _bind("reshape", x, shape=tuple(shape))


@rule("reshape")
def _reshape(x, *, new_sizes, dimensions=None, sharding=None):
    if dimensions is not None:
        x = _bind("transpose", x, permutation=tuple(dimensions))
    return with_sharding(sharding, _bind, "reshape", x, shape=tuple(new_sizes))


@rule("tile")
def _tile(x, *, reps):
    # each dim n -> (rep, n), broadcast, then merged: rep copies of the dim, as jax's
    shape = core.aval_of(x).shape
    pairs = tuple(k for r, n in zip(reps, shape) for k in (r, n))
    b = _bind("broadcast_in_dim", x, shape=pairs,
              broadcast_dimensions=tuple(2 * i + 1 for i in range(len(shape))))
    return _bind("reshape", b, shape=tuple(r * n for r, n in zip(reps, shape)))


@rule("split")
def _split(x, *, sizes, axis):
    from ..api.lax_ops import split
    return split(x, sizes, axis)


def _argminmax_rule(name):
    def run(x, *, axes, index_dtype):
        (axis,) = axes
        return _bind(name, x, axis=axis, index_dtype=index_dtype)
    return run


RULES["argmax"] = _argminmax_rule("argmax")
RULES["argmin"] = _argminmax_rule("argmin")


@rule("round")
def _round(x, *, rounding_method):
    # jax's RoundingMethod: 0 away from zero, 1 to nearest even
    return _bind("round_afz" if int(rounding_method) == 0 else "round", x)


@rule("stage")
def staged(x):
    """A value lifted into the trace (a constant becomes a traced one, a jax key shardc's)."""
    x = lifted(x)
    if core.is_tracer(x):
        return x
    b = core.current_builder()
    v = core.constant_value(b, x)
    return core.literal_tracer(v) if type(v) is Lit else core.Tracer(b, v)


@rule("fft")
def _fft(x, *, fft_type, fft_lengths):
    return fft_op(x, fft_type, fft_lengths)     # takes jax's FftType enum


@rule("dot_general")
def _dot_general(x, y, *, dimension_numbers, precision=None, preferred_element_type=None,
                 out_sharding=None):
    from ..api.lax import dot_general
    return with_sharding(out_sharding, dot_general, x, y, dimension_numbers, precision,
                         preferred_element_type)


@rule("top_k")
def _top_k(x, *, k, axis=-1):
    from ..api.lax_sorting import top_k
    return list(top_k(x, k, axis=axis))


@rule("conv_general_dilated")
def _conv(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
          feature_group_count, batch_group_count, precision=None, preferred_element_type=None,
          out_sharding=None):
    from ..api.conv import conv_general_dilated
    return with_sharding(out_sharding, conv_general_dilated, lhs, rhs, window_strides, padding,
                         lhs_dilation, rhs_dilation, dimension_numbers, feature_group_count,
                         batch_group_count, precision, preferred_element_type)


@rule("dynamic_slice")
def _dynamic_slice(x, *starts, slice_sizes):
    return _bind("dynamic_slice", x, *starts, slice_sizes=tuple(slice_sizes))


@rule("sharding_constraint")
def _wsc(x, *, sharding, layout=None, unconstrained_dims=frozenset(), context_mesh=None):
    from ..api.lax import with_sharding_constraint
    return with_sharding_constraint(x, sharding)


@rule("copy", "copy_p")
def _copy(x):
    return _bind("copy", x)


@rule("stop_gradient")
def _stop_gradient(x):
    return _bind("stop_gradient", x)


@rule("pjit", "jit", "closed_call", "core_call", "remat_call")
def _call(*args, jaxpr=None, call_jaxpr=None, in_shardings=None, out_shardings=None,
          **_params):
    """jax.jit inside shardc.jit: inlined, its in/out shardings kept as constraints."""
    closed = jaxpr if jaxpr is not None else call_jaxpr
    args = [_constrain(a, s) for a, s in zip(args, in_shardings or [None] * len(args))]
    if isinstance(closed, jcore.ClosedJaxpr):
        outs = eval_closed(closed, args)
    else:
        outs = eval_jaxpr(closed, (), args)
    return [_constrain(o, s) for o, s in zip(outs, out_shardings or [None] * len(outs))]


def _constrain(x, s):
    """A jit's in/out sharding as a constraint (UNSPECIFIED and AUTO leave it free)."""
    if s is None or not hasattr(s, "spec") or not core.is_tracer(x):
        return x
    from ..api.lax import with_sharding_constraint
    return with_sharding_constraint(x, s)


# the control-flow, custom-rule, random, gather/scatter, window and shard_map rules
# register here
from . import (rules_control, rules_effects, rules_indexing, rules_manual,  # noqa: E402,F401
               rules_numeric, rules_random)

__all__ = ["apply", "eval_jaxpr", "eval_closed", "RULES"]
