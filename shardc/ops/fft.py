"""fft: stablehlo.fft over the trailing `len(fft_lengths)` dims (jax.lax.fft).

fft_type is "FFT", "IFFT" (complex -> complex), "RFFT" (real -> complex, the last dim
n -> n // 2 + 1) or "IRFFT" (complex -> real, back to n). Sharding as Shardy's rule: the
leading dims are batch dims (pass-through), the transformed dims need replication, and
the last one is blocked when the transform changes its size.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ShardcError
from ..ir import dtypes
from ..ir.primitive import PropKind
from ..ir.rules import NEED_REPLICATION, PASS, RuleBuilder
from ..lower.emit import tensor_type
from ..trace.core import Primitive
from .common import i64_array

FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")


def _fft_shape(x, *, fft_type, fft_lengths):
    if fft_type not in FFT_TYPES:
        raise ShardcError(f"fft: fft_type must be one of {FFT_TYPES}, got {fft_type!r}")
    k = len(fft_lengths)
    if not 1 <= k <= 3 or k > x.ndim:
        raise ShardcError(f"fft transforms 1 to 3 trailing dims of an array of rank >= "
                          f"their number; got fft_lengths={fft_lengths} for {x}")
    lead, tail = x.shape[:x.ndim - k], x.shape[x.ndim - k:]
    if fft_type == "RFFT":
        if x.dtype not in (dtypes.float32, dtypes.float64):
            raise ShardcError(f"RFFT needs a float32 or float64 array, got {x}")
        if tail != tuple(fft_lengths):
            raise ShardcError(f"RFFT: fft_lengths {fft_lengths} must be the trailing dims "
                              f"of {x}")
        n = fft_lengths[-1]
        return x.update(shape=(*x.shape[:-1], n // 2 + 1),
                        dtype=dtypes.complex_dtype(x.dtype))
    if not dtypes.is_complex(x.dtype):
        raise ShardcError(f"{fft_type} needs a complex array, got {x}")
    if fft_type == "IRFFT":
        n = fft_lengths[-1]
        if tail[:-1] != tuple(fft_lengths[:-1]) or tail[-1] != n // 2 + 1:
            raise ShardcError(f"IRFFT: {x} does not fit fft_lengths {fft_lengths} (the last "
                              f"dim must be n // 2 + 1 = {n // 2 + 1})")
        return x.update(shape=(*lead, *fft_lengths), dtype=dtypes.real_dtype(x.dtype))
    if tail != tuple(fft_lengths):
        raise ShardcError(f"{fft_type}: fft_lengths {fft_lengths} must be the trailing dims "
                          f"of {x}")
    return x


def _fft_rule(in_avals, out_avals, *, fft_type, fft_lengths):
    x, out = in_avals[0], out_avals[0]
    b = RuleBuilder(in_avals, out_avals)
    first = x.ndim - len(fft_lengths)
    for d, n in enumerate(x.shape):
        if d < first:
            b.factor([d], [d], n, PASS)
        elif d < x.ndim - 1:
            b.factor([d], [d], n, NEED_REPLICATION)
        else:
            b.factor([d], [d], n, NEED_REPLICATION, blocked=x.shape[-1] != out.shape[-1])
    return b.build()


def _lower_fft(ctx, x, *, fft_type, fft_lengths):
    props = {"fft_type": f"#stablehlo<fft_type {fft_type}>",
             "fft_length": i64_array(fft_lengths)}
    return ctx.op("stablehlo.fft", [x], [tensor_type(ctx.in_avals[0])],
                  [tensor_type(ctx.out_avals[0])], props)


fft_p = Primitive("fft", shape_rule=_fft_shape, sharding_rule=_fft_rule, lower=_lower_fft,
                  prop_kind=PropKind.NONE)


def fft(x, fft_type, fft_lengths):
    """jax.lax.fft: fft_type a name ("FFT", ...) or jax's FftType; lengths a tuple."""
    name = getattr(fft_type, "name", fft_type)
    if isinstance(name, str):
        name = name.upper()
    return fft_p.bind(x, fft_type=name, fft_lengths=tuple(int(n) for n in fft_lengths))


def _batch(ctx, args, batched, *, fft_type, fft_lengths):
    """The transformed dims are the trailing ones: the mapped dim (first) is a batch dim."""
    return fft_p.bind(args[0], fft_type=fft_type, fft_lengths=fft_lengths), True


fft_p.batch = _batch


# ---------------------------------------------------------------- gradients
# Linear, so its VJP is its transpose, as jax's (no conjugation: FFT's matrix is
# symmetric; the real transforms account for the Hermitian half they drop).

def _mask(t_aval, n, dtype):
    """1 for the DC (and, for even n, the Nyquist) bin, 2 for the others, along the
    last dim, broadcast to t's shape."""
    from . import lax as L
    from .special import constant_p
    m = t_aval.shape[-1]
    mask = np.full((m,), 2.0, dtype)
    mask[0] = 1.0
    if n % 2 == 0:
        mask[m - 1] = 1.0
    c = constant_p.bind(value=mask)
    return L.broadcast_in_dim(c, t_aval.shape, (t_aval.ndim - 1,))


def _fft_vjp(ctx, cts, x, *, fft_type, fft_lengths):
    from . import lax as L
    from .complex import conj
    t = cts[0]
    ta = L.aval(t)
    n_all = math.prod(fft_lengths)
    if fft_type == "RFFT":
        masked = L.div(conj(t), _mask(ta, fft_lengths[-1], ta.dtype))
        out = fft_p.bind(masked, fft_type="IRFFT", fft_lengths=fft_lengths)
        return [L.mul(out, float(n_all))]
    if fft_type == "IRFFT":
        y = fft_p.bind(t, fft_type="RFFT", fft_lengths=fft_lengths)
        ya = L.aval(y)
        out = L.mul(L.mul(y, _mask(ya, fft_lengths[-1], ya.dtype)), 1 / n_all)
        return [conj(out)]
    return [fft_p.bind(t, fft_type=fft_type, fft_lengths=fft_lengths)]


fft_p.vjp = _fft_vjp
