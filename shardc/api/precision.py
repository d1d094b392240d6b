"""Matmul precision (jax.lax.Precision): a dot's or convolution's `precision=` as the
pair of StableHLO precision names its lowering carries. It decides how many passes an
f32 product takes on TPUs and whether GPUs use TF32; CPUs compute at full precision
whatever it says. A dot may instead name an algorithm (jax.lax.DotAlgorithmPreset, or
its name, or a jax.lax.DotAlgorithm): ("preset", name) or ("algorithm", lhs type, rhs
type, accumulation type, lhs components, rhs components, primitive operations,
imprecise accumulation), which its lowering carries (shardc.ops.linalg)."""
from __future__ import annotations

from ..errors import ArgumentError, ShardcError

_NAMES = {"DEFAULT", "HIGH", "HIGHEST"}
_ALIASES = {"BFLOAT16": "DEFAULT", "FASTEST": "DEFAULT", "TENSORFLOAT32": "HIGH",
            "BFLOAT16_3X": "HIGH", "FLOAT32": "HIGHEST"}


def _name(p):
    name = getattr(p, "name", None) or str(p).upper()
    name = _ALIASES.get(name, name)
    if name not in _NAMES:
        raise ShardcError(
            f"precision={p!r} is not one shardc lowers: pass None, 'default', 'high' or "
            "'highest' (or jax.lax.Precision), or a jax.lax.DotAlgorithmPreset (or its "
            "name) for a dot")
    return name


# the algorithms XLA:CPU computes (it ignores any other silently, so jax rejects them)
_CPU_PRESETS = {"DEFAULT", "F16_F16_F16", "F32_F32_F32", "F64_F64_F64", "BF16_BF16_F32",
                "BF16_BF16_F32_X3", "BF16_BF16_F32_X6"}


_NOT_ALGORITHM = object()


def _algorithm(p, what):
    """`p` as a dot algorithm (None for the DEFAULT preset), or _NOT_ALGORITHM. jax's
    DotAlgorithmPreset and DotAlgorithm are known by their class names (the compiler
    does not import jax.lax); a preset's name is upper case (jax's lower case strings
    name Precisions)."""
    from ..ops.linalg import PRESETS
    kind = type(p).__name__
    if isinstance(p, str) and (p == "DEFAULT" or p in PRESETS):
        alg, name = ("preset", p), p
    elif kind == "DotAlgorithmPreset":
        alg, name = ("preset", p.name), p.name
    elif kind == "DotAlgorithm":
        import numpy as np
        alg = ("algorithm", *(np.dtype(t).name for t in (
            p.lhs_precision_type, p.rhs_precision_type, p.accumulation_type)),
            int(p.lhs_component_count), int(p.rhs_component_count),
            int(p.num_primitive_operations), bool(p.allow_imprecise_accumulation))
        name = None
    else:
        return _NOT_ALGORITHM
    if what != "dot":
        return None     # as jax lowers a convolution's: the default precision
    from ..runtime.meshes import target_platform
    if target_platform() == "cpu" and name not in _CPU_PRESETS:
        raise ArgumentError(f"The precision '{p}' is not supported by dot_general on CPU "
                            f"(XLA:CPU computes {sorted(_CPU_PRESETS)})")
    return None if name == "DEFAULT" else alg


def canonical_precision(precision, what="dot"):
    """None, a pair of names (DEFAULT / HIGH / HIGHEST) for lhs and rhs, or a dot's
    algorithm, as jax's canonicalize_precision: a single value for both; None takes the
    jax_default_matmul_precision config when it is set (a preset's name too)."""
    if precision is None:
        import jax
        precision = jax.config.jax_default_matmul_precision
        if precision is None:
            return None
    alg = _algorithm(precision, what)
    if alg is not _NOT_ALGORITHM:
        return alg
    if isinstance(precision, (tuple, list)):
        if len(precision) != 2:
            raise ShardcError(f"precision needs one value or a pair, got {precision!r}")
        ps = tuple(_name(p) for p in precision)
    else:
        ps = (_name(precision),) * 2
    return None if ps == ("DEFAULT", "DEFAULT") else ps
