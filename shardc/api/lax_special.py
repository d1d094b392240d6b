"""jax.lax's special functions, mulhi, the general reduce and its enums (Precision,
GatherScatterMode, RandomAlgorithm), with jax.lax's names and semantics.

The special functions are shardc.scipy.special's (jax.lax's take floats only and do not
promote). `reduce_tree` is lax.reduce with a reducer that is not one of the monoids
shardc has as ops: it folds halves of the operands, a tree of elementwise applications
(XLA leaves the order of a reduction's applications unspecified, so this is one of its
orders).
"""
from __future__ import annotations

import enum
import math

import numpy as np

from ..errors import ShardcTypeError
from ..ir import dtypes
from ..ops import elementwise as ew
from ..ops import lax as L
from ..ops import special_math as sm
from . import scipy_special5 as s5
from .igamma import igamma_grad_a, random_gamma_grad  # noqa: F401
from .numpy._util import aval
from .lax_ops import _same


class Precision(str, enum.Enum):
    """jax.lax.Precision: a matmul's precision on TPU (XLA:CPU and GPU compute f32 as
    f32 whatever the value, as jax's). A string enum, so jax's functions take it too
    (jax accepts its names as strings)."""
    DEFAULT = "default"
    HIGH = "high"
    HIGHEST = "highest"

    @classmethod
    def _missing_(cls, value):
        names = {"bfloat16": "default", "fastest": "default", "tensorfloat32": "high",
                 "float32": "highest"}
        v = str(getattr(value, "name", value)).lower()
        v = names.get(v, v)
        return next((m for m in cls if m.value == v), None)

    def __str__(self):
        return self.name


class GatherScatterMode(enum.Enum):
    """jax.lax.GatherScatterMode: what an out-of-bounds index does."""
    CLIP = 0
    FILL_OR_DROP = 1
    PROMISE_IN_BOUNDS = 2
    ONE_HOT = 3

    @staticmethod
    def from_any(s):
        if isinstance(s, GatherScatterMode):
            return s
        if s == "clip":
            return GatherScatterMode.CLIP
        if s is None or s in ("fill", "drop"):
            return GatherScatterMode.FILL_OR_DROP
        if s == "promise_in_bounds":
            return GatherScatterMode.PROMISE_IN_BOUNDS
        if s == "one_hot":
            return GatherScatterMode.ONE_HOT
        raise ValueError(f"Unknown gather mode \"{s}\"")


class RandomAlgorithm(enum.IntEnum):
    """jax.lax.RandomAlgorithm (rng_bit_generator's algorithms)."""
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT,
                      *, out_sharding=None):
    """XLA's stateless bit generator, as jax.lax.rng_bit_generator: (the next key, bits
    of `shape`); key is uint32[4] (or uint64[2]). The bits depend on the backend."""
    from ..ops.rng import BIT_DTYPES, rng_bit_generator_p
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(map(int, shape))
    d = dtypes.canonicalize(dtype)
    if d not in BIT_DTYPES:
        raise ShardcTypeError(f"rng_bit_generator: unsupported dtype {d}")
    outs = rng_bit_generator_p.bind(key, shape=shape, dtype=d,
                                    algorithm=RandomAlgorithm(algorithm).name)
    if out_sharding is not None:
        from .explicit import apply_out_sharding
        outs = [outs[0], apply_out_sharding(outs[1], out_sharding)]
    return tuple(outs)


def _floats(name, *xs):
    xs = _same(name, *xs)
    for x in xs:
        dt = aval(x).dtype
        if not dtypes.is_float(dt):
            raise ShardcTypeError(f"lax.{name} does not accept dtype {dt}. Accepted dtypes "
                                  "are subtypes of floating.")
    return xs


def lgamma(x):
    return sm.lgamma_p.bind(*_floats("lgamma", x))


def digamma(x):
    return sm.digamma_p.bind(*_floats("digamma", x))


def polygamma(m, x):
    return sm.polygamma_p.bind(*_floats("polygamma", m, x))


def zeta(x, q):
    return sm.zeta_p.bind(*_floats("zeta", x, q))


def erf_inv(x):
    return sm.erf_inv_p.bind(*_floats("erf_inv", x))


def bessel_i0e(x):
    return s5.i0e(*_floats("bessel_i0e", x))


def bessel_i1e(x):
    return s5.i1e(*_floats("bessel_i1e", x))


def igamma(a, x):
    """P(a, x), differentiable in both (as jax's igamma)."""
    return s5.gammainc(*_floats("igamma", a, x))


def igammac(a, x):
    return s5.gammaincc(*_floats("igammac", a, x))


def betainc(a, b, x):
    return s5.betainc(*_floats("betainc", a, b, x))


def mulhi(x, y, /):
    """The high half of each 2N-bit product of N-bit integers (as jax.lax.mulhi)."""
    x, y = _same("mulhi", x, y)
    dt = aval(x).dtype
    if not dtypes.is_int(dt) or dt == dtypes.bool_:
        raise ShardcTypeError(f"lax.mulhi does not accept dtype {dt}. Accepted dtypes are "
                              "subtypes of integer.")
    bits = np.dtype(dt).itemsize * 8
    signed = dtypes.is_signed(dt)
    if bits < 64:       # the product fits a type of twice the width (jax's lowering)
        from ..ops.bits import mulhi_p
        return mulhi_p.bind(x, y)
    # N = 64: schoolbook on 32-bit halves in unsigned 64-bit arithmetic
    u = np.dtype(f"u{bits // 8}")
    xu, yu = L.convert_element_type(x, u), L.convert_element_type(y, u)
    h = bits // 2
    mask = _c(xu, (1 << h) - 1)

    def lo(v):
        return ew.and_p.bind(v, mask)

    def hi(v):
        return ew.shift_right_logical_p.bind(v, _c(v, h))
    xl, xh, yl, yh = lo(xu), hi(xu), lo(yu), hi(yu)
    ll, lh, hl, hh = L.mul(xl, yl), L.mul(xl, yh), L.mul(xh, yl), L.mul(xh, yh)
    cross = L.add(L.add(lo(lh), lo(hl)), hi(ll))
    out = L.add(hh, L.add(hi(lh), L.add(hi(hl), hi(cross))))
    out = L.convert_element_type(out, dt)
    if signed:      # signed = unsigned - (x < 0 ? y : 0) - (y < 0 ? x : 0), mod 2^N
        sx = ew.shift_right_arithmetic_p.bind(x, _c(x, bits - 1))
        sy = ew.shift_right_arithmetic_p.bind(y, _c(y, bits - 1))
        out = L.add(out, L.add(L.mul(sx, y), L.mul(sy, x)))
    return out


def _c(x, v):
    from ..ir.program import Aval, Lit
    from ..trace import core
    dt = aval(x).dtype
    return Lit(core._scalar(v, dt), Aval((), dt, False))


# ---------------------------------------------------------------- the general reduce

def _static(x):
    """A Python/NumPy scalar's or a literal's value; None for a traced one."""
    from ..ir.program import Lit
    if isinstance(x, Lit):
        return x.value
    if isinstance(x, (int, float, bool, np.generic, np.ndarray)) and np.ndim(x) == 0:
        return np.asarray(x).item()
    return None


def reduce_tree(xs, inits, fn, dims):
    """Fold operands `xs` (one shape) over `dims` with `fn(list, list) -> list`: the
    reduced dims last and merged, halves combined until one element is left (an odd
    one out joins the first pair), then `fn(inits, that)`: the init counts once."""
    from .numpy._util import convert
    shape = aval(xs[0]).shape
    kept = [d for d in range(len(shape)) if d not in dims]
    out_shape = tuple(shape[d] for d in kept)
    n = math.prod(shape[d] for d in dims)
    inits = [convert(v, aval(x).dtype) for v, x in zip(inits, xs)]
    if n == 0:
        return [L.broadcast_in_dim(v, out_shape, ()) for v in inits]
    perm = (*kept, *dims)
    xs = [L.reshape(L.transpose(x, perm) if perm != tuple(range(len(shape))) else x,
                    (*out_shape, n)) for x in xs]
    axis = len(out_shape)
    zero = (0,) * axis
    while n > 1:
        half = n // 2
        a = [L.slice(x, (*zero, 0), (*out_shape, half)) for x in xs]
        b = [L.slice(x, (*zero, half), (*out_shape, 2 * half)) for x in xs]
        c = fn(a, b)
        if n % 2:   # the odd one joins the first pair (no init value: it counts once)
            head = fn([L.slice(x, (*zero, 0), (*out_shape, 1)) for x in c],
                      [L.slice(x, (*zero, n - 1), (*out_shape, n)) for x in xs])
            c = [L.concatenate([h, L.slice(x, (*zero, 1), (*out_shape, half))], axis)
                 if half > 1 else h for h, x in zip(head, c)]
        xs, n = c, half
    last = [L.reshape(x, out_shape) for x in xs]
    return fn([L.broadcast_in_dim(v, out_shape, ()) for v in inits], last)


__all__ = ["Precision", "GatherScatterMode", "RandomAlgorithm", "rng_bit_generator", "lgamma",
           "digamma", "polygamma", "zeta", "erf_inv", "bessel_i0e", "bessel_i1e", "betainc",
           "igamma", "igammac", "igamma_grad_a", "random_gamma_grad", "mulhi"]
