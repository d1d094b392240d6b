"""Matmul precision (jax.lax.Precision): a dot's or convolution's `precision=` as the
pair of StableHLO precision names its lowering carries. It decides how many passes an
f32 product takes on TPUs and whether GPUs use TF32; CPUs compute at full precision
whatever it says."""
from __future__ import annotations

from ..errors import ShardcError

_NAMES = {"DEFAULT", "HIGH", "HIGHEST"}
_ALIASES = {"BFLOAT16": "DEFAULT", "FASTEST": "DEFAULT", "TENSORFLOAT32": "HIGH",
            "BFLOAT16_3X": "HIGH", "FLOAT32": "HIGHEST"}


def _name(p):
    name = getattr(p, "name", None) or str(p).upper()
    name = _ALIASES.get(name, name)
    if name not in _NAMES:
        raise ShardcError(
            f"precision={p!r} is not one shardc lowers: pass None, 'default', 'high' or "
            "'highest' (or jax.lax.Precision); for a DotAlgorithmPreset, cast the "
            "operands and set preferred_element_type= for the accumulation type")
    return name


def canonical_precision(precision):
    """None, or a pair of names (DEFAULT / HIGH / HIGHEST) for lhs and rhs, as jax's
    canonicalize_precision: a single value for both; None takes the
    jax_default_matmul_precision config when it is set."""
    if precision is None:
        import jax
        precision = jax.config.jax_default_matmul_precision
        if precision is None:
            return None
    if isinstance(precision, (tuple, list)):
        if len(precision) != 2:
            raise ShardcError(f"precision needs one value or a pair, got {precision!r}")
        ps = tuple(_name(p) for p in precision)
    else:
        ps = (_name(precision),) * 2
    return None if ps == ("DEFAULT", "DEFAULT") else ps
