"""shardc.lax's convolutions (conv_general_dilated, conv, conv_with_general_padding,
conv_transpose, conv_dimension_numbers) and shardc.numpy's convolve/correlate, with jax's
signatures: string padding ('SAME', 'SAME_LOWER', 'VALID') and string dimension numbers
('NCHW', 'OIHW', 'NCHW') are resolved here, the primitive takes explicit ones."""
from __future__ import annotations

from typing import NamedTuple, Union

import numpy as np

from ..errors import ShardcError, wrap_public
from ..ops import lax as L
from ..ops.conv import conv_general_dilated_p, dilate_dim
from .explicit import takes_out_sharding
from .precision import canonical_precision
from .numpy._util import (aval, canonical_dtype, check_arraylike, promote_dtypes,
                          promote_dtypes_inexact)


class ConvDimensionNumbers(NamedTuple):
    lhs_spec: tuple
    rhs_spec: tuple
    out_spec: tuple


ConvGeneralDilatedDimensionNumbers = Union[tuple, ConvDimensionNumbers, None]


def conv_general_permutations(dimension_numbers):
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    pairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for i, (a, b) in enumerate(pairs):
        s = dimension_numbers[i]
        if not s.count(a) == s.count(b) == 1:
            raise ShardcError(f"convolution dimension_numbers[{i}] must contain the characters "
                              f"'{a}' and '{b}' exactly once, got {s}.")
        if len(s) != len(set(s)):
            raise ShardcError(f"convolution dimension_numbers[{i}] cannot have duplicate "
                              f"characters, got {s}.")
    if not (set(lhs_spec) - {"N", "C"} == set(rhs_spec) - {"O", "I"} ==
            set(out_spec) - {"N", "C"}):
        raise ShardcError("convolution dimension_numbers elements must each have the same set "
                          f"of spatial characters, got {dimension_numbers}.")

    def perm(spec, pair):
        spatial = [i for i, c in enumerate(spec) if c not in pair]
        if spec is not rhs_spec:
            spatial = sorted(spatial, key=lambda i: rhs_spec.index(spec[i]))
        return (spec.index(pair[0]), spec.index(pair[1])) + tuple(spatial)
    return tuple(perm(s, p) for s, p in zip(dimension_numbers, pairs))


def conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers):
    """`dimension_numbers` (None, three strings or a ConvDimensionNumbers) in canonical form."""
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        return dimension_numbers
    if len(lhs_shape) != len(rhs_shape):
        raise ShardcError("convolution requires lhs and rhs ndim to be equal, got "
                          f"{len(lhs_shape)} and {len(rhs_shape)}.")
    if dimension_numbers is None:
        iota = tuple(range(len(lhs_shape)))
        return ConvDimensionNumbers(iota, iota, iota)
    if hasattr(dimension_numbers, "lhs_spec"):      # jax's ConvDimensionNumbers
        return ConvDimensionNumbers(*map(tuple, dimension_numbers))
    if not isinstance(dimension_numbers, (list, tuple)) or len(dimension_numbers) != 3:
        raise ShardcError("convolution dimension_numbers must be None, a ConvDimensionNumbers "
                          f"or a tuple of 3 strings, got {dimension_numbers!r}")
    if not all(isinstance(e, str) for e in dimension_numbers):
        if all(isinstance(e, (tuple, list)) for e in dimension_numbers):
            return ConvDimensionNumbers(*map(tuple, dimension_numbers))
        raise ShardcError("convolution dimension_numbers elements must be strings, got "
                          f"{tuple(map(type, dimension_numbers))}.")
    for i, e in enumerate(dimension_numbers):
        if len(e) != len(lhs_shape):
            raise ShardcError(f"convolution dimension_numbers[{i}] must have len equal to the "
                              f"ndim of lhs and rhs, got {len(e)} for lhs and rhs shapes "
                              f"{tuple(lhs_shape)} and {tuple(rhs_shape)}.")
    return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))


def padtype_to_pads(in_shape, window_shape, window_strides, padding):
    p = padding.upper() if isinstance(padding, str) else padding
    if p == "VALID":
        return [(0, 0)] * len(in_shape)
    if p not in ("SAME", "SAME_LOWER"):
        raise ShardcError(f"Unrecognized padding type: expected 'VALID', 'SAME', or "
                          f"'SAME_LOWER', got {padding}.")
    pads = []
    for d, w, s in zip(in_shape, window_shape, window_strides):
        out = -(-d // s)
        n = max((out - 1) * s + w - d, 0)
        pads.append((n // 2, n - n // 2) if p == "SAME" else (n - n // 2, n // 2))
    return pads


def _ints(name, what, v, n):
    try:
        t = tuple(int(x) for x in v)
    except TypeError:
        raise ShardcError(f"{name}: {what} must be a sequence of ints, got {v!r}") from None
    if len(t) != n:
        raise ShardcError(f"{name}: {what} needs {n} entries (one per spatial dim), got {v!r}")
    return t


@takes_out_sharding
def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None,
                         rhs_dilation=None, dimension_numbers=None, feature_group_count=1,
                         batch_group_count=1, precision=None, preferred_element_type=None,
                         out_sharding=None):
    """General N-d convolution, as jax.lax.conv_general_dilated (out_sharding=: the
    result's sharding, and in explicit mode its type)."""
    if out_sharding is not None:    # passed by position (takes_out_sharding takes the keyword)
        return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation,
                                    rhs_dilation, dimension_numbers, feature_group_count,
                                    batch_group_count, precision, preferred_element_type,
                                    out_sharding=out_sharding)
    name = "conv_general_dilated"
    check_arraylike(name, lhs, rhs)
    lhs, rhs = promote_dtypes(lhs, rhs)
    la, ra = aval(lhs), aval(rhs)
    dn = conv_dimension_numbers(la.shape, ra.shape, dimension_numbers)
    ns = la.ndim - 2
    if ns < 0:
        raise ShardcError(f"{name} needs operands of at least 2 dims, got {la.shape}")
    strides = _ints(name, "window_strides", window_strides, ns)
    if lhs_dilation is None:
        lhs_dilation = (1,) * ns
    elif isinstance(padding, str) and any(d != 1 for d in lhs_dilation):
        raise ShardcError("String padding is not implemented for transposed convolution using "
                          "this op. Please either exactly specify the required padding or use "
                          "conv_transpose.")
    rhs_dilation = (1,) * ns if rhs_dilation is None else rhs_dilation
    lhs_dilation = _ints(name, "lhs_dilation", lhs_dilation, ns)
    rhs_dilation = _ints(name, "rhs_dilation", rhs_dilation, ns)
    if isinstance(padding, str):
        k = [dilate_dim(ra.shape[d], r) for d, r in zip(dn.rhs_spec[2:], rhs_dilation)]
        padding = padtype_to_pads([la.shape[d] for d in dn.lhs_spec[2:]], k, strides, padding)
    try:
        padding = tuple((int(lo), int(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        raise ShardcError("padding argument to conv_general_dilated should be a string or a "
                          f"sequence of (low, high) pairs, got {padding}") from None
    params = dict(window_strides=strides, padding=padding, lhs_dilation=lhs_dilation,
                  rhs_dilation=rhs_dilation, dimension_numbers=tuple(map(tuple, dn)),
                  feature_group_count=int(feature_group_count),
                  batch_group_count=int(batch_group_count))
    prec = canonical_precision(precision, "conv")
    if prec is not None:
        params["precision"] = prec
    if preferred_element_type is not None:
        params["preferred_element_type"] = canonical_dtype(preferred_element_type)
    return conv_general_dilated_p.bind(lhs, rhs, **params)


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)


def _conv_transpose_padding(k, s, padding):
    if padding == "SAME":
        pad_len = k + s - 2
        pad_a = k - 1 if s > k - 1 else int(np.ceil(pad_len / 2))
    elif padding == "VALID":
        pad_len = k + s - 2 + max(k - s, 0)
        pad_a = k - 1
    elif isinstance(padding, tuple):
        pads = tuple(k - p - 1 for p in padding)
        pad_a, pad_len = pads[0], sum(pads)
    else:
        raise ShardcError(f"Invalid padding mode: {padding}")
    return pad_a, pad_len - pad_a


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None,
                   use_consistent_padding=False):
    """The transposed (fractionally strided) convolution, as jax.lax.conv_transpose."""
    check_arraylike("conv_transpose", lhs, rhs)
    nd = aval(lhs).ndim
    if nd != aval(rhs).ndim or nd < 2:
        raise ShardcError("conv_transpose needs lhs and rhs of one rank >= 2, got "
                          f"{aval(lhs).shape} and {aval(rhs).shape}")
    if dimension_numbers is None:
        defaults = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                    4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}
        if nd not in defaults:
            raise ShardcError("No 4+ dimensional dimension_number defaults.")
        dimension_numbers = defaults[nd]
    dn = conv_dimension_numbers(aval(lhs).shape, aval(rhs).shape, dimension_numbers)
    k_sdims = [aval(rhs).shape[d] for d in dn.rhs_spec[2:]]
    rhs_dilation = (1,) * (nd - 2) if rhs_dilation is None else tuple(rhs_dilation)
    if use_consistent_padding or (isinstance(padding, str) and padding in ("SAME", "VALID")):
        eff = [dilate_dim(k, r) for k, r in zip(k_sdims, rhs_dilation)]
        rep = [padding] * len(strides) if isinstance(padding, str) else padding
        pads = tuple(_conv_transpose_padding(k, s, tuple(p) if not isinstance(p, str) else p)
                     for k, s, p in zip(eff, strides, rep))
    else:
        pads = padding
    if transpose_kernel:
        rhs = L.rev(rhs, tuple(dn.rhs_spec[2:]))
        perm = list(range(nd))
        perm[dn.rhs_spec[0]], perm[dn.rhs_spec[1]] = perm[dn.rhs_spec[1]], perm[dn.rhs_spec[0]]
        rhs = L.transpose(rhs, tuple(perm))
    return conv_general_dilated(lhs, rhs, (1,) * (nd - 2), pads, strides, rhs_dilation, dn,
                                precision=precision,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_patches(lhs, filter_shape, window_strides, padding,
                                 lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                                 precision=None, preferred_element_type=None):
    """Each output position's receptive-field patch, flattened into the feature dim (a
    grouped convolution with an identity kernel, as jax's)."""
    check_arraylike("conv_general_dilated_patches", lhs)
    filter_shape = tuple(int(n) for n in filter_shape)
    la = aval(lhs)
    dn = conv_dimension_numbers(la.shape, (1, 1) + filter_shape, dimension_numbers)
    size = int(np.prod(filter_shape))
    channels = la.shape[dn.lhs_spec[1]]
    eye = L.convert_element_type(L.eq(L.iota(np.dtype(np.int32), (size, size), 0),
                                      L.iota(np.dtype(np.int32), (size, size), 1)), la.dtype)
    rhs = L.broadcast_in_dim(eye, (channels, size, size), (1, 2))
    rhs = L.reshape(rhs, (channels * size, 1, *filter_shape))
    perm = _moveaxis_perm(rhs, (0, 1), (dn.rhs_spec[0], dn.rhs_spec[1]))
    rhs = L.transpose(rhs, perm)
    prec = None if precision is None else (precision, "DEFAULT")
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                dn, feature_group_count=channels, precision=prec,
                                preferred_element_type=preferred_element_type)


def conv_general_dilated_local(lhs, rhs, window_strides, padding, filter_shape,
                               lhs_dilation=None, rhs_dilation=None, dimension_numbers=None,
                               precision=None):
    """A locally connected (unshared-weight) convolution: patches, then a dot with a
    kernel per output position (as jax's)."""
    check_arraylike("conv_general_dilated_local", lhs, rhs)
    lhs, rhs = promote_dtypes(lhs, rhs)
    prec = canonical_precision(precision, "conv")
    patches = conv_general_dilated_patches(lhs, filter_shape, window_strides, padding,
                                           lhs_dilation, rhs_dilation, dimension_numbers,
                                           precision=None if prec is None else prec[0])
    lspec, rspec, ospec = conv_dimension_numbers(aval(lhs).shape, (1, 1) + tuple(filter_shape),
                                                 dimension_numbers)
    lb, rb = list(ospec[2:]), list(rspec[2:])
    rb = [rb[i] for i in sorted(range(len(rb)), key=lambda k: lb[k])]
    lb = sorted(lb)
    from ..ops.linalg import dot_general_p
    out = dot_general_p.bind(patches, rhs, contracting=((ospec[1],), (rspec[1],)),
                             batch=(tuple(lb), tuple(rb)),
                             **({} if prec is None else {"precision": prec}))
    nd = aval(out).ndim
    return L.transpose(out, _moveaxis_perm(out, (nd - 2, nd - 1), (ospec[0], ospec[1])))


def _moveaxis_perm(x, src, dst):
    nd = aval(x).ndim
    order = [d for d in range(nd) if d not in src]
    for d_, s_ in sorted(zip(dst, src)):
        order.insert(d_, s_)
    return tuple(order)


# ---------------------------------------------------------------- shape utilities (jax's)

def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1):
    """The output shape of a conv given shapes in canonical (N, C, spatial...) order."""
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise ShardcError("Wrong number of explicit pads for convolution: expected "
                          f"{len(lhs_shape) - 2}, got {len(pads)}.")
    padded = [n + lo + hi for n, (lo, hi) in zip(lhs_shape[2:], pads)]
    if any(n < 0 for n in padded):
        raise ShardcError("Negative padding is larger than the size of the corresponding "
                          f"dimension: got padding={pads} for lhs_shape[2:]={lhs_shape[2:]}")
    space = tuple(max(0, (n - k) // s + 1) if n >= k else 0
                  for n, k, s in zip(padded, rhs_shape[2:], strides))
    n0 = lhs_shape[0] // batch_group_count if batch_group_count > 1 else lhs_shape[0]
    return (n0, rhs_shape[0]) + space


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    lp, rp, op = conv_general_permutations(dimension_numbers)
    out = conv_shape_tuple([lhs_shape[d] for d in lp], [rhs_shape[d] for d in rp],
                           window_strides, padding)
    return tuple(out[i] for i in np.argsort(op))


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding,
                               dimension_numbers):
    lp, rp, op = conv_general_permutations(dimension_numbers)
    lt, rt = [lhs_shape[d] for d in lp], [rhs_shape[d] for d in rp]
    if isinstance(padding, str):
        padding = [_conv_transpose_padding(k, s, padding) for k, s in zip(rt[2:], window_strides)]
    pads = [sum(p) for p in padding]
    space = [(i - 1) * s - k + 2 + p for i, k, s, p in zip(lt[2:], rt[2:], window_strides, pads)]
    out = (lt[0], rt[0], *space)
    return tuple(out[i] for i in np.argsort(op))


# ---------------------------------------------------------------- numpy.convolve/correlate

def _conv1d(name, x, y, mode, precision, preferred_element_type):
    """jnp's _conv: a one-channel conv_general_dilated (correlate reverses its result when
    it swaps the operands)."""
    check_arraylike(name, x, y)
    x, y = promote_dtypes_inexact(x, y) if preferred_element_type is None else \
        promote_dtypes(x, y)
    if aval(x).ndim != 1 or aval(y).ndim != 1:
        raise ShardcError(f"{name}() only support 1-dimensional inputs.")
    if aval(x).shape[0] == 0 or aval(y).shape[0] == 0:
        raise ShardcError(f"{name}: inputs cannot be empty, got shapes {aval(x).shape} and "
                          f"{aval(y).shape}.")
    reverse = False
    if name == "correlate":     # (numpy's correlate conjugates v, before any swap)
        from .numpy._complex import conjugate
        y = conjugate(y)
    if aval(x).shape[0] < aval(y).shape[0]:
        x, y = y, x
        reverse = name == "correlate"
    if name == "convolve":
        y = L.rev(y, (0,))
    m = aval(y).shape[0]
    if mode == "valid":
        pad = (0, 0)
    elif mode == "same":
        pad = (m // 2, m - m // 2 - 1)
    elif mode == "full":
        pad = (m - 1, m - 1)
    else:
        raise ShardcError("mode must be one of ['full', 'same', 'valid']")
    out = conv_general_dilated(L.reshape(x, (1, 1, aval(x).shape[0])), L.reshape(y, (1, 1, m)),
                               (1,), [pad], precision=precision,
                               preferred_element_type=preferred_element_type)
    out = L.reshape(out, (aval(out).shape[-1],))
    return L.rev(out, (0,)) if reverse else out


def convolve(a, v, mode="full", *, precision=None, preferred_element_type=None):
    """The discrete linear convolution of two 1-D arrays (as jnp.convolve)."""
    return _conv1d("convolve", a, v, mode, precision, preferred_element_type)


def correlate(a, v, mode="valid", *, precision=None, preferred_element_type=None):
    """The cross-correlation of two 1-D arrays (as jnp.correlate)."""
    return _conv1d("correlate", a, v, mode, precision, preferred_element_type)


wrap_public(globals())
