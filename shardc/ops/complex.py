"""Complex numbers: complex(x, y), real, imag, conj, elementwise as jax.lax's.

Gradients follow jax's convention: a rule is the transpose of the op's JVP with no
conjugation (for holomorphic f, grad(f, holomorphic=True) is f'), so the existing
rules of the holomorphic ops (mul, exp, sin, dot_general, ...) hold for complex as is.
"""
from __future__ import annotations

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.primitive import PropKind
from ..trace.core import Primitive
from . import elementwise as ew
from .batching import elementwise_rule
from .common import same_shapes


def _need_complex(name, a):
    if not dtypes.is_complex(a.dtype):
        raise ShardcError(f"{name} needs a complex array, got {a}; "
                          "convert it first (e.g. x.astype(jnp.complex64))")


def _part_shape(name):
    def rule(x):
        _need_complex(name, x)
        return x.update(dtype=dtypes.real_dtype(x.dtype))
    return rule


def _conj_shape(x):
    _need_complex("conj", x)
    return x


def _complex_shape(x, y):
    same_shapes("complex", (x, y))
    if x.dtype not in (dtypes.float32, dtypes.float64):
        raise ShardcError(f"complex needs float32 or float64 parts, got {x} and {y}")
    shape = x.shape if x.ndim else y.shape
    return x.update(shape=shape, dtype=dtypes.complex_dtype(x.dtype), weak=x.weak and y.weak)


def _lower_conj(ctx, x):
    """conj(x) = complex(real(x), -imag(x)) (StableHLO has no conj, as jax lowers it)."""
    a = ctx.out_avals[0]
    t = ew.tensor_type(a)
    pt = ew.tensor_type(a.update(dtype=dtypes.real_dtype(a.dtype)))
    (re,) = ctx.op("stablehlo.real", [x], [t], [pt])
    (im,) = ctx.op("stablehlo.imag", [x], [t], [pt])
    (im,) = ctx.op("stablehlo.negate", [im], [pt], [pt])
    return ctx.op("stablehlo.complex", [re, im], [pt, pt], [t])


def _prim(name, shape_rule, lower, nargs=1):
    p = Primitive(name, shape_rule=shape_rule, sharding_rule=ew.pointwise, lower=lower,
                  prop_kind=PropKind.ELEMENTWISE, nargs=nargs)
    p.batch = elementwise_rule(p)
    return p


real_p = _prim("real", _part_shape("real"), lambda ctx, x: ew._lower("stablehlo.real", ctx, x))
imag_p = _prim("imag", _part_shape("imag"), lambda ctx, x: ew._lower("stablehlo.imag", ctx, x))
conj_p = _prim("conj", _conj_shape, _lower_conj)
complex_p = _prim("complex", _complex_shape,
                  lambda ctx, x, y: ew._lower("stablehlo.complex", ctx, x, y), nargs=2)


def real(x):
    return real_p.bind(x)


def imag(x):
    return imag_p.bind(x)


def conj(x):
    return conj_p.bind(x)


def complex(x, y):   # noqa: A001  (jax.lax's name)
    return complex_p.bind(x, y)


# ---------------------------------------------------------------- gradients

def _vjps():
    from . import lax as L
    ew.defvjp(real_p, lambda c, g, x: (complex(g, L.zeros_like(g)),))
    ew.defvjp(imag_p, lambda c, g, x: (complex(L.zeros_like(g), L.neg(g)),))
    ew.defvjp(conj_p, lambda c, g, x: (conj(g),))
    ew.defvjp(complex_p, lambda c, g, x, y: (real(g), L.neg(imag(g))))

    real_abs = ew.abs_p.vjp

    def abs_vjp(ctx, cts, x):
        """|z|' as jax's: the cotangent times conj(z) / |z| (|0| counts as 1)."""
        if not dtypes.is_complex(ctx.in_avals[0].dtype):
            return real_abs(ctx, cts, x)
        out = ctx.out
        safe = L.select(L.eq(out, 0), L.ones_like(out), out)
        g = cts[0]
        zc = L.convert_element_type(g, ctx.in_avals[0].dtype)
        return [L.mul(zc, L.div(conj(x), L.convert_element_type(safe, ctx.in_avals[0].dtype)))]
    ew.abs_p.vjp = abs_vjp


_vjps()
