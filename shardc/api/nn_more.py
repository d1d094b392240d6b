"""More of jax.nn, each built as jax.nn builds it from jax.numpy (so values, dtypes, weak
types and gradients agree): softplus elu celu selu leaky_relu relu6 hard_* soft_sign
sparse_* log_sigmoid glu squareplus mish identity tanh log1mexp logmeanexp, and
dot_product_attention (jax's 'xla' implementation)."""
from __future__ import annotations

import numpy as np

from ..errors import ShardcError, wrap_public
from ..transforms.custom_jvp import custom_jvp
from ..ir import dtypes
from . import numpy as snp
from .numpy._util import aval, check_arraylike


def _nn():
    from . import nn
    return nn


def softplus(x):
    """log(1 + exp(x)), as jnp.logaddexp(x, 0)."""
    return snp.logaddexp(x, 0)


def soft_sign(x):
    check_arraylike("soft_sign", x)
    return snp.divide(x, snp.add(snp.abs(x), 1))


def sparse_plus(x):
    check_arraylike("sparse_plus", x)
    return snp.where(snp.less_equal(x, -1.0), 0.0,
                     snp.where(snp.greater_equal(x, 1.0), x,
                               snp.divide(snp.power(snp.add(x, 1.0), 2), 4)))


def sparse_sigmoid(x):
    return snp.multiply(0.5, snp.clip(snp.add(x, 1.0), 0.0, 2.0))


def celu(x, alpha=1.0):
    return snp.add(snp.maximum(x, 0.0),
                   snp.multiply(alpha, snp.expm1(snp.divide(snp.minimum(x, 0.0), alpha))))


def elu(x, alpha=1.0):
    check_arraylike("elu", x)
    pos = snp.greater(x, 0)
    return snp.where(pos, x, snp.multiply(alpha, snp.expm1(snp.where(pos, 0.0, x))))


def selu(x):
    alpha = 1.6732632423543772
    scale = 1.0507009873554805
    return snp.multiply(scale, elu(x, alpha))


def leaky_relu(x, negative_slope=0.01):
    check_arraylike("leaky_relu", x)
    return snp.where(snp.greater_equal(x, 0), x, snp.multiply(negative_slope, x))


@custom_jvp
def relu6(x):
    return snp.minimum(snp.maximum(x, 0), 6.0)


def _relu6_jvp(g, ans, x):
    # as jax.nn.relu6's: 0 at the kinks x == 0 and x == 6 (maximum and minimum split ties)
    return snp.where(snp.logical_and(snp.greater(x, 0), snp.less(x, 6)), g,
                     snp.zeros_like(g))


relu6.defjvps(_relu6_jvp)


def hard_sigmoid(x):
    return snp.divide(relu6(snp.add(x, 3.0)), 6.0)


def hard_silu(x):
    check_arraylike("hard_silu", x)
    return snp.multiply(x, hard_sigmoid(x))


hard_swish = hard_silu


def hard_tanh(x):
    check_arraylike("hard_tanh", x)
    return snp.where(snp.greater(x, 1), 1, snp.where(snp.less(x, -1), -1, x))


def log_sigmoid(x):
    check_arraylike("log_sigmoid", x)
    return snp.negative(softplus(snp.negative(x)))


def glu(x, axis=-1):
    check_arraylike("glu", x)
    if aval(x).shape[axis] % 2:
        raise ShardcError("glu: axis size must be divisible by 2")
    x1, x2 = snp.split(x, 2, axis)
    return snp.multiply(x1, _nn().sigmoid(x2))


def squareplus(x, b=4):
    check_arraylike("squareplus", x, b)
    return snp.divide(snp.add(x, snp.sqrt(snp.add(snp.square(x), b))), 2)


def mish(x):
    check_arraylike("mish", x)
    return snp.multiply(x, snp.tanh(softplus(x)))


def identity(x):
    check_arraylike("identity", x)
    return snp.asarray(x)


def tanh(x, /):
    return snp.tanh(x)


def log1mexp(x):
    """log(1 - exp(-x)), accurately on both sides of log(2)."""
    check_arraylike("log1mexp", x)
    c = np.log(2.0)
    return snp.where(snp.less(x, c), snp.log(snp.negative(snp.expm1(snp.negative(x)))),
                     snp.log1p(snp.negative(snp.exp(snp.negative(x)))))


def logmeanexp(x, axis=None, where=None, keepdims=False):
    nn = _nn()
    lse = nn.logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    dt = aval(lse).dtype
    if where is None:
        from ..ops.common import norm_axes
        import math
        n = math.prod(aval(x).shape[d] for d in norm_axes("logmeanexp", axis, aval(x).ndim))
        count = snp.asarray(np.array(n, dt))
    else:
        count = snp.sum(snp.broadcast_to(where, aval(x).shape), axis=axis, dtype=dt,
                        keepdims=keepdims)
    return snp.subtract(lse, snp.log(count))


# ---------------------------------------------------------------- attention

def _ensure_4d(t):
    t = snp.asarray(t)
    n = 4 - aval(t).ndim
    return snp.expand_dims(t, tuple(range(n))) if n > 0 else t


def _check(t, shape, dtype, name):
    if t is None:
        return
    a = aval(t)
    if a.ndim != len(shape):
        raise ShardcError(f"{name} ndim should be {len(shape)}, but got {a.ndim}")
    if dtype is not None and a.dtype != dtype:
        raise ShardcError(f"{name} dtype should be {dtype}, but got {a.dtype}")
    for i in range(a.ndim):
        if shape[i] != -1 and a.shape[i] != shape[i]:
            raise ShardcError(f"{name} shape should be {shape}: but got {a.shape}")


def dot_product_attention(query, key, value, bias=None, mask=None, *, scale=None,
                          is_causal=False, query_seq_lengths=None, key_value_seq_lengths=None,
                          local_window_size=None, implementation=None,
                          return_residual=False):
    """Scaled dot-product attention over (B, T, N, H) queries and (B, S, K, H) keys and
    values (N a multiple of K: grouped queries), as jax.nn's 'xla' implementation."""
    if implementation not in (None, "xla"):
        raise ShardcError(f"dot_product_attention: implementation={implementation!r} is not "
                          "supported by shardc; use None or 'xla'")
    out_shape = aval(snp.asarray(query)).shape
    q, k, v = _ensure_4d(query), _ensure_4d(key), _ensure_4d(value)
    bias = _ensure_4d(bias) if bias is not None else None
    mask = _ensure_4d(mask) if mask is not None else None
    qsl = snp.asarray(query_seq_lengths) if query_seq_lengths is not None else None
    kvsl = snp.asarray(key_value_seq_lengths) if key_value_seq_lengths is not None else None
    if isinstance(local_window_size, int):
        local_window_size = (local_window_size, local_window_size)
    B, S, K, H = aval(k).shape
    _check(v, [B, S, K, H], aval(k).dtype, "value")
    _check(q, [B, -1, -1, H], aval(k).dtype, "query")
    _check(mask, [-1] * 4, np.dtype(bool), "mask")
    _check(bias, [-1] * 4, None, "bias")
    _check(qsl, [B], np.dtype("int32"), "query_seq_lengths")
    _check(kvsl, [B], np.dtype("int32"), "key_value_seq_lengths")
    if aval(q).shape[-2] % K:
        raise ShardcError(f"The number of query heads must be a multiple of key/value heads, "
                          f"but got {aval(q).shape[-2]} vs {K}")
    scale = 1.0 / np.sqrt(H) if scale is None else scale
    out = _attention_xla(q, k, v, bias, mask, is_causal, scale, qsl, kvsl, local_window_size,
                         return_residual)
    if return_residual:
        out, res = out
        return snp.reshape(out, out_shape), snp.reshape(res, out_shape[:-1])
    return snp.reshape(out, out_shape)


def _attention_xla(q, k, v, bias, mask, is_causal, scale, qsl, kvsl, window, residual):
    B, T, N, H = aval(q).shape
    K = aval(k).shape[2]
    G = N // K
    q = snp.reshape(q, (B, T, K, G, H))

    def grouped(t):
        if t is None:
            return None
        tB, tN, tT, tS = aval(t).shape
        if tN == 1:
            return snp.broadcast_to(snp.expand_dims(t, 2), (tB, tN, G, tT, tS))
        if tN != N:
            raise ShardcError(f"bias/mask head dim must be 1 or {N}, got {tN}")
        return snp.reshape(t, (tB, K, G, tT, tS))
    bias, mask = grouped(bias), grouped(mask)
    # jax vmaps the core over the group dim G (query dim 3, bias/mask dim 2, out dim 3):
    # here the group dim rides along in the einsums
    logits_dtype = snp.promote_types(aval(q).dtype, np.float32)
    logits = snp.einsum("BTKGH,BSKH->BKGTS", q, k, preferred_element_type=logits_dtype)
    logits = snp.multiply(logits, snp.asarray(np.array(scale, logits_dtype)))
    if bias is not None:
        logits = snp.astype(snp.add(logits, bias), logits_dtype)
    logits = _apply_masks(logits, mask, is_causal, qsl, kvsl, window)
    logits = snp.astype(logits, np.float32)
    probs = snp.astype(_nn().softmax(logits, axis=-1), aval(k).dtype)
    enc = snp.einsum("BKGTS,BSKH->BTKGH", probs, v)
    if qsl is not None:
        qm = snp.less(snp.arange(0, T)[None, :], qsl[:, None])
        enc = snp.multiply(enc, snp.astype(qm[:, :, None, None, None], aval(enc).dtype))
    enc = snp.reshape(enc, (B, T, N, H))
    if residual:
        from ..transforms.ad import stop_gradient
        lse = snp.astype(_nn().logsumexp(logits, axis=-1), aval(k).dtype)   # (B, K, G, T)
        lse = snp.reshape(snp.transpose(lse, (0, 3, 1, 2)), (B, T, N))
        return enc, stop_gradient(lse)
    return enc


def _apply_masks(logits, mask, is_causal, qsl, kvsl, window):
    if mask is None and not is_causal and qsl is None and kvsl is None and window is None:
        return logits
    T, S = aval(logits).shape[-2:]
    combined = snp.ones_like(logits, dtype=bool)
    if mask is not None:
        combined = snp.logical_and(combined, mask)
    if is_causal:
        combined = snp.logical_and(combined, snp.tril(snp.ones((T, S), dtype=bool)))
    if window is not None:
        qp, kp = snp.arange(T), snp.arange(S)
        left, right = window
        lm = snp.less_equal(qp[:, None], snp.add(kp[None, :], left))
        rm = snp.greater_equal(qp[:, None], snp.subtract(kp[None, :], right))
        combined = snp.logical_and(combined, snp.logical_and(rm, lm))
    if qsl is not None or kvsl is not None:
        qmask, kvmask = True, True
        if qsl is not None:
            qmask = snp.less(snp.arange(0, T)[None, :, None], qsl[:, None, None])
        if kvsl is not None:
            kvmask = snp.less(snp.arange(0, S)[None, None, :], kvsl[:, None, None])
        m = snp.logical_and(qmask, kvmask)                  # (B, T, S)
        combined = snp.logical_and(combined, m[:, None, None, :, :])
    dt = aval(logits).dtype
    info = np.finfo(dt) if dt != dtypes.bfloat16 else __import__("ml_dtypes").finfo(dt)
    big = min(float(info.max), float(np.finfo(np.float32).max))
    return snp.where(combined, logits, snp.asarray(np.array(-0.7 * big, dt)))


wrap_public(globals())

__all__ = [n for n, v in list(globals().items()) if not n.startswith("_") and
           getattr(v, "__module__", None) == __name__]
